"""Where the record is filed: safe names and the workspace-relative paths events refer to.

A checkpoint event names the log its line lives in, an export's preview names the
``events.jsonl`` line or the artifact that holds the whole value, and a blob is named by
its content. Those names are part of the record (they are hashed with it), so they are
made here, once, and the workspace that writes the files uses the same functions.

Thread ids and namespaces become one directory or file name each, reversibly and safely:
names of lower-case letters, digits, ``_ . -`` stay as they are; anything else is
``~`` + lower-case base32 (safe on case-insensitive file systems, never a separator); an
encoding longer than 200 characters becomes ``~~`` + sha256 (the real id is kept in
``thread.json``).

Example:
    >>> encode_thread_id("thread-42"), decode_thread_id(encode_thread_id("../etc/passwd"))
    ('thread-42', '../etc/passwd')
    >>> checkpoints_relpath("t", ""), events_relpath("a/b")
    ('threads/t/checkpoints/_root.jsonl', 'threads/~mexwe/events.jsonl')
"""

from __future__ import annotations

import base64
import hashlib
import re

from langgraph_external.errors import InvalidThreadIdError

__all__ = [
    "ROOT_NS_DIR",
    "artifact_relpath",
    "checkpoints_relpath",
    "decode_thread_id",
    "encode_ns",
    "encode_thread_id",
    "events_relpath",
    "sha256_hex",
    "thread_relpath",
]

_PLAIN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,127}$")
_ENCODED_MAX = 200  # leave room under the 255-byte file-name limit
_HASHED_PREFIX = "~~"
_ENCODED_PREFIX = "~"
ROOT_NS_DIR = "_root"
"""The file name of the root namespace (``""``)."""


def _b32(text: str) -> str:
    return base64.b32encode(text.encode("utf-8", "surrogatepass")).decode().rstrip("=").lower()


def _unb32(name: str) -> str:
    pad = "=" * (-len(name) % 8)
    return base64.b32decode(name.upper() + pad).decode("utf-8", "surrogatepass")


def encode_thread_id(thread_id: str) -> str:
    """Encode a thread id as one safe directory name.

    Plain ids (lower-case letters, digits, ``_ . -``, at most 128 characters) stay as they
    are; others become ``~`` + lower-case base32 of their UTF-8, so the name is safe on
    case-insensitive file systems and never contains a separator. Ids whose encoding would
    exceed 200 characters become ``~~`` + sha256; their real id is kept in ``thread.json``.

    Raises:
        InvalidThreadIdError: the id is not a non-empty ``str``.

    Example:
        >>> encode_thread_id("a/b")
        '~mexwe'
    """
    if not isinstance(thread_id, str) or thread_id == "":
        raise InvalidThreadIdError(f"thread id must be a non-empty str, got {thread_id!r}")
    if _PLAIN.match(thread_id):
        return thread_id
    encoded = _ENCODED_PREFIX + _b32(thread_id)
    if len(encoded) <= _ENCODED_MAX:
        return encoded
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()
    return _HASHED_PREFIX + digest


def decode_thread_id(name: str) -> str | None:
    """Invert :func:`encode_thread_id`; ``None`` for hashed names (read ``thread.json``).

    Example:
        >>> decode_thread_id("~mexwe"), decode_thread_id("~~" + "0" * 64)
        ('a/b', None)
    """
    if name.startswith(_HASHED_PREFIX):
        return None
    if name.startswith(_ENCODED_PREFIX):
        return _unb32(name[1:])
    return name


def encode_ns(checkpoint_ns: str) -> str:
    """File name (without ``.jsonl``) of a checkpoint namespace (``""`` is ``_root``).

    Example:
        >>> encode_ns(""), encode_ns("sub:1")
        ('_root', '~on2weorr')
    """
    return ROOT_NS_DIR if checkpoint_ns == "" else encode_thread_id(checkpoint_ns)


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data``: the name of content-addressed files (without a key).

    Example:
        >>> sha256_hex(b"")[:12]
        'e3b0c44298fc'
    """
    return hashlib.sha256(data).hexdigest()


def thread_relpath(thread_id: str) -> str:
    """The thread's folder, relative to the workspace root.

    Example:
        >>> thread_relpath("t")
        'threads/t'
    """
    return f"threads/{encode_thread_id(thread_id)}"


def events_relpath(thread_id: str) -> str:
    """The thread's ``events.jsonl`` (one envelope per line), relative to the root."""
    return f"{thread_relpath(thread_id)}/events.jsonl"


def checkpoints_relpath(thread_id: str, checkpoint_ns: str) -> str:
    """The namespace's checkpoint log; a checkpoint is the line with its checkpoint id."""
    return f"{thread_relpath(thread_id)}/checkpoints/{encode_ns(checkpoint_ns)}.jsonl"


def artifact_relpath(thread_id: str, digest: str) -> str:
    """A content-addressed artifact of the thread (a large payload, a raw response).

    Example:
        >>> artifact_relpath("t", "ab12")
        'threads/t/artifacts/ab12'
    """
    return f"{thread_relpath(thread_id)}/artifacts/{digest}"
