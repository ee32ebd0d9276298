"""The log's signing key: an Ed25519 key of the sealing side, never of the database.

The sealer that moves heads (the helper process the app starts, ``lgx worker``, or the
app's own thread with ``sealing="thread"``) signs the log's tree heads with it. The key
file is looked up as ``$LGX_SIGNING_KEY_FILE``, else
``$XDG_CONFIG_HOME/langgraph-external/signing.key`` (beside the deployment key), and
created with a new key, mode 0600, on first use. It holds one line in the signed-note
format of private keys (``PRIVATE+KEY+<name>+<key hash>+base64(0x01 || seed)``), so
tools that read signed notes read it too. ``lgx log key`` prints the public verifier
key to publish; ``lgx log rotate`` starts a new key and keeps the old one (its heads
stay verifiable with its published key; the head signed at the rotation carries both
signatures, so whoever trusts the old key learns the new one from it).

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "signing.key")
    >>> s = load_signer(path)
    >>> from langgraph_external.proof.verify import parse_key
    >>> parse_key(s.verifier.text).verify(b"m", s.sign(b"m")), oct(os.stat(path).st_mode & 0o777)
    (True, '0o600')
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_external.errors import ConfigurationError
from langgraph_external.proof.verify import ED25519, VerifierKey, key_hash
from langgraph_external.record.keys import config_file, read_secret_file, write_secret_file

__all__ = ["Signer", "default_signing_key_file", "load_signer", "rotate_signer"]

_PRIVATE = "PRIVATE+KEY+"


@dataclass(frozen=True)
class Signer:
    """An Ed25519 signing key with its name (``seed`` is the private key)."""

    name: str
    seed: bytes

    @property
    def verifier(self) -> VerifierKey:
        """The public verifier key (what ``lgx log key`` prints, to publish)."""
        public = _private(self.seed).public_key().public_bytes_raw()
        return VerifierKey(self.name, key_hash(self.name, public), public)

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature of ``message``."""
        return _private(self.seed).sign(message)

    @property
    def text(self) -> str:
        """The private key as its file holds it."""
        raw = base64.b64encode(bytes([ED25519]) + self.seed).decode()
        return f"{_PRIVATE}{self.name}+{self.verifier.key_hash:08x}+{raw}"

    @classmethod
    def generate(cls, name: str | None = None) -> Signer:
        """A new key; its name defaults to ``langgraph-external-<8 random hex digits>``."""
        name = name or f"langgraph-external-{os.urandom(4).hex()}"
        if not name or any(c in name for c in "+ \t\n") or "\u2014" in name:
            raise ConfigurationError(f"a signing key name has no '+', spaces or dashes: {name!r}")
        return cls(name, os.urandom(32))

    @classmethod
    def parse(cls, text: str) -> Signer:
        """Read a private key line (raises :class:`ConfigurationError`)."""
        text = text.strip()
        if not text.startswith(_PRIVATE):
            raise ConfigurationError("a signing key reads PRIVATE+KEY+<name>+<hash>+<key>")
        parts = text[len(_PRIVATE) :].split("+", 2)  # base64 may hold '+' itself
        try:
            name, hexhash, raw = parts
            blob = base64.b64decode(raw, validate=True)
            declared = int(hexhash, 16)
        except (ValueError, binascii.Error):
            raise ConfigurationError("the signing key is not well formed") from None
        if len(blob) != 33 or blob[0] != ED25519:
            raise ConfigurationError("the signing key is not an Ed25519 key")
        signer = cls(name, blob[1:])
        if signer.verifier.key_hash != declared:
            raise ConfigurationError("the signing key's hash does not match its name and key")
        return signer


def _private(seed: bytes) -> Any:
    # lazy: an app that neither encrypts nor seals never loads the cipher library
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(seed)


def default_signing_key_file() -> Path:
    """``$LGX_SIGNING_KEY_FILE``, else ``$XDG_CONFIG_HOME/langgraph-external/signing.key``."""
    return config_file("LGX_SIGNING_KEY_FILE", "signing.key")


def load_signer(path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Signer:
    """The signing key: ``$LGX_SIGNING_KEY`` (the key's text, for containers without a
    writable home) unless ``path`` is given, else the file ``path`` (default
    :func:`default_signing_key_file`), created with a new key when missing (unless
    ``create=False``).

    Raises:
        ConfigurationError: the file is malformed, too open, unreadable, or missing with
            ``create=False``.
    """
    if path is None and os.environ.get("LGX_SIGNING_KEY"):
        return Signer.parse(os.environ["LGX_SIGNING_KEY"])
    file = Path(path).expanduser() if path is not None else default_signing_key_file()
    try:
        return Signer.parse(read_secret_file(file))
    except FileNotFoundError:
        if not create:
            raise ConfigurationError(
                f"no signing key: {file} does not exist (set LGX_SIGNING_KEY_FILE)"
            ) from None
    write_secret_file(file, Signer.generate().text)
    return Signer.parse(read_secret_file(file))


def rotate_signer(path: str | os.PathLike[str] | None = None) -> tuple[Signer, Signer, Path]:
    """Replace the signing key of ``path`` with a new one; the old key is kept beside it
    as ``<file>.<key hash>.old``. Returns ``(old, new, where the old key went)``."""
    file = Path(path).expanduser() if path is not None else default_signing_key_file()
    old = load_signer(file, create=False)
    kept = file.with_name(f"{file.name}.{old.verifier.key_hash:08x}.old")
    write_secret_file(kept, old.text)
    new = Signer.generate()
    tmp = file.with_name(f".{file.name}.{os.getpid()}.{os.urandom(4).hex()}.new")
    write_secret_file(tmp, new.text)
    os.replace(tmp, file)
    return old, new, kept
