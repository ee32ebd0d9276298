"""The deployment key: where it comes from, and how it is created on first use.

One 32-byte key per deployment keys every content address that a value could be guessed
from (HMAC-SHA256 instead of a bare sha256), encrypts the exact checkpoint copies
(AES-256-GCM), anchors each thread's chain head (an HMAC stored in the ledger) and seals
``state.json``. It is looked up in this order:

1. the ``key`` given in code (``External(key=...)``);
2. ``$LGX_KEY`` (``$LGX_WORKSPACE_KEY``, its earlier name, is read too when ``$LGX_KEY``
   is unset, with a :class:`DeprecationWarning`, until 0.3);
3. the key file ``$LGX_KEY_FILE``, else ``$XDG_CONFIG_HOME/langgraph-external/key``
   (``~/.config/langgraph-external/key``). When no file exists there it is created with
   a new random key, mode 0600, in a directory of mode 0700.

The key file must not lie inside the workspace: whoever reads the workspace would read
the key with it.

Every keyed hash the record keeps is made here, under its own *tag domain* (the first
part of :meth:`WorkspaceCipher.tag`, so a tag of one kind can never pass for another):
:data:`HEAD` (a thread's chain head in the ledger), :data:`HEADS` (a snapshot of every
head), :data:`STATE` (``state.json``), :data:`PROMPT` (what a chat model saw),
:data:`MEMORY` (a Mem0 text's fingerprint) and :data:`NONCE` (reserved: the nonce of a
sealed exact copy, :meth:`WorkspaceCipher.seal`). Content addresses of exact bytes are
:meth:`WorkspaceCipher.address` (a key of their own).

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
import hashlib
import hmac
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from langgraph_external._moved import warn_deprecated
from langgraph_external.errors import ConfigurationError
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import canonical_json

__all__ = [
    "HEAD",
    "HEADS",
    "KEY_VARIABLE",
    "MEMORY",
    "NONCE",
    "OLD_KEY_VARIABLE",
    "PROMPT",
    "STATE",
    "TAG_DOMAINS",
    "config_file",
    "default_key_file",
    "existing_key",
    "head_tag",
    "heads_tag",
    "key_from_env",
    "load_key",
    "memory_hash",
    "prompt_hash",
    "read_secret_file",
    "same_tag",
    "state_tag",
    "write_secret_file",
]

# -- tag domains -----------------------------------------------------------------------
HEAD: Final = "head"
"""A thread's chain head ``(seq, hash)``, stored in the ledger's ``threads`` row."""
HEADS: Final = "heads"
"""A snapshot of every thread's head, kept outside the database (``lgx heads FILE``)."""
STATE: Final = "state"
"""``state.json``: its thread, checkpoint, step and values."""
PROMPT: Final = "prompt"
"""Everything a chat model saw (the callback handler's ``prompt_context_hash``)."""
MEMORY: Final = "memory"
"""The fingerprint of a memory's or a query's text (the Mem0 adapter)."""
NONCE: Final = "nonce"
"""Reserved: :meth:`WorkspaceCipher.seal` derives a sealed copy's nonce under it."""
TAG_DOMAINS: Final = (HEAD, HEADS, STATE, PROMPT, MEMORY, NONCE)
"""Every tag domain of the record; a new kind of keyed hash gets a new one here."""

KEY_VARIABLE: Final = "LGX_KEY"
"""The environment variable that gives the deployment key."""
OLD_KEY_VARIABLE: Final = "LGX_WORKSPACE_KEY"
"""The earlier name of :data:`KEY_VARIABLE`: read when that is unset, with a warning, until
0.3."""

STATE_FIELDS = ("thread_id", "checkpoint_id", "step", "values")
"""What the tag of ``state.json`` covers (not its ``updated`` time or the tag itself)."""


def default_key_file() -> Path:
    """``$LGX_KEY_FILE``, else ``$XDG_CONFIG_HOME/langgraph-external/key``."""
    return config_file("LGX_KEY_FILE", "key")


def config_file(variable: str, name: str) -> Path:
    """``$variable``, else ``$XDG_CONFIG_HOME/langgraph-external/<name>`` (the user's
    configuration directory: where key files live by default).

    Example:
        >>> config_file("LGX_NO_SUCH_VARIABLE", "k").parts[-2:]
        ('langgraph-external', 'k')
    """
    env = os.environ.get(variable)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "langgraph-external" / name


