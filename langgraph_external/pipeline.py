"""The event pipeline: sources emit, processors run on the caller's thread, captures commit
with the checkpoint, a sealer seals them after commit, projections follow.

* **Sources** (checkpointer, callback handler, store, guard, memory adapter) know only
  :class:`~langgraph_external.events.Event`, :class:`~langgraph_external.capture.Capture`
  and this class.
* **Processors** run in :meth:`Pipeline.emit`, on the caller's thread, so a value is
  recorded as it was when it was reported: ``materialize → Redact → Offload → normalize``.
* **Capture.** A checkpoint's capture — a reference to the saver's rows and the thread's
  buffered events that precede it — commits in the checkpoint's own transaction
  (:meth:`Pipeline.open_commit`, used by the checkpointer). Events reported between two
  checkpoints of a thread wait in a per-thread buffer and ride in that thread's next
  capture, or are captured on their own by the background flusher after ``linger``
  seconds. Events that must be durable before the call returns and cannot ride a saver
  transaction (checkpoints of other savers) go to an fsync'd write-ahead log first
  (:meth:`Pipeline.emit` with ``durable=True``).
* **Sealing** (:mod:`langgraph_external.seal`) happens after commit, in batches, in a
  :class:`~langgraph_external.service.SealingService`: a thread of this process
  (``sealing="thread"``), the helper process :mod:`langgraph_external.worker` starts, or
  ``lgx worker`` processes; the projections (the workspace mirror, exporters) follow the
  sealed events there.

Nothing recorded is dropped: a ledger outage keeps events buffered (the buffer is bounded:
producers then wait) and retried; at close, what could not be captured goes to the
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
import inspect
import itertools
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external.capture import Capture
from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.errors import (
    RecordingError,
)
from langgraph_external.events import Event
from langgraph_external.processors import (
    Offload,
    Processor,
    Redact,
    Redactor,
    materialize,
    normalize,
)
from langgraph_external.projector import Failures
from langgraph_external.seal import is_poison
from langgraph_external.service import SealingService
from langgraph_external.sinks.base import Ledger, Projection

logger = logging.getLogger("langgraph_external")

STALL_AFTER = 5.0
"""Seconds a database call may take before ``health()`` reports the database as failing
(a server that is frozen or unreachable does not fail calls, it stops answering)."""

__all__ = ["Commit", "Pipeline", "SealingBackend", "WriteAheadLog", "is_poison"]


class SealingBackend(Protocol):
    """Where captures are sealed and projections run (a local service, a helper process,
    ``lgx worker`` processes): what the capturing side asks of it."""

    def wake(self) -> None:
        """Captures were committed."""

    def flush(
        self,
        threads: Collection[str],
        horizon: str,
        timeout: float | None,
        *,
        exports: bool = True,
    ) -> bool:
        """Wait until the captures of ``threads`` before ``horizon`` are sealed (and, where
        projections run, projected; ``exports``: exported, where exports run)."""

    def health(self) -> dict[str, Any]:
        """Sealing and projection health."""

    def close(self, timeout: float = 30.0) -> bool:
        """Seal what is sealable and stop."""


@dataclass(slots=True)
class _Entry:
    tick: int
    born: float
    event: Event
    wal: str | None = None  # write-ahead log file holding it, if any


class Commit:
    """One capture riding someone else's transaction (the saver's).

    The checkpointer opens it around the saver's ``put``: :meth:`take` (inside the
    transaction) gives the capture the thread's buffered events that precede it;
    :meth:`done` or :meth:`failed` settles it once the saver returned.
    """

    __slots__ = ("_riders", "_settled", "capture", "pipeline", "step", "thread_id")

    def __init__(self, pipeline: Pipeline, thread_id: str) -> None:
        self.pipeline = pipeline
        self.thread_id = thread_id
        self.capture: Capture | None = None
        self.step: int | None = None
        self._riders: list[_Entry] = []
        self._settled = False
        with pipeline._cv:  # the flusher leaves the thread to this commit until it settles
            pipeline._inflight[thread_id] = pipeline._inflight.get(thread_id, 0) + 1
            pipeline._open_commits[id(self)] = time.monotonic()  # health(): a stuck commit

    def take(
        self,
        capture: Capture,
        *,
        ns: str,
        step: int | None,
        checkpoint_id: str | None,
        parent_id: str | None = None,
        riders: bool = True,
    ) -> Capture:
        """Give ``capture`` the buffered events that precede it (call once, inside the
        transaction) and return it.

        A checkpoint's capture waits, first, for the flusher's capture of the thread's
        earlier events and for any other capture of the thread in flight that carries
        events (a subgraph's checkpoint beside the parent's): both commit before it, so
        the order they are sealed in — commit order — is the order they were taken in.
        """
        self.step = step
        if not riders:
            self.capture = capture
            return capture
        p = self.pipeline
        if self.thread_id in p._doubtful:
            p._resolve_doubts(self.thread_id)  # before riders are picked again
        with p._cv:
            while not self._try_take(capture, ns, step, checkpoint_id, parent_id):
                p._cv.wait(0.05)
        return capture

    async def atake(
        self,
        capture: Capture,
        *,
        ns: str,
        step: int | None,
        checkpoint_id: str | None,
        parent_id: str | None = None,
    ) -> Capture:
        """:meth:`take` for a transaction on an event loop: it waits without blocking the
        loop (the capture it waits for may be another task of the same loop)."""
        p = self.pipeline
        self.step = step
        if self.thread_id in p._doubtful:
            await asyncio.to_thread(p._resolve_doubts, self.thread_id)
        while True:
            with p._cv:
                if self._try_take(capture, ns, step, checkpoint_id, parent_id):
                    return capture
            await asyncio.sleep(0.001)

    def _try_take(
        self,
        capture: Capture,
        ns: str,
        step: int | None,
        checkpoint_id: str | None,
        parent_id: str | None,
    ) -> bool:
        p = self.pipeline  # under p._cv
        if p._flushing.get(self.thread_id) or p._holding.get(self.thread_id):
            return False
        self._riders = p._take_riders(self.thread_id, ns, step, checkpoint_id, parent_id)
        capture.riders = [en.event for en in self._riders]
        if self._riders:
            p._holding[self.thread_id] = p._holding.get(self.thread_id, 0) + 1
        self.capture = capture
        return True

    def done(self) -> None:
        """The transaction committed: the capture (and its riders) are recorded."""
        if self._settled:
            return
        self._settled = True
        self.pipeline._captured(
            [self.capture] if self.capture is not None else [], self._riders, inflight=self
        )

    def failed(self, *, doubtful: bool = False) -> None:
        """The transaction did not commit: riders go back to the buffer.

        ``doubtful``: the failure may have come after the server committed (a connection
        lost around the COMMIT); the riders are checked against the ledger before they
        are captured again, so none is recorded twice.
        """
        if self._settled:
            return
        self._settled = True
        p = self.pipeline
        with p._cv:
            if doubtful and self._riders and self.capture is not None:
                p._doubtful.setdefault(self.thread_id, []).append(
                    (self.capture.event_id, {en.event.event_id for en in self._riders})
                )
            p._inflight[self.thread_id] -= 1
            p._open_commits.pop(id(self), None)
            if not p._inflight[self.thread_id]:
                del p._inflight[self.thread_id]
            p._release(self)
            p._rebuffer(self.thread_id, self._riders)
            p._cv.notify_all()


class Pipeline:
    """Runs events through processors into captures; a sealer seals them after commit.

    Args:
        ledger: the system of record (:class:`~langgraph_external.sinks.postgres.
            PostgresLedger`, or :class:`~langgraph_external.sinks.memory.InMemoryLedger`).
        projections: views fed from the ledger (the workspace mirror) by a local
            sealing service (``sealing="thread"``).
        redactor: applied to every payload before anything is recorded.
        offload_threshold: payloads or raw bytes larger than this go to artifacts.
        strict: capture every event before :meth:`emit` returns; raise if it cannot be.
        wal_dir: where the write-ahead log and events that outlived a close are kept
            (default ``$LGX_SPOOL_DIR`` or ``~/.cache/langgraph-external/spool``).
        linger: seconds buffered events wait for a capture to ride before the flusher
            captures them on their own.
        hold: most seconds an event waits for the checkpoint that precedes it.
        max_buffered: events held before producers wait (back-pressure, never a drop).
        retry_interval: seconds between attempts while the ledger is unavailable.
        poll_interval: seconds between a sealer's and a projection's looks for work
            nothing woke them for.
        cipher: the deployment key (:mod:`langgraph_external.keys`): keyed addresses
            of exact bytes, chain-head tags, and the sealing of exact copies.
        encrypt: encrypt the exact checkpoint copies with ``cipher``.
        serde: the saver's serializer (the sealer encodes inline values with it).
        sealing: ``"thread"`` (a :class:`~langgraph_external.service.SealingService`
            in this process, built here), a :class:`SealingBackend` built elsewhere
            (the helper process, ``lgx worker``), or ``None`` (nothing seals here: an
            ``lgx worker`` does, and :meth:`flush` waits for it).
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
        serde: SerializerProtocol | None = None,
        sealing: str | SealingBackend | None = "thread",
    ) -> None:
        self.ledger = ledger
        self.cipher = cipher
        self.encrypt = encrypt and cipher is not None
        self.strict = strict
        self.processors: list[Processor] = [
            materialize,
            Redact(redactor),
            *extra_processors,
            Offload(offload_threshold),
            normalize,
        ]
        self.linger = linger
        self.hold = hold
        self.max_buffered = max_buffered
        self.retry_interval = retry_interval
        self.failures = Failures()
        self.delivered = 0  # events captured so far
        self.quarantined: dict[str, str] = {}  # "ledger:thread" -> error
        self._store_started: float | None = None
        identity = getattr(ledger, "identity", None)
        key = identity() if callable(identity) else ledger.name
        spool = Path(wal_dir or spool_dir or default_spool_dir())
        self._wal = WriteAheadLog(spool / "wal" / key)
        self.quarantine_dir = spool / "quarantine" / key
        self.service: SealingService | None = None
        self.sealing: SealingBackend | None
        if sealing == "thread":
            self.service = SealingService(
                ledger,
                projections=projections,
                cipher=cipher,
                encrypt=encrypt,
                serde=serde,
                processors=self.processors,
                poll_interval=poll_interval,
                retry_interval=retry_interval,
                quarantine_dir=self.quarantine_dir,
                failures=self.failures,
            ).start()
            self.sealing = self.service
        elif isinstance(sealing, str):
            raise ValueError(f"sealing must be 'thread', a backend or None, not {sealing!r}")
        else:
            self.sealing = sealing
        self._lock = threading.RLock()
        self._cv = threading.Condition(self._lock)
        self._fcv = threading.Condition(self._lock)  # the flusher waits here
        self._flusher_idle = False
        self._buf: dict[str, list[_Entry]] = {}
        self._count = 0
        self._tick = itertools.count()
        self._inflight: dict[str, int] = {}
        self._open_commits: dict[int, float] = {}  # commit -> when it opened
        self._storing = 0  # entries taken by the flusher, not yet captured or put back
        self._flushing: dict[str, int] = {}  # the same, per thread
        self._holding: dict[str, int] = {}  # captures in flight carrying a thread's events
        # captures whose commit was not seen to succeed or fail (a connection lost around
        # the COMMIT): thread -> [(capture event id, its riders' event ids)]
        self._doubtful: dict[str, list[tuple[str, set[str]]]] = {}
        self._done_steps: dict[tuple[str, str], int] = {}
        self._done_checkpoints: dict[tuple[str, str, str], None] = {}
        self._force = 0  # flush requests not yet served
        self._unflushed: set[str] = set()  # threads captured since the last flush
        self._watched: dict[str, set[str]] | None = None  # listeners fed by read-back
        self._listeners: list[Callable[[Sequence[Event]], None]] = []
        self._ledger_down_since: float | None = None
        self._calls: dict[int, float] = {}  # database calls of sources in flight
        self._closed = False
        self._stop = False
        self._flush_hooks: list[Callable[[], Callable[[], None] | None]] = []
        self._replay_wal()
        self._flusher = self._worker(self._flush_loop, "flusher")
        ref = weakref.ref(self)
        self._atexit = lambda: (p := ref()) is not None and p._close_at_exit()
        atexit.register(self._atexit)

    @property
    def projections(self) -> list[Projection]:
        """The projections a local sealing service feeds."""
        return self.service.projector.projections if self.service is not None else []

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
            if self._flusher_idle:
                self._fcv.notify()
        if self.strict:
            for tid in dict.fromkeys(threads):
                self._capture_now(tid)

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
        ``thread_id``: also wait while the flusher is capturing that thread's events (a
        capture of the thread would otherwise wait for it inside the transaction).

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
        """Start a capture of ``thread_id`` inside the caller's transaction (:class:`Commit`)."""
        if self._closed:
            raise RecordingError("the pipeline is closed; events can no longer be recorded")
        return Commit(self, thread_id)

    def assume_new(self, thread_id: str) -> None:
        """Hint that ``thread_id`` has no record yet (kept for sources; nothing to look up)."""

    def captured_alone(self, thread_id: str, event_id: str) -> None:
        """A capture that carried no buffered events committed (a task's writes): the
        sealer may take it; :meth:`flush` waits for it."""
        self._unflushed.add(thread_id)
        self.delivered += 1
        watched = self._watched
        if watched is not None:
            with self._cv:
                watched.setdefault(thread_id, set()).add(event_id)
        if self.sealing is not None:
            self.sealing.wake()

    def call_started(self, key: int) -> None:
        """A source's database call began (``health()`` reports one that does not return)."""
        self._calls[key] = time.monotonic()

    def call_ended(self, key: int) -> None:
        """The call of :meth:`call_started` returned."""
        self._calls.pop(key, None)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Capture everything emitted so far, and wait until it is sealed and projected.

        Returns ``False`` if that did not finish within ``timeout`` (ledger, sealer or
        workspace down); nothing is dropped, it stays buffered and is retried.
        """
        return self._flush(timeout, exports=True)

    def _flush(self, timeout: float | None, *, exports: bool) -> bool:
        self._run_flush_hooks()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            self._force += 1
            self._cv.notify_all()
            self._fcv.notify_all()
            while self._count or self._storing or any(self._inflight.values()):
                if not self._wait(deadline):
                    self._force -= 1
                    return False
            self._force -= 1
            threads, self._unflushed = self._unflushed, set()
        if self.sealing is None:
            return True
        try:
            horizon = self._horizon()
        except Exception as exc:
            self.failures.add("ledger", exc)
            with self._cv:
                self._unflushed |= threads
            return False
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ok = self.sealing.flush(threads, horizon, left, exports=exports)
        if not ok:
            with self._cv:
                self._unflushed |= threads
            return False
        self._feed_listeners()
        return True

    def _horizon(self) -> str:
        horizon = getattr(self.ledger, "horizon", None)
        return str(horizon()) if horizon is not None else ""

    def catch_up(self, timeout: float = 600.0) -> tuple[int, list[str]]:
        """Bring every projection of the local sealing service up to the ledger."""
        if self.service is None:
            return 0, []
        return self.service.projector.catch_up(timeout)

    def _worker(self, loop: Callable[[], None], role: str) -> threading.Thread:
        thread = threading.Thread(target=loop, name=f"langgraph-external-{role}", daemon=True)
        thread.start()
        return thread

    def _revive(self) -> None:
        """Start the flusher again if it died (under ``_cv``; never expected: it retries
        every error, but a stalled recording must not wait on a dead thread)."""
        if self._stop:
            return
        if not self._flusher.is_alive():
            logger.error("langgraph-external: the flusher thread died; starting it again")
            self._flusher = self._worker(self._flush_loop, "flusher")
        if self.service is not None:
            self.service.revive()

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
        """Call ``fn`` with recorded events as they are sealed (testing helpers).

        With a local sealing service, with every sealed batch; otherwise, at the end of
        each :meth:`flush`, with the events this pipeline captured since, read back.
        """
        if self.service is not None:
            self.service.add_listener(fn)
            return
        with self._cv:
            self._listeners.append(fn)
            if self._watched is None:
                self._watched = {}

    def remove_listener(self, fn: Callable[[Sequence[Event]], None]) -> None:
        """Stop calling ``fn``."""
        if self.service is not None:
            self.service.remove_listener(fn)
            return
        with self._cv:
            if fn in self._listeners:
                self._listeners.remove(fn)
            if not self._listeners:
                self._watched = None

    def _feed_listeners(self) -> None:
        with self._cv:
            watched, listeners = self._watched, list(self._listeners)
            if watched is not None:
                self._watched = {}
        if not watched or not listeners:
            return
        for tid, ids in watched.items():
            events = [e for e in _read_all(self.ledger, tid) if e.event_id in ids]
            for fn in listeners:
                try:
                    fn(events)
                except Exception:
                    logger.exception("event listener failed")

    def close(self, timeout: float = 30.0) -> None:
        """Capture what is buffered, let the sealer and projections catch up, stop.

        What cannot be captured (ledger down) is written to the write-ahead log and
        replayed by the next start or ``lgx repair``: never dropped.
        """
        if self._closed:
            return
        atexit.unregister(self._atexit)
        deadline = time.monotonic() + timeout
        # exports get their own chance when the sealer closes (and do not wait again
        # after a flush of the app's that found their receiver down)
        ok = self._flush(timeout, exports=False)
        self._closed = True
        with self._cv:
            self._stop = True
            self._cv.notify_all()
            self._fcv.notify_all()
        self._flusher.join(timeout=60)
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
        if self.sealing is not None:
            try:
                # the flush above already waited if it could not finish: not again
                self.sealing.close(max(0.0, deadline - time.monotonic()) if ok else 0.0)
            except Exception as exc:  # closing must not hide the app's own error
                logger.warning("closing the sealer failed: %s", exc)
        try:
            self.ledger.close()
        except Exception as exc:
            logger.warning("closing %s failed: %s", self.ledger.name, exc)

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
        """Recording health: what is captured, waiting, failing, lagging or set aside."""
        with self._cv:
            oldest = min(
                (en.born for entries in self._buf.values() for en in entries), default=None
            )
            buffered = self._count + self._storing
            # the flusher's capture, a capture inside a saver's transaction, any other
            # database call of a source: all wait on the database
            waits = [
                t
                for t in (self._store_started, *self._open_commits.values(), *self._calls.values())
                if t
            ]
            started = min(waits, default=None)
        now = time.monotonic()
        wait = now - started if started else 0.0
        out: dict[str, Any] = {
            "delivered": self.delivered,
            "captured": self.delivered,
            "buffered": buffered,
            "oldest_buffered_seconds": round(now - oldest, 3) if oldest is not None else 0.0,
            "ledger_wait_seconds": round(wait, 3),
            "ledger_down_seconds": (
                round(now - self._ledger_down_since, 3) if self._ledger_down_since else 0.0
            ),
            "failures": self.failures.as_dicts(),
            # down, or not answering within the bound wherever the app waits on it
            "failing": ["ledger"] if self._ledger_down_since or wait > STALL_AFTER else [],
            "quarantined": dict(self.quarantined),
            "wal_files": len(self._wal.pending()),
        }
        if self.sealing is not None:
            try:
                sealing = self.sealing.health()
            except Exception as exc:
                sealing = {"error": f"{type(exc).__name__}: {exc}"}
            out["sealing"] = sealing
            out["projection_lag_commits"] = sealing.get("projection_lag_batches", 0)
            if self.service is None:  # a local service shares this pipeline's failures
                out["failures"] = out["failures"] + list(sealing.get("failures") or [])
            out["quarantined"] = {**out["quarantined"], **(sealing.get("quarantined") or {})}
            if (
                sealing.get("sealer_down_seconds")  # it cannot reach the same database
                or (sealing.get("sealer_wait_seconds") or 0) > STALL_AFTER
            ):
                out["failing"] = sorted({*out["failing"], "ledger"})
            if sealing.get("helper_down"):
                out["failing"] = sorted({*out["failing"], "sealer"})
        return out

    # -- buffer bookkeeping (under self._cv) ----------------------------------------------
    def _take_riders(
        self,
        tid: str,
        ns: str,
        step: int | None,
        checkpoint_id: str | None,
        parent_id: str | None,
    ) -> list[_Entry]:
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

    def note_committed(self, thread_id: str, ns: str, step: int | None, checkpoint_id: str) -> None:
        """Tell the pipeline a checkpoint is stored (e.g. read back when a run resumes)."""
        with self._cv:
            self._note_checkpoint(thread_id, ns, step, checkpoint_id)
            self._cv.notify_all()

    def _note_checkpoint(self, tid: str, ns: str, step: int | None, cid: str) -> None:
        if step is not None and step > self._done_steps.get((tid, ns), -(10**9)):
            self._done_steps[(tid, ns)] = step
        self._done_checkpoints[(tid, ns, cid)] = None
        while len(self._done_checkpoints) > 8192:
            self._done_checkpoints.pop(next(iter(self._done_checkpoints)))

    def _release(self, commit: Commit) -> None:
        """``commit`` (which carried events) settled: the next capture may take (under _cv)."""
        if commit._riders:
            tid = commit.thread_id
            self._holding[tid] -= 1
            if not self._holding[tid]:
                del self._holding[tid]

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
        """Whether the checkpoint that causally precedes ``e`` is already captured."""
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

    def _captured(
        self,
        captures: Sequence[Capture],
        entries: Sequence[_Entry],
        inflight: Commit | None = None,
    ) -> None:
        """``captures`` committed (``inflight``: the commit of a saver's transaction that
        stored them, settled here under the same lock)."""
        if entries:
            self._wal.settled([en.wal for en in entries if en.wal])
        with self._cv:
            for c in captures:
                if c.kind == "checkpoint" and c.checkpoint_id:
                    step = inflight.step if inflight is not None else None
                    self._note_checkpoint(c.thread_id, c.checkpoint_ns, step, c.checkpoint_id)
                self._unflushed.add(c.thread_id)
                if self._watched is not None:
                    ids = self._watched.setdefault(c.thread_id, set())
                    ids.update(e.event_id for e in c.riders)
                    if c.kind != "events":
                        ids.add(c.event_id)
            for en in entries:
                e = en.event
                if e.kind == "checkpoint" and e.checkpoint_id:
                    self._note_checkpoint(e.thread_id, e.checkpoint_ns, e.step, e.checkpoint_id)
            if inflight is not None:
                self._open_commits.pop(id(inflight), None)
                tid = inflight.thread_id
                self._inflight[tid] -= 1
                if not self._inflight[tid]:
                    del self._inflight[tid]
                self._release(inflight)
            self.delivered += len(entries) + sum(c.kind != "events" for c in captures)
            self._ledger_down_since = None
            self._cv.notify_all()
        if captures and self.sealing is not None:
            self.sealing.wake()

    # -- the flusher ------------------------------------------------------------------------
    def _capture_now(self, tid: str) -> None:
        """Strict mode: capture ``tid``'s buffer on the caller's thread or raise."""
        entries, captures = self._collect(lambda: self._flushable(tid, True, time.monotonic()))
        if not entries:
            return
        try:
            self._store(entries, captures)
        except Exception as exc:
            raise RecordingError(f"could not record events of thread {tid!r}: {exc}") from exc
        finally:
            self._stored(entries)

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
                time.sleep(self.linger)  # let captures carry what they can; batch the rest
            for tid in list(self._doubtful):
                try:
                    self._resolve_doubts(tid)
                except Exception as exc:  # the ledger is still away: the thread waits
                    logger.debug("could not check thread %r against the ledger: %s", tid, exc)
            batch, captures = self._collect(self._flushable_now)
            if not batch:
                with self._cv:
                    if self._stop and not any(self._inflight.values()):
                        return
                    self._fcv.wait(0.05)  # events waiting for their checkpoint
                continue
            try:
                self._store(batch, captures)
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
        """What the flusher may capture now (under ``_cv``)."""
        force = self._force > 0 or self._stop
        now = time.monotonic()
        batch: list[_Entry] = []
        for tid in list(self._buf):
            # a thread with a commit in flight: the commit takes what precedes it; a
            # doubtful one: its events are checked against the ledger first
            if not self._inflight.get(tid) and tid not in self._doubtful:
                batch.extend(self._flushable(tid, force, now))
        return batch

    def _collect(self, collect: Callable[[], list[_Entry]]) -> tuple[list[_Entry], list[Capture]]:
        """Pick entries with ``collect`` and make one capture per thread of them."""
        with self._cv:
            picked = collect()
            if not picked:
                return [], []
            by_thread: dict[str, list[_Entry]] = {}
            for en in picked:
                by_thread.setdefault(en.event.thread_id, []).append(en)
            ordered = [en for ens in by_thread.values() for en in ens]
            captures = [
                Capture(
                    "events", tid, riders=[en.event for en in ens], event_id=ens[0].event.event_id
                )
                for tid, ens in by_thread.items()
            ]
            self._storing += len(ordered)
            for tid, ens in by_thread.items():
                self._flushing[tid] = self._flushing.get(tid, 0) + len(ens)
        return ordered, captures

    def _stored(self, entries: Sequence[_Entry]) -> None:
        """Entries picked by :meth:`_collect` are captured or back in the buffer."""
        with self._cv:
            self._storing -= len(entries)
            for en in entries:
                tid = en.event.thread_id
                self._flushing[tid] -= 1
                if not self._flushing[tid]:
                    del self._flushing[tid]
            self._cv.notify_all()

    def _store(self, entries: list[_Entry], captures: list[Capture]) -> None:
        """Capture ``entries`` (one capture per thread) in one transaction.

        On failure the entries go back to the buffer. Values the ledger refuses (not an
        outage) are isolated to their thread and set aside (:meth:`_quarantine`).
        """
        with self._cv:
            self._store_started = time.monotonic()
        try:
            self.ledger.capture(captures)  # type: ignore[attr-defined]
        except Exception as exc:
            with self._cv:
                self._store_started = None
            by_thread: dict[str, list[_Entry]] = {}
            for en in entries:
                by_thread.setdefault(en.event.thread_id, []).append(en)
            if is_poison(exc) and len(captures) > 1:
                # find the thread whose values the ledger refuses; the others go on
                for c in captures:
                    ens = by_thread[c.thread_id]
                    try:
                        self.ledger.capture([c])  # type: ignore[attr-defined]
                    except Exception as inner:
                        if is_poison(inner):
                            self._quarantine(c.thread_id, ens, inner)
                        else:
                            with self._cv:
                                self._rebuffer(c.thread_id, list(ens))
                        continue
                    self._captured([c], ens)
                return
            if is_poison(exc):
                self._quarantine(captures[0].thread_id, entries, exc)
                return
            with self._cv:
                for tid, ens in by_thread.items():
                    self._rebuffer(tid, ens)
                    self._doubtful.setdefault(tid, []).extend(
                        (c.event_id, {e.event_id for e in c.riders})
                        for c in captures
                        if c.thread_id == tid
                    )
                if self._ledger_down_since is None:
                    self._ledger_down_since = time.monotonic()
                self._cv.notify_all()
            self.failures.add("ledger", exc, len(entries))
            raise
        with self._cv:
            self._store_started = None
        self._captured(captures, entries)

    def _quarantine(self, tid: str, entries: Sequence[_Entry], exc: BaseException) -> None:
        """Set aside events the ledger refuses, with an error event for their thread."""
        path = self._wal.quarantine([en.event for en in entries], f"{type(exc).__name__}: {exc}")
        self.failures.add("ledger", exc, len(entries))
        self.quarantined[f"ledger:{tid}"] = f"{type(exc).__name__}: {exc}"
        logger.error(
            "langgraph-external: %d events of thread %r refused by the ledger (%s); kept in %s",
            len(entries),
            tid,
            exc,
            path,
        )
        self._wal.settled([en.wal for en in entries if en.wal])
        note = self.process(
            Event.new(
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
        )
        capture = Capture("events", tid, riders=[note], event_id=note.event_id)
        try:
            self.ledger.capture([capture])  # type: ignore[attr-defined]
            self._captured([capture], [])
        except Exception:
            logger.debug("could not record the refusal of thread %r", tid)
        with self._cv:
            self._cv.notify_all()

    # -- write-ahead log and doubtful commits ------------------------------------------------
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
        """Drop ``tid``'s buffered events whose capture the ledger holds (see
        :meth:`Commit.failed`). Raises what the ledger raises when it cannot be asked;
        the thread stays doubtful."""
        with self._cv:
            doubts = list(self._doubtful.get(tid, []))
        if not doubts:
            with self._cv:
                self._doubtful.pop(tid, None)
            return
        held = _recorded(self.ledger, tid, [d[0] for d in doubts])
        gone_ids = set().union(*(ids for cid, ids in doubts if cid in held))
        with self._cv:
            if gone_ids:
                gone = [en for en in self._buf.get(tid, []) if en.event.event_id in gone_ids]
                keep = [en for en in self._buf.get(tid, []) if en.event.event_id not in gone_ids]
                if keep:
                    self._buf[tid] = keep
                else:
                    self._buf.pop(tid, None)
                self._count -= len(gone)
                self._wal.settled([en.wal for en in gone if en.wal])
                self.delivered += len(gone)
            self._doubtful.pop(tid, None)
            self._cv.notify_all()

    def _skip_already_recorded(self) -> None:
        """Drop replayed events the ledger already holds (the crash came after the capture)."""
        with self._cv:
            tids = list(self._buf)
        for tid in tids:
            with self._cv:
                entries = list(self._buf.get(tid, []))
            if not entries:
                continue
            try:
                held = _recorded(self.ledger, tid, [en.event.event_id for en in entries])
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


def _recorded(ledger: Any, tid: str, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` the ledger holds for ``tid``, captured or sealed."""
    if not ids:
        return set()
    recorded = getattr(ledger, "recorded", None)
    if recorded is not None:
        return set(recorded(tid, ids))
    return {e.event_id for e in _read_all(ledger, tid)} & set(ids)


def _read_all(ledger: Any, tid: str) -> list[Event]:
    out: list[Event] = []
    after = 0
    while events := ledger.read(tid, after):
        out.extend(events)
        after = events[-1].seq or after + len(events)
    return out


def _on_event_loop() -> bool:
    """Whether the calling thread is running an asyncio event loop (never block it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


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
