"""The one projection runner: every view of the ledger — the workspace mirror, each
exporter — tails it the same way (the OpenTelemetry SDK's model: one generic batch
processor, a tiny target contract).

A :class:`ProjectionRunner` runs in a background thread next to a sealer (in the app, its
helper process, or ``lgx worker``), or on the caller's thread (:meth:`~ProjectionRunner.
follow`, ``lgx export ... --follow``). Sealed batches are handed to it in memory
(:meth:`~ProjectionRunner.hand_over`: no read-back when they follow a projection's
position, unless ``fresh=False``); anything else — another process's batches, a
restart, a gap — is read from the ledger, whose ``lagging`` scan (a cursor per projection
and thread, in ``projection_cursors``) finds what is behind every ``poll_interval``. One
writer per thread across processes (the ledger's advisory locks); an error is retried,
never the end of the thread; a thread a projection cannot apply is set aside
(:mod:`~langgraph_external.pipeline.outcomes`).

A target is a :class:`~langgraph_external.ledger.contract.Projection` (``name``,
``position``, ``apply``, ``close``). It may raise :class:`TargetStalled` when its receiver
takes nothing (the pass stops; every thread waits ``backoff`` seconds, an attribute the
target may have), and may have the hooks :mod:`~langgraph_external.pipeline.apply` and
:mod:`~langgraph_external.pipeline.settling` name.

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> p = ProjectionRunner(InMemoryLedger(), [])
    >>> p.start(); p.settle(1.0), p.stop()
    (True, None)
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langgraph_external.errors import LedgerUnavailableError
from langgraph_external.ledger.contract import Projection
from langgraph_external.pipeline.apply import FreshEvents, apply_thread
from langgraph_external.pipeline.background import BackgroundThread, Deadline
from langgraph_external.pipeline.failures import Failures
from langgraph_external.pipeline.outcomes import ThreadOutcomes, label_of
from langgraph_external.pipeline.settling import (
    lagging_threads,
    settle_deferred,
    settle_projection,
)
from langgraph_external.record.events import Event

logger = logging.getLogger("langgraph_external")

__all__ = ["RECHECK_INTERVAL", "ProjectionRunner", "TargetStalled"]

_LINGER = 0.02  # seconds a pass waits to gather more batches (unless a settle is waiting)
_QUIET = 0.2  # seconds without a new batch after which deferred writes are made
RECHECK_INTERVAL = 30.0
"""Seconds between passes that resume threads whose files are ahead of their cursors (a
writer that died before settling them); the first pass of a runner is one, and so is the
pass a :meth:`ProjectionRunner.settle` waits for."""


class TargetStalled(Exception):
    """A target's receiver did not take a batch: it takes nothing now. The thread's cursor
    stays; the pass stops and every thread is tried again after the target's backoff."""