def key_from_env() -> str | None:
    """``$LGX_KEY``, if set; else the earlier ``$LGX_WORKSPACE_KEY`` (with a
    :class:`DeprecationWarning`: it goes in 0.3)."""
    if key := os.environ.get(KEY_VARIABLE):
        return key
    if old := os.environ.get(OLD_KEY_VARIABLE):
        warn_deprecated(f"${OLD_KEY_VARIABLE}", f"set ${KEY_VARIABLE} (the same key) instead")
    return old or None


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
    if workspace_root is not None and (
        path.resolve().is_relative_to(Path(workspace_root).resolve())
    ):
        raise ConfigurationError(
            f"the key file {path} is inside the workspace {workspace_root}: anyone who "
            "reads the workspace would read the key; keep it elsewhere (LGX_KEY_FILE)"
        )
    try:
        return WorkspaceCipher(read_secret_file(path))
    except FileNotFoundError:
        if not create:
            raise ConfigurationError(
                f"no deployment key: {path} does not exist (set LGX_KEY or LGX_KEY_FILE)"
            ) from None
    write_secret_file(path, WorkspaceCipher.generate_key())
    return WorkspaceCipher(read_secret_file(path))


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


def read_secret_file(path: Path) -> str:
    """The text of a key file, refused when group or others may read it.

    Raises:
        FileNotFoundError: there is no such file.
        ConfigurationError: the file is too open or unreadable.
    """
    try:
        st = path.stat()
        if st.st_mode & 0o077:
            raise ConfigurationError(
                f"the key file {path} is readable by others (mode {oct(st.st_mode & 0o777)}); "
                f"chmod 600 {path}"
            )
        return path.read_text().strip()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigurationError(f"cannot read the key file {path}: {exc}") from exc


def write_secret_file(path: Path, text: str) -> None:
    """Write a new key file with mode 0600 (its directory 0700), atomically; when another
    process created it first, its file wins and is left as it is."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, (text + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # never replaces a key another process just created
    except OSError as exc:
        raise ConfigurationError(f"cannot create the key file {path}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


# -- keyed hashes ----------------------------------------------------------------------
def head_tag(
    cipher: WorkspaceCipher | None, thread_id: str, seq: int, hash_: str | None
) -> str | None:
    """The keyed tag of a thread's head ``(seq, hash)``; ``None`` without a key.

    Example:
        >>> len(head_tag(WorkspaceCipher(bytes(32)), "t", 3, "ab")), head_tag(None, "t", 3, "ab")
        (64, None)
    """
    return None if cipher is None else cipher.tag(HEAD, thread_id, seq, hash_ or "")


def heads_tag(cipher: WorkspaceCipher, body: Mapping[str, Any]) -> str:
    """The keyed tag of a snapshot of every head (the snapshot without its ``tag``).

    Example:
        >>> c = WorkspaceCipher(bytes(32))
        >>> heads_tag(c, {"heads": {"t": [3, "ab"]}}) == heads_tag(c, {"heads": {"t": [4, "cd"]}})
        False
    """
    return cipher.tag(HEADS, canonical_json(body))


def state_tag(cipher: WorkspaceCipher, doc: Mapping[str, Any]) -> str:
    """The keyed tag of a ``state.json`` document (its thread, checkpoint, step and values).

    ``lgx verify`` recomputes it: a ``state.json`` edited without the key no longer matches.

    Example:
        >>> c = WorkspaceCipher(bytes(32))
        >>> d = {"thread_id": "t", "checkpoint_id": "c", "step": 1, "values": {"x": 1}}
        >>> state_tag(c, d) == state_tag(c, {**d, "updated": "now"})
        True
        >>> state_tag(c, d) == state_tag(c, {**d, "step": 2})
        False
    """
    return cipher.tag(STATE, canonical_json({k: doc.get(k) for k in STATE_FIELDS}))


def prompt_hash(text: str, key: WorkspaceCipher | None = None) -> str:
    """The hash of a chat model's prompt context (its canonical JSON ``text``).

    Keyed with the deployment ``key``: it is taken before redaction, and an unkeyed sha256
    of a short prompt holding a secret could be brute-forced. Without a key: sha256 hex.

    Example:
        >>> prompt_hash("hi") == hashlib.sha256(b"hi").hexdigest()
        True
        >>> prompt_hash("hi", WorkspaceCipher(bytes(32))) != prompt_hash("hi")
        True
    """
    return _keyed(PROMPT, text, key)


def memory_hash(text: str, key: WorkspaceCipher | None = None) -> str:
    """The content-free fingerprint of a memory's or a query's ``text``.

    Keyed with the deployment ``key``: a plain sha256 of a short memory, kept after the
    text was erased, would let anyone confirm a guess of it. Without a key: sha256 hex.

    Example:
        >>> c = WorkspaceCipher(bytes(32))
        >>> memory_hash("tea", c) == memory_hash("tea", c) != prompt_hash("tea", c)
        True
    """
    return _keyed(MEMORY, text, key)


def same_tag(found: object, expected: str | None) -> bool:
    """Whether a stored tag is the one expected, compared in constant time.

    Example:
        >>> same_tag("ab", "ab"), same_tag(None, "ab"), same_tag("ab", None)
        (True, False, False)
    """
    if not isinstance(found, str) or expected is None:
        return False
    return hmac.compare_digest(found, expected)


def _keyed(domain: str, text: str, key: WorkspaceCipher | None) -> str:
    if key is not None:
        return key.tag(domain, text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
