"""The walk of a value being redacted: every string, key and number in any JSON-like value.

:class:`ValueWalker` is the traversal :class:`~langgraph_external.record.redaction.Redactor`
runs; the redactor supplies what happens at the leaves (``text`` for strings,
``_key_kind`` for a mapping's keys, ``_int`` for integers). The walk shares every part
that needed no change with the input, so a value without findings comes back as the same
object, and it never mutates its input.

Example:
    >>> class Hunter(ValueWalker):
    ...     def text(self, text):
    ...         return (marker("password"), 1) if text == "hunter2" else (text, 0)
    ...     def _key_kind(self, key):
    ...         return "pin" if key == "pin" else None
    ...     def _int(self, value):
    ...         return value, 0
    >>> Hunter().walk({"a": ["hunter2", 3], "pin": 1234})
    ({'a': ['[REDACTED:password]', 3], 'pin': '[REDACTED:pin]'}, 2)
    >>> v = {"a": ["ok", (1, 2.5)]}
    >>> Hunter().walk(v)[0] is v
    True
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from collections.abc import Mapping
from typing import Any

from langgraph_external.record.redaction_detectors import is_marker, marker

__all__ = ["MAX_DEPTH", "SAFE_SCALARS", "ValueWalker"]

SAFE_SCALARS = (
    float,
    datetime.datetime,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    decimal.Decimal,
    enum.Enum,
)
"""Types with nothing to scan (their text is not data a user entered)."""

MAX_DEPTH = 100
"""Deeper values are scanned as their ``repr`` (a cycle or a pathological nesting)."""


class ValueWalker:
    """Walks dicts and other mappings (keys too), lists, tuples, sets, strings, bytes,
    ints, dataclasses and pydantic models; other objects through ``str()``.

    Subclasses define the leaves: :meth:`text`, ``_key_kind`` and ``_int``.
    """

    def walk(self, value: Any) -> tuple[Any, int]:
        """``(redacted_value, number_of_redactions)`` of any value."""
        return self._walk(value, 0)

    def text(self, text: str) -> tuple[str, int]:
        """Redact one string: ``(text, count)``."""
        raise NotImplementedError

    def _key_kind(self, redacted_key: str) -> str | None:
        """The kind of a key whose value is hidden whole, else ``None``."""
        raise NotImplementedError

    def _int(self, value: int) -> tuple[Any, int]:
        """Redact an integer: ``(value or its marker, count)``."""
        raise NotImplementedError

    def _walk(self, value: Any, depth: int) -> tuple[Any, int]:
        t = type(value)
        if t is str:
            return self.text(value)
        if value is None or t is bool:
            return value, 0
        if t is int:
            return self._int(value)
        if depth > MAX_DEPTH:
            return self.text(repr(value))
        if t is dict:
            return self._dict(value, depth)
        if t is list or t is tuple:
            return self._sequence(value, depth)
        return self._other(value, depth)

    def _dict(self, value: Mapping[Any, Any], depth: int) -> tuple[Any, int]:
        total = 0
        out: dict[Any, Any] | None = None
        d = depth + 1
        for i, (k, v) in enumerate(value.items()):
            nk, kc = self.text(k) if type(k) is str else (k, 0)
            kind = self._key_kind(nk) if type(k) is str else None
            if kind is not None and _worth_hiding(v):
                nv: Any = marker(kind)
                vc = 1
            else:
                nv, vc = self._walk(v, d)
            if kc or vc:
                if out is None:
                    out = dict(list(value.items())[:i])
                total += kc + vc
            if out is not None:
                while nk in out:  # two keys redacted to the same marker keep both values
                    nk = f"{nk}#"
                out[nk] = nv
        return (value if out is None else out), total

    def _sequence(self, value: list[Any] | tuple[Any, ...], depth: int) -> tuple[Any, int]:
        total = 0
        out: list[Any] | None = None
        d = depth + 1
        for i, item in enumerate(value):
            nv, n = self._walk(item, d)
            if n:
                if out is None:
                    out = list(value[:i])
                total += n
            if out is not None:
                out.append(nv)
        if out is None:
            return value, 0
        return (tuple(out) if isinstance(value, tuple) else out), total

    def _other(self, value: Any, depth: int) -> tuple[Any, int]:
        if isinstance(value, (bytes, bytearray)):
            text, n = self.text(bytes(value).decode("latin-1"))
            if not n:
                return value, 0
            data = text.encode("latin-1", errors="replace")
            return (bytearray(data) if isinstance(value, bytearray) else data), n
        if isinstance(value, str):  # str subclasses (str enums) come back as str
            text, n = self.text(str.__str__(value))
            return (text, n) if n else (value, 0)
        if isinstance(value, SAFE_SCALARS) and not isinstance(value, int):  # bool: in _walk
            return value, 0
        if isinstance(value, int):
            return self._int(int(value))
        if isinstance(value, Mapping):
            return self._dict(value, depth)
        if isinstance(value, (list, tuple)):
            return self._sequence(value, depth)
        if isinstance(value, (set, frozenset)):
            items, n = self._sequence(list(value), depth)
            return (type(value)(items) if n else value), n
        as_dict = _fields(value)
        if as_dict is not None:
            out, n = self._dict(as_dict, depth)
            return (out if n else value), n
        try:
            text = str(value)
        except Exception:  # an object that cannot be shown cannot leak through str() either
            return value, 0
        redacted, n = self.text(text)
        return (redacted if n else value), n


def _worth_hiding(value: Any) -> bool:
    # nothing to hide in an empty value, and a marker is already hidden (idempotence)
    if value is None or value == "" or type(value) is bool:
        return False
    return not (isinstance(value, str) and is_marker(value))


def _fields(value: Any) -> dict[str, Any] | None:
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            out = dump()
        except Exception:
            return None
        return out if isinstance(out, dict) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None