class ProjectionRunner:
    """Feeds ``projections`` from ``ledger`` (see module docs).

    Args:
        ledger: where sealed events are read back and cursors kept.
        projections: the targets to keep up to date.
        poll_interval: seconds between scans for threads a projection is behind on.
        retry_interval: least seconds between attempts after an error.
        failures: where failures are recorded (shared with the sealer).
        linger: seconds a pass waits after a hand-over to gather what follows.
        fresh: hold handed-over events in memory for the projections (else they read the
            ledger; an exporter reads its own lean rows).
        drain_on_stop: finish the threads handed over before stopping.
        track: keep each handed-over thread's position until done (:meth:`flush`).
        name: the background thread's name (``langgraph-external-<name>``).
    """

    def __init__(
        self,
        ledger: Any,
        projections: Sequence[Projection],
        *,
        poll_interval: float = 1.0,
        retry_interval: float = 1.0,
        failures: Failures | None = None,
        linger: float = _LINGER,
        fresh: bool = True,
        drain_on_stop: bool = True,
        track: bool = False,
        name: str = "projector",
    ) -> None:
        self.ledger = ledger
        self.projections = list(projections)
        self.poll_interval = poll_interval
        self.retry_interval = retry_interval
        self.linger = linger
        self.failures = failures if failures is not None else Failures()
        self.name = name
        self._cv = threading.Condition(threading.Lock())
        self.outcomes = ThreadOutcomes(ledger, self.failures, self._cv)
        self.quarantined = self.outcomes.quarantined  # "projection:thread" -> error
        self._drain_on_stop = drain_on_stop
        self._track = track
        self._touched: set[str] = set()
        self._batches = 0  # batches handed over so far
        self._projected = 0  # batches the projections caught up with
        self._settle_at = 0  # a settle waits for a pass at this batch count
        self._settled = 0
        self._force = 0  # flush() calls waiting: no linger
        # the next pass reads the cursors and resumes threads whose files are ahead of
        # theirs (settle, catch_up): what a writer that died left unsettled
        self._recheck = False
        self._fresh = FreshEvents(p.name for p in self.projections) if fresh else None
        self._idle = False
        self._bg = BackgroundThread(name, self._loop, wake=self._notify)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the background thread (a no-op without projections)."""
        if self.projections:
            self._bg.start()

    @property
    def started(self) -> bool:
        """Whether the background thread was started (it may have died since)."""
        return self._bg.started

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        return self._bg.alive

    def revive(self) -> None:
        """Start the thread again if it died (never expected: every error is retried)."""
        self._bg.revive()

    def stop(self, timeout: float = 60.0, *, close: bool = True) -> None:
        """Stop the thread (after the pass it is in); ``close``: close the projections."""
        self._bg.stop(timeout)
        for proj in self.projections if close else ():
            try:
                proj.close()
            except Exception as exc:  # closing must not hide the app's own error
                logger.warning("closing %s failed: %s", proj.name, exc)

    # -- feeding -------------------------------------------------------------------------
    def hand_over(self, events: Sequence[Event]) -> None:
        """Sealed events: the projections apply them (from memory, unless ``fresh=False``)."""
        if not self.projections or not events:
            return
        if self._fresh is not None:
            self._fresh.add(events)
        with self._cv:
            for e in events:
                if self._track:
                    self.outcomes.expect(e.thread_id, e.seq)
                self._touched.add(e.thread_id)
            self._batches += 1
            if self._idle:
                self._cv.notify_all()

    def touch(self, thread_ids: Sequence[str]) -> None:
        """Look at these threads in the next pass (sealed elsewhere)."""
        with self._cv:
            self._touched.update(thread_ids)
            self._batches += 1
            self._cv.notify_all()

    # -- waiting -------------------------------------------------------------------------
    def settle(self, timeout: float | None = 30.0) -> bool:
        """Wait for one full pass after everything handed over so far, in which the
        projections also write what they defer (``state.json``). ``False`` on timeout."""
        if not self.projections:
            return True
        deadline = Deadline(timeout)
        with self._cv:
            self._batches += 1
            target = self._settle_at = self._batches
            self._recheck = True
            self._cv.notify_all()
            while self._projected < target:
                self.revive()
                left = deadline.left()
                if left == 0:
                    return False
                self._cv.wait(0.05 if left is None else min(0.05, left))
        return True

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every projection holds every event handed over so far, per thread.
        ``False`` when that did not happen in time (or the thread is not running)."""
        names = [p.name for p in self.projections]
        deadline = Deadline(timeout)
        with self._cv:
            target = self.outcomes.expected()
            self._touched |= self.outcomes.pending(names, target)
            self._force += 1
            self._cv.notify_all()
            try:
                while self.outcomes.pending(names, target):
                    left = deadline.left()
                    if not self.running or left == 0:
                        return False
                    self._cv.wait(0.1 if left is None else min(left, 0.1))
            finally:
                self._force -= 1
        return True

    def catch_up(self, timeout: float = 600.0) -> tuple[int, list[str]]:
        """Bring every projection up to the ledger on every thread (``lgx repair``).

        Returns how many threads were behind, and the problems of those still behind
        (quarantined: the error that set them aside) when it stopped.
        """
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while True:
            lag = {t for p in self.projections for t, _, _ in self.ledger.lagging(p.name)}
            lag -= self.outcomes.aside_threads()
            seen |= lag
            if not lag:
                break
            self.touch(sorted(lag))
            if not self.settle(max(0.0, deadline - time.monotonic())):
                return len(seen), [f"{t}: still behind" for t in sorted(lag)]
        return len(seen), [f"{k}: {v}" for k, v in sorted(self.quarantined.items())]

    def lag(self) -> int:
        """Batches handed over that the projections have not caught up with."""
        return max(0, self._batches - self._projected)

    def threads_behind(self) -> int:
        """Threads handed over that some projection does not hold yet."""
        return self.outcomes.behind([p.name for p in self.projections])

    # -- the loop ------------------------------------------------------------------------
    def follow(self, stop: threading.Event) -> None:
        """Run the passes on the calling thread until ``stop`` is set (``--follow``)."""
        self._loop(stop)

    def _notify(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def _stopping(self, until: threading.Event | None) -> bool:
        return self._bg.stopping or (until is not None and until.is_set())

    def _deferred(self) -> bool:
        """Whether a projection holds writes back until its threads go quiet."""
        dues = (getattr(proj, "due", None) for proj in self.projections)
        return any(due is not None and due() for due in dues)

    def _hurried(self) -> bool:
        return self._force > 0 or self._settle_at > self._settled

    def _next_pass(
        self, until: threading.Event | None, last_scan: float
    ) -> tuple[set[str], int, bool] | None:
        """Wait for work; the pass's threads, batch count and recheck (``None``: stop)."""
        nap = self.poll_interval if until is None else min(self.poll_interval, 0.2)
        with self._cv:
            self._idle = True
            while (
                not self._stopping(until) and not self._touched and self._projected >= self._batches
            ):
                deferred = self._deferred()
                self._cv.wait(min(nap, _QUIET) if deferred else nap)
                if deferred or time.monotonic() - last_scan >= self.poll_interval:
                    break  # quiet for a while: a pass writes what was deferred
            self._idle = False
            if self._stopping(until) and (not self._drain_on_stop or not self._touched):
                return None
            if self._touched and self.linger:
                linger = Deadline(self.linger)  # gather the next moments' batches into one pass
                while not (self._stopping(until) or self._hurried() or linger.passed()):
                    self._cv.wait(linger.left())
            touched, self._touched = self._touched, set()
            recheck, self._recheck = self._recheck, False
            return touched, self._batches, recheck

    def _loop(self, until: threading.Event | None = None) -> None:
        last_scan = last_recheck = 0.0
        while True:
            job = self._next_pass(until, last_scan)
            if job is None:
                return
            touched, target, recheck = job
            if time.monotonic() - last_recheck >= RECHECK_INTERVAL:
                recheck, last_recheck = True, time.monotonic()
            scan = recheck or time.monotonic() - last_scan >= self.poll_interval
            ok, failed = True, set[str]()
            for proj in self.projections:
                try:
                    done, again = self._project(proj, touched, scan, recheck)
                    ok, failed = ok and done, failed | again
                except Exception as exc:  # never let the thread die: retried
                    self.failures.add(proj.name, exc)
                    logger.warning("%s deferred (%s); retrying", label_of(proj), exc)
                    ok = False
            if scan:
                last_scan = time.monotonic()
            if ok and self._settle_at <= self._settled:
                ok = settle_deferred(self.ledger, self.projections, self.failures, bool(touched))
            if ok and self._settled < self._settle_at <= target:
                for proj in self.projections:
                    ok = settle_projection(self.ledger, proj, self.failures) and ok
                if ok:
                    self._settled = target
            with self._cv:
                if ok:
                    self._projected = max(self._projected, target)
                else:
                    self._touched |= touched | failed
                    self._recheck = self._recheck or recheck
                self._cv.notify_all()
                if not ok:
                    self._nap(self._retry_after(), until)

    def _nap(self, seconds: float, until: threading.Event | None) -> None:
        """Wait ``seconds`` before a retry (under the condition), less when stopped without
        draining; ``until`` is polled every 0.2 s (it does not notify the condition)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if (self._bg.stopping and not self._drain_on_stop) or (
                until is not None and until.is_set()
            ):
                return
            self._cv.wait(left if until is None else min(left, 0.2))

    def _retry_after(self) -> float:
        backoff = max((float(getattr(p, "backoff", 0.0)) for p in self.projections), default=0)
        return max(self.retry_interval, backoff)

    # -- one projection --------------------------------------------------------------------
    def _project(
        self, proj: Projection, touched: set[str], scan: bool, recheck: bool
    ) -> tuple[bool, set[str]]:
        """Bring ``proj`` up to the ledger on ``touched`` (and lagging) threads; whether it
        did, and the threads to try again. ``recheck``: see :func:`.apply.apply_thread`."""
        todo = dict.fromkeys(sorted(touched))
        cursors: dict[str, int] = {}  # lagging thread -> its recorded cursor
        if scan:
            try:
                cursors = lagging_threads(self.ledger, proj, recheck)
            except Exception as exc:
                logger.debug("projection scan failed: %s", exc)
                return False, set()
            todo.update(dict.fromkeys(cursors))
        tids = _located(proj, self.ledger, todo, self.outcomes.is_aside)
        locks = getattr(self.ledger, "projection_locks", None)
        if locks is None or not tids:
            return self._each(
                proj,
                tids,
                lambda tid: self.project_thread(proj, tid, cursor=cursors.get(tid), resume=recheck),
            )
        try:
            # one statement takes the pass's thread locks, one records the cursors and
            # releases them: two round trips per pass, not four per thread
            with locks(proj.name, tids) as held:
                return self._each(
                    proj,
                    tids,
                    lambda tid: self._project_held(proj, tid, held, cursors.get(tid), recheck),
                )
        except (LedgerUnavailableError, ConnectionError) as exc:
            self.failures.add(proj.name, exc)
            return False, set(tids)

    def _project_held(
        self, proj: Projection, tid: str, held: Any, cursor: int | None, resume: bool
    ) -> int | None:
        if tid not in held.threads:
            self.outcomes.held_elsewhere(proj, tid)
            return None  # another process is writing it: look again shortly
        revalidate = getattr(proj, "revalidate", None) or getattr(proj, "forget", None)
        if revalidate is not None:
            revalidate(tid)  # another process may have written since we last looked
        pos, mark = self._apply(proj, tid, cursor, resume)
        if mark is not None:
            held.positions[tid] = mark
        return pos

    def _each(
        self, proj: Projection, tids: list[str], run: Callable[[str], int | None]
    ) -> tuple[bool, set[str]]:
        """Run ``run`` on each thread; whether all went through, and the threads to try
        again (all the rest, once the target stalled)."""
        failed: set[str] = set()
        for i, tid in enumerate(tids):
            try:
                if run(tid) is None:
                    failed.add(tid)  # another process is writing it: look again shortly
                    continue
            except TargetStalled:  # the receiver takes nothing now: every thread waits
                return False, failed | set(tids[i:])
            except OSError as exc:  # disk full, read-only, vanished: retried
                if not self.outcomes.files_failed(proj, tid, exc):
                    failed.add(tid)
                continue
            except (LedgerUnavailableError, ConnectionError) as exc:
                self.failures.add(proj.name, exc)
                failed.add(tid)
            except Exception as exc:  # a value it cannot apply: set the thread aside
                self.outcomes.set_aside(proj, tid, exc)
                continue
            self.outcomes.written(proj.name, tid)
        return not failed, failed

    def project_thread(
        self, proj: Projection, tid: str, *, cursor: int | None = None, resume: bool = False
    ) -> int | None:
        """Apply every event of ``tid`` the projection lacks; returns its new position.

        Several processes may feed one view: a lock in the ledger lets one of them write a
        thread at a time, and the holder reads the position afresh. Returns ``None`` when
        another process holds the thread (it is tried again later). ``cursor`` and
        ``resume``: see :func:`~langgraph_external.pipeline.apply.apply_thread`.
        """
        lock = getattr(self.ledger, "projection_lock", None)
        with contextlib.nullcontext(True) if lock is None else lock(proj.name, tid) as held:
            if not held:
                self.outcomes.held_elsewhere(proj, tid)
                return None
            forget = getattr(proj, "forget", None)
            if forget is not None and lock is not None:
                forget(tid)  # another process may have written since we last looked
            pos, mark = self._apply(proj, tid, cursor, resume)
            if mark is not None:
                self.ledger.set_cursor(proj.name, tid, mark, None)
            return pos

    def _apply(
        self, proj: Projection, tid: str, cursor: int | None, resume: bool
    ) -> tuple[int, int | None]:
        fresh = self._fresh
        take = None if fresh is None else (lambda pos: fresh.take(proj.name, tid, pos))
        pos, mark = apply_thread(self.ledger, proj, tid, take, cursor=cursor, resume=resume)
        self.outcomes.mark_done(proj.name, tid, pos)
        return pos, mark


def _located(
    proj: Projection, ledger: Any, todo: Iterable[str], aside: Callable[[str, str], bool]
) -> list[str]:
    """The pass's threads not set aside, once ``proj`` asked the ledger where their files
    go in one query (else :func:`.apply.apply_thread` asks per thread)."""
    tids = [t for t in todo if not aside(proj.name, t)]
    locate = getattr(proj, "locate", None)
    if locate is not None and tids:
        with contextlib.suppress(LedgerUnavailableError, ConnectionError):
            locate(ledger, tids)
    return tids
