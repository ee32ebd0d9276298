"""What became of each thread of a projection: done up to a ``seq``, written by another
process, stalled, or set aside.

The one place that decides when a thread counts as *done* (what :meth:`~langgraph_external.
pipeline.runner.ProjectionRunner.flush` waits for) and when it is *set aside*
(quarantined with its error in ``projection_cursors.error`` and ``health()``; ``lgx repair``
retries it). Every projection target — the workspace mirror, each exporter — goes through it.

Example:
    >>> import threading
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> from langgraph_external.pipeline.failures import Failures
    >>> o = ThreadOutcomes(InMemoryLedger(), Failures(), threading.Condition())
    >>> o.expect("t", 3); o.behind(["otlp"])
    1
    >>> o.mark_done("otlp", "t", 3); o.behind(["otlp"])
    0
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Collection
from typing import Any

from langgraph_external.ledger.contract import Projection
from langgraph_external.pipeline.apply import cursor_of
from langgraph_external.pipeline.failures import Failures

logger = logging.getLogger("langgraph_external")

__all__ = ["STALLS_BEFORE_ASIDE", "ThreadOutcomes"]

STALLS_BEFORE_ASIDE = 3
"""Failed writes of one thread's files (while other threads were written) before the
thread is set aside."""


# errors of the whole filesystem (full, over quota, read-only) pass once space is back: a
# thread meeting one is retried, never set aside (another thread's small append may still
# fit in a block it holds, which says nothing about this thread's files)
WHOLE_DISK = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def label_of(proj: Projection) -> str:
    """How log lines name ``proj`` (an exporter's label, else the projection's name)."""
    label = getattr(proj, "label", None)
    return f"{label} export" if label else f"projection {proj.name}"


class ThreadOutcomes:
    """Done positions and quarantine of the threads of a runner's projections.

    Args:
        ledger: where a quarantine is recorded (``set_cursor`` with the error).
        failures: where failures are recorded for ``health()``.
        cv: the runner's condition: done positions are kept (and waited for) under it.
    """

    def __init__(self, ledger: Any, failures: Failures, cv: threading.Condition) -> None:
        self.ledger = ledger
        self.failures = failures
        self.quarantined: dict[str, str] = {}  # "projection:thread" -> error
        self._cv = cv
        self._stalls: dict[str, int] = {}
        self._stall_since: dict[str, float] = {}
        self._last_ok = 0.0
        self._target: dict[str, int] = {}  # thread -> highest seq handed over
        self._done: dict[tuple[str, str], int] = {}  # (projection, thread) -> applied seq

    # -- done ------------------------------------------------------------------------------
    def expect(self, tid: str, seq: int | None) -> None:
        """``tid`` has sealed events up to ``seq`` (under the runner's condition)."""
        if seq is not None and seq > self._target.get(tid, 0):
            self._target[tid] = seq

    def mark_done(self, name: str, tid: str, seq: int) -> None:
        """Projection ``name`` holds ``tid`` up to ``seq``."""
        with self._cv:
            if tid in self._target and seq > self._done.get((name, tid), 0):
                self._done[(name, tid)] = seq
            self._cv.notify_all()

    def held_elsewhere(self, proj: Projection, tid: str) -> None:
        """Another process writes ``tid`` of ``proj`` right now: what that process already
        wrote is done here too (as far as ``proj``'s position says)."""
        if tid not in self._target:
            return
        peek = getattr(proj, "peek", None) or proj.position  # it is not ours now
        try:
            self.mark_done(proj.name, tid, peek(tid))
        except Exception as exc:
            logger.debug("could not read the position of %r: %s", tid, exc)

    def expected(self) -> dict[str, int]:
        """A copy of the handed-over positions (under the runner's condition)."""
        return dict(self._target)

    def pending(self, names: Collection[str], target: dict[str, int]) -> set[str]:
        """Threads of ``target`` some projection of ``names`` does not hold yet (under the
        runner's condition)."""
        return {t for t, s in target.items() for n in names if self._done.get((n, t), 0) < s}

    def behind(self, names: Collection[str]) -> int:
        """How many threads handed over some projection of ``names`` does not hold yet."""
        with self._cv:
            return len(self.pending(names, self._target))

    # -- quarantine ------------------------------------------------------------------------
    def is_aside(self, name: str, tid: str) -> bool:
        """Whether ``tid`` of projection ``name`` is set aside."""
        return f"{name}:{tid}" in self.quarantined

    def aside_threads(self) -> set[str]:
        """Threads some projection set aside."""
        return {k.split(":", 1)[1] for k in self.quarantined}

    def written(self, name: str, tid: str) -> None:
        """``tid`` of ``name`` was written: its stall count starts over."""
        key = f"{name}:{tid}"
        self._stalls.pop(key, None)
        self._stall_since.pop(key, None)
        self._last_ok = time.monotonic()

    def files_failed(self, proj: Projection, tid: str, exc: OSError) -> bool:
        """Writing ``tid``'s files failed (disk full, read-only, vanished). Retried; set
        aside (``True``) after :data:`STALLS_BEFORE_ASIDE` failures while other threads
        were written meanwhile — then this thread's files are the problem — unless the error
        is the whole filesystem's (:data:`WHOLE_DISK`): those pass once space is back."""
        key = f"{proj.name}:{tid}"
        self.failures.add(proj.name, exc)
        self._stalls[key] = self._stalls.get(key, 0) + 1
        if (
            exc.errno not in WHOLE_DISK
            and self._stalls[key] >= STALLS_BEFORE_ASIDE
            and self._last_ok > self._stall_since.get(key, time.monotonic())
        ):
            self.set_aside(proj, tid, exc)
            return True
        self._stall_since.setdefault(key, time.monotonic())
        logger.warning("%s stalled on %r: %s", label_of(proj), tid, exc)
        return False

    def set_aside(self, proj: Projection, tid: str, exc: BaseException) -> None:
        """Quarantine one thread of a projection; the others go on (``lgx repair`` retries)."""
        err = f"{type(exc).__name__}: {exc}"[:2000]
        self.quarantined[f"{proj.name}:{tid}"] = err
        logger.error("%s set thread %r aside: %s", label_of(proj), tid, err)
        try:
            # where its files are settled, not their end: a deferred state.json is still
            # written once lgx repair lets it go on (0: files this process did not write)
            mark = cursor_of(proj, tid, proj.position(tid))
            self.ledger.set_cursor(proj.name, tid, 0 if mark is None else mark, err)
        except Exception:
            logger.debug("could not record the quarantine of %r", tid)
