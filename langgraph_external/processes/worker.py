"""Sealing outside the app: the helper process an app starts with itself, and ``lgx worker``.

The app's threads share its GIL: sealing (hashing, encryption, canonical JSON), mirroring
the workspace and exporting traces would slow the app down even in a background thread.
So by default ``External(...)`` starts one helper process
(:class:`~langgraph_external.processes.helper.HelperProcess`) that runs a
:class:`~langgraph_external.pipeline.service.SealingService` — sealer, workspace mirror,
exporters — for the app's database, and stops it with itself; the app only captures. In
production, ``lgx worker`` processes (:func:`run_worker`) do the same for every app
process on a database: run any number of them, anywhere that reaches the database; they
share the work per thread (advisory locks) and wake on ``NOTIFY`` (polling as fallback).
With ``External(..., sealing="worker")`` an app captures only (:class:`NotifyingBackend`)
and starts nothing.

Example (a production layout)::

    $ lgx worker --dsn postgresql://lgx@db/app --workspace s3://audit/agent_workspace
    # in the app:
    External(dsn="postgresql://app@db/app", sealing="worker")
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from langgraph_external.pipeline.backend import FlushRequest
from langgraph_external.pipeline.background import BackgroundThread, Deadline
from langgraph_external.pipeline.service import unsealed_health
from langgraph_external.processes.gc_tuning import tune_gc
from langgraph_external.processes.helper import HelperProcess
from langgraph_external.processes.running import Running, notify_channel
from langgraph_external.settings import Settings

logger = logging.getLogger("langgraph_external")

__all__ = [
    "HelperProcess",
    "NotifyingBackend",
    "notify_channel",
    "run_worker",
    "tune_gc",
]


def run_worker(config: Settings, *, once: bool = False) -> int:
    """Seal, mirror and export for ``config`` until SIGTERM/SIGINT (``lgx worker``).

    ``once``: seal and project what is there, then return. Returns an exit code.
    """
    running = Running(config, listen=not once)
    stop = threading.Event()
    if once:
        ok = running.flush(FlushRequest((), running.service.horizon(), None))
        return 0 if running.close() and ok else 1

    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        while not stop.wait(1.0):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if running.close() else 1


class NotifyingBackend:
    """``sealing="worker"``: the app seals nothing; ``lgx worker`` processes do.

    Captures are announced with ``NOTIFY`` (at most every ``interval`` seconds, from a
    background thread); :meth:`flush` waits until the workers sealed the app's captures.
    Closing the app does not wait for them (``seals_here`` is false): what it captured is
    committed, announced once more, and logged as waiting for a worker.
    """

    seals_here = False

    def __init__(self, ledger: Any, schema: str, interval: float = 0.05) -> None:
        self.ledger = ledger
        self.channel = notify_channel(schema)
        self.interval = interval
        self._pending = threading.Event()
        self._stop = threading.Event()
        self.waiting: dict[str, Any] = {}  # what was unsealed when the app closed
        self._bg = BackgroundThread("notify", self._loop, wake=self._stopping).start()

    def _stopping(self) -> None:
        self._stop.set()
        self._pending.set()  # wake the loop now, not at its next half-second look

    def wake(self) -> None:
        self._pending.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self._pending.wait(0.5):
                continue
            self._pending.clear()
            if self._stop.is_set():
                return  # closing: close() announces once more itself
            try:
                self.ledger.notify(self.channel)
            except Exception as exc:  # the workers poll too: a lost NOTIFY only delays
                logger.debug("NOTIFY failed: %s", exc)
            self._stop.wait(self.interval)

    def flush(self, request: FlushRequest) -> bool:
        deadline = Deadline(request.timeout)
        self.wake()
        while True:
            try:
                if not self.ledger.unsealed(request.threads, request.horizon):
                    return True
            except Exception as exc:
                logger.debug("could not ask for unsealed captures: %s", exc)
            if deadline.passed():
                return False
            time.sleep(0.02)

    def health(self) -> dict[str, Any]:
        try:
            return unsealed_health(self.ledger.pending())
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}

    def close(self, timeout: float = 30.0) -> bool:
        self._bg.stop(timeout=5)
        try:
            self.ledger.notify(self.channel)
            waiting = self.ledger.pending()
        except Exception as exc:  # the workers poll too
            logger.debug("NOTIFY at close failed: %s", exc)
            return True
        if waiting["captures"]:
            logger.info(
                "langgraph-external: %d captures (%d threads) in the ledger wait for an lgx worker",
                waiting["captures"],
                waiting["threads"],
            )
        self.waiting = dict(waiting)
        return True
