"""Helpers to assert, in your own tests, on what langgraph-external recorded.

In the spirit of ``structlog.testing.capture_logs``:

Example:
    >>> from langgraph_external.pipeline.pipeline import Pipeline
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> from langgraph_external.record.events import Event
    >>> pipeline = Pipeline(InMemoryLedger())
    >>> with capture_events(pipeline) as events:
    ...     pipeline.emit(Event.new("tool_end", "t", name="search"))
    >>> [(e.kind, e.name, e.seq) for e in events]
    [('tool_end', 'search', 1)]
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.events import Event

__all__ = ["capture_events", "node_path", "of_kind"]


@contextmanager
def capture_events(
    target: Any,
    *,
    kinds: Collection[str] | None = None,
    thread_id: str | None = None,
) -> Iterator[list[Event]]:
    """Collect every event recorded while the block runs (sequenced, as stored).

    Args:
        target: an :class:`~langgraph_external.External` or a :class:`Pipeline`.
        kinds: keep only these event kinds.
        thread_id: keep only this thread's events.

    The list is complete when the block exits (the pipeline is flushed then).
    """
    pipeline: Pipeline = target if isinstance(target, Pipeline) else target.pipeline
    captured: list[Event] = []

    def listen(batch: Sequence[Event]) -> None:
        captured.extend(
            e
            for e in batch
            if (kinds is None or e.kind in kinds)
            and (thread_id is None or e.thread_id == thread_id)
        )

    pipeline.add_listener(listen)
    try:
        yield captured
        pipeline.flush()
    finally:
        pipeline.remove_listener(listen)


def of_kind(events: Sequence[Event], *kinds: str) -> list[Event]:
    """The events of the given kinds, in recorded order."""
    return [e for e in events if e.kind in kinds]


def node_path(events: Sequence[Event]) -> list[tuple[int | None, list[str]]]:
    """The nodes that ran, per step, in recorded start order: ``[(step, [node, ...]), ...]``.

    Parallel branches and ``Send`` tasks of one step appear together.
    """
    out: list[tuple[int | None, list[str]]] = []
    for e in events:
        if e.kind != "node_start" or e.node is None:
            continue
        if out and out[-1][0] == e.step:
            out[-1][1].append(e.node)
        else:
            out.append((e.step, [e.node]))
    return out
