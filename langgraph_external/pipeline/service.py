"""The sealing service: a sealer and the projection runner, side by side in one process.

The same service runs wherever sealing runs: in a background thread of the app
(``sealing="thread"``), in the helper process the app starts and stops with itself (the
default), or in ``lgx worker`` processes. It seals captures in batches
(:class:`~langgraph_external.pipeline.seal.Sealer`) when woken — by the app capturing, by a
``NOTIFY``, or every ``poll_interval`` — and hands what it sealed to the projections
(:class:`~langgraph_external.pipeline.runner.ProjectionRunner`) and to listeners.

Example:
    >>> from langgraph_external.record.capture import Capture
    >>> from langgraph_external.record.events import Event
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> ledger = InMemoryLedger()
    >>> with SealingService(ledger) as service:
    ...     ledger.capture([Capture("events", "t", riders=[Event.new("error", "t")])])
    ...     service.flush(FlushRequest(["t"], service.horizon(), 5.0))
    True
    >>> [(e.kind, e.seq) for e in ledger.events]
    [('error', 1)]
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external.errors import LedgerUnavailableError
from langgraph_external.ledger.contract import Projection
from langgraph_external.pipeline.backend import FlushRequest
from langgraph_external.pipeline.background import BackgroundThread, Deadline
from langgraph_external.pipeline.failures import Failures
from langgraph_external.pipeline.runner import ProjectionRunner
from langgraph_external.pipeline.seal import Sealer, SealResult
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event
from langgraph_external.record.processors import Processor

logger = logging.getLogger("langgraph_external")

__all__ = ["SEAL_LINGER", "SealingService", "unsealed_health"]

SEAL_LINGER = 0.2
"""Seconds a sealer's wake-up gathers captures before it seals them (see ``linger``)."""

Listener = Callable[[Sequence[Event]], None]


