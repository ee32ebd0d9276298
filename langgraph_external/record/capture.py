"""Captures: what commits with the checkpoint, from which its record is sealed later.

A :class:`Capture` is one row of the ledger's ``captures`` table (the v7 migration). On
the official Postgres saver the checkpointer adds it to the saver's own transaction —
one statement, nothing computed: a reference to the saver's rows (thread, namespace,
checkpoint and parent, or a task's writes) and the thread's callback events that precede
it (:attr:`Capture.riders`, snapshotted on the caller's thread; redacted there too, or
— :attr:`Capture.pending` — encrypted with the deployment key and redacted by the
sealer).
Events that ride no saver transaction are captured by the pipeline's flusher (kind
``"events"``). The sealer (:mod:`langgraph_external.pipeline.seal`) turns captures into
sequenced, hash-chained events in commit order and deletes them as it stores those.

Example:
    >>> from langgraph_external.record.events import Event
    >>> c = Capture("events", "t1", riders=[Event.new("error", "t1", payload={"x": 1})])
    >>> [(e.kind, e.payload) for e in unpack_riders(pack_riders(c.riders), "t1")]
    [('error', {'x': 1})]
"""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
import ormsgpack

from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.escapes import is_utf8
from langgraph_external.record.events import (
    ENVELOPE_KEYS,
    SCHEMA_VERSION,
    TEXT_FIELDS,
    Event,
    new_id,
)

__all__ = [
    "KINDS",
    "Capture",
    "pack_riders",
    "riders_of",
    "snapshot",
    "unpack_inline",
    "unpack_riders",
]

KINDS = ("checkpoint", "writes", "events")
"""What a capture stands for: a stored checkpoint, a task's stored writes, or only the
events it carries."""


@dataclass(slots=True)
class Capture:
    """One captured row (see the module docstring).

    ``event_id`` is the id its main event (the checkpoint's or the writes') will have,
    or the id that names an ``"events"`` capture; ``id`` and ``captured_at`` are the
    ledger's (assigned when the row is stored). ``inline``: the serializer's bytes of the
    changed channel values the official saver keeps inline in its checkpoint row (a float,
    a string...): that JSON row cannot give them back exactly (``-0.0``, ``1.7e308``).
    """

    kind: str
    thread_id: str
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None
    parent_id: str | None = None
    task_id: str | None = None
    task_path: str | None = None
    node: str | None = None
    changed: list[str] | None = None
    idx: list[int] | None = None
    riders: Sequence[Event] = ()
    inline: dict[str, tuple[str, bytes]] | None = None
    event_id: str = field(default_factory=new_id)
    id: int | None = None
    captured_at: datetime | None = None
    recovered: bool = False  # made by ``lgx repair`` for saver rows nothing captured
    material: bytes | None = None  # captured by value (:mod:`~.by_value`), not referenced
    pending: bool = False
    """The riders are snapshots the sealer still redacts, normalizes and offloads: the
    row holds them encrypted (with :attr:`key`), never in clear."""
    key: WorkspaceCipher | None = field(default=None, repr=False)

    def row(self) -> tuple[Any, ...]:
        """The insert's parameters (:data:`langgraph_external.ledger.schema.INSERT_CAPTURE`)."""
        return (
            self.event_id,
            self.thread_id,
            self.kind,
            self.checkpoint_ns,
            self.checkpoint_id,
            self.parent_id,
            self.task_id,
            self.task_path,
            self.node,
            # JSON text, not arrays: psycopg adapts a text parameter at a third of the cost
            _json_text(self.changed),
            _json_text(self.idx),
            self._riders_column(),
            ormsgpack.packb(self.inline) if self.inline else None,
            self.material,
        )

    def _riders_column(self) -> bytes | None:
        if not self.riders:
            return None
        data = pack_riders(self.riders)
        if not self.pending:
            return data
        if self.key is None:
            raise ValueError("pending riders are stored encrypted: the capture needs a key")
        return _SEALED + self.key.encrypt(data, _aad(self.event_id))


_SEALED = b"\xc1"  # never the first byte of msgpack: riders sealed with the deployment key


def _aad(event_id: str) -> bytes:
    return b"lgx-riders\x1f" + event_id.encode()


def _json_text(value: list[Any] | None) -> str | None:
    """JSON text of a list of names or indexes (orjson; the standard library's escapes
    for what it refuses, a lone surrogate in a channel's name)."""
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value)


_BIG_INT = 1  # msgpack extension code of an integer beyond 64 bits (JSON allows them)


