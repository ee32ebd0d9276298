"""Applying one thread's events to one projection: from memory when the sealer just handed
them over, else read from the ledger; where the thread's cursor goes afterwards.

Used by :class:`~langgraph_external.pipeline.runner.ProjectionRunner` for every projection
target. Optional hooks a target may have besides the
:class:`~langgraph_external.ledger.contract.Projection` contract: ``read(tid, after)`` (its
own way to read the ledger), ``settled(tid, pos)`` (the cursor to record at ``pos``),
``resume(tid)`` (finish what a writer that died left unsettled), ``locate(ledger, tids)``
(ask the ledger where the threads' files go before touching them).

Example:
    >>> from langgraph_external.record.events import Event
    >>> fresh = FreshEvents(["workspace"])
    >>> fresh.add([Event.new("error", "t").replace(seq=1)])
    >>> [e.seq for e in fresh.take("workspace", "t", 0)]
    [1]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langgraph_external.ledger.contract import Projection
from langgraph_external.record.events import Event

__all__ = ["FRESH_MAX", "FreshEvents", "apply_thread", "cursor_of"]

FRESH_MAX = 20_000
"""Sealed events held for projections before they read them back from the ledger."""


class FreshEvents:
    """Sealed events handed over in memory, per projection and thread (thread-safe)."""

    def __init__(self, names: Iterable[str]) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, list[Event]]] = {n: {} for n in names}
        self._count = 0

    def add(self, events: Sequence[Event]) -> None:
        """Hold ``events`` for every projection (far behind: the ledger is read instead)."""
        with self._lock:
            if self._count > FRESH_MAX:
                for held in self._held.values():
                    held.clear()
                self._count = 0
            for held in self._held.values():
                for e in events:
                    held.setdefault(e.thread_id, []).append(e)
            self._count += len(events)

    def take(self, name: str, tid: str, pos: int) -> list[Event] | None:
        """The held events of ``tid`` right after ``pos``, or ``None`` (a gap, or none)."""
        with self._lock:
            held = self._held.get(name, {}).pop(tid, None)
            if not held:
                return None
            self._count -= len(held)
        held.sort(key=lambda e: e.seq or 0)
        run: list[Event] = []
        for e in held:
            if (e.seq or 0) <= pos:
                continue
            if (e.seq or 0) != pos + len(run) + 1:
                return None  # a gap: sealed elsewhere or not yet settled; read the ledger
            run.append(e)
        return run


def cursor_of(proj: Projection, tid: str, pos: int) -> int | None:
    """The cursor to record for ``tid`` at ``pos``: what ``proj`` holds for good (``None``:
    none — files another writer left, which this process did not write to)."""
    settled = getattr(proj, "settled", None)
    if settled is None:
        return pos
    mark = settled(tid, pos)
    return None if mark is None else int(mark)


def apply_thread(
    ledger: Any,
    proj: Projection,
    tid: str,
    take_fresh: Callable[[int], list[Event] | None] | None,
    *,
    cursor: int | None = None,
    resume: bool = False,
) -> tuple[int, int | None]:
    """Apply what ``tid`` lacks; returns its position and the cursor to record there
    (``None``: leave the recorded one).

    ``take_fresh``: gives the sealed events right after a position held in memory, if
    any (then nothing is read back). A cursor short of what the files hold (``cursor``, from
    the ledger) means their writer has not settled them — it is settling them, or it died
    first (a deferred ``state.json``). With ``resume`` (a settle, ``lgx repair``) the
    projection finishes that now; otherwise the cursor is not moved past it.
    """
    locate = getattr(proj, "locate", None)
    if locate is not None:  # where the thread's files go (the ledger's word)
        locate(ledger, [tid])
    pos = proj.position(tid)
    finish = getattr(proj, "resume", None)
    unsettled = finish is not None and cursor is not None and cursor < pos
    if unsettled and resume and finish is not None:
        finish(tid)
        unsettled = False
    fresh = take_fresh(pos) if take_fresh is not None else None
    read = getattr(proj, "read", None) or ledger.read
    while True:
        # every event held in memory follows pos: apply them and stop (what is sealed
        # later touches the thread again); otherwise read the ledger to its end
        events = fresh if fresh is not None else read(tid, pos)
        if not events:
            break
        if events[0].seq != pos + 1 and events[0].kind != "thread_deleted":
            # the ledger dropped older events (thread deleted): start over from there
            pos = (events[0].seq or 1) - 1
        proj.apply(tid, events)
        pos = events[-1].seq or pos
        if fresh is not None:
            break
    mark = cursor_of(proj, tid, pos)
    if unsettled and cursor is not None:
        mark = cursor if mark is None else min(mark, cursor)
    return pos, mark
