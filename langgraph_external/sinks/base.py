"""The sink contract: where sequenced events are persisted."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from langgraph_external.events import Event


@runtime_checkable
class Sink(Protocol):
    """Persists batches of sequenced events, in order.

    ``write`` must be idempotent for events it already holds (the spool may replay a
    batch after a partial failure) and must raise on failure rather than drop anything.
    """

    name: str

    def write(self, events: Sequence[Event]) -> None:
        """Persist ``events`` (already sequenced and hashed) in order."""

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Last ``(seq, hash)`` this sink holds for each known thread."""

    def close(self) -> None:
        """Release resources; called once by the pipeline on close."""
