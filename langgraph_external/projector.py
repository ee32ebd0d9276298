"""The projection runner: every view of the ledger (the workspace mirror, exporters) tails
it the same way.

A :class:`Projector` runs in a background thread next to a sealer (in the app, its helper
process, or ``lgx worker``). Sealed batches are handed to it in memory (:meth:`hand_over`:
no read-back when they follow a projection's position); anything else — another
process's batches, a restart, a gap — is read from the ledger, whose ``lagging`` scan (a
cursor per projection and thread, kept in the ledger) finds what is behind every
``poll_interval``. One writer per thread across processes (the ledger's advisory locks);
a thread a projection cannot apply is set aside (quarantined with its error, the others go
on; ``lgx repair`` retries it); an error is retried, never the end of the thread.

Example:
    >>> from langgraph_external.sinks.memory import InMemoryLedger
    >>> p = Projector(InMemoryLedger(), [])
    >>> p.start(); p.settle(1.0), p.stop()
    (True, None)
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langgraph_external.errors import LedgerUnavailableError
from langgraph_external.events import Event
from langgraph_external.sinks.base import Projection

logger = logging.getLogger("langgraph_external")

__all__ = ["Failure", "Projector"]

_LINGER = 0.02  # seconds a pass waits to gather more batches (unless a settle is waiting)
_QUIET = 0.2  # seconds without a new batch after which deferred writes are made
_FRESH_MAX = 20_000  # sealed events held for projections before they read them back
# errors of the whole filesystem (full, over quota, read-only): every thread meets them
# sooner or later, whatever its files, and they pass once space is back — a thread that
# meets one waits and is retried, it is never set aside (another thread's small append
# may still fit in a block it holds, which says nothing about this thread's files)
_WHOLE_DISK = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


@dataclass
class Failure:
    """One failed attempt (a store, a pass), kept for ``health()``."""

    where: str
    error: str
    events: int
    at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


class Failures(list[Failure]):
    """The last 100 failures (a list), shared by a capturing side, a sealer and a projector."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def add(self, where: str, exc: BaseException, n: int = 0) -> None:
        """Record one failure (thread-safe)."""
        with self._lock:
            self.append(Failure(where, f"{type(exc).__name__}: {exc}", n))
            del self[:-100]

    def as_dicts(self) -> list[dict[str, Any]]:
        """The failures as plain dicts (``health()``)."""
        with self._lock:
            return [f.__dict__ for f in self]


