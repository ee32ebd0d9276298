"""The event pipeline: sources emit, processors run on the caller's thread, the ledger
stores, projections follow.

* **Sources** (checkpointer, callback handler, store, guard, memory adapter) know only
  :class:`~langgraph_external.events.Event` and this class.
* **Processors** run in :meth:`Pipeline.emit`, on the caller's thread, so a value is
  recorded as it was when it was reported: ``materialize → Redact → Offload → normalize``.
* **The ledger** (Postgres, the system of record) stores sequenced events. A checkpoint's
  event commits in the checkpoint's own transaction (:meth:`Pipeline.open_commit`, used
  by the checkpointer); events reported between two checkpoints of a thread wait in a
  per-thread buffer and ride in that thread's next commit, or are committed on their own
  by the background flusher after ``linger`` seconds. Events that must be durable before
  the call returns and cannot ride a saver transaction (checkpoints of other savers) go
  to an fsync'd write-ahead log first (:meth:`Pipeline.emit` with ``durable=True``).
* **Projections** (the workspace mirror, exporters) tail the ledger with a cursor kept
  in the ledger, idempotently; one failing thread is quarantined, the others go on.

Nothing recorded is dropped: a ledger outage keeps events buffered (the buffer is bounded:
producers then wait) and retried; at close, what could not be stored goes to the
write-ahead log and is replayed by the next start or ``lgx repair``.

Example:
    >>> from langgraph_external.sinks.memory import InMemoryLedger
    >>> ledger = InMemoryLedger()
    >>> with Pipeline(ledger) as p:
    ...     p.emit(Event.new("error", "t1", payload={"x": 1}))
    ...     _ = p.flush()
    >>> [(e.thread_id, e.seq) for e in ledger.events]
    [('t1', 1)]
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import fcntl
import functools
import inspect
import itertools
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.errors import (
    LedgerUnavailableError,
    PositionMovedError,
    RecordingError,
)
from langgraph_external.events import Event
from langgraph_external.processors import (
    Offload,
    Processor,
    Redact,
    Redactor,
    Sequencer,
    materialize,
    normalize,
)
from langgraph_external.sinks.base import Ledger, Projection

logger = logging.getLogger("langgraph_external")
_PROJECT_LINGER = 0.02  # seconds the projector waits to gather commits into one pass
_FRESH_MAX = 20_000  # committed events held for the projector before it reads them back

_ORDINARY = (
    LedgerUnavailableError,
    PositionMovedError,
    ConnectionError,
    TimeoutError,
)


@dataclass
class RecordingFailure:
    """One failed attempt, kept for :meth:`Pipeline.health`."""

    where: str
    error: str
    events: int
    at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


@dataclass(slots=True)
class _Entry:
    tick: int
    born: float
    event: Event
    wal: str | None = None  # write-ahead log file holding it, if any


class Commit:
    """One commit of a thread's events inside someone else's transaction.

    The checkpointer opens it around the saver's ``put``: :meth:`take` (inside the
    transaction) seals the checkpoint's event with the thread's buffered events that
    precede it; :meth:`done` or :meth:`failed` settles it once the saver returned.
    """

    def __init__(self, pipeline: Pipeline, thread_id: str) -> None:
        self.pipeline = pipeline
        self.thread_id = thread_id
        self.sealed: list[Event] = []
        self._riders: list[_Entry] = []
        self._settled = False
        with pipeline._cv:  # the flusher leaves the thread to this commit until it settles
            pipeline._inflight[thread_id] = pipeline._inflight.get(thread_id, 0) + 1
            pipeline._open_commits[id(self)] = time.monotonic()  # health(): a stuck commit

    def take(
        self,
        own: Sequence[Event],
        *,
        ns: str,
        step: int | None,
        checkpoint_id: str | None,
        parent_id: str | None = None,
    ) -> list[Event]:
        """Process ``own``, pick the riders, and seal all of them (call once)."""
        p = self.pipeline
        processed = [p.process(e) for e in own]
        if self.thread_id in p._doubtful:
            p._resolve_doubts(self.thread_id)  # before riders are picked again
        p.sequencer.prime([self.thread_id])  # a look-up, if any, outside the lock
        with p._cv:  # picked and numbered at once: numbering order is buffer order
            while p._flushing.get(self.thread_id):  # the flusher holds earlier events
                p._cv.wait(0.05)
            self._riders = p._take_riders(self.thread_id, ns, step, checkpoint_id, parent_id)
            self.sealed = p.sequencer.seal([r.event for r in self._riders] + processed)
        return self.sealed

    def done(self) -> None:
        """The transaction committed: the events are recorded."""
        if self._settled:
            return
        self._settled = True
        self.pipeline._committed(self.sealed, self._riders, inflight=self)

    def failed(self, *, doubtful: bool = False) -> None:
        """The transaction did not commit: riders go back, the head is asked again.

        ``doubtful``: the failure may have come after the server committed (a connection
        lost around the COMMIT); the riders are checked against the ledger before they
        are stored again, so none is recorded twice.
        """
        if self._settled:
            return
        self._settled = True
        p = self.pipeline
        if self.sealed:
            p.sequencer.invalidate(self.thread_id)
        with p._cv:
            if doubtful and self._riders:
                p._doubtful.add(self.thread_id)
            p._inflight[self.thread_id] -= 1
            p._open_commits.pop(id(self), None)
            if not p._inflight[self.thread_id]:
                del p._inflight[self.thread_id]
            p._rebuffer(self.thread_id, self._riders)
            p._cv.notify_all()


class Pipeline:
    """Runs events through processors into the ledger; feeds projections from it.

    Args:
        ledger: the system of record (:class:`~langgraph_external.sinks.postgres.
            PostgresLedger`, or :class:`~langgraph_external.sinks.memory.InMemoryLedger`).
        projections: views fed from the ledger (the workspace mirror).
        redactor: applied to every payload before anything is recorded.
        offload_threshold: payloads or raw bytes larger than this go to artifacts.
        strict: commit every event before :meth:`emit` returns; raise if it cannot be.
        wal_dir: where the write-ahead log and events that outlived a close are kept
            (default ``$LGX_SPOOL_DIR`` or ``~/.cache/langgraph-external/spool``).
        linger: seconds buffered events wait for a commit to ride before the flusher
            commits them on their own.
        hold: most seconds an event waits for the checkpoint that precedes it.
        max_buffered: events held before producers wait (back-pressure, never a drop).
        retry_interval: seconds between attempts while the ledger is unavailable.
        poll_interval: seconds between projection catch-up scans.
        cipher: the deployment key (:mod:`langgraph_external.keys`): sources address
            values with it (keyed HMAC, never a bare sha256) and seal exact copies.
        encrypt: sources encrypt the exact checkpoint copies with ``cipher``.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        projections: Sequence[Projection] = (),
        redactor: Redactor | None = None,
        offload_threshold: int = 64 * 1024,
        extra_processors: Sequence[Processor] = (),
        strict: bool = False,
        wal_dir: str | os.PathLike[str] | None = None,
        spool_dir: str | os.PathLike[str] | None = None,
        linger: float = 0.05,
        hold: float = 1.0,
        max_buffered: int = 50_000,
        retry_interval: float = 1.0,
        poll_interval: float = 1.0,
        cipher: WorkspaceCipher | None = None,
        encrypt: bool = True,
    ) -> None:
        self.ledger = ledger
        self.cipher = cipher
        self.encrypt = encrypt and cipher is not None
        self.projections = list(projections)
        self.strict = strict
        self.processors: list[Processor] = [
            materialize,
            Redact(redactor),
            *extra_processors,
            Offload(offload_threshold),
            normalize,
        ]
        self.sequencer = Sequencer(ledger.positions)
        self.linger = linger
        self.hold = hold
        self.max_buffered = max_buffered
        self.retry_interval = retry_interval
        self.poll_interval = poll_interval
        self.failures: list[RecordingFailure] = []
        self.delivered = 0
        self.conflicts = 0  # commits retried because another writer moved the thread first
        self.quarantined: dict[str, str] = {}  # "projection:thread" -> error
        self._stalls: dict[str, int] = {}  # "projection:thread" -> failed attempts in a row
        self._stall_since: dict[str, float] = {}
        self._last_projected_ok = 0.0
        self._store_started: float | None = None
        identity = getattr(ledger, "identity", None)
        key = identity() if callable(identity) else ledger.name
        self._wal = WriteAheadLog(Path(wal_dir or spool_dir or default_spool_dir()) / "wal" / key)
        # one lock; the flusher and the projector wait on conditions of their own, so a
        # commit or an event wakes them only when they are idle (not on every call)
        self._lock = threading.RLock()
        self._cv = threading.Condition(self._lock)
        self._fcv = threading.Condition(self._lock)  # the flusher waits here
        self._pcv = threading.Condition(self._lock)  # the projector waits here
        self._flusher_idle = False
        self._projector_idle = False
        self._buf: dict[str, list[_Entry]] = {}
        self._count = 0
        self._tick = itertools.count()
        self._inflight: dict[str, int] = {}
        self._open_commits: dict[int, float] = {}  # commit -> when it opened
        self._storing = 0  # entries taken by the flusher, not yet committed or put back
        self._flushing: dict[str, int] = {}  # the same, per thread
        # threads whose buffered events may be committed already (a commit's outcome was
        # not seen): checked against the ledger before they are stored again
        self._doubtful: set[str] = set()
        self._done_steps: dict[tuple[str, str], int] = {}
        self._done_checkpoints: dict[tuple[str, str, str], None] = {}
        self._force = 0  # flush requests not yet served
        self._commits = 0  # commits so far (projection catch-up waits on this)
        self._projected = 0
        self._touched: set[str] = set()
        self._settle_at = 0  # a flush waits for projections to settle at this commit count
        self._settled = 0
        # the next pass reads the cursors and resumes threads whose files are ahead of
        # theirs (flush, catch_up): what a writer that died left unsettled
        self._recheck = False
        # committed events handed to each projection in memory (no read-back from the
        # ledger when they follow its position): projection -> thread -> events
        self._fresh: dict[str, dict[str, list[Event]]] = {p.name: {} for p in self.projections}
        self._fresh_count = 0
        self._last_ok = time.monotonic()
        self._ledger_down_since: float | None = None
        self._closed = False
        self._stop = False
        self._listeners: list[Callable[[Sequence[Event]], None]] = []
        self._flush_hooks: list[Callable[[], Callable[[], None] | None]] = []
        self._replay_wal()
        self._flusher = self._worker(self._flush_loop, "flusher")
        self._projector: threading.Thread | None = None
        if self.projections:
            self._projector = self._worker(self._project_loop, "projector")
        ref = weakref.ref(self)
        self._atexit = lambda: (p := ref()) is not None and p._close_at_exit()
        atexit.register(self._atexit)

    # -- producer side -------------------------------------------------------------------
    def process(self, event: Event) -> Event:
        """Run the processors on ``event`` (on the caller's thread)."""
        for proc in self.processors:
            event = proc(event)
        return event

    def emit(self, event: Event, *, durable: bool = False) -> None:
        """Submit one event. ``durable``: in the write-ahead log before returning."""
        self.emit_many((event,), durable=durable)

    def emit_many(self, events: Iterable[Event], *, durable: bool = False) -> None:
        """Submit events in order (see :meth:`emit`)."""
        if self._closed:
            raise RecordingError("the pipeline is closed; events can no longer be recorded")
        processed = [self.process(e) for e in events]
        if not processed:
            return
        wal = self._wal.append(processed) if durable else None
        threads = []
        with self._cv:
            while (
                self._count >= self.max_buffered
                and not self._stop
                and threading.current_thread() is not self._flusher
                and not _on_event_loop()
            ):
                self._revive()
                self._cv.wait(0.1)  # back-pressure: the ledger is behind or down
            now = time.monotonic()
            for e in processed:
                self._buf.setdefault(e.thread_id, []).append(_Entry(next(self._tick), now, e, wal))
                threads.append(e.thread_id)
            self._count += len(processed)
            self._cv.notify_all()
            if self._flusher_idle:
                self._fcv.notify()
        if self.strict:
            for tid in dict.fromkeys(threads):
                self._commit_now(tid)

    def has_room(self) -> bool:
        """Whether :meth:`emit` would return without waiting for the ledger."""
        return self._count < self.max_buffered or self._stop

    async def wait_for_room(self, thread_id: str | None = None) -> None:
        """Back-pressure for async code: yield to the event loop until there is room.

        :meth:`emit` never waits on a thread that runs an event loop (an async graph's
        callbacks emit there); async producers await this at their step boundaries
        instead (the checkpointer's ``aput``/``aput_writes`` do), so the buffer stays
        bounded — by ``max_buffered`` plus one step's events per running graph — and
        the loop keeps serving other tasks while the ledger is behind or down.
        ``thread_id``: also wait while the flusher is storing that thread's events (a
        commit of the thread would otherwise wait for it inside the transaction).

        Example:
            >>> import asyncio
            >>> from langgraph_external.sinks.memory import InMemoryLedger
            >>> with Pipeline(InMemoryLedger()) as p:
            ...     asyncio.run(p.wait_for_room("t"))
        """
        while not self.has_room() or (thread_id is not None and self._flushing.get(thread_id)):
            with self._cv:
                self._revive()
            await asyncio.sleep(0.005)

    def open_commit(self, thread_id: str) -> Commit:
        """Start a commit of ``thread_id`` inside the caller's transaction (see :class:`Commit`)."""
        if self._closed:
            raise RecordingError("the pipeline is closed; events can no longer be recorded")
        return Commit(self, thread_id)

    def assume_new(self, thread_id: str) -> None:
        """Hint that ``thread_id`` has no record yet (saves a position look-up)."""
        self.sequencer.assume_new(thread_id)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Commit everything emitted so far and wait until projections caught up.

        Returns ``False`` if that did not finish within ``timeout`` (ledger or workspace
        down); nothing is dropped, it stays buffered and is retried.
        """
        self._run_flush_hooks()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            self._force += 1
            self._wake_workers()
            while self._count or self._storing or any(self._inflight.values()):
                if not self._wait(deadline):
                    self._force -= 1
                    return False
            self._force -= 1
            if not self.projections:
                return True
            # one more pass after everything committed so far, then projections settle
            # (the workspace writes the state.json files it deferred)
            self._commits += 1
            target = self._settle_at = self._commits
            self._recheck = True
            while self._projected < target:
                self._wake_workers()
                if not self._wait(deadline):
                    return False
        return True

    def _wake_workers(self) -> None:
        """Wake the flusher and the projector, whatever they wait for (under ``_cv``)."""
        self._cv.notify_all()
        self._fcv.notify_all()
        self._pcv.notify_all()

    def catch_up(self, timeout: float = 600.0) -> tuple[int, list[str]]:
        """Bring every projection up to the ledger on every thread (``lgx repair``).

        Returns how many threads were behind, and the problems of those still behind
        (quarantined: the error that set them aside) when it stopped.
        """
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while True:
            lag = {t for proj in self.projections for t, _, _ in self.ledger.lagging(proj.name)}
            lag -= {k.split(":", 1)[1] for k in self.quarantined}
            seen |= lag
            if not lag:
                break
            with self._cv:
                self._touched |= lag
                self._commits += 1  # ask the projector for one more full pass, which
                # settles (a deferred state.json holds a cursor back) and finishes what
                # dead writers left unsettled (see _project_locked)
                target = self._settle_at = self._commits
                self._recheck = True
                self._wake_workers()
                while self._projected < target:
                    if not self._wait(deadline):
                        return len(seen), [f"{t}: still behind" for t in sorted(lag)]
        return len(seen), [f"{k}: {v}" for k, v in sorted(self.quarantined.items())]

    def _worker(self, loop: Callable[[], None], role: str) -> threading.Thread:
        thread = threading.Thread(target=loop, name=f"langgraph-external-{role}", daemon=True)
        thread.start()
        return thread

    def _revive(self) -> None:
        """Start a background thread again if it died (under ``_cv``; never expected: both
        loops retry every error, but a stalled recording must not wait on a dead thread)."""
        if self._stop:
            return
        if not self._flusher.is_alive():
            logger.error("langgraph-external: the flusher thread died; starting it again")
            self._flusher = self._worker(self._flush_loop, "flusher")
        if self._projector is not None and not self._projector.is_alive():
            logger.error("langgraph-external: the projector thread died; starting it again")
            self._projector = self._worker(self._project_loop, "projector")

    def _wait(self, deadline: float | None) -> bool:
        self._revive()
        if deadline is None:
            self._cv.wait(0.1)
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self._cv.wait(min(left, 0.1))
        return True

    def add_flush_hook(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` at the start of every flush (sources emit what they still hold).

        Bound methods are held weakly, so a source that is gone is not kept alive.
        """
        ref: Callable[[], Callable[[], None] | None] = (
            weakref.WeakMethod(fn) if inspect.ismethod(fn) else (lambda: fn)
        )
        self._flush_hooks.append(ref)

    def _run_flush_hooks(self) -> None:
        alive = []
        for ref in self._flush_hooks:
            hook = ref()
            if hook is not None:
                hook()
                alive.append(ref)
        self._flush_hooks = alive

    def add_listener(self, fn: Callable[[Sequence[Event]], None]) -> None:
        """Call ``fn`` with every committed batch (testing helpers)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[Sequence[Event]], None]) -> None:
        """Stop calling ``fn``."""
        if fn in self._listeners:
            self._listeners.remove(fn)

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is buffered, let projections catch up, stop, close everything.

        What cannot be committed (ledger down) is written to the write-ahead log and
        replayed by the next start or ``lgx repair``: never dropped.
        """
        if self._closed:
            return
        atexit.unregister(self._atexit)
        ok = self.flush(timeout)
        self._closed = True
        with self._cv:
            self._stop = True
            self._wake_workers()
        self._flusher.join(timeout=60)
        if self._projector is not None:
            self._projector.join(timeout=60)
        with self._cv:
            leftover = [en for entries in self._buf.values() for en in entries]
        if leftover:
            fresh = [en.event for en in leftover if en.wal is None]
            if fresh:
                self._wal.append(fresh)
            logger.error(
                "langgraph-external: %d events could not be recorded before close; kept in "
                "the write-ahead log %s and recorded by the next start or `lgx repair`",
                len(leftover),
                self._wal.dir,
            )
        elif ok:
            self._wal.release()
        self._wal.close()
        closeables: list[Projection | Ledger] = [*self.projections, self.ledger]
        for closeable in closeables:
            try:
                closeable.close()
            except Exception as exc:  # closing must not hide the app's own error
                logger.warning("closing %s failed: %s", closeable.name, exc)

    def _close_at_exit(self) -> bool:
        try:
            self.close(timeout=10)
        except Exception:  # exiting: report, never raise
            logger.exception("langgraph-external could not flush its pipeline at exit")
        return True

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> dict[str, Any]:
        """Recording health: what is stored, waiting, failing, lagging or set aside."""
        with self._cv:
            oldest = min(
                (en.born for entries in self._buf.values() for en in entries), default=None
            )
            buffered = self._count + self._storing
            # the flusher's store, or a commit inside a saver's transaction: both wait on
            # the ledger's database
            waits = [t for t in (self._store_started, *self._open_commits.values()) if t]
            store_started = min(waits, default=None)
        now = time.monotonic()
        return {
            "delivered": self.delivered,
            "buffered": buffered,
            "oldest_buffered_seconds": round(now - oldest, 3) if oldest is not None else 0.0,
            "ledger_wait_seconds": round(now - store_started, 3) if store_started else 0.0,
            "ledger_down_seconds": (
                round(now - self._ledger_down_since, 3) if self._ledger_down_since else 0.0
            ),
            "projection_lag_commits": max(0, self._commits - self._projected),
            "position_conflicts": self.conflicts,
            "failures": [f.__dict__ for f in self.failures],
            "failing": ["ledger"] if self._ledger_down_since else [],
            "quarantined": dict(self.quarantined),
            "wal_files": len(self._wal.pending()),
        }

    # -- buffer bookkeeping (under self._cv) ----------------------------------------------
    def _take_riders(
        self,
        tid: str,
        ns: str,
        step: int | None,
        checkpoint_id: str | None,
        parent_id: str | None,
    ) -> list[_Entry]:
        """The longest prefix of the thread's buffer that causally precedes the commit.

        An event may ride if it belongs to this checkpoint's step or earlier, or if the
        checkpoint it follows is committed already (writes: their checkpoint is this
        commit's parent or committed). The next step's events come after this checkpoint
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

    def note_committed(self, thread_id: str, ns: str, step: int | None, checkpoint_id: str) -> None:
        """Tell the pipeline a checkpoint is stored (e.g. read back when a run resumes)."""
        with self._cv:
            if step is not None and step > self._done_steps.get((thread_id, ns), -(10**9)):
                self._done_steps[(thread_id, ns)] = step
            self._done_checkpoints[(thread_id, ns, checkpoint_id)] = None
            self._cv.notify_all()

    def _flushable(self, tid: str, force: bool, now: float) -> list[_Entry]:
        entries = self._buf.get(tid)
        if not entries:
            return []
        n = 0
        for en in entries:
            if not force and now - en.born < self.hold and not self._precedes_ok(tid, en.event):
                break
            n += 1
        return self._take_first(tid, n)

    def _precedes_ok(self, tid: str, e: Event) -> bool:
        """Whether the checkpoint that causally precedes ``e`` is already committed."""
        if e.kind == "writes":
            return (tid, e.checkpoint_ns, e.checkpoint_id or "") in self._done_checkpoints
        if e.step is None or e.kind == "checkpoint":
            return True
        return self._done_steps.get((tid, e.checkpoint_ns), -(10**9)) >= e.step - 1

    def _take_first(self, tid: str, n: int) -> list[_Entry]:
        entries = self._buf.get(tid, [])
        taken = entries[:n]
        del entries[:n]
        if not entries:
            self._buf.pop(tid, None)
        self._count -= len(taken)
        return taken

    def _rebuffer(self, tid: str, entries: list[_Entry]) -> None:
        if not entries:
            return
        merged = sorted([*entries, *self._buf.get(tid, [])], key=lambda en: en.tick)
        self._buf[tid] = merged
        self._count += len(entries)
        if self._flusher_idle:
            self._fcv.notify()

    def _committed(
        self, sealed: Sequence[Event], entries: Sequence[_Entry], inflight: Commit | None = None
    ) -> None:
        """``sealed`` are in the ledger (``inflight``: the commit of a saver's transaction
        that stored them, settled here under the same lock)."""
        self._wal.settled([en.wal for en in entries if en.wal])
        with self._cv:
            for e in sealed:
                if e.kind == "checkpoint" and e.checkpoint_id:
                    key = (e.thread_id, e.checkpoint_ns)
                    if e.step is not None and e.step > self._done_steps.get(key, -(10**9)):
                        self._done_steps[key] = e.step
                    self._done_checkpoints[(e.thread_id, e.checkpoint_ns, e.checkpoint_id)] = None
            while len(self._done_checkpoints) > 8192:
                self._done_checkpoints.pop(next(iter(self._done_checkpoints)))
            if inflight is not None:
                self._open_commits.pop(id(inflight), None)
                tid = inflight.thread_id
                self._inflight[tid] -= 1
                if not self._inflight[tid]:
                    del self._inflight[tid]
            self.delivered += len(sealed)
            self._commits += 1
            self._touched.update(e.thread_id for e in sealed)
            self._hand_over(sealed)
            self._last_ok = time.monotonic()
            self._ledger_down_since = None
            self._cv.notify_all()
            if self._projector_idle:
                self._pcv.notify()
        for fn in list(self._listeners):
            try:
                fn(sealed)
            except Exception:
                logger.exception("event listener failed")

    def _hand_over(self, sealed: Sequence[Event]) -> None:
        """Keep committed events for the projector (under ``_cv``): it skips the read-back."""
        if not self._fresh:
            return
        if self._fresh_count > _FRESH_MAX:  # the projector is far behind: it reads the ledger
            for fresh in self._fresh.values():
                fresh.clear()
            self._fresh_count = 0
        for fresh in self._fresh.values():
            for e in sealed:
                fresh.setdefault(e.thread_id, []).append(e)
        self._fresh_count += len(sealed)

    def _take_fresh(self, proj: Projection, tid: str, pos: int) -> list[Event] | None:
        """The committed events right after ``pos`` held in memory, or ``None``."""
        with self._cv:
            held = self._fresh.get(proj.name, {}).pop(tid, None)
            if not held:
                return None
            self._fresh_count -= len(held)
        held.sort(key=lambda e: e.seq or 0)
        run: list[Event] = []
        for e in held:
            if (e.seq or 0) <= pos:
                continue
            if (e.seq or 0) != pos + len(run) + 1:
                return None  # a gap: committed elsewhere or not yet settled; read the ledger
            run.append(e)
        return run

    # -- the flusher ------------------------------------------------------------------------
    def _commit_now(self, tid: str) -> None:
        """Strict mode: commit ``tid``'s buffer on the caller's thread or raise."""
        for _ in range(50):
            entries, sealed = self._collect_sealed(
                lambda: self._flushable(tid, True, time.monotonic())
            )
            if not entries:
                return
            try:
                self._store(entries, sealed)
                return
            except PositionMovedError:
                continue
            except Exception as exc:
                raise RecordingError(f"could not record events of thread {tid!r}: {exc}") from exc
            finally:
                self._stored(entries)
        raise RecordingError(f"could not record events of thread {tid!r}: position kept moving")

    def _flush_loop(self) -> None:
        while True:
            with self._cv:
                self._flusher_idle = True
                while not self._count and not self._stop:
                    self._fcv.wait(1.0)
                self._flusher_idle = False
                if self._stop and not self._count:
                    return
                force = self._force > 0 or self._stop
            if not force and self.linger:
                time.sleep(self.linger)  # let commits carry what they can; batch the rest
            for tid in list(self._doubtful):
                try:
                    self._resolve_doubts(tid)
                except Exception as exc:  # the ledger is still away: the thread waits
                    logger.debug("could not check thread %r against the ledger: %s", tid, exc)
            try:
                batch, sealed = self._collect_sealed(self._flushable_now)
            except Exception as exc:  # a head could not be looked up: the ledger is away
                self._fail("ledger", exc, 0)
                if isinstance(exc, (LedgerUnavailableError, ConnectionError)):
                    with self._cv:
                        self._ledger_down_since = self._ledger_down_since or time.monotonic()
                if not self._retry_later(exc):
                    return
                continue
            if not batch:
                with self._cv:
                    if self._stop and not any(self._inflight.values()):
                        return
                    self._fcv.wait(0.05)  # events waiting for their checkpoint
                continue
            try:
                self._store(batch, sealed)
            except PositionMovedError:
                self._stored(batch)
                continue
            except Exception as exc:
                self._stored(batch)
                if not self._retry_later(exc):
                    return
            else:
                self._stored(batch)

    def _retry_later(self, exc: BaseException) -> bool:
        """The flusher backs off after ``exc``; ``False`` when it is asked to stop."""
        logger.warning("langgraph-external: recording deferred (%s); retrying", exc)
        with self._cv:
            if self._stop:
                return False
            self._fcv.wait(self.retry_interval)
            return True

    def _flushable_now(self) -> list[_Entry]:
        """What the flusher may commit now (under ``_cv``)."""
        force = self._force > 0 or self._stop
        now = time.monotonic()
        batch: list[_Entry] = []
        for tid in list(self._buf):
            # a thread with a commit in flight: the commit takes what precedes it; a
            # doubtful one: its events are checked against the ledger first
            if not self._inflight.get(tid) and tid not in self._doubtful:
                batch.extend(self._flushable(tid, force, now))
        return batch

    def _collect_sealed(
        self, collect: Callable[[], list[_Entry]]
    ) -> tuple[list[_Entry], list[Event]]:
        """Pick entries with ``collect`` and number them in one step under the lock.

        Picking and numbering at once keeps numbering order equal to buffer order even
        when a checkpoint's commit picks its riders at the same moment. Heads are looked
        up before, outside the lock.
        """
        with self._cv:
            unknown = [t for t in self._buf if not self.sequencer.known(t)]
        if unknown:
            self.sequencer.prime(unknown)
        with self._cv:
            picked = collect()
            if not picked:
                return [], []
            by_thread: dict[str, list[_Entry]] = {}
            for en in picked:
                by_thread.setdefault(en.event.thread_id, []).append(en)
            ordered = [en for ens in by_thread.values() for en in ens]
            sealed = self.sequencer.seal([en.event for en in ordered])
            self._storing += len(ordered)
            for tid, ens in by_thread.items():
                self._flushing[tid] = self._flushing.get(tid, 0) + len(ens)
        return ordered, sealed

    def _stored(self, entries: Sequence[_Entry]) -> None:
        """Entries picked by :meth:`_collect_sealed` are committed or back in the buffer."""
        with self._cv:
            self._storing -= len(entries)
            for en in entries:
                tid = en.event.thread_id
                self._flushing[tid] -= 1
                if not self._flushing[tid]:
                    del self._flushing[tid]
            self._cv.notify_all()

    def _store(self, entries: list[_Entry], sealed: list[Event]) -> None:
        """Append sealed ``entries`` (several threads, grouped) in one transaction.

        On failure the entries go back to the buffer. A value the ledger refuses
        (not an outage) is isolated to its thread and set aside (:meth:`_quarantine`).
        """
        by_thread: dict[str, list[_Entry]] = {}
        for en in entries:
            by_thread.setdefault(en.event.thread_id, []).append(en)
        with self._cv:
            self._store_started = time.monotonic()
        try:
            self.ledger.append(sealed)
        except Exception as exc:
            with self._cv:
                self._store_started = None
            for tid in by_thread:
                self.sequencer.invalidate(tid)
            ordinary = not is_poison(exc)
            if not ordinary and len(by_thread) > 1:
                # find the thread whose values the ledger refuses; the others go on
                for tid, ens in by_thread.items():
                    with self._cv:
                        self._buf[tid] = ens + self._buf.get(tid, [])
                        self._count += len(ens)
                    alone, alone_sealed = self._collect_sealed(
                        functools.partial(self._take_first, tid, len(ens))
                    )
                    try:
                        self._store(alone, alone_sealed)  # puts entries back if it fails
                    except Exception as inner:
                        logger.debug("thread retried alone still failing: %s", inner)
                    finally:
                        self._stored(alone)
                return
            if not ordinary:
                self._quarantine(next(iter(by_thread)), entries, exc)
                return
            with self._cv:
                for tid, ens in by_thread.items():
                    self._rebuffer(tid, ens)
                moved = isinstance(exc, PositionMovedError)
                if moved:
                    self.conflicts += 1  # another commit of the thread got there first
                elif self._ledger_down_since is None:
                    self._ledger_down_since = time.monotonic()
                self._cv.notify_all()
            if not moved:
                with self._cv:
                    self._doubtful.update(by_thread)  # the COMMIT may have gone through
                self._fail("ledger", exc, len(entries))
            raise
        with self._cv:
            self._store_started = None
        self._committed(sealed, entries)

    def _quarantine(self, tid: str, entries: list[_Entry], exc: BaseException) -> None:
        """Set aside events the ledger refuses, with an error event for their thread."""
        path = self._wal.quarantine([en.event for en in entries], f"{type(exc).__name__}: {exc}")
        self._fail("ledger", exc, len(entries))
        self.quarantined[f"ledger:{tid}"] = f"{type(exc).__name__}: {exc}"
        logger.error(
            "langgraph-external: %d events of thread %r refused by the ledger (%s); kept in %s",
            len(entries),
            tid,
            exc,
            path,
        )
        self._wal.settled([en.wal for en in entries if en.wal])
        note = Event.new(
            "error",
            tid,
            status="quarantined",
            name="ledger_refused",
            payload={
                "error": f"{type(exc).__name__}: {exc}"[:2000],
                "events": len(entries),
                "file": str(path),
            },
        )
        try:
            sealed = self.sequencer.seal([self.process(note)])
            self.ledger.append(sealed)
            self._committed(sealed, [])
        except Exception:
            self.sequencer.invalidate(tid)
        with self._cv:
            self._cv.notify_all()

    def _fail(self, where: str, exc: BaseException, n: int) -> None:
        self.failures.append(RecordingFailure(where, f"{type(exc).__name__}: {exc}", n))
        del self.failures[:-100]

    # -- the projector ----------------------------------------------------------------------
    def _project_loop(self) -> None:
        last_scan = 0.0
        while True:
            with self._cv:
                self._projector_idle = True
                while not self._stop and not self._touched and self._projected >= self._commits:
                    self._pcv.wait(self.poll_interval)
                    if time.monotonic() - last_scan >= self.poll_interval:
                        break
                self._projector_idle = False
                if self._stop and not self._touched:
                    return
                # gather the commits of the next few ms into one pass (one lock round
                # trip for all of their threads) unless a flush is waiting
                end = time.monotonic() + _PROJECT_LINGER
                while not self._stop and self._settle_at <= self._settled:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._pcv.wait(left)  # woken early by a flush or a close
                touched, self._touched = self._touched, set()
                target = self._commits
                recheck, self._recheck = self._recheck, False
            scan = recheck or time.monotonic() - last_scan >= self.poll_interval
            ok = True
            for proj in self.projections:
                try:
                    ok = self._project(proj, touched, scan, recheck) and ok
                except Exception as exc:  # never let the projector die: retried
                    self._fail(proj.name, exc, 0)
                    logger.warning("projection %s deferred (%s); retrying", proj.name, exc)
                    ok = False
            if scan:
                last_scan = time.monotonic()
            if ok and self._settled < self._settle_at <= target:
                for proj in self.projections:
                    ok = self._settle(proj) and ok
                if ok:
                    self._settled = target
            with self._cv:
                if ok:
                    self._projected = max(self._projected, target)
                else:
                    self._touched |= touched
                    self._recheck = self._recheck or recheck
                self._cv.notify_all()
            if not ok:
                time.sleep(self.retry_interval)

    def _project(
        self, proj: Projection, touched: set[str], scan: bool, recheck: bool = False
    ) -> bool:
        """Bring ``proj`` up to the ledger on ``touched`` threads (and lagging ones).

        ``recheck``: resume threads whose files are ahead of their cursors (see
        :meth:`_project_locked`)."""
        todo = dict.fromkeys(sorted(touched))
        cursors: dict[str, int] = {}  # lagging thread -> its recorded cursor
        if scan:
            try:
                cursors = self._lagging(proj, recheck)
            except Exception as exc:
                logger.debug("projection scan failed: %s", exc)
                return False
            todo.update(dict.fromkeys(cursors))
        tids = [t for t in todo if f"{proj.name}:{t}" not in self.quarantined]
        locks = getattr(self.ledger, "projection_locks", None)
        if locks is None or not tids:
            return self._project_each(
                proj,
                tids,
                lambda tid: self.project_thread(proj, tid, cursor=cursors.get(tid), resume=recheck),
            )
        try:
            # one statement takes the pass's thread locks, one records the cursors and
            # releases them: two round trips per pass, not four per thread
            with locks(proj.name, tids) as held:
                return self._project_each(
                    proj,
                    tids,
                    lambda tid: self._project_held(proj, tid, held, cursors.get(tid), recheck),
                )
        except (LedgerUnavailableError, ConnectionError) as exc:
            self._fail(proj.name, exc, 0)
            return False

    def _lagging(self, proj: Projection, recheck: bool) -> dict[str, int]:
        """Threads the ledger says ``proj`` is behind on, with their recorded cursors.

        Of a projection that settles after it applies (it has ``resume``), left out: a
        thread whose files hold the ledger's head and whose settling is pending here
        (:meth:`_settle` records it), and, unless ``recheck``, any thread whose files hold
        the head (nothing to read; its writer may be settling it).
        """
        lag = self.ledger.lagging(proj.name)
        if getattr(proj, "resume", None) is None:
            return {t: cursor for t, _, cursor in lag}
        due = getattr(proj, "due", None)
        pending = set(due()) if due is not None else set()
        out = {}
        for t, head, cursor in lag:
            if (recheck and t not in pending) or head > proj.position(t):
                out[t] = cursor
        return out

    @staticmethod
    def _cursor_of(proj: Projection, tid: str, pos: int) -> int:
        """The cursor to record for ``tid`` at ``pos``: what ``proj`` holds for good."""
        settled = getattr(proj, "settled", None)
        return pos if settled is None else int(settled(tid, pos))

    def _project_held(
        self,
        proj: Projection,
        tid: str,
        held: Any,
        cursor: int | None = None,
        resume: bool = False,
    ) -> int | None:
        if tid not in held.threads:
            return None  # another process is writing it: look again shortly
        revalidate = getattr(proj, "revalidate", None) or getattr(proj, "forget", None)
        if revalidate is not None:
            revalidate(tid)  # another process may have written since we last looked
        pos, held.positions[tid] = self._project_locked(
            proj, tid, record=False, cursor=cursor, resume=resume
        )
        return pos

    def _project_each(
        self, proj: Projection, tids: list[str], run: Callable[[str], int | None]
    ) -> bool:
        ok = True
        for tid in tids:
            key = f"{proj.name}:{tid}"
            try:
                if run(tid) is None:
                    ok = False  # another process is writing it: look again shortly
                    continue
            except OSError as exc:  # disk full, read-only, vanished: retried
                self._fail(proj.name, exc, 0)
                self._stalls[key] = self._stalls.get(key, 0) + 1
                if self._stalls[key] >= 3 and self._last_projected_ok > self._stall_since.get(
                    key, time.monotonic()
                ):
                    # other threads were written meanwhile: this thread's files are the problem
                    self._set_aside(proj, tid, exc)
                    continue
                self._stall_since.setdefault(key, time.monotonic())
                logger.warning("projection %s stalled on %r: %s", proj.name, tid, exc)
                ok = False
                continue
            except (LedgerUnavailableError, ConnectionError) as exc:
                self._fail(proj.name, exc, 0)
                ok = False
            except Exception as exc:  # a value it cannot apply: set the thread aside
                self._set_aside(proj, tid, exc)
                continue
            self._stalls.pop(key, None)
            self._stall_since.pop(key, None)
            self._last_projected_ok = time.monotonic()
        return ok

    def _settle(self, proj: Projection) -> bool:
        settle = getattr(proj, "settle", None)
        if settle is None:
            return True
        due = getattr(proj, "due", None)
        locks = getattr(self.ledger, "projection_locks", None)
        try:
            if due is None or locks is None:
                pending = due() if due is not None else []
                settle()
                for tid in pending:
                    self.ledger.set_cursor(
                        proj.name, tid, self._cursor_of(proj, tid, proj.position(tid)), None
                    )
            elif threads := due():
                # under the threads' projection locks, like any other write of them; a
                # thread another process holds is left to it (its state is the newer one).
                # Settled, their cursors move past the checkpoints they held back.
                revalidate = getattr(proj, "revalidate", None)
                with locks(proj.name, threads) as held:
                    settle(held.threads)
                    for tid in held.threads:
                        if revalidate is not None:
                            revalidate(tid)
                        held.positions[tid] = self._cursor_of(proj, tid, proj.position(tid))
        except Exception as exc:  # a derived view: reported, retried by the next flush
            self._fail(proj.name, exc, 0)
            logger.warning("projection %s could not settle: %s", proj.name, exc)
            return False
        return True

    def _set_aside(self, proj: Projection, tid: str, exc: BaseException) -> None:
        """Quarantine one thread of a projection; the others go on (``lgx repair`` retries)."""
        err = f"{type(exc).__name__}: {exc}"[:2000]
        self.quarantined[f"{proj.name}:{tid}"] = err
        logger.error("projection %s set thread %r aside: %s", proj.name, tid, err)
        try:
            self.ledger.set_cursor(proj.name, tid, proj.position(tid), err)
        except Exception:
            logger.debug("could not record the quarantine of %r", tid)

    def project_thread(
        self, proj: Projection, tid: str, *, cursor: int | None = None, resume: bool = False
    ) -> int | None:
        """Apply every event of ``tid`` the projection lacks; returns its new position.

        Several processes may feed one workspace: a lock in the ledger lets one of them
        write a thread at a time, and the holder reads the files' position afresh. Returns
        ``None`` when another process holds the thread (it is tried again later).
        ``cursor`` and ``resume``: see :meth:`_project_locked`.
        """
        lock = getattr(self.ledger, "projection_lock", None)
        if lock is None:
            return self._project_locked(proj, tid, cursor=cursor, resume=resume)[0]
        with lock(proj.name, tid) as held:
            if not held:
                return None
            forget = getattr(proj, "forget", None)
            if forget is not None:
                forget(tid)  # another process may have written since we last looked
            return self._project_locked(proj, tid, cursor=cursor, resume=resume)[0]

    def _project_locked(
        self,
        proj: Projection,
        tid: str,
        *,
        record: bool = True,
        cursor: int | None = None,
        resume: bool = False,
    ) -> tuple[int, int]:
        """Apply what ``tid`` lacks; returns its position and the cursor to record there.

        A cursor short of what the files hold (``cursor``, from the ledger) means their
        writer has not settled them — it is settling them, or it died first (a deferred
        ``state.json``). With ``resume`` (a flush, ``lgx repair``) the projection finishes
        that now; otherwise the cursor is not moved past it.
        """
        pos = proj.position(tid)
        finish = getattr(proj, "resume", None)
        unsettled = finish is not None and cursor is not None and cursor < pos
        if unsettled and resume and finish is not None:
            finish(tid)
            unsettled = False
        fresh = self._take_fresh(proj, tid, pos)
        while True:
            # every event held in memory follows pos: apply them and stop (what commits
            # later touches the thread again); otherwise read the ledger to its end
            events = fresh if fresh is not None else self.ledger.read(tid, after=pos)
            if not events:
                break
            if events[0].seq != pos + 1 and events[0].kind != "thread_deleted":
                # the ledger dropped older events (thread deleted): start over from there
                pos = (events[0].seq or 1) - 1
            proj.apply(tid, events)
            pos = events[-1].seq or pos
            if fresh is not None:
                break
        mark = self._cursor_of(proj, tid, pos)
        if unsettled and cursor is not None:
            mark = min(mark, cursor)
        if record:
            self.ledger.set_cursor(proj.name, tid, mark, None)
        return pos, mark

    # -- write-ahead log --------------------------------------------------------------------
    def _replay_wal(self) -> None:
        """Queue events that dead processes (or a failed close) left in the log."""
        for path, events in self._wal.orphans():
            with self._cv:
                now = time.monotonic()
                for e in events:
                    self._buf.setdefault(e.thread_id, []).append(
                        _Entry(next(self._tick), now, e, str(path))
                    )
                self._count += len(events)
                self._wal.adopt(path, len(events))
        self._skip_already_recorded()

    def _resolve_doubts(self, tid: str) -> None:
        """Drop ``tid``'s buffered events the ledger holds already (see :meth:`Commit.failed`).

        Raises what the ledger raises when it cannot be asked; the thread stays doubtful.
        """
        with self._cv:
            entries = list(self._buf.get(tid, []))
        ids = [en.event.event_id for en in entries]
        recorded = getattr(self.ledger, "recorded", None)
        if recorded is not None:
            held = recorded(tid, ids) if ids else set()
        else:
            held = self._ids_in_ledger(tid) if ids else set()
        with self._cv:
            if held:
                gone = [en for en in self._buf.get(tid, []) if en.event.event_id in held]
                keep = [en for en in self._buf.get(tid, []) if en.event.event_id not in held]
                if keep:
                    self._buf[tid] = keep
                else:
                    self._buf.pop(tid, None)
                self._count -= len(gone)
                self._wal.settled([en.wal for en in gone if en.wal])
                self.delivered += len(gone)
            self._doubtful.discard(tid)
            self._cv.notify_all()

    def _ids_in_ledger(self, tid: str) -> set[str]:
        """Every event id the ledger holds for ``tid`` (a ledger without ``recorded``)."""
        held: set[str] = set()
        after = 0
        while events := self.ledger.read(tid, after):
            held.update(e.event_id for e in events)
            after = events[-1].seq or after + len(events)
        return held

    def _skip_already_recorded(self) -> None:
        """Drop replayed events the ledger already holds (the crash came after the commit)."""
        with self._cv:
            tids = list(self._buf)
        for tid in tids:
            with self._cv:
                entries = list(self._buf.get(tid, []))
            if not entries:
                continue
            try:
                held = self._ids_in_ledger(tid)
            except Exception:
                return
            keep = [en for en in entries if en.event.event_id not in held]
            gone = [en for en in entries if en.event.event_id in held]
            with self._cv:
                self._buf[tid] = keep
                if not keep:
                    del self._buf[tid]
                self._count -= len(gone)
            self._wal.settled([en.wal for en in gone if en.wal])


def _on_event_loop() -> bool:
    """Whether the calling thread is running an asyncio event loop (never block it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def is_poison(exc: BaseException) -> bool:
    """Whether the ledger refused the *values* (retrying cannot help), not the service.

    Values that cannot be encoded, or that PostgreSQL rejects as data (class 22) or
    as violating a constraint (class 23), are poison; anything else is retried.
    """
    if isinstance(exc, _ORDINARY):
        return False
    if isinstance(exc, (UnicodeError, ValueError, TypeError)):
        return True
    state = getattr(exc, "sqlstate", None) or ""
    return state.startswith(("22", "23"))


class WriteAheadLog:
    """fsync'd local log of events that must survive a crash before they reach the ledger.

    One file per process generation under ``dir``, locked while its process lives; a file
    whose events are all recorded is deleted. Files of dead processes are replayed by the
    next :class:`Pipeline` (or ``lgx repair``); events already in the ledger are skipped.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._open_count: dict[str, int] = {}
        self._written = 0

    def _current(self) -> tuple[IO[bytes], Path]:
        if self._file is None or self._written > 5000:
            self._rotate()
        assert self._file is not None and self._path is not None
        return self._file, self._path

    def _rotate(self) -> None:
        if self._file is not None and self._path is not None:
            old = str(self._path)
            self._file.close()  # releases the lock; the file stays until settled
            if not self._open_count.get(old):
                self._path.unlink(missing_ok=True)
                self._open_count.pop(old, None)
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}.wal"
        self._path = self.dir / name
        self._file = open(self._path, "ab")  # noqa: SIM115 - held open for appends
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._written = 0

    def append(self, events: Sequence[Event]) -> str:
        """Append ``events`` and fsync; returns the file that holds them."""
        data = b"".join(_wal_line(e) for e in events)
        with self._lock:
            f, path = self._current()
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            self._written += len(events)
            key = str(path)
            self._open_count[key] = self._open_count.get(key, 0) + len(events)
            return key

    def settled(self, files: Iterable[str | None]) -> None:
        """Events of ``files`` reached the ledger; delete files with nothing left."""
        with self._lock:
            for key in files:
                if key is None or key not in self._open_count:
                    continue
                self._open_count[key] -= 1
                if self._open_count[key] <= 0 and (self._path is None or key != str(self._path)):
                    Path(key).unlink(missing_ok=True)
                    del self._open_count[key]

    def adopt(self, path: Path, count: int) -> None:
        """Track a replayed orphan file until its events are recorded."""
        with self._lock:
            self._open_count[str(path)] = count
            if count == 0:
                path.unlink(missing_ok=True)

    def orphans(self) -> list[tuple[Path, list[Event]]]:
        """Files no live process holds, with their (complete) events."""
        out: list[tuple[Path, list[Event]]] = []
        if not self.dir.is_dir():
            return out
        for path in sorted(self.dir.glob("*.wal")):
            try:
                with open(path, "rb") as f:
                    try:
                        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        continue  # its process is alive
                    events = [_wal_event(line) for line in f.read().split(b"\n") if line]
            except (OSError, ValueError) as exc:
                logger.error("unreadable write-ahead log %s: %s", path, exc)
                continue
            out.append((path, [e for e in events if e is not None]))
        return out

    def pending(self) -> list[Path]:
        """Log files present (this process's and orphans)."""
        return sorted(self.dir.glob("*.wal")) if self.dir.is_dir() else []

    def quarantine(self, events: Sequence[Event], why: str) -> Path:
        """Keep events the ledger refused, with the reason, for a person to look at."""
        qdir = self.dir.parent.parent / "quarantine" / self.dir.name
        qdir.mkdir(parents=True, exist_ok=True)
        path = qdir / f"{time.time_ns():020d}-{os.urandom(4).hex()}.jsonl"
        with open(path, "wb") as f:
            f.write(json.dumps({"reason": why}).encode() + b"\n")
            f.write(b"".join(_wal_line(e) for e in events))
            f.flush()
            os.fsync(f.fileno())
        return path

    def release(self) -> None:
        """Delete this process's file if everything in it is recorded."""
        with self._lock:
            if self._path is not None and not self._open_count.get(str(self._path)):
                self._path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close (and unlock) this process's file."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
                if self._path is not None and not self._open_count.get(str(self._path)):
                    self._path.unlink(missing_ok=True)


def _wal_line(e: Event) -> bytes:
    env = e.envelope()
    env["attachments"] = {k: base64.b64encode(v).decode() for k, v in e.attachments.items()}
    env["detail"] = e.detail
    return json.dumps(env, ensure_ascii=False, default=str).encode("utf-8") + b"\n"


def _wal_event(line: bytes) -> Event | None:
    try:
        env = json.loads(line)
    except ValueError:
        return None  # a torn last line: its write never returned, so nothing relied on it
    atts = {k: base64.b64decode(v) for k, v in env.pop("attachments", {}).items()}
    detail = env.pop("detail", None)
    return Event.from_envelope(env).replace(attachments=atts, detail=detail)


def default_spool_dir() -> Path:
    """``$LGX_SPOOL_DIR`` or ``~/.cache/langgraph-external/spool``."""
    env = os.environ.get("LGX_SPOOL_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "langgraph-external" / "spool"
