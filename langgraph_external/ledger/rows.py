"""Rows of the ledger's tables ↔ events and captures (the (de)serialization of the ledger).

What the statements of :mod:`langgraph_external.ledger.statements` take and return:
an event's row (envelope columns and the packed projection ``detail``), a thread's
sealed events as one ``COMMIT_EVENTS`` parameter set, a checkpoint event's index row, a
capture read back for sealing.

Example:
    >>> unpack_detail(pack_detail(Event.new("error", "t").replace(detail={"a": 1})))
    ({'a': 1}, {})
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import ormsgpack
from psycopg.types.json import Jsonb

from langgraph_external.ledger.schema import row_to_envelope
from langgraph_external.ledger.statements import CHECKPOINT_INDEX_COLUMNS, EVENT_COLUMNS
from langgraph_external.record.capture import Capture, riders_of, unpack_inline
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event

__all__ = [
    "capture_from_row",
    "checkpoint_row",
    "commit_params",
    "event_from_row",
    "event_row",
    "pack_detail",
    "unpack_detail",
]

_EVENT_FIELDS = EVENT_COLUMNS.split(", ")


def pack_detail(e: Event) -> bytes | None:
    """What a projection needs beyond the envelope: exact bytes, skeletons, artifacts."""
    if not e.detail and not e.attachments:
        return None
    files = dict(e.attachments)
    for address in (e.detail or {}).get("saver_blobs") or {}:
        files.pop(f"checkpoints/blobs/{address}", None)  # the saver's row holds them
    return ormsgpack.packb({"detail": e.detail or {}, "files": files})


def unpack_detail(data: bytes | None) -> tuple[dict[str, Any] | None, dict[str, bytes]]:
    """Inverse of :func:`pack_detail`."""
    if not data:
        return None, {}
    obj = ormsgpack.unpackb(bytes(data))
    return (obj.get("detail") or None), dict(obj.get("files") or {})


def event_row(e: Event) -> tuple[Any, ...]:
    """The parameters of ``INSERT_EVENT`` for one sequenced event."""
    # the payload is JSON text already; the detail is packed
    packed = {"payload": Jsonb(e.payload_json(), dumps=str), "detail": pack_detail(e)}
    return tuple(packed[c] if c in packed else getattr(e, c) for c in _EVENT_FIELDS)


def commit_params(group: Sequence[Event]) -> tuple[str, list[bytes | None], str]:
    """The events of ``COMMIT_EVENTS``: their lines, details, index rows."""
    rows = "[" + ",".join(e.line for e in group if e.line) + "]"
    index = [
        dict(zip(CHECKPOINT_INDEX_COLUMNS, checkpoint_row(e), strict=True))
        for e in group
        if e.kind == "checkpoint"
    ]
    return rows, [pack_detail(e) for e in group], json.dumps(index, default=_iso)


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def checkpoint_row(e: Event) -> tuple[Any, ...]:
    """The checkpoint index row a ``checkpoint`` event stores (``lgx verify`` re-derives it)."""
    p = e.payload
    writers = p.get("writers") or []
    return (
        e.thread_id,
        e.checkpoint_ns,
        e.checkpoint_id,
        p.get("parent_checkpoint_id"),
        e.step,
        p.get("source"),
        e.run_id,
        [w.get("task_id") for w in writers if w.get("task_id")],
        sorted({w["node"] for w in writers if w.get("node")}),
        sorted(p.get("changed") or p.get("channels") or {}),
        e.ts,
        int(p.get("size", 0)),
        p.get("path"),
        e.seq,
    )


def event_from_row(row: Sequence[Any]) -> Event:
    """An event from a row of ``SELECT_EVENTS_AFTER`` (envelope columns, then ``detail``)."""
    env = row_to_envelope(row[:-1])
    detail, files = unpack_detail(row[-1])
    return Event.from_envelope(env).replace(detail=detail, attachments=files)


def _unreadable(r: Sequence[Any], exc: BaseException) -> Event:
    return Event.new(
        "error",
        r[2],
        status="error",
        name="riders_unreadable",
        checkpoint_ns=r[4] or "",
        checkpoint_id=r[5],
        payload={
            "error": f"{type(exc).__name__}: {exc}"[:2000],
            "capture": r[3],
            "detail": "the events this capture carried are encrypted with a key this "
            "sealer does not have, or were altered",
        },
    )


def capture_from_row(r: Sequence[Any], cipher: WorkspaceCipher | None = None) -> Capture:
    """A capture from a row of ``SELECT_CAPTURES`` (``cipher`` opens pending riders)."""
    try:
        riders, pending = riders_of(r[12], r[2], r[1], cipher)
    except Exception as exc:  # another deployment key, altered bytes: said, never dropped
        riders, pending = [_unreadable(r, exc)], False
    return Capture(
        id=int(r[0]),
        event_id=r[1],
        thread_id=r[2],
        kind=r[3],
        checkpoint_ns=r[4] or "",
        checkpoint_id=r[5],
        parent_id=r[6],
        task_id=r[7],
        task_path=r[8],
        node=r[9],
        changed=list(r[10]) if r[10] is not None else None,
        idx=list(r[11]) if r[11] is not None else None,
        riders=riders,
        pending=pending,
        captured_at=r[13],
        recovered=bool(r[14]),
        inline=unpack_inline(r[15]),
        material=bytes(r[16]) if r[16] is not None else None,
    )