class Projector:
    """Feeds ``projections`` from ``ledger`` in a background thread (see module docs).

    Args:
        ledger: where sealed events are read back and cursors kept.
        projections: the views to keep up to date.
        poll_interval: seconds between scans for threads a projection is behind on.
        retry_interval: seconds between attempts after an error.
        failures: where failures are recorded (shared with the sealer).
    """

    def __init__(
        self,
        ledger: Any,
        projections: Sequence[Projection],
        *,
        poll_interval: float = 1.0,
        retry_interval: float = 1.0,
        failures: Failures | None = None,
    ) -> None:
        self.ledger = ledger
        self.projections = list(projections)
        self.poll_interval = poll_interval
        self.retry_interval = retry_interval
        self.failures = failures if failures is not None else Failures()
        self.quarantined: dict[str, str] = {}  # "projection:thread" -> error
        self._stalls: dict[str, int] = {}
        self._stall_since: dict[str, float] = {}
        self._last_ok = 0.0
        self._cv = threading.Condition(threading.Lock())
        self._touched: set[str] = set()
        self._batches = 0  # batches handed over so far
        self._projected = 0  # batches the projections caught up with
        self._settle_at = 0  # a settle waits for a pass at this batch count
        self._settled = 0
        # the next pass reads the cursors and resumes threads whose files are ahead of
        # theirs (settle, catch_up): what a writer that died left unsettled
        self._recheck = False
        self._fresh: dict[str, dict[str, list[Event]]] = {p.name: {} for p in self.projections}
        self._fresh_count = 0
        self._idle = False
        self._stop = False
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the background thread (a no-op without projections)."""
        if self.projections and self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="langgraph-external-projector", daemon=True
            )
            self._thread.start()

    def revive(self) -> None:
        """Start the thread again if it died (never expected: every error is retried)."""
        if self._thread is not None and not self._thread.is_alive() and not self._stop:
            logger.error("langgraph-external: the projector thread died; starting it again")
            self._thread = None
            self.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the thread (after the pass it is in) and close the projections."""
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
        for proj in self.projections:
            try:
                proj.close()
            except Exception as exc:  # closing must not hide the app's own error
                logger.warning("closing %s failed: %s", proj.name, exc)

    # -- feeding -------------------------------------------------------------------------
    def hand_over(self, events: Sequence[Event]) -> None:
        """Sealed events, for the projections to apply without reading them back."""
        if not self.projections or not events:
            return
        with self._cv:
            if self._fresh_count > _FRESH_MAX:  # far behind: the ledger is read instead
                for fresh in self._fresh.values():
                    fresh.clear()
                self._fresh_count = 0
            for fresh in self._fresh.values():
                for e in events:
                    fresh.setdefault(e.thread_id, []).append(e)
            self._fresh_count += len(events)
            self._touched.update(e.thread_id for e in events)
            self._batches += 1
            if self._idle:
                self._cv.notify_all()

    def touch(self, thread_ids: Sequence[str]) -> None:
        """Look at these threads in the next pass (sealed elsewhere)."""
        with self._cv:
            self._touched.update(thread_ids)
            self._batches += 1
            self._cv.notify_all()

    def settle(self, timeout: float | None = 30.0) -> bool:
        """Wait for one full pass after everything handed over so far, in which the
        projections also write what they defer (``state.json``). ``False`` on timeout."""
        if not self.projections:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            self._batches += 1
            target = self._settle_at = self._batches
            self._recheck = True
            self._cv.notify_all()
            while self._projected < target:
                self.revive()
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                self._cv.wait(0.05 if deadline is None else min(0.05, deadline - time.monotonic()))
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
            lag -= {k.split(":", 1)[1] for k in self.quarantined}
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

    # -- the loop ------------------------------------------------------------------------
    def _loop(self) -> None:
        last_scan = 0.0
        while True:
            with self._cv:
                self._idle = True
                while not self._stop and not self._touched and self._projected >= self._batches:
                    deferred = self._deferred()
                    self._cv.wait(_QUIET if deferred else self.poll_interval)
                    if deferred or time.monotonic() - last_scan >= self.poll_interval:
                        break  # quiet for a while: a pass writes what was deferred
                self._idle = False
                if self._stop and not self._touched:
                    return
                end = time.monotonic() + _LINGER
                while not self._stop and self._settle_at <= self._settled:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)  # gather the next few ms of batches into one pass
                touched, self._touched = self._touched, set()
                target = self._batches
                recheck, self._recheck = self._recheck, False
            scan = recheck or time.monotonic() - last_scan >= self.poll_interval
            ok = True
            for proj in self.projections:
                try:
                    ok = self._project(proj, touched, scan, recheck) and ok
                except Exception as exc:  # never let the thread die: retried
                    self.failures.add(proj.name, exc)
                    logger.warning("projection %s deferred (%s); retrying", proj.name, exc)
                    ok = False
            if scan:
                last_scan = time.monotonic()
            if ok and not touched and self._settle_at <= self._settled:
                # a quiet pass: what the projections deferred (a thread's state.json is
                # rewritten at most every few seconds while it is busy) is written now,
                # not at the next flush, which a long-running worker never gets
                for proj in self.projections:
                    due = getattr(proj, "due", None)
                    if due is not None and due():
                        ok = self._settle_projection(proj) and ok
            if ok and self._settled < self._settle_at <= target:
                for proj in self.projections:
                    ok = self._settle_projection(proj) and ok
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
                with self._cv:
                    self._cv.wait(self.retry_interval)

    def _deferred(self) -> bool:
        """Whether a projection holds writes back until its threads go quiet."""
        for proj in self.projections:
            due = getattr(proj, "due", None)
            if due is not None and due():
                return True
        return False

    def _project(
        self, proj: Projection, touched: set[str], scan: bool, recheck: bool = False
    ) -> bool:
        """Bring ``proj`` up to the ledger on ``touched`` threads (and lagging ones).

        ``recheck``: resume threads whose files are ahead of their cursors (see
        :meth:`_apply`)."""
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
            return False

    def _lagging(self, proj: Projection, recheck: bool) -> dict[str, int]:
        """Threads the ledger says ``proj`` is behind on, with their recorded cursors.

        Of a projection that settles after it applies (it has ``resume``), left out: a
        thread whose files hold the ledger's head and whose settling is pending here
        (:meth:`_settle_projection` records it), and, unless ``recheck``, any thread whose
        files hold the head (nothing to read; its writer may be settling it).
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
        pos, held.positions[tid] = self._apply(
            proj, tid, record=False, cursor=cursor, resume=resume
        )
        return pos

    def _each(self, proj: Projection, tids: list[str], run: Callable[[str], int | None]) -> bool:
        ok = True
        for tid in tids:
            key = f"{proj.name}:{tid}"
            try:
                if run(tid) is None:
                    ok = False  # another process is writing it: look again shortly
                    continue
            except OSError as exc:  # disk full, read-only, vanished: retried
                self.failures.add(proj.name, exc)
                self._stalls[key] = self._stalls.get(key, 0) + 1
                if (
                    exc.errno not in _WHOLE_DISK
                    and self._stalls[key] >= 3
                    and self._last_ok > self._stall_since.get(key, time.monotonic())
                ):
                    # other threads were written meanwhile: this thread's files are the problem
                    self._set_aside(proj, tid, exc)
                    continue
                self._stall_since.setdefault(key, time.monotonic())
                logger.warning("projection %s stalled on %r: %s", proj.name, tid, exc)
                ok = False
                continue
            except (LedgerUnavailableError, ConnectionError) as exc:
                self.failures.add(proj.name, exc)
                ok = False
            except Exception as exc:  # a value it cannot apply: set the thread aside
                self._set_aside(proj, tid, exc)
                continue
            self._stalls.pop(key, None)
            self._stall_since.pop(key, None)
            self._last_ok = time.monotonic()
        return ok

    def _settle_projection(self, proj: Projection) -> bool:
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
        except Exception as exc:  # a derived view: reported, retried by the next settle
            self.failures.add(proj.name, exc)
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
        ``cursor`` and ``resume``: see :meth:`_apply`.
        """
        lock = getattr(self.ledger, "projection_lock", None)
        if lock is None:
            return self._apply(proj, tid, cursor=cursor, resume=resume)[0]
        with lock(proj.name, tid) as held:
            if not held:
                return None
            forget = getattr(proj, "forget", None)
            if forget is not None:
                forget(tid)  # another process may have written since we last looked
            return self._apply(proj, tid, cursor=cursor, resume=resume)[0]

    def _apply(
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
        ``state.json``). With ``resume`` (a settle, ``lgx repair``) the projection
        finishes that now; otherwise the cursor is not moved past it.
        """
        pos = proj.position(tid)
        finish = getattr(proj, "resume", None)
        unsettled = finish is not None and cursor is not None and cursor < pos
        if unsettled and resume and finish is not None:
            finish(tid)
            unsettled = False
        fresh = self._take_fresh(proj, tid, pos)
        while True:
            # every event held in memory follows pos: apply them and stop (what is sealed
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

    def _take_fresh(self, proj: Projection, tid: str, pos: int) -> list[Event] | None:
        """The sealed events right after ``pos`` held in memory, or ``None``."""
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
                return None  # a gap: sealed elsewhere or not yet settled; read the ledger
            run.append(e)
        return run
