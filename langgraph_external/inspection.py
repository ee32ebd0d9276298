"""Deprecated import path: use :mod:`langgraph_external.read.inspection` (this one goes in 0.3).

It re-exports what ``langgraph_external.inspection`` had before the layout change, and warns
on import.
"""

from langgraph_external._moved import warn_moved
from langgraph_external.read.inspection import (
    REPLAY_PREFIX,
    AmbiguousCheckpointError,
    EventFilter,
    NotFoundError,
    Placed,
    QueryResult,
    StateView,
    example_queries,
    is_replay_copy,
    list_threads,
    parse_time,
    place_events,
    prepare_session,
    query_events,
    read_state,
    run_query,
    step_context,
    thread_in_ledger,
)

__all__ = [
    "REPLAY_PREFIX",
    "AmbiguousCheckpointError",
    "EventFilter",
    "NotFoundError",
    "Placed",
    "QueryResult",
    "StateView",
    "example_queries",
    "is_replay_copy",
    "list_threads",
    "parse_time",
    "place_events",
    "prepare_session",
    "query_events",
    "read_state",
    "run_query",
    "step_context",
    "thread_in_ledger",
]

warn_moved(__name__, "langgraph_external.read.inspection")
