"""What the sources need from the layers below them, as contracts.

Sources (checkpointer, callback handler, store) hand events and captures to the
:class:`~langgraph_external.pipeline.pipeline.Pipeline`; they never import the ledger, the
workspace or an exporter. The one thing the checkpointer needs of the ledger itself — to
queue a capture inside the wrapped saver's own transaction — is described here, and the
ledger the pipeline hands in either offers it (the Postgres ledger) or the checkpointer
falls back to the write-ahead log (any other ledger).

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> isinstance(InMemoryLedger(), CaptureInTransaction)
    False
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["CaptureInTransaction"]


@runtime_checkable
class CaptureInTransaction(Protocol):
    """A ledger that can write a capture on a cursor of someone else's transaction.

    ``dsn`` names its database: a capture can only join the saver's transaction when the
    saver writes to the same database.
    """

    dsn: str

    def capture_in(self, cur: Any, row: Sequence[Any]) -> None:
        """Queue one capture's row (:meth:`Capture.row
        <langgraph_external.record.capture.Capture.row>`) on ``cur``."""

    async def acapture_in(self, cur: Any, row: Sequence[Any]) -> None:
        """Async twin of :meth:`capture_in`."""
