r"""Text PostgreSQL or UTF-8 cannot hold, recorded escaped — reversibly, and marked so.

PostgreSQL ``text``/``jsonb`` cannot hold NUL, and UTF-8 cannot encode a lone surrogate
(``"\udce9"``, from ``os.fsdecode`` of a non-UTF-8 name). A payload string holding
either is recorded as a marked value, ``{"$escaped": <text>, "as": "text"}``, whose text
spells the backslash as ``\\``, NUL as ``\u0000`` and each lone surrogate as ``\udXXX``
(lowercase hex): the escape is reversible, and a string that needed no escaping is never
marked, so a user's literal ``\u0000`` (six characters) stays a plain string and reads
back as itself. A mapping with such a key is recorded as ``{"$escaped": <mapping with
every key escaped so>, "as": "object"}``.

:func:`unmark` (and :func:`~langgraph_external.record.artifacts.expand`, which every
reader that returns exact values uses) gives the original values back. Records written
before this form held such text escaped visibly and unmarked (``\u0000``); they read back
as they were stored. A mapping that is exactly ``{"$escaped": <str>, "as": "text"}`` in
the app's own data reads back as the text it names (as a mapping shaped as an artifact
reference does): the two forms are what the record reserves.

Example:
    >>> marked = mark_text("a\x00b\\u0000\udce9")
    >>> marked
    {'$escaped': 'a\\u0000b\\\\u0000\\udce9', 'as': 'text'}
    >>> unmark({"out": marked, "literal": "\\u0000"})
    {'out': 'a\x00b\\u0000\udce9', 'literal': '\\u0000'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MARK",
    "escape_text",
    "has_marks",
    "is_marked",
    "is_utf8",
    "mark_keys",
    "mark_text",
    "needs_escape",
    "restore_marked",
    "unescape_text",
    "unmark",
]

MARK = "$escaped"
"""The key of a marked value."""

_UNSAFE = re.compile("[\\\\\x00\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4})")


def needs_escape(text: str) -> bool:
    r"""Whether ``text`` holds what PostgreSQL text or UTF-8 cannot (NUL, a lone surrogate).

    Example:
        >>> needs_escape("a\x00"), needs_escape("\udce9"), needs_escape("\\u0000 é")
        (True, True, False)
    """
    return "\x00" in text or not (text.isascii() or is_utf8(text))


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escape_one(m: re.Match[str]) -> str:
    c = m.group()
    return "\\\\" if c == "\\" else f"\\u{ord(c):04x}"


def escape_text(text: str) -> str:
    r"""``text`` with ``\`` as ``\\``, NUL as ``\u0000``, a lone surrogate as ``\udXXX``.

    Example:
        >>> escape_text("a\\b\x00\ud800")
        'a\\\\b\\u0000\\ud800'
    """
    return _UNSAFE.sub(_escape_one, text)


def _unescape_one(m: re.Match[str]) -> str:
    body = m.group(1)
    return "\\" if body == "\\" else chr(int(body[1:], 16))


def unescape_text(text: str) -> str:
    r"""The text :func:`escape_text` was given.

    Example:
        >>> s = "x\\u0000\x00\udce9\\"
        >>> unescape_text(escape_text(s)) == s
        True
    """
    return _ESCAPE.sub(_unescape_one, text) if "\\" in text else text


def mark_text(text: str) -> dict[str, Any]:
    """``text`` as the record holds it when it :func:`needs_escape`: a marked value."""
    return {MARK: escape_text(text), "as": "text"}


def mark_keys(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping with a key that :func:`needs_escape`, as the record holds it: every key
    escaped (the values as given), marked."""
    return {MARK: {escape_text(k): v for k, v in mapping.items()}, "as": "object"}


def is_marked(value: Any) -> bool:
    """Whether ``value`` is a marked value (:func:`mark_text`, :func:`mark_keys`)."""
    return (
        isinstance(value, Mapping)
        and len(value) == 2
        and MARK in value
        and value.get("as") in ("text", "object")
    )


def has_marks(value: Any) -> bool:
    """Whether ``value`` holds a marked value anywhere."""
    if isinstance(value, Mapping):
        return is_marked(value) or any(has_marks(v) for v in value.values())
    if isinstance(value, list):
        return any(has_marks(v) for v in value)
    return False


def restore_marked(value: Mapping[str, Any], inner: Any) -> Any:
    """The original of marked ``value`` whose content, read back, is ``inner`` (a text for
    ``"as": "text"``, a mapping for ``"as": "object"``); anything else: ``value`` as is."""
    if value.get("as") == "text" and isinstance(inner, str):
        return unescape_text(inner)
    if value.get("as") == "object" and isinstance(inner, Mapping):
        return {unescape_text(str(k)): v for k, v in inner.items()}
    return dict(value)


def unmark(value: Any) -> Any:
    """``value`` with every marked value turned back into the original it stands for."""
    if isinstance(value, Mapping):
        if is_marked(value):
            inner = value[MARK]
            if value.get("as") == "object" and isinstance(inner, Mapping):
                inner = {k: unmark(v) for k, v in inner.items()}
            return restore_marked(value, inner)
        return {k: unmark(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unmark(v) for v in value]
    return value
