"""Failures kept for ``health()``: the last hundred, shared by a capturing side, a sealer
and the projection runners.

Example:
    >>> f = Failures()
    >>> f.add("ledger", ConnectionError("refused"), 3)
    >>> [(x["where"], x["error"], x["events"]) for x in f.as_dicts()]
    [('ledger', 'ConnectionError: refused', 3)]
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = ["Failure", "Failures"]


logger = logging.getLogger("langgraph_external")


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
        self.unrecorded_events = 0  # replaced by a ``record_failed`` event (``health()``)

    def unrecorded(self, event: Any, exc: BaseException) -> None:
        """``event`` could not be recorded: a ``record_failed`` event takes its place."""
        self.add("record", exc, 1)
        with self._lock:
            self.unrecorded_events += 1
        logger.error(
            "langgraph-external could not record a %s event of thread %r (%s): "
            "recorded as record_failed",
            event.kind,
            event.thread_id,
            exc,
        )

    def add(self, where: str, exc: BaseException, n: int = 0) -> None:
        """Record one failure (thread-safe)."""
        with self._lock:
            self.append(Failure(where, f"{type(exc).__name__}: {exc}", n))
            del self[:-100]

    def as_dicts(self) -> list[dict[str, Any]]:
        """The failures as plain dicts (``health()``)."""
        with self._lock:
            return [f.__dict__ for f in self]