def _big_int(value: Any) -> Any:
    if isinstance(value, int):
        return ormsgpack.Ext(_BIG_INT, str(value).encode())
    raise TypeError(f"cannot pack {type(value).__name__}")


def _ext(code: int, data: bytes) -> Any:
    if code == _BIG_INT:
        return int(data)
    raise ValueError(f"unknown msgpack extension {code}")


def pack_riders(events: Sequence[Event]) -> bytes:
    """Processed, unsequenced events as compact bytes (msgpack), exactly restorable.

    Example:
        >>> e = Event.new("node_end", "t", payload={"n": 10**30})
        >>> unpack_riders(pack_riders([e]), "t")[0].payload
        {'n': 1000000000000000000000000000000}
    """
    return ormsgpack.packb(
        [_row(e) for e in events], default=_big_int, option=ormsgpack.OPT_PASSTHROUGH_BIG_INT
    )


# a packed rider's fields, a stored format: the envelope's (its order) but the thread (the
# capture's) and what sealing sets, then ``detail`` and ``attachments``
_ROW = (
    *(k for k in ENVELOPE_KEYS if k not in ("seq", "thread_id", "prev", "hash")),
    "detail",
    "attachments",
)
_ROW_OF = operator.attrgetter(*_ROW)


def _row(e: Event) -> list[Any]:
    row = list(_ROW_OF(e))
    row[-1] = dict(e.attachments) if e.attachments else None
    return row


def unpack_inline(data: bytes | None) -> dict[str, tuple[str, bytes]] | None:
    """Inverse of the packing of :attr:`Capture.inline`."""
    if not data:
        return None
    return {ch: (str(v[0]), bytes(v[1])) for ch, v in ormsgpack.unpackb(bytes(data)).items()}


def snapshot(event: Event) -> Event | None:
    """``event`` with a copy of its values that later changes to the caller's objects
    cannot reach — or ``None`` when they are not plain data :func:`pack_riders` takes as
    they are (an object, a date, text UTF-8 cannot hold, a key that is not a string):
    such an event is processed where it was emitted.

    Example:
        >>> live = {"n": [1, 2.5, "x"]}
        >>> snap = snapshot(Event.new("node_end", "t", payload=live))
        >>> live["n"].append("later"); snap.payload
        {'n': [1, 2.5, 'x']}
        >>> snapshot(Event.new("node_end", "t", payload={"n": object()})) is None
        True
    """
    for text in _TEXT(event):
        if text is not None and not (text.isascii() or is_utf8(text)):
            return None
    values = event.payload if event.detail is None else (event.payload, event.detail)
    try:
        data = ormsgpack.packb(values, default=_big_int, option=_PLAIN)
    except (TypeError, ValueError):
        return None
    copy = ormsgpack.unpackb(data, ext_hook=_ext)
    if event.detail is None:
        return event.replace(payload=copy)
    return event.replace(payload=copy[0], detail=copy[1])


# what a snapshot takes as it is: anything else goes to ``default`` (``_big_int``: a big
# integer, or TypeError), so the event is processed where it was emitted
_PLAIN = (
    ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_UUID
)


_TEXT = operator.attrgetter("event_id", *TEXT_FIELDS)


def riders_of(
    data: bytes | None, thread_id: str, event_id: str, cipher: WorkspaceCipher | None
) -> tuple[list[Event], bool]:
    """A capture row's riders and whether they are pending (see :attr:`Capture.pending`).

    Raises:
        ValueError: pending riders and no ``cipher`` to open them.
    """
    if not data or bytes(data[:1]) != _SEALED:
        return unpack_riders(data, thread_id), False
    if cipher is None:
        raise ValueError("this capture's riders are encrypted and no deployment key is given")
    return unpack_riders(cipher.decrypt(bytes(data[1:]), _aad(event_id)), thread_id), True


def unpack_riders(data: bytes | None, thread_id: str) -> list[Event]:
    """Inverse of :func:`pack_riders` (``thread_id``: the capture's thread)."""
    if not data:
        return []
    out = []
    for r in ormsgpack.unpackb(bytes(data), ext_hook=_ext):
        f = dict(zip(_ROW, r, strict=False))  # a longer row (a newer writer): its extras ignored
        f.update(
            v=int(f["v"] or SCHEMA_VERSION),
            ts=datetime.fromisoformat(f["ts"]),
            checkpoint_ns=f["checkpoint_ns"] or "",
            payload=f["payload"] or {},
            redactions=int(f["redactions"] or 0),
            attachments=f["attachments"] or {},
        )
        out.append(Event(thread_id=thread_id, **f))
    return out
