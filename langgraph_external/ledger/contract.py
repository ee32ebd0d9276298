"""The contracts: a ledger (the system of record) and projections (views built from it).

A :class:`Ledger` stores sequenced events under one rule — a thread's position advances
only from where the writer saw it — and serves them back in order. A :class:`Projection`
(the workspace, an exporter) is fed from the ledger: it says how far it got on a thread
and applies the next events idempotently. ``tests/test_sink_contract.py`` holds the
behaviour every implementation must show.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from langgraph_external.record.capture import Capture
from langgraph_external.record.events import Event


@runtime_checkable
class Ledger(Protocol):
    """Where sequenced events are stored, gap-free and never interleaved per thread."""

    name: str

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Last ``(seq, hash)`` per thread that has events."""

    def append(self, events: Sequence[Event], *, legacy_names: Collection[str] = ()) -> None:
        """Store ``events`` (sequenced; grouped by thread, each group starting right
        after the thread's stored head) atomically; ``legacy_names``: threads among them
        that keep their workspace folder names of the old rule (see
        :mod:`~langgraph_external.record.locations`).

        Raises:
            PositionMovedError: a group does not start at its thread's head; nothing stored.
        """

    def capture(self, captures: Sequence[Capture]) -> None:
        """Store ``captures`` (events waiting for a sealer) in one transaction of its own.

        Raises:
            LedgerUnavailableError: the ledger cannot be reached; nothing stored.
        """

    def read(self, thread_id: str, after: int = 0, limit: int = 2000) -> list[Event]:
        """Events with ``seq > after`` in order, with their detail and attachments.

        May return fewer than ``limit`` (a ledger may bound what one call holds): the
        caller reads again after the last event returned, until nothing comes.
        """

    def legacy_named(self, thread_ids: Collection[str]) -> set[str]:
        """Which of ``thread_ids`` keep their workspace folder names of the old rule."""

    def lagging(self, projection: str, limit: int = 1000) -> list[tuple[str, int, int]]:
        """``(thread_id, head seq, projected seq)`` where ``projection`` is behind."""

    def set_cursor(self, projection: str, thread_id: str, seq: int, error: str | None) -> None:
        """Remember how far ``projection`` got; ``error`` sets the thread aside."""

    def close(self) -> None:
        """Release resources."""


@runtime_checkable
class Projection(Protocol):
    """A view of the ledger that tails it (the workspace mirror, an exporter)."""

    name: str

    def position(self, thread_id: str) -> int:
        """The last ``seq`` of ``thread_id`` this projection holds (0: none)."""

    def apply(self, thread_id: str, events: Sequence[Event]) -> None:
        """Apply ``events`` (consecutive, starting right after :meth:`position`).

        Must be idempotent: applying an event it already holds changes nothing.
        """

    def close(self) -> None:
        """Release resources."""
