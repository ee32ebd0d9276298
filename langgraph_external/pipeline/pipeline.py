"""The event pipeline: sources emit, processors run on the caller's thread, captures commit
with the checkpoint, a sealer seals them after commit, projections follow.

* **Sources** (checkpointer, callback handler, store, guard, memory adapter) know only
  :class:`~langgraph_external.record.events.Event`,
  :class:`~langgraph_external.record.capture.Capture` and this class.
* **Processors** (``materialize → Redact → normalize → Offload``) run in
  :meth:`Pipeline.emit`, on the caller's thread, so a value is recorded as it was when it
  was reported — or, deferred, only a snapshot there and the rest in the sealer
  (:mod:`~langgraph_external.pipeline.processing`).
* **Capture.** A checkpoint's capture — a reference to the saver's rows and the thread's
  buffered events that precede it — commits in the checkpoint's own transaction
  (:meth:`Pipeline.open_commit`, used by the checkpointer). Events reported between
  two checkpoints of a thread wait in a per-thread buffer
  (:mod:`~langgraph_external.pipeline.buffer`) and ride in that thread's next capture,
  or are captured on their own by the background flusher
  (:mod:`~langgraph_external.pipeline.flusher`) after ``linger`` seconds. Events that
  must be durable before the call returns and cannot ride a saver transaction
  (checkpoints of other savers) go to an fsync'd write-ahead log first
  (:meth:`Pipeline.emit` with ``durable=True``; :mod:`~langgraph_external.pipeline.wal`,
  replayed by :mod:`~langgraph_external.pipeline.recovery`).
* **Sealing** (:mod:`langgraph_external.pipeline.seal`) happens after commit, in batches, in a
  :class:`~langgraph_external.pipeline.service.SealingService`: a thread of this process
  (``sealing="thread"``), the helper process :mod:`langgraph_external.processes.worker` starts, or
  ``lgx worker`` processes; the projections (the workspace mirror, exporters) follow the
  sealed events there.

Nothing recorded is dropped: a ledger outage keeps events buffered (the buffer is bounded:
producers then wait) and retried; at close, what could not be captured goes to the
write-ahead log and is replayed by the next start or ``lgx repair``.

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
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
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external.errors import RecordingError
from langgraph_external.ledger.contract import Ledger, Projection
from langgraph_external.pipeline.backend import FlushRequest, SealingBackend
from langgraph_external.pipeline.background import Deadline
from langgraph_external.pipeline.buffer import Entry, EventBuffer
from langgraph_external.pipeline.commit import Commit
from langgraph_external.pipeline.failures import Failures
from langgraph_external.pipeline.flusher import Flusher
from langgraph_external.pipeline.health import STALL_AFTER, capture_health, recording_health
from langgraph_external.pipeline.listeners import FlushHooks, Listener, ReadBackListeners
from langgraph_external.pipeline.processing import EventProcessing
from langgraph_external.pipeline.recovery import keep_leftover, replay_wal, resolve_doubts
from langgraph_external.pipeline.seal import is_poison
from langgraph_external.pipeline.service import SealingService
from langgraph_external.pipeline.wal import WriteAheadLog, default_spool_dir, spool_for
from langgraph_external.record.capture import Capture
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event
from langgraph_external.record.processors import Processor, Redactor

logger = logging.getLogger("langgraph_external")

__all__ = [
    "STALL_AFTER",
    "Commit",
    "Pipeline",
    "SealingBackend",
    "WriteAheadLog",
    "default_spool_dir",
    "is_poison",
]


class Pipeline:
    """Runs events through processors into captures; a sealer seals them after commit.

    Args:
        ledger: the system of record (:class:`~langgraph_external.ledger.postgres.
            PostgresLedger`, or :class:`~langgraph_external.ledger.memory.InMemoryLedger`).
        projections: views fed from the ledger (the workspace mirror) by a local
            sealing service (``sealing="thread"``).
        redactor: applied to every payload before anything is recorded.
        offload_threshold: payloads or raw bytes larger than this go to artifacts.
        strict: capture every event before :meth:`emit` returns; raise if it cannot be.
        spool_dir: where the write-ahead log, events that outlived a close and refused
            captures are kept (default ``$LGX_SPOOL_DIR`` or
            ``~/.cache/langgraph-external/spool``).
        linger: seconds buffered events wait for a capture to ride before the flusher
            captures them on their own.
        hold: most seconds an event waits for the checkpoint that precedes it.
        max_buffered: events held before producers wait (back-pressure, never a drop).
        retry_interval: seconds between attempts while the ledger is unavailable.
        poll_interval: seconds between a sealer's and a projection's looks for work
            nothing woke them for.
        cipher: the deployment key (:mod:`langgraph_external.record.keys`): keyed addresses
            of exact bytes, chain-head tags, and the sealing of exact copies.
        encrypt: encrypt the exact checkpoint copies with ``cipher``.
        serde: the saver's serializer (the sealer encodes inline values with it).
        sealing: ``"thread"`` (a :class:`~langgraph_external.pipeline.service.SealingService`
            in this process, built here), a :class:`SealingBackend` built elsewhere
            (the helper process, ``lgx worker``), or ``None`` (nothing seals here: an
            ``lgx worker`` does, and :meth:`flush` waits for it).
        defer: leave redaction and the rest to the sealer, which must run these
            processors (:mod:`~langgraph_external.pipeline.processing`).
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
        defer: bool = False,
    ) -> None:
        self.ledger = ledger
        self.cipher = cipher
        self.encrypt = encrypt and cipher is not None
        self.strict = strict
        self.failures = Failures()
        self.processing = EventProcessing(
            self.failures,
            redactor=redactor,
            offload_threshold=offload_threshold,
            extra_processors=extra_processors,
            strict=strict,
            cipher=cipher if encrypt else None,  # opted out of AES-GCM: processed here
            defer=defer,
        )
        self.processors = self.processing.processors
        self.linger = linger
        self.hold = hold
        self.max_buffered = max_buffered
        self.retry_interval = retry_interval
        self.quarantined: dict[str, str] = {}  # "ledger:thread" -> error
        spool = Path(spool_dir or default_spool_dir())
        self._wal, self.quarantine_dir = spool_for(spool, ledger)
        if isinstance(sealing, str) and sealing != "thread":
            raise ValueError(f"sealing must be 'thread', a backend or None, not {sealing!r}")
        self.service: SealingService | None = None
        self.sealing: SealingBackend | None = None if isinstance(sealing, str) else sealing
        if sealing == "thread":
            self.sealing = self.service = SealingService(
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
        self.buffer = EventBuffer(hold)  # per thread, and the order captures take it in
        self.buffer.riders_key = cipher if self.processing.deferred else None  # snapshots
        self._listeners = ReadBackListeners(self.buffer, ledger)
        self._calls: dict[int, float] = {}  # database calls of sources in flight
        self._closed = False
        self._flush_hooks = FlushHooks()
        replay_wal(self.buffer, self._wal, ledger)
        self.flusher = Flusher(
            self.buffer,
            ledger,
            self._wal,
            failures=self.failures,
            quarantined=self.quarantined,
            pick=lambda: self._flushable_now(),
            captured=self.captured,
            resolve_doubts=self.resolve_doubts,
            process=self.process,
            finish=self.processing.finish,
            linger=linger,
            retry_interval=retry_interval,
        )
        ref = weakref.ref(self)
        self._atexit = lambda: (p := ref()) is not None and p._close_at_exit()
        atexit.register(self._atexit)

    @property
    def projections(self) -> list[Projection]:
        """The projections a local sealing service feeds."""
        return self.service.projector.projections if self.service is not None else []

    @property
    def delivered(self) -> int:
        """Events captured so far."""
        return self.buffer.delivered

    def _flushable_now(self) -> list[Entry]:
        """What the flusher may capture now (under the buffer's lock)."""
        return self.buffer.flushable_now()

    # -- producer side -------------------------------------------------------------------
    def process(self, event: Event) -> Event:
        """``event`` processed, or snapshotted for the sealer (``defer``)."""
        return self.processing.process(event)

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
        # the log is a file: what goes there is redacted (a deferred event: here)
        wal = self._wal.append(self.processing.finish(processed)) if durable else None
        b = self.buffer
        with b.cv:
            while (
                b.count >= self.max_buffered
                and not b.stopping
                and threading.current_thread() is not self.flusher.thread
                and not _on_event_loop()
            ):
                self._revive()
                b.cv.wait(0.1)  # back-pressure: the ledger is behind or down
            b.add(processed, wal)
        if self.strict:
            for tid in dict.fromkeys(e.thread_id for e in processed):
                self.flusher.capture_now(tid)

    def has_room(self) -> bool:
        """Whether :meth:`emit` would return without waiting for the ledger."""
        return self.buffer.count < self.max_buffered or self.buffer.stopping

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
            >>> from langgraph_external.ledger.memory import InMemoryLedger
            >>> with Pipeline(InMemoryLedger()) as p:
            ...     asyncio.run(p.wait_for_room("t"))
        """
        while not self.has_room() or (thread_id is not None and self.buffer.is_flushing(thread_id)):
            with self.buffer.cv:
                self._revive()
            await asyncio.sleep(0.005)

    def open_commit(self, thread_id: str) -> Commit:
        """Start a capture of ``thread_id`` inside the caller's transaction (:class:`Commit`)."""
        if self._closed:
            raise RecordingError("the pipeline is closed; events can no longer be recorded")
        return Commit(self, thread_id)

    def captured_alone(self, thread_id: str, event_id: str) -> None:
        """A capture that carried no buffered events committed (a task's writes): the
        sealer may take it; :meth:`flush` waits for it."""
        b = self.buffer
        with b.cv:
            b.unflushed.add(thread_id)
            b.delivered += 1
            if b.watched is not None:
                b.watched.setdefault(thread_id, set()).add(event_id)
        if self.sealing is not None:
            self.sealing.wake()

    def captured(
        self,
        captures: Sequence[Capture],
        entries: Sequence[Entry],
        *,
        commit: Commit | None = None,
    ) -> None:
        """``captures`` (carrying ``entries``) committed; ``commit``: the capture of a
        saver's transaction that stored them, settled here under the same lock."""
        if entries:
            self._wal.settled([en.wal for en in entries if en.wal])
        b = self.buffer
        with b.cv:
            b.captured(captures, entries, commit.step if commit is not None else None)
            if commit is not None:
                b.close_commit(id(commit), commit.thread_id, commit.riders)
            b.cv.notify_all()
        if captures and self.sealing is not None:
            self.sealing.wake()

    def is_doubtful(self, thread_id: str) -> bool:
        """Whether a capture of ``thread_id`` may have committed unseen."""
        return thread_id in self.buffer.doubtful

    def resolve_doubts(self, thread_id: str) -> None:
        """Drop ``thread_id``'s buffered events whose capture the ledger holds (see
        :meth:`Commit.failed`). Raises what the ledger raises when it cannot be asked."""
        resolve_doubts(self.buffer, self._wal, self.ledger, thread_id)

    def note_committed(self, thread_id: str, ns: str, step: int | None, checkpoint_id: str) -> None:
        """Tell the pipeline a checkpoint is stored (e.g. read back when a run resumes)."""
        with self.buffer.cv:
            self.buffer.note_checkpoint(thread_id, ns, step, checkpoint_id)
            self.buffer.cv.notify_all()

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

    def _flush(self, timeout: float | None, *, exports: bool, seal: bool = True) -> bool:
        self._flush_hooks.run()
        deadline = Deadline(timeout)
        b = self.buffer
        with b.cv:
            b.force += 1
            b.cv.notify_all()
            b.fcv.notify_all()
            try:
                while b.busy():
                    self._revive()
                    if (left := deadline.left()) == 0:
                        return False
                    b.cv.wait(0.1 if left is None else min(0.1, left))
            finally:
                b.force -= 1
            threads, b.unflushed = b.unflushed, set()
        if self.sealing is None or not seal:
            return True
        try:
            horizon = getattr(self.ledger, "horizon", None)
            at = str(horizon()) if horizon is not None else ""
        except Exception as exc:
            self.failures.add("ledger", exc)
        else:
            if self.sealing.flush(FlushRequest(tuple(threads), at, deadline.left(), exports)):
                self._listeners.feed()
                return True
        with b.cv:
            b.unflushed |= threads
        return False

    def catch_up(self, timeout: float = 600.0) -> tuple[int, list[str]]:
        """Bring every projection of the local sealing service up to the ledger."""
        if self.service is None:
            return 0, []
        return self.service.projector.catch_up(timeout)

    def _revive(self) -> None:
        """Start the background threads again if one died (under the buffer's lock)."""
        if self.buffer.stopping:
            return
        self.flusher.revive()
        if self.service is not None:
            self.service.revive()

    def add_flush_hook(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` at the start of every flush (sources emit what they still hold).

        Bound methods are held weakly, so a source that is gone is not kept alive.
        """
        self._flush_hooks.add(fn)

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn`` with recorded events as they are sealed (testing helpers).

        With a local sealing service, with every sealed batch; otherwise, at the end of
        each :meth:`flush`, with the events this pipeline captured since, read back.
        """
        (self._listeners.add if self.service is None else self.service.add_listener)(fn)

    def remove_listener(self, fn: Listener) -> None:
        """Stop calling ``fn``."""
        (self._listeners.remove if self.service is None else self.service.remove_listener)(fn)

    def close(self, timeout: float = 30.0) -> None:
        """Capture what is buffered, let the sealer and projections catch up, stop.

        What cannot be captured (ledger down) is written to the write-ahead log and
        replayed by the next start or ``lgx repair``: never dropped.
        """
        if self._closed:
            return
        atexit.unregister(self._atexit)
        deadline = Deadline(timeout)
        # exports get their chance when the sealer closes (no second wait after a flush
        # found their receiver down); a worker elsewhere is not waited for (durable)
        seal = getattr(self.sealing, "seals_here", True)
        ok = self._flush(timeout, exports=False, seal=seal)
        self._closed = True
        keep_leftover(self._wal, self.flusher.stop(), ok, self.processing.finish)
        self._wal.close()
        if self.sealing is not None:
            try:
                # the flush above already waited if it could not finish: not again
                self.sealing.close((deadline.left() or 0.0) if ok else 0.0)
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
        with self.buffer.cv:
            # the flusher's capture, a capture inside a saver's transaction, any other
            # database call of a source: all wait on the database
            waits = [self.flusher.store_started or 0.0, *self._calls.values()]
            out = capture_health(self.buffer, waits, self.failures, self.quarantined)
        out["wal_files"] = len(self._wal.pending())
        out["record_failures"] = self.failures.unrecorded_events
        return recording_health(out, self.sealing, shares_failures=self.service is not None)


def _on_event_loop() -> bool:
    """Whether the calling thread is running an asyncio event loop (never block it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
