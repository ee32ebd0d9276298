"""Encryption and keyed hashes with the deployment key (AES-256-GCM, HMAC-SHA256).

Redaction governs the *record*; the checkpoint is the app's own state and is mirrored
exactly. Those exact copies (the inline bytes of checkpoint and writes events, the blob
files) are encrypted with AES-256-GCM where they are made, before they reach the ledger,
the write-ahead log or the workspace, and their content addresses are keyed
(HMAC-SHA256), so a reader without the key can neither decrypt a value nor confirm a guess
of it from its address. :meth:`WorkspaceCipher.tag` keys the other hashes the record keeps
(chain heads, ``state.json``, prompt hashes), each under a tag domain named in
:mod:`langgraph_external.record.keys`, which also finds the key itself.

Example:
    >>> key = WorkspaceCipher.generate_key()
    >>> c = WorkspaceCipher(key)
    >>> c.decrypt(c.encrypt(b"state", b"addr"), b"addr")
    b'state'
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Any

from langgraph_external.errors import ConfigurationError, RestoreError

__all__ = ["ALGORITHM", "DecryptionError", "WorkspaceCipher", "parse_key"]

ALGORITHM = "aes-256-gcm"


class DecryptionError(RestoreError):
    """Encrypted workspace bytes cannot be decrypted (wrong key, or tampered)."""


class WorkspaceCipher:
    """AES-256-GCM with a random 96-bit nonce per value; the address is authenticated data.

    Args:
        key: 32 raw bytes, or their URL-safe base64 / hex text
            (:meth:`generate_key` makes one). :func:`langgraph_external.record.keys.load_key`
            finds the deployment key.
    """

    def __init__(self, key: bytes | str) -> None:
        self._raw = raw = parse_key(key)
        self._aead_impl: Any = None  # AES-GCM, made on first use (see _aead)
        self._mac_key = hashlib.sha256(b"langgraph-external address\x00" + raw).digest()
        # keyed once; each use copies the keyed state (cheaper than keying it again)
        self._address = hmac.new(self._mac_key, digestmod=hashlib.sha256)
        # the salts of commitments to exact bytes (a key of their own: a salt handed to an
        # auditor reveals nothing of the others)
        self._commit_key = hashlib.sha256(b"langgraph-external commit\x00" + raw).digest()
        tag_key = hashlib.sha256(b"langgraph-external tag\x00" + raw).digest()
        self._tag = hmac.new(tag_key, digestmod=hashlib.sha256)
        # names the key without revealing it (key rotation, error messages)
        self.key_id = hashlib.sha256(b"langgraph-external key id\x00" + raw).hexdigest()[:16]

    def __reduce__(self) -> tuple[Any, ...]:
        # picklable (to a sealing helper process over a pipe, never to disk): rebuilt
        # from the key, the keyed states are made again
        return (WorkspaceCipher, (self._raw,))

    @property
    def _aead(self) -> Any:
        # imported when a value is first sealed or opened: a process that only hashes
        # (encrypt=False, verify) does not load the cryptography library
        if self._aead_impl is None:
            try:
                from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            except ImportError as exc:  # pragma: no cover - a declared dependency
                raise ConfigurationError("encryption needs the 'cryptography' package") from exc
            self._aead_impl = AESGCM(self._raw)
        return self._aead_impl

    @staticmethod
    def generate_key() -> str:
        """A new random key as URL-safe base64 text (keep it in your secret store)."""
        return base64.urlsafe_b64encode(os.urandom(32)).decode()

    def address(self, data: bytes) -> str:
        """Keyed content address (HMAC-SHA256 hex) of plaintext ``data``."""
        mac = self._address.copy()
        mac.update(data)
        return mac.hexdigest()

    def tag(self, purpose: str, *parts: object) -> str:
        """HMAC-SHA256 hex over ``purpose`` and ``parts`` (chain heads, ``state.json``).

        Example:
            >>> c = WorkspaceCipher(bytes(32))
            >>> c.tag("head", "t", 1, "h") == c.tag("head", "t", 1, "h") != c.tag("x", "t")
            True
        """
        mac = self._tag.copy()
        mac.update(
            "\x1f".join([purpose, *(str(p) for p in parts)]).encode("utf-8", "surrogatepass")
        )
        return mac.hexdigest()

    def commitment_salt(self, address: str) -> bytes:
        """The secret salt of the commitment to the exact bytes at ``address`` (16 bytes,
        keyed: only the key's holder can open a commitment, by handing out its salt)."""
        # keyed BLAKE2b: a MAC in one call (a third of HMAC-SHA256's cost here)
        return hashlib.blake2b(address.encode(), key=self._commit_key, digest_size=16).digest()

    def commitment(self, data: bytes, address: str) -> str:
        """A commitment to exact bytes an auditor can check without the key, given the
        bytes and their salt (a bundle, ``lgx log bundle --values``): the first 128 bits
        of ``SHA-256(salt || data)``. Without the salt it reveals nothing a guess could
        be checked against.

        Example:
            >>> c = WorkspaceCipher(bytes(32))
            >>> a = c.address(b"x")
            >>> salted = c.commitment_salt(a) + b"x"
            >>> c.commitment(b"x", a) == hashlib.sha256(salted).hexdigest()[:32]
            True
        """
        return hashlib.sha256(self.commitment_salt(address) + data).hexdigest()[:32]

    def encrypt(self, data: bytes, aad: bytes) -> bytes:
        """``nonce || ciphertext+tag``."""
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, data, aad)

    def seal(self, data: bytes, address: bytes) -> bytes:
        """:meth:`encrypt` with the nonce derived from ``address`` (a keyed content
        address): equal values give equal bytes, so a copy re-sealed from the saver's row
        is the copy first written. A nonce repeats only with its plaintext (the address is
        a keyed hash of it), which GCM allows.

        Example:
            >>> c = WorkspaceCipher(bytes(32))
            >>> a = c.address(b"v").encode()
            >>> c.seal(b"v", a) == c.seal(b"v", a) and c.decrypt(c.seal(b"v", a), a) == b"v"
            True
        """
        # tag(keys.NONCE, address)'s first 12 bytes (an address is ASCII hex); the domain
        # is spelled here because keys.py imports this module (tests/test_keys.py pins it)
        text = address if address.isascii() else address.decode("ascii", "replace").encode()
        mac = self._tag.copy()
        mac.update(b"nonce\x1f" + text)
        nonce = mac.digest()[:12]
        return nonce + self._aead.encrypt(nonce, data, address)

    def decrypt(self, blob: bytes, aad: bytes) -> bytes:
        """Inverse of :meth:`encrypt`.

        Raises:
            DecryptionError: wrong key or altered bytes.
        """
        from cryptography.exceptions import InvalidTag

        try:
            view = memoryview(blob)  # no copy of a large ciphertext
            return self._aead.decrypt(view[:12], view[12:], aad)
        except (InvalidTag, ValueError) as exc:
            raise DecryptionError("cannot decrypt workspace bytes: wrong key or altered") from exc


def parse_key(key: bytes | str) -> bytes:
    """The 32 raw bytes of a key given as raw bytes, URL-safe base64 or hex text.

    Raises:
        ConfigurationError: anything else (the message never shows the key).

    Example:
        >>> parse_key("00" * 32) == bytes(32)
        True
    """
    if isinstance(key, bytes) and len(key) == 32:
        return key
    text = (key.decode() if isinstance(key, bytes) else key).strip()
    for decode in (
        lambda t: base64.urlsafe_b64decode(t + "=" * (-len(t) % 4)),
        bytes.fromhex,
    ):
        try:
            raw = decode(text)
        except ValueError:
            continue
        if len(raw) == 32:
            return raw
    raise ConfigurationError("the workspace key must be 32 bytes (base64 or hex text)")
