"""The flusher: captures buffered events that no checkpoint's capture took, in one
transaction for all threads, after ``linger``; retries every error; sets aside events the
ledger refuses (not an outage), with an error event for their thread.

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> from langgraph_external.pipeline.pipeline import Pipeline
    >>> with Pipeline(InMemoryLedger()) as p:
    ...     p.flusher.thread is not None and p.flusher.thread.is_alive()
    True
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from langgraph_external.errors import RecordingError
from langgraph_external.pipeline.background import BackgroundThread
from langgraph_external.pipeline.buffer import Entry, EventBuffer
from langgraph_external.pipeline.failures import Failures
from langgraph_external.pipeline.seal import is_poison, refusal
from langgraph_external.pipeline.wal import WriteAheadLog
from langgraph_external.record.capture import Capture
from langgraph_external.record.events import Event

logger = logging.getLogger("langgraph_external")

__all__ = ["Flusher"]

Captured = Callable[[Sequence[Capture], Sequence[Entry]], None]


class Flusher:
    """The background thread that captures what waits in ``buffer`` (see module docs).

    Args:
        buffer: the capturing side's buffer.
        ledger: where captures go (``ledger.capture``).
        wal: the write-ahead log (refused events are kept beside it).
        failures, quarantined: where failures and set-aside threads are reported.
        pick: what the flusher may capture now (under the buffer's lock).
        captured: called once captures committed.
        resolve_doubts: checks a doubtful thread's buffered events against the ledger.
        process: the processors (the refusal's error event goes through them).
        linger, retry_interval: seconds to wait for captures to ride, and between retries.
    """

    def __init__(
        self,
        buffer: EventBuffer,
        ledger: Any,
        wal: WriteAheadLog,
        *,
        failures: Failures,
        quarantined: dict[str, str],
        pick: Callable[[], list[Entry]],
        captured: Captured,
        resolve_doubts: Callable[[str], None],
        process: Callable[[Event], Event],
        linger: float,
        finish: Callable[[Sequence[Event]], list[Event]] = list,
        retry_interval: float,
    ) -> None:
        self.buffer = buffer
        self.ledger = ledger
        self.wal = wal
        self.failures = failures
        self.quarantined = quarantined
        self.pick = pick
        self.captured = captured
        self.resolve_doubts = resolve_doubts
        self.process = process
        self.finish = finish  # deferred events processed before they go to a file
        self.linger = linger
        self.retry_interval = retry_interval
        self.store_started: float | None = None
        self._bg = BackgroundThread("flusher", self._loop, wake=self._stopping).start()

    @property
    def thread(self) -> threading.Thread | None:
        """The flusher's thread."""
        return self._bg.thread

    def revive(self) -> None:
        """Start the thread again if it died (never expected: it retries every error, but
        a stalled recording must not wait on a dead thread)."""
        self._bg.revive()

    def stop(self) -> list[Entry]:
        """Stop the thread once it captured what it could; returns what is still buffered."""
        self._bg.stop(timeout=60)
        with self.buffer.cv:
            return self.buffer.entries()

    def _stopping(self) -> None:
        b = self.buffer
        with b.cv:  # the loop reads the buffer's flag, under its lock
            b.stopping = True
            b.cv.notify_all()
            b.fcv.notify_all()

    def capture_now(self, tid: str) -> None:
        """Strict mode: capture ``tid``'s buffer on the caller's thread or raise."""
        b = self.buffer
        with b.cv:
            entries, captures = b.collect(lambda: b.flushable(tid, True, time.monotonic()))
        if not entries:
            return
        try:
            self._store(entries, captures)
        except Exception as exc:
            raise RecordingError(f"could not record events of thread {tid!r}: {exc}") from exc
        finally:
            with b.cv:
                b.stored(entries)

    def _loop(self) -> None:
        b = self.buffer
        while True:
            with b.cv:
                b.flusher_idle = True
                while not b.count and not b.stopping:
                    b.fcv.wait(1.0)
                b.flusher_idle = False
                if b.stopping and not b.count:
                    return
                force = b.force > 0 or b.stopping
            if not force and self.linger:
                time.sleep(self.linger)  # let captures carry what they can; batch the rest
            for tid in list(b.doubtful):
                try:
                    self.resolve_doubts(tid)
                except Exception as exc:  # the ledger is still away: the thread waits
                    logger.debug("could not check thread %r against the ledger: %s", tid, exc)
            with b.cv:
                batch, captures = b.collect(self.pick)
            if not batch:
                with b.cv:
                    if b.stopping and not b.in_flight():
                        return
                    b.fcv.wait(0.05)  # events waiting for their checkpoint
                continue
            try:
                self._store(batch, captures)
            except Exception as exc:
                logger.warning("langgraph-external: recording deferred (%s); retrying", exc)
                with b.cv:
                    b.stored(batch)
                    if b.stopping:
                        return
                    b.fcv.wait(self.retry_interval)  # back off
            else:
                with b.cv:
                    b.stored(batch)

    def _store(self, entries: list[Entry], captures: list[Capture]) -> None:
        """Capture ``entries`` in one transaction; on failure they go back to the buffer,
        and values the ledger refuses (not an outage) are set aside per thread."""
        b = self.buffer
        self.store_started = time.monotonic()
        try:
            self.ledger.capture(captures)
        except Exception as exc:
            self.store_started = None
            by_thread: dict[str, list[Entry]] = {}
            for en in entries:
                by_thread.setdefault(en.event.thread_id, []).append(en)
            if is_poison(exc) and len(captures) > 1:
                # find the thread whose values the ledger refuses; the others go on
                for c in captures:
                    ens = by_thread[c.thread_id]
                    try:
                        self.ledger.capture([c])
                    except Exception as inner:
                        if is_poison(inner):
                            self._set_aside(c.thread_id, ens, inner)
                        else:
                            with b.cv:
                                b.rebuffer(c.thread_id, list(ens))
                        continue
                    self.captured([c], ens)
                return
            if is_poison(exc):
                self._set_aside(captures[0].thread_id, entries, exc)
                return
            with b.cv:
                for c in captures:  # one per thread (collect)
                    b.rebuffer(c.thread_id, by_thread[c.thread_id])
                    b.doubt(c.thread_id, [(c.event_id, {e.event_id for e in c.riders})])
                if b.ledger_down_since is None:
                    b.ledger_down_since = time.monotonic()
                b.cv.notify_all()
            self.failures.add("ledger", exc, len(entries))
            raise
        self.store_started = None
        self.captured(captures, entries)

    def _set_aside(self, tid: str, entries: Sequence[Entry], exc: BaseException) -> None:
        """Set aside events the ledger refuses, with an error event for their thread."""
        why = f"{type(exc).__name__}: {exc}"
        path = self.wal.quarantine(self.finish([en.event for en in entries]), why)
        self.failures.add("ledger", exc, len(entries))
        self.quarantined[f"ledger:{tid}"] = why
        logger.error(
            "langgraph-external: %d events of thread %r refused by the ledger (%s); kept in %s",
            len(entries),
            tid,
            exc,
            path,
        )
        self.wal.settled([en.wal for en in entries if en.wal])
        note = self.process(refusal(tid, why, path, events=len(entries)))
        capture = self.buffer.riding(Capture("events", tid, riders=[note], event_id=note.event_id))
        try:
            self.ledger.capture([capture])
            self.captured([capture], [])
        except Exception:
            logger.debug("could not record the refusal of thread %r", tid)
        with self.buffer.cv:
            self.buffer.cv.notify_all()
