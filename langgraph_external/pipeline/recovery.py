"""Recovery of the capturing side: events a dead process left in the write-ahead log, and
captures whose commit was not seen to succeed or fail (a connection lost around the
COMMIT). Either way, what the ledger already holds is not captured again.

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> recorded(InMemoryLedger(), "t", [])
    set()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from langgraph_external.pipeline.buffer import Entry, EventBuffer
from langgraph_external.pipeline.wal import WriteAheadLog
from langgraph_external.record.events import Event

__all__ = ["keep_leftover", "read_all", "recorded", "replay_wal", "resolve_doubts"]

logger = logging.getLogger("langgraph_external")


def keep_leftover(
    wal: WriteAheadLog,
    leftover: Sequence[Entry],
    flushed: bool,
    finish: Callable[[Sequence[Event]], list[Event]] = list,
) -> None:
    """At close: events that could not be captured go to the write-ahead log (replayed by
    the next start or ``lgx repair``), ``finish``-ed first (a deferred event is redacted
    before it is written to a file); with nothing left and everything ``flushed``, this
    process's log file goes."""
    if leftover:
        fresh = finish([en.event for en in leftover if en.wal is None])
        if fresh:
            wal.append(fresh)
        logger.error(
            "langgraph-external: %d events could not be recorded before close; kept in "
            "the write-ahead log %s and recorded by the next start or `lgx repair`",
            len(leftover),
            wal.dir,
        )
    elif flushed:
        wal.release()


def replay_wal(buffer: EventBuffer, wal: WriteAheadLog, ledger: Any) -> None:
    """Buffer events that dead processes (or a failed close) left in the log, except
    those the ledger already holds (the crash came after their capture)."""
    for path, events in wal.orphans():
        with buffer.cv:
            buffer.add(events, str(path), time.monotonic())
            wal.adopt(path, len(events))
    with buffer.cv:
        tids = buffer.threads()
    for tid in tids:
        with buffer.cv:
            entries = buffer.entries(tid)
        if not entries:
            continue
        try:
            held = recorded(ledger, tid, [en.event.event_id for en in entries])
        except Exception:
            return
        with buffer.cv:
            gone = buffer.drop(tid, held)
        wal.settled([en.wal for en in gone if en.wal])


def resolve_doubts(buffer: EventBuffer, wal: WriteAheadLog, ledger: Any, tid: str) -> None:
    """Drop ``tid``'s buffered events whose capture the ledger holds. Raises what the
    ledger raises when it cannot be asked; the thread stays doubtful."""
    with buffer.cv:
        doubts = list(buffer.doubtful.get(tid, []))
    held = recorded(ledger, tid, [d[0] for d in doubts])
    gone_ids = set().union(*(ids for cid, ids in doubts if cid in held))
    with buffer.cv:
        if gone_ids:
            gone = buffer.drop(tid, gone_ids)
            wal.settled([en.wal for en in gone if en.wal])
            buffer.delivered += len(gone)
        buffer.doubtful.pop(tid, None)
        buffer.cv.notify_all()


def recorded(ledger: Any, tid: str, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` the ledger holds for ``tid``, captured or sealed."""
    if not ids:
        return set()
    ask = getattr(ledger, "recorded", None)
    if ask is not None:
        return set(ask(tid, ids))
    return {e.event_id for e in read_all(ledger, tid)} & set(ids)


def read_all(ledger: Any, tid: str) -> list[Event]:
    """Every event of ``tid`` the ledger holds, in order."""
    out: list[Event] = []
    after = 0
    while events := ledger.read(tid, after):
        out.extend(events)
        after = events[-1].seq or after + len(events)
    return out
