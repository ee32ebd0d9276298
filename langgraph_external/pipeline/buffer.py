"""The capturing side's per-thread buffer, and the causal order captures take it in.

Events reported between two checkpoints of a thread wait here (:class:`EventBuffer`). A
checkpoint's capture (:class:`~langgraph_external.pipeline.commit.Commit`) takes the
longest prefix of the thread's buffer that causally precedes it; the flusher
(:class:`~langgraph_external.pipeline.flusher.Flusher`) captures the rest once the
checkpoint they follow is captured (or after ``hold``). Everything here happens under one
lock (:attr:`EventBuffer.cv`), which producers, commits and the flusher share.

Example:
    >>> from langgraph_external.record.events import Event
    >>> b = EventBuffer(hold=1.0)
    >>> with b.cv:
    ...     b.add([Event.new("node_end", "t", step=1)], None)
    ...     [en.event.kind for en in b.take_riders("t", "", 1, "c1", None)], b.count
    (['node_end'], 0)
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langgraph_external.record.capture import Capture
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event

__all__ = ["Entry", "EventBuffer"]

_NEVER = -(10**9)


@dataclass(slots=True)
class Entry:
    """One buffered event: its place in take order, when it came, and the write-ahead log
    file holding it (if any)."""

    tick: int
    born: float
    event: Event
    wal: str | None = None


class EventBuffer:
    """Buffered events per thread and what orders their captures (see module docs).

    Every method but the constructor runs under :attr:`cv` (the caller holds it).

    Args:
        hold: most seconds an event waits for the checkpoint that precedes it.
    """

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.lock = threading.RLock()
        self.cv = threading.Condition(self.lock)
        """Producers, commits and flushes wait here."""
        self.fcv = threading.Condition(self.lock)
        """The flusher waits here."""
        self.flusher_idle = False
        self.stopping = False
        self.force = 0  # flush requests not yet served
        self.count = 0
        self.delivered = 0  # events captured so far
        self.ledger_down_since: float | None = None
        self.riders_key: WorkspaceCipher | None = None
        """Set when riders are snapshots the sealer processes (``Pipeline(defer=True)``)."""
        self.open_commits: dict[int, float] = {}  # commit -> when it opened
        self.storing = 0  # entries taken by the flusher, not yet captured or put back
        # captures whose commit was not seen to succeed or fail (a connection lost around
        # the COMMIT): thread -> [(capture event id, its riders' event ids)]
        self.doubtful: dict[str, list[tuple[str, set[str]]]] = {}
        self.unflushed: set[str] = set()  # threads captured since the last flush
        self.watched: dict[str, set[str]] | None = None  # listeners fed by read-back
        self._buf: dict[str, list[Entry]] = {}
        self._tick = itertools.count()
        self._inflight: dict[str, int] = {}
        self._flushing: dict[str, int] = {}  # entries the flusher took, per thread
        self._holding: dict[str, int] = {}  # captures in flight carrying a thread's events
        self._done_steps: dict[tuple[str, str], int] = {}
        self._done_checkpoints: dict[tuple[str, str, str], None] = {}

    # -- producers -------------------------------------------------------------------------
    def add(self, events: Sequence[Event], wal: str | None, now: float | None = None) -> None:
        """Buffer ``events`` (``wal``: the log file holding them) and wake the flusher."""
        born = time.monotonic() if now is None else now
        for e in events:
            self._buf.setdefault(e.thread_id, []).append(Entry(next(self._tick), born, e, wal))
        self.count += len(events)
        if self.flusher_idle:
            self.fcv.notify()

    def busy(self) -> bool:
        """Whether anything is buffered, being captured, or in a saver's transaction."""
        return bool(self.count or self.storing or any(self._inflight.values()))

    def in_flight(self) -> bool:
        """Whether a capture is inside a saver's transaction right now."""
        return any(self._inflight.values())

    def is_flushing(self, tid: str) -> bool:
        """Whether the flusher is capturing events of ``tid`` right now."""
        return bool(self._flushing.get(tid))

    def entries(self, tid: str | None = None) -> list[Entry]:
        """A copy of the buffered entries (of ``tid``, or all)."""
        if tid is not None:
            return list(self._buf.get(tid, []))
        return [en for entries in self._buf.values() for en in entries]

    def threads(self) -> list[str]:
        """Threads with buffered events."""
        return list(self._buf)

    def drop(self, tid: str, event_ids: set[str]) -> list[Entry]:
        """Remove ``tid``'s entries whose events are in ``event_ids`` (recorded already)."""
        entries = self._buf.get(tid, [])
        gone = [en for en in entries if en.event.event_id in event_ids]
        keep = [en for en in entries if en.event.event_id not in event_ids]
        if keep:
            self._buf[tid] = keep
        else:
            self._buf.pop(tid, None)
        self.count -= len(gone)
        return gone

    def oldest(self) -> float | None:
        """When the oldest buffered event came (``None``: nothing buffered)."""
        return min((en.born for entries in self._buf.values() for en in entries), default=None)

    # -- commits (a capture inside a saver's transaction) ----------------------------------
    def open_commit(self, key: int, tid: str) -> None:
        """A commit of ``tid`` opened: the flusher leaves the thread to it until it settles."""
        self._inflight[tid] = self._inflight.get(tid, 0) + 1
        self.open_commits[key] = time.monotonic()  # health(): a stuck commit

    def try_take(
        self, tid: str, ns: str, step: int | None, checkpoint_id: str | None, parent_id: str | None
    ) -> list[Entry] | None:
        """The riders of a checkpoint's capture, or ``None`` while it must wait: for the
        flusher's capture of the thread's earlier events, and for any other capture of the
        thread in flight that carries events."""
        if self._flushing.get(tid) or self._holding.get(tid):
            return None
        riders = self.take_riders(tid, ns, step, checkpoint_id, parent_id)
        if riders:
            self._holding[tid] = self._holding.get(tid, 0) + 1
        return riders

    def close_commit(self, key: int, tid: str, riders: Sequence[Entry]) -> None:
        """The commit ``key`` of ``tid`` settled (committed or not): the next may take."""
        self.open_commits.pop(key, None)
        self._inflight[tid] -= 1
        if not self._inflight[tid]:
            del self._inflight[tid]
        if riders:
            self._holding[tid] -= 1
            if not self._holding[tid]:
                del self._holding[tid]

    def take_riders(
        self, tid: str, ns: str, step: int | None, checkpoint_id: str | None, parent_id: str | None
    ) -> list[Entry]:
        """The longest prefix of the thread's buffer that causally precedes the capture.

        An event may ride if it belongs to this checkpoint's step or earlier, or if the
        checkpoint it follows is captured already (writes: their checkpoint is this
        capture's parent or captured). The next step's events come after this checkpoint
        and wait for it.
        """
        entries = self._buf.get(tid)
        if not entries:
            return []
        n = 0
        for en in entries:
            e = en.event
            if e.kind == "writes":
                ok = e.checkpoint_id != checkpoint_id and (
                    (e.checkpoint_ns == ns and e.checkpoint_id == parent_id)
                    or self._precedes_ok(tid, e)
                )
            elif e.step is None or e.kind == "checkpoint":
                ok = True
            elif e.checkpoint_ns == ns and step is not None:
                ok = e.step <= step  # a task of this step (or before) precedes its checkpoint
            else:
                ok = self._precedes_ok(tid, e)
            if not ok:
                break
            n += 1
        return self._take_first(tid, n)

    def note_checkpoint(self, tid: str, ns: str, step: int | None, cid: str) -> None:
        """The checkpoint ``cid`` of ``tid`` is stored: the events after it may go."""
        if step is not None and step > self._done_steps.get((tid, ns), _NEVER):
            self._done_steps[(tid, ns)] = step
        self._done_checkpoints[(tid, ns, cid)] = None
        while len(self._done_checkpoints) > 8192:
            self._done_checkpoints.pop(next(iter(self._done_checkpoints)))

    def rebuffer(self, tid: str, entries: Sequence[Entry]) -> None:
        """Put ``entries`` back in take order (their capture did not commit)."""
        if not entries:
            return
        merged = sorted([*entries, *self._buf.get(tid, [])], key=lambda en: en.tick)
        self._buf[tid] = merged
        self.count += len(entries)
        if self.flusher_idle:
            self.fcv.notify()

    def captured(
        self,
        captures: Sequence[Capture],
        entries: Sequence[Entry],
        step: int | None = None,
    ) -> None:
        """``captures`` (carrying ``entries``) committed; ``step``: of a checkpoint's."""
        for c in captures:
            if c.kind == "checkpoint" and c.checkpoint_id:
                self.note_checkpoint(c.thread_id, c.checkpoint_ns, step, c.checkpoint_id)
            self.unflushed.add(c.thread_id)
            if self.watched is not None:
                ids = self.watched.setdefault(c.thread_id, set())
                ids.update(e.event_id for e in c.riders)
                if c.kind != "events":
                    ids.add(c.event_id)
        for en in entries:
            e = en.event
            if e.kind == "checkpoint" and e.checkpoint_id:
                self.note_checkpoint(e.thread_id, e.checkpoint_ns, e.step, e.checkpoint_id)
        self.delivered += len(entries) + sum(c.kind != "events" for c in captures)
        self.ledger_down_since = None

    # -- the flusher -----------------------------------------------------------------------
    def flushable_now(self) -> list[Entry]:
        """What the flusher may capture now."""
        force = self.force > 0 or self.stopping
        now = time.monotonic()
        batch: list[Entry] = []
        for tid in list(self._buf):
            # a thread with a commit in flight: the commit takes what precedes it; a
            # doubtful one: its events are checked against the ledger first
            if not self._inflight.get(tid) and tid not in self.doubtful:
                batch.extend(self.flushable(tid, force, now))
        return batch

    def flushable(self, tid: str, force: bool, now: float) -> list[Entry]:
        """The prefix of ``tid``'s buffer the flusher may take (all of it with ``force``)."""
        entries = self._buf.get(tid)
        if not entries:
            return []
        n = 0
        for en in entries:
            if not force and now - en.born < self.hold and not self._precedes_ok(tid, en.event):
                break
            n += 1
        return self._take_first(tid, n)

    def riding(self, capture: Capture) -> Capture:
        """``capture`` with its riders marked pending (sealed with :attr:`riders_key`)
        when the pipeline leaves their processing to the sealer."""
        if self.riders_key is not None and capture.riders:
            capture.pending, capture.key = True, self.riders_key
        return capture

    def collect(self, pick: Callable[[], list[Entry]]) -> tuple[list[Entry], list[Capture]]:
        """Pick entries with ``pick`` and make one capture per thread of them."""
        picked = pick()
        if not picked:
            return [], []
        by_thread: dict[str, list[Entry]] = {}
        for en in picked:
            by_thread.setdefault(en.event.thread_id, []).append(en)
        ordered = [en for ens in by_thread.values() for en in ens]
        captures = []
        for tid, ens in by_thread.items():
            riders = [en.event for en in ens]
            c = Capture("events", tid, riders=riders, event_id=riders[0].event_id)
            captures.append(self.riding(c))
            self._flushing[tid] = self._flushing.get(tid, 0) + len(ens)
        self.storing += len(ordered)
        return ordered, captures

    def stored(self, entries: Sequence[Entry]) -> None:
        """Entries picked by :meth:`collect` are captured or back in the buffer."""
        self.storing -= len(entries)
        for en in entries:
            tid = en.event.thread_id
            self._flushing[tid] -= 1
            if not self._flushing[tid]:
                del self._flushing[tid]
        self.cv.notify_all()

    def doubt(self, tid: str, captures: Sequence[tuple[str, set[str]]]) -> None:
        """Captures of ``tid`` whose commit was not seen to succeed or fail."""
        self.doubtful.setdefault(tid, []).extend(captures)

    def waits(self) -> list[float]:
        """When each capture inside a saver's transaction began."""
        return list(self.open_commits.values())

    # -- internals -------------------------------------------------------------------------
    def _precedes_ok(self, tid: str, e: Event) -> bool:
        """Whether the checkpoint that causally precedes ``e`` is already captured."""
        if e.kind == "writes":
            return (tid, e.checkpoint_ns, e.checkpoint_id or "") in self._done_checkpoints
        if e.step is None or e.kind == "checkpoint":
            return True
        return self._done_steps.get((tid, e.checkpoint_ns), _NEVER) >= e.step - 1

    def _take_first(self, tid: str, n: int) -> list[Entry]:
        entries = self._buf.get(tid, [])
        taken = entries[:n]
        del entries[:n]
        if not entries:
            self._buf.pop(tid, None)
        self.count -= len(taken)
        return taken
