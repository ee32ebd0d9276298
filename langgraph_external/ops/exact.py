"""Exact bytes into a saver: restore without decoding and re-encoding every value.

A long thread's saver holds every version of a changed channel whole (a message list
grows by one message a step), so decoding every checkpoint's values and letting the
target saver encode them again costs time that grows with the square of the thread:
11.8 s for 1 092 checkpoints of a chat thread. The workspace already holds the exact
bytes the serializer wrote, checked against their addresses, and the savers that store
the serializer's bytes (``InMemorySaver``, ``SqliteSaver``) need nothing else: each
value goes in as a :class:`RawValue`, and for the duration of the restore the saver's
serializer is an :class:`ExactSerde` that hands those bytes back as they are (and, for
``SqliteSaver``, which serializes the whole checkpoint, splices them into its msgpack
map). Which savers qualify is :func:`~langgraph_external.upstream.langgraph.
stores_serializer_bytes`; every other saver gets decoded values.

Example:
    >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    >>> serde = JsonPlusSerializer()
    >>> raw = RawValue(*serde.dumps_typed(["a", "b"]))
    >>> exact = ExactSerde(serde)
    >>> exact.dumps_typed(raw) == (raw.type, raw.data)
    True
    >>> cp = {"v": 4, "id": "c", "channel_values": {"items": raw, "n": 1}}
    >>> serde.loads_typed(exact.dumps_typed(cp))["channel_values"]
    {'items': ['a', 'b'], 'n': 1}
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = ["SPLICEABLE_TYPES", "ExactSerde", "RawValue", "exact_serde"]

SPLICEABLE_TYPES = frozenset({"msgpack"})
"""Serializer types whose bytes are one msgpack value (they splice into a map as is)."""

_NIL = b"\xc0"


@dataclass(frozen=True, slots=True)
class RawValue:
    """A channel value or write as the exact ``(type, bytes)`` its serializer wrote."""

    type: str
    data: bytes


def _map_header(n: int) -> bytes:
    if n < 16:
        return bytes([0x80 | n])
    if n < 1 << 16:
        return b"\xde" + struct.pack(">H", n)
    return b"\xdf" + struct.pack(">I", n)


class ExactSerde:
    """A serializer that writes :class:`RawValue` s as their bytes, and the rest as ``inner``.

    ``loads_typed`` is ``inner``'s. A mapping with ``channel_values`` holding raw values
    (a whole checkpoint, as ``SqliteSaver`` serializes it) becomes one msgpack map whose
    members are ``inner``'s bytes of each field, with the raw values spliced in.
    """

    def __init__(self, inner: SerializerProtocol) -> None:
        self.inner = inner

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if isinstance(obj, RawValue):
            return obj.type, obj.data
        if isinstance(obj, dict):
            values = obj.get("channel_values")
            if isinstance(values, dict) and any(isinstance(v, RawValue) for v in values.values()):
                return "msgpack", self._map(obj, splice="channel_values")
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)

    def _member(self, value: Any) -> bytes:
        if isinstance(value, RawValue):
            if value.type not in SPLICEABLE_TYPES:
                raise TypeError(f"a {value.type!r} value cannot be spliced into a msgpack map")
            return value.data
        kind, data = self.inner.dumps_typed(value)
        if kind == "null":
            return _NIL
        if kind in ("bytes", "bytearray"):
            return ormsgpack.packb(bytes(data))
        if kind not in SPLICEABLE_TYPES:
            raise TypeError(f"a {kind!r} value cannot be spliced into a msgpack map")
        return data

    def _map(self, obj: dict[str, Any], *, splice: str | None = None) -> bytes:
        parts = [_map_header(len(obj))]
        for key, value in obj.items():
            parts.append(ormsgpack.packb(key))
            if key == splice:
                parts.append(_map_header(len(value)))
                for ch, v in value.items():
                    parts += (ormsgpack.packb(ch), self._member(v))
            else:
                parts.append(self._member(value))
        return b"".join(parts)


@contextmanager
def exact_serde(saver: BaseCheckpointSaver[Any]) -> Iterator[None]:
    """``saver`` writes :class:`RawValue` s as their exact bytes while this is open."""
    inner = saver.serde
    saver.serde = ExactSerde(inner)
    try:
        yield
    finally:
        saver.serde = inner
