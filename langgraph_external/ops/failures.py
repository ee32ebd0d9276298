"""Record failures: the events that could not be recorded, and their resolution.

A ``record_failed`` event stands in the thread's chain for an event the pipeline could
not record (what, where, why). ``lgx verify`` fails the thread until a
``record_failure_resolved`` event answers it (``lgx resolve THREAD SEQ --note ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_external.errors import ExternalError
from langgraph_external.record.events import Event

__all__ = ["record_failures", "resolve_record_failure"]


def record_failures(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """One problem per ``record_failed`` event no ``record_failure_resolved`` event answers:
    something of the thread was not recorded, and nobody has said why that is acceptable
    (``lgx resolve THREAD SEQ --note ...``, :func:`resolve_record_failure`).

    Example:
        >>> failed = {"seq": 3, "kind": "record_failed", "payload": {"kind": "tool_end",
        ...     "processor": "Offload", "error_type": "ValueError"}}
        >>> record_failures([failed])
        ['ledger seq 3: a tool_end event could not be recorded (Offload: ValueError); \
lgx resolve THREAD 3 --note ... once it is accounted for']
        >>> record_failures([failed, {"seq": 4, "kind": "record_failure_resolved",
        ...     "payload": {"seq": 3}}])
        []
    """
    resolved = {
        (e.get("payload") or {}).get("seq")
        for e in events
        if e.get("kind") == "record_failure_resolved"
    }
    out = []
    for e in events:
        if e.get("kind") == "record_failed" and e["seq"] not in resolved:
            p = e.get("payload") or {}
            out.append(
                f"ledger seq {e['seq']}: a {p.get('kind')} event could not be recorded "
                f"({p.get('processor')}: {p.get('error_type')}); "
                f"lgx resolve THREAD {e['seq']} --note ... once it is accounted for"
            )
    return out


def resolve_record_failure(ext: Any, thread_id: str, seq: int, note: str) -> Event:
    """Record that the ``record_failed`` event at ``seq`` of ``thread_id`` is accounted for.

    Appends a ``record_failure_resolved`` event (payload: the failure's ``seq``, its
    event id, the kind that was not recorded, ``note``) through ``ext``'s pipeline and
    waits for it to be sealed; ``lgx verify`` no longer fails the thread for that
    failure. The failure itself stays in the chain.

    Raises:
        ExternalError: ``seq`` is not an unresolved ``record_failed`` event of the thread,
            or ``note`` is empty.
    """
    if not note.strip():
        raise ExternalError("say why the failure is accounted for (--note)")
    events = ext.events(thread_id)
    failed = next((e for e in events if e["seq"] == seq), None)
    if failed is None or failed["kind"] != "record_failed":
        raise ExternalError(f"seq {seq} of thread {thread_id!r} is not a record_failed event")
    if all(not p.startswith(f"ledger seq {seq}:") for p in record_failures(events)):
        raise ExternalError(f"the record failure at seq {seq} of {thread_id!r} is resolved")
    payload = failed.get("payload") or {}
    event = Event.new(
        "record_failure_resolved",
        thread_id,
        node=failed.get("node"),
        step=failed.get("step"),
        payload={
            "seq": seq,
            "event_id": failed["event_id"],
            "kind": payload.get("kind"),
            "note": note,
        },
    )
    ext.pipeline.emit(event)
    if not ext.flush():
        raise ExternalError("the resolution was captured but not sealed yet; run lgx verify later")
    return event
