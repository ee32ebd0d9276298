"""The deployment key: where it comes from, and how it is created on first use.

One 32-byte key per deployment keys every content address that a value could be guessed
from (HMAC-SHA256 instead of a bare sha256), encrypts the exact checkpoint copies
(AES-256-GCM), anchors each thread's chain head (an HMAC stored in the ledger) and seals
``state.json``. It is looked up in this order:

1. the ``key`` given in code (``External(key=...)``);
2. ``$LGX_KEY`` (``$LGX_WORKSPACE_KEY`` is read too, the earlier name);
3. the key file ``$LGX_KEY_FILE``, else ``$XDG_CONFIG_HOME/langgraph-external/key``
   (``~/.config/langgraph-external/key``). When no file exists there it is created with
   a new random key, mode 0600, in a directory of mode 0700.

The key file must not lie inside the workspace: whoever reads the workspace would read
the key with it.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "key")
    >>> a = load_key(key_file=path)
    >>> b = load_key(key_file=path)
    >>> a.address(b"x") == b.address(b"x"), oct(os.stat(path).st_mode & 0o777)
    (True, '0o600')
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from langgraph_external.errors import ConfigurationError
from langgraph_external.record.crypto import WorkspaceCipher, _parse_key

__all__ = ["default_key_file", "key_from_env", "load_key"]


def default_key_file() -> Path:
    """``$LGX_KEY_FILE``, else ``$XDG_CONFIG_HOME/langgraph-external/key``."""
    env = os.environ.get("LGX_KEY_FILE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "langgraph-external" / "key"


def key_from_env() -> str | None:
    """``$LGX_KEY`` (or the earlier ``$LGX_WORKSPACE_KEY``), if set."""
    return os.environ.get("LGX_KEY") or os.environ.get("LGX_WORKSPACE_KEY") or None


def load_key(
    key: str | bytes | None = None,
    *,
    key_file: str | os.PathLike[str] | None = None,
    create: bool = True,
    workspace_root: str | None = None,
) -> WorkspaceCipher:
    """The deployment key as a :class:`WorkspaceCipher` (see the module docs for the order).

    Args:
        key: a key given in code (32 raw bytes, or base64 / hex text).
        key_file: the key file (default :func:`default_key_file`).
        create: create the key file with a new key when it does not exist.
        workspace_root: a local workspace directory the key file must not be inside.

    Raises:
        ConfigurationError: the key is malformed, the file is unreadable, too open
            (readable by group or others), inside the workspace, or missing with
            ``create=False``.
    """
    given = key if key is not None else key_from_env()
    if given:
        return WorkspaceCipher(given)
    path = Path(key_file).expanduser() if key_file is not None else default_key_file()
    if workspace_root is not None and _inside(path, Path(workspace_root)):
        raise ConfigurationError(
            f"the key file {path} is inside the workspace {workspace_root}: anyone who "
            "reads the workspace would read the key; keep it elsewhere (LGX_KEY_FILE)"
        )
    try:
        return WorkspaceCipher(_read_key_file(path))
    except FileNotFoundError:
        if not create:
            raise ConfigurationError(
                f"no deployment key: {path} does not exist (set LGX_KEY or LGX_KEY_FILE)"
            ) from None
    _create_key_file(path)
    return WorkspaceCipher(_read_key_file(path))


def existing_key(key: str | bytes | None = None) -> WorkspaceCipher | None:
    """The deployment key if one is given or already exists here, else ``None`` (never
    creates one): for tools that write into a record made elsewhere (prune, import).

    Example:
        >>> existing_key(bytes(32)) is not None
        True
    """
    try:
        return load_key(key, create=False)
    except ConfigurationError:
        if key is not None:
            raise
        return None


def _read_key_file(path: Path) -> str:
    try:
        st = path.stat()
        if st.st_mode & 0o077:
            raise ConfigurationError(
                f"the key file {path} is readable by others (mode {oct(st.st_mode & 0o777)}); "
                f"chmod 600 {path}"
            )
        text = path.read_text().strip()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigurationError(f"cannot read the key file {path}: {exc}") from exc
    _parse_key(text)  # malformed: a ConfigurationError naming the problem
    return text


def _create_key_file(path: Path) -> None:
    """Write a new key with mode 0600, atomically; a concurrent creator's key wins."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, (WorkspaceCipher.generate_key() + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # never replaces a key another process just created
    except OSError as exc:
        raise ConfigurationError(f"cannot create the key file {path}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True
