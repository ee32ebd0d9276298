"""Failures kept for ``health()``: the last hundred, shared by a capturing side, a sealer
and the projection runners.

Example:
    >>> f = Failures()
    >>> f.add("ledger", ConnectionError("refused"), 3)
    >>> [(x["where"], x["error"], x["events"]) for x in f.as_dicts()]
    [('ledger', 'ConnectionError: refused', 3)]
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = ["Failure", "Failures"]


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
