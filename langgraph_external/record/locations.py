"""Where the record is filed: safe names and the workspace-relative paths events refer to.

A checkpoint event names the log its line lives in, an export's preview names the
``events.jsonl`` line or the artifact that holds the whole value, and a blob is named by
its content. Those names are part of the record (they are hashed with it), so they are
made here, once, and the workspace that writes the files uses the same functions.

Thread ids and namespaces become one directory or file name each, reversibly and safely,
one character at a time (:func:`encode_thread_id`): lower-case ASCII letters, digits,
``- _ . + = @ ,`` and CJK ideographs stay as they are; an upper-case letter becomes ``!``
and its lower-case letter (``sp-A`` is ``sp-!a``, as Go's module cache spells module
paths); every other character becomes ``%`` and two lower-case hex digits per byte of its
UTF-8 (``a/b`` is ``a%2fb``) — separators, controls, spaces, ``: * ? " < > | \\ % ! ~``,
accented letters, emoji. So is a leading ``.`` or ``-``, a trailing ``.``, and the last
letter of a Windows device name (``con`` is ``co%6e``). Every name is lower-case, so two
ids never share a folder on a case-insensitive file system. A name longer than 200
characters becomes its first 100 and ``~`` + the sha256 of the id (the real id is kept
in ``thread.json``).

Threads recorded before this rule (before ledger migration v11) keep their folders and
namespace file names (:func:`legacy_thread_folder`): plain ids (``[a-z0-9][a-z0-9_.-]*``,
at most 128 characters) as they are, others ``~`` + lower-case base32 of the id, ``~~``
+ sha256 when long. The ledger marks those threads (``threads.legacy_names``) and every
path function takes ``legacy=``. A name of the old rule is either plain (and decodes as
itself) or starts with ``~``, which the rule above never writes first, so
:func:`decode_thread_id` reads both.

Example:
    >>> encode_thread_id("sp-A"), decode_thread_id("sp-!a"), decode_thread_id("~onyc2qi")
    ('sp-!a', 'sp-A', 'sp-A')
    >>> checkpoints_relpath("t", ""), events_relpath("a/b")
    ('threads/t/checkpoints/_root.jsonl', 'threads/a%2fb/events.jsonl')
    >>> events_relpath("a/b", legacy=True)
    'threads/~mexwe/events.jsonl'
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re

from langgraph_external.errors import InvalidThreadIdError

__all__ = [
    "ROOT_NS_DIR",
    "artifact_relpath",
    "checkpoints_relpath",
    "decode_ns",
    "decode_thread_id",
    "encode_ns",
    "encode_thread_id",
    "events_relpath",
    "legacy_thread_folder",
    "sha256_hex",
    "thread_folder",
    "thread_relpath",
]

_ENCODED_MAX = 200  # leave room under the 255-byte file-name limit
_HASHED_KEEP = 100  # characters of a too-long name kept before its hash
_HASH_MARK = "~"  # never written by the per-character rule: it is escaped there
ROOT_NS_DIR = "_root"
"""The file name of the root namespace (``""``)."""

# kept as they are: safe in file names on Linux, macOS and Windows, in shells and URLs,
# and not glob characters for fsspec (``* ? [``)
_KEPT = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.+=@,")
# CJK ideographs have no case and no decomposition (no file system folds or normalizes
# them); fixed code point ranges, so the rule never depends on the Unicode tables of the
# running Python
_KEPT_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF))
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"{p}{d}" for p in ("com", "lpt") for d in "0123456789"]
)
_ESCAPE = re.compile(r"%([0-9a-f]{2})|!([a-z])|([^%!~])", re.DOTALL)

# -- the names of 0.x (kept for the threads recorded with them) ---------------------------
_LEGACY_PLAIN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,127}$")
_LEGACY_HASHED = "~~"
_LEGACY_ENCODED = "~"


def _check(thread_id: object) -> str:
    if not isinstance(thread_id, str) or thread_id == "":
        raise InvalidThreadIdError(f"thread id must be a non-empty str, got {thread_id!r}")
    return thread_id


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _units(text: str) -> list[str]:
    """``text`` as encoded units, one per character (an escape is one unit)."""
    out = []
    for ch in text:
        if ch in _KEPT or any(lo <= ord(ch) <= hi for lo, hi in _KEPT_RANGES):
            out.append(ch)
        elif "A" <= ch <= "Z":
            out.append("!" + ch.lower())
        else:
            out.append("".join(f"%{b:02x}" for b in _utf8(ch)))
    for i in (0, -1):  # hidden files, options, Windows' trailing dots
        if out[i] == "." or (i == 0 and out[i] == "-"):
            out[i] = f"%{ord(out[i]):02x}"
    base = "".join(out).split(".", 1)[0]
    if base in _WINDOWS_DEVICES:  # ``con``, ``nul.txt``: a device on Windows
        last = len(base) - 1
        out[last] = f"%{ord(out[last]):02x}"
    return out


def _hashed(units: list[str], text: str) -> str:
    """A too-long name: its first units, then ``~`` and the sha256 of ``text``."""
    sizes = itertools.accumulate(map(len, units))
    kept = "".join(u for u, size in zip(units, sizes, strict=True) if size <= _HASHED_KEEP)
    return kept + _HASH_MARK + hashlib.sha256(_utf8(text)).hexdigest()


def encode_thread_id(thread_id: str) -> str:
    """Encode a thread id as one safe, readable directory name.

    One character at a time: lower-case ASCII letters, digits, ``- _ . + = @ ,`` and CJK
    ideographs stay; ``A``-``Z`` become ``!`` + the lower-case letter; anything else is
    ``%`` + two lower-case hex digits per UTF-8 byte, and so is a leading ``.`` or ``-``,
    a trailing ``.`` and the last letter of a Windows device name (``con``, ``com1``,
    ``nul.txt``). The name is lower-case (distinct ids never meet on a case-insensitive
    file system), never a separator, ``.`` or ``..``, and never starts with ``~`` (the
    mark of names written before this rule, see :func:`legacy_thread_folder`). A name
    longer than 200 characters becomes its first 100 characters, ``~`` and the sha256 of
    the id; the real id is kept in ``thread.json``.

    Raises:
        InvalidThreadIdError: the id is not a non-empty ``str``.

    Example:
        >>> [encode_thread_id(t) for t in ("thread-42", "sp-A", "a/b", "..", "CON", "con")]
        ['thread-42', 'sp-!a', 'a%2fb', '%2e%2e', '!c!o!n', 'co%6e']
        >>> encode_thread_id("用户 7")
        '用户%207'
    """
    units = _units(_check(thread_id))
    name = "".join(units)
    return name if len(name) <= _ENCODED_MAX else _hashed(units, thread_id)


def legacy_thread_folder(thread_id: str) -> str:
    """The folder name the earlier rule gave ``thread_id`` (kept by threads recorded then).

    Plain ids (lower-case letters, digits, ``_ . -``, at most 128 characters) as they are;
    others ``~`` + lower-case base32 of their UTF-8, or ``~~`` + sha256 when that exceeds
    200 characters.

    Raises:
        InvalidThreadIdError: the id is not a non-empty ``str``.

    Example:
        >>> legacy_thread_folder("sp-A"), legacy_thread_folder("thread-42")
        ('~onyc2qi', 'thread-42')
    """
    if _LEGACY_PLAIN.match(_check(thread_id)):
        return thread_id
    b32 = base64.b32encode(_utf8(thread_id)).decode().rstrip("=").lower()
    encoded = _LEGACY_ENCODED + b32
    if len(encoded) <= _ENCODED_MAX:
        return encoded
    return _LEGACY_HASHED + hashlib.sha256(_utf8(thread_id)).hexdigest()


def thread_folder(thread_id: str, *, legacy: bool = False) -> str:
    """The folder name of ``thread_id``: :func:`encode_thread_id`, or with ``legacy`` (a
    thread the ledger marks as recorded before the current rule)
    :func:`legacy_thread_folder`.

    Example:
        >>> thread_folder("sp-A"), thread_folder("sp-A", legacy=True)
        ('sp-!a', '~onyc2qi')
    """
    return legacy_thread_folder(thread_id) if legacy else encode_thread_id(thread_id)


def decode_thread_id(name: str) -> str | None:
    """Invert :func:`encode_thread_id` and :func:`legacy_thread_folder`; ``None`` for
    hashed names (read ``thread.json``) and names neither rule writes.

    Example:
        >>> decode_thread_id("sp-!a"), decode_thread_id("~onyc2qi"), decode_thread_id("a%2fb")
        ('sp-A', 'sp-A', 'a/b')
        >>> decode_thread_id("~~" + "0" * 64), decode_thread_id("long" + "~" + "0" * 64)
        (None, None)
    """
    if name.startswith(_LEGACY_HASHED) or (
        not name.startswith(_LEGACY_ENCODED) and _HASH_MARK in name
    ):
        return None
    if name.startswith(_LEGACY_ENCODED):
        pad = "=" * (-len(name[1:]) % 8)
        try:
            return base64.b32decode(name[1:].upper() + pad).decode("utf-8", "surrogatepass")
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            return None
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(name):
        if m.start() != pos:
            return None  # a lone ``%`` or ``!``: not a name of ours
        pos = m.end()
        hexpair, upper, ch = m.groups()
        if hexpair is not None:
            out.append(int(hexpair, 16))
        else:
            out += _utf8(upper.upper() if upper is not None else ch)
    if pos != len(name):
        return None
    try:
        return out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def encode_ns(checkpoint_ns: str, *, legacy: bool = False) -> str:
    """File name (without ``.jsonl``) of a checkpoint namespace (``""`` is ``_root``),
    by the rule of its thread's folder (``legacy``: see :func:`thread_folder`).

    Example:
        >>> encode_ns(""), encode_ns("sub:1"), encode_ns("sub:1", legacy=True)
        ('_root', 'sub%3a1', '~on2weorr')
        >>> encode_ns("_root")
        '%5froot'
    """
    if checkpoint_ns == "":
        return ROOT_NS_DIR
    name = thread_folder(checkpoint_ns, legacy=legacy)
    return "%5f" + name[1:] if name == ROOT_NS_DIR else name


def decode_ns(stem: str) -> str | None:
    """Invert :func:`encode_ns` (either rule); ``None`` for a hashed name (the namespace
    is written in its log's lines).

    Example:
        >>> decode_ns("_root"), decode_ns("sub%3a1"), decode_ns("~on2weorr")
        ('', 'sub:1', 'sub:1')
    """
    return "" if stem == ROOT_NS_DIR else decode_thread_id(stem)


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data``: the name of content-addressed files (without a key).

    Example:
        >>> sha256_hex(b"")[:12]
        'e3b0c44298fc'
    """
    return hashlib.sha256(data).hexdigest()


def thread_relpath(thread_id: str, *, legacy: bool = False) -> str:
    """The thread's folder, relative to the workspace root (``legacy``: see
    :func:`thread_folder`).

    Example:
        >>> thread_relpath("t"), thread_relpath("Ab")
        ('threads/t', 'threads/!ab')
    """
    return f"threads/{thread_folder(thread_id, legacy=legacy)}"


def events_relpath(thread_id: str, *, legacy: bool = False) -> str:
    """The thread's ``events.jsonl`` (one envelope per line), relative to the root."""
    return f"{thread_relpath(thread_id, legacy=legacy)}/events.jsonl"


def checkpoints_relpath(thread_id: str, checkpoint_ns: str, *, legacy: bool = False) -> str:
    """The namespace's checkpoint log; a checkpoint is the line with its checkpoint id."""
    name = encode_ns(checkpoint_ns, legacy=legacy)
    return f"{thread_relpath(thread_id, legacy=legacy)}/checkpoints/{name}.jsonl"


def artifact_relpath(thread_id: str, digest: str, *, legacy: bool = False) -> str:
    """A content-addressed artifact of the thread (a large payload, a raw response).

    Example:
        >>> artifact_relpath("t", "ab12")
        'threads/t/artifacts/ab12'
    """
    return f"{thread_relpath(thread_id, legacy=legacy)}/artifacts/{digest}"