class SealingService:
    """Seals captures and feeds projections, in background threads (see module docs).

    Args:
        ledger: the ledger holding the captures.
        projections: views fed from the ledger (workspace, exporters).
        cipher, encrypt, serde, processors: see :class:`~langgraph_external.pipeline.seal.Sealer`.
        linger: seconds a wake-up waits to gather more captures into one batch (cut short
            when someone waits in :meth:`flush` or :meth:`close`). Each batch has fixed
            costs — a transaction, its reads of the saver's rows, a projection pass per
            thread — so a busy app's captures are sealed a few hundred milliseconds after
            they commit rather than one by one: about a fifth less CPU for the whole
            record (docs/benchmarks.md, "Batching the sealer").
        poll_interval: seconds between looks when nothing wakes it (captures of other
            processes; projections' lagging scans).
        retry_interval: seconds between attempts while the ledger is unavailable.
        quarantine_dir: where captures the ledger refuses are kept for a person.
        signer: signs the log's head while anything is sealed, and once more at
            :meth:`close` (a :class:`~langgraph_external.proof.heads.HeadSigner`).
    """

    def __init__(
        self,
        ledger: Any,
        *,
        projections: Sequence[Projection] = (),
        cipher: WorkspaceCipher | None = None,
        encrypt: bool = True,
        serde: SerializerProtocol | None = None,
        processors: Sequence[Processor] = (),
        linger: float = SEAL_LINGER,
        poll_interval: float = 1.0,
        retry_interval: float = 1.0,
        quarantine_dir: Any = None,
        failures: Failures | None = None,
        signer: Any = None,
    ) -> None:
        self.ledger = ledger
        self.signer = signer
        self.failures = failures if failures is not None else Failures()
        self.linger = linger
        self.poll_interval = poll_interval
        self.retry_interval = retry_interval
        self.sealer = Sealer(
            ledger,
            cipher=cipher,
            encrypt=encrypt,
            serde=serde,
            processors=processors,
            on_sealed=self._on_sealed,
            quarantine_dir=quarantine_dir,
            unrecorded=self.failures.unrecorded,
        )
        self.projector = ProjectionRunner(
            ledger,
            projections,
            poll_interval=poll_interval,
            retry_interval=retry_interval,
            failures=self.failures,
        )
        self._listeners: list[Listener] = []
        self._cv = threading.Condition(threading.Lock())
        self._wakes = 0  # wake-ups asked for
        self._hurry = 0  # flush()/close() calls waiting: no linger
        self._drained = 0  # wake-ups served by a drain that ended with nothing sealable
        self._down_since: float | None = None
        self._busy_since: float | None = None  # a batch waiting on the database
        self._pending: tuple[float, dict[str, Any]] | None = None  # (when, ledger.pending())
        self._bg = BackgroundThread("sealer", self._loop, wake=self._notify)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> SealingService:
        """Start the sealer and projector threads."""
        self._bg.start()
        self.projector.start()
        return self

    def __enter__(self) -> SealingService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: float = 30.0) -> bool:
        """Seal what is sealable, let projections settle, stop. ``False``: not all done."""
        deadline = Deadline(timeout)
        ok = self._drain(deadline)
        ok = self.projector.settle(deadline.left()) and ok
        if self.signer is not None:
            self.signer.maybe_sign(force=True)  # the last head covers all that was sealed
        self._bg.stop(timeout=60)
        self.projector.stop()
        return ok

    def revive(self) -> None:
        """Start a background thread again if it died (never expected)."""
        self._bg.revive()
        self.projector.revive()

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn`` with every sealed batch (an exporter's wake-up, testing helpers)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        """Stop calling ``fn``."""
        if fn in self._listeners:
            self._listeners.remove(fn)

    # -- waking and waiting ----------------------------------------------------------------
    def _notify(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def wake(self) -> None:
        """Captures were committed: seal soon."""
        with self._cv:
            self._wakes += 1
            self._cv.notify_all()

    def horizon(self) -> str:
        """A position in commit order every capture committed so far is below."""
        horizon = getattr(self.ledger, "horizon", None)
        return horizon() if horizon is not None else ""

    def flush(self, request: FlushRequest) -> bool:
        """Wait until the captures of the request's threads committed before its
        horizon are sealed and the projections settled on them. ``False`` if that did
        not happen in time. (The exporters attached here flush themselves.)"""
        deadline = Deadline(request.timeout)
        if not self._drain(deadline, request.threads, request.horizon):
            return False
        return self.projector.settle(deadline.left())

    def _drain(
        self,
        deadline: Deadline,
        threads: Collection[str] | None = None,
        horizon: str | None = None,
    ) -> bool:
        with self._cv:
            self._hurry += 1  # no linger while someone waits here
            self._cv.notify_all()
        try:
            while True:
                with self._cv:
                    self._wakes += 1
                    target = self._wakes
                    self._cv.notify_all()
                    while self._drained < target:
                        if not self._bg.started or self._bg.stopping:
                            break  # not running (closing): drain on this thread below
                        self.revive()
                        if deadline.passed():
                            return False
                        self._cv.wait(0.05)
                if not self._bg.started or self._bg.stopping:
                    try:
                        while self.sealer.seal_batch():
                            if deadline.passed():
                                return False
                    except Exception as exc:
                        self.failures.add("sealer", exc)
                        return False
                try:
                    left = self._unsealed(threads, horizon)
                except Exception as exc:  # the ledger is away: try again until the deadline
                    self.failures.add("sealer", exc)
                    left = 1
                if not left or deadline.passed():
                    return not left
                time.sleep(0.01)  # older transactions still running: their captures come next
        finally:
            with self._cv:
                self._hurry -= 1

    def _unsealed(self, threads: Collection[str] | None, horizon: str | None) -> int:
        unsealed = getattr(self.ledger, "unsealed", None)
        if threads is not None and horizon is not None and unsealed is not None:
            return int(unsealed(threads, horizon))
        pending = getattr(self.ledger, "pending", None)
        if pending is None:
            return 0
        info = pending()
        return int(info["captures"]) - int(info["behind_running_transactions"])

    # -- the loop --------------------------------------------------------------------------
    def _loop(self) -> None:
        busy = False  # the last look sealed something: more is likely on its way
        while True:
            with self._cv:
                if self._drained >= self._wakes and not self._bg.stopping:
                    # a busy app's wake-ups are spaced out: look again soon after a batch
                    self._cv.wait(self.linger * 2 if busy else self.poll_interval)
                if self._bg.stopping:
                    return
            if self.linger:
                with self._cv:  # gather more captures into the batch, unless someone waits
                    self._cv.wait_for(lambda: self._bg.stopping or self._hurry > 0, self.linger)
            with self._cv:
                target = self._wakes
                self._busy_since = time.monotonic()
            busy = False
            try:
                # a batch below the limits took all there was: the next waits a linger
                # (sealing each late capture at once costs a transaction and its reads)
                while self.sealer.seal_batch():
                    busy = True
                    with self._cv:
                        self._busy_since = time.monotonic()
                        if self._bg.stopping or not self.sealer.full:
                            break
                self._look_pending()
                if self.signer is not None:
                    self.signer.maybe_sign()
                with self._cv:
                    self._busy_since = None
                    self._down_since = None
                    self._drained = max(self._drained, target)
                    self._cv.notify_all()
            except Exception as exc:  # the ledger is away, or a bug: retried, never fatal
                self.failures.add("sealer", exc)
                logger.warning("langgraph-external: sealing deferred (%s); retrying", exc)
                with self._cv:
                    self._busy_since = None
                    if isinstance(exc, (LedgerUnavailableError, ConnectionError)):
                        self._down_since = self._down_since or time.monotonic()
                    self._cv.wait(self.retry_interval)

    def _look_pending(self) -> None:
        """Count the captures still waiting (for ``health()``), at most once a second."""
        pending = getattr(self.ledger, "pending", None)
        stale = self._pending is None or time.monotonic() - self._pending[0] >= 1.0
        if pending is not None and stale:
            self._pending = (time.monotonic(), pending())

    def _on_sealed(self, result: SealResult) -> None:
        if self.signer is not None:
            self.signer.note_sealed()
        self.projector.hand_over(result.events)
        for fn in list(self._listeners):
            try:
                fn(result.events)
            except Exception:
                logger.exception("a listener of sealed events failed")

    # -- health ----------------------------------------------------------------------------
    def health(self, *, ask_ledger: bool = False) -> dict[str, Any]:
        """Sealing and projection health; pending captures as of the sealer's last look
        (``ask_ledger``: count them now, a query that waits for the database)."""
        now = time.monotonic()
        out: dict[str, Any] = {
            "sealed_captures": self.sealer.sealed_captures,
            "sealed_events": self.sealer.sealed_events,
            "sealer_wait_seconds": round(now - self._busy_since, 3) if self._busy_since else 0.0,
            "sealer_down_seconds": round(now - self._down_since, 3) if self._down_since else 0.0,
            "projection_lag_batches": self.projector.lag(),
            "quarantined": {
                **dict(self.projector.quarantined),
                **{f"ledger:{t}": why for t, why in self.sealer.refused.items()},
            },
            "failures": self.failures.as_dicts(),
            "record_failures": self.failures.unrecorded_events,
        }
        if self.signer is not None:
            out["signing"] = self.signer.health()
        pending = getattr(self.ledger, "pending", None)
        if ask_ledger and pending is not None:
            try:
                self._pending = (time.monotonic(), pending())
            except Exception as exc:
                out["pending_error"] = f"{type(exc).__name__}: {exc}"
        if self._pending is not None:  # as of the sealer's last look (never blocks here)
            out.update(unsealed_health(self._pending[1], self._pending[0]))
        return out


def unsealed_health(info: Mapping[str, Any], at: float | None = None) -> dict[str, Any]:
    """What ``health()`` says of the captures waiting for a sealer (``info``: the ledger's
    ``pending()``, asked at the monotonic time ``at``)."""
    oldest = info.get("oldest")
    out = {"unsealed_captures": info["captures"], "unsealed_threads": info["threads"]}
    if at is not None:
        out["unsealed_as_of_seconds"] = round(time.monotonic() - at, 3)
    out["sealer_lag_seconds"] = (
        round(time.time() - oldest.timestamp(), 3) if oldest is not None else 0.0
    )
    return out
