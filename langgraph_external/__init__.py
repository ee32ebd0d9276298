"""langgraph-external: make any LangGraph app auditable.

Every checkpoint, node transition, tool result, LLM call and memory operation lands as
an ordered, hash-chained record in Postgres (the system of record) and as readable
files in an external workspace (its mirror).

Example:
    >>> from langgraph_external import External, ExternalCheckpointer, Event
"""

from typing import TYPE_CHECKING, Any

from langgraph_external.errors import (
    ChainConflictError,
    ConfigurationError,
    ExternalError,
    InvalidCheckpointIdError,
    InvalidFilterError,
    InvalidThreadIdError,
    LedgerUnavailableError,
    SerializationError,
    SinkError,
    WorkspaceError,
)
from langgraph_external.workspace.files import Workspace, decode_thread_id, encode_thread_id

if TYPE_CHECKING:
    from langgraph_external.external import External
    from langgraph_external.pipeline.pipeline import Pipeline
    from langgraph_external.record.events import Event, EventKind, verify_chain
    from langgraph_external.sources.checkpointer import ExternalCheckpointer

# Imported on first use: they pull in LangGraph and langchain-core (over a second), which
# the command line's reading commands never need.
_LAZY = {
    "ExternalCheckpointer": "langgraph_external.sources.checkpointer",
    "Event": "langgraph_external.record.events",
    "EventKind": "langgraph_external.record.events",
    "verify_chain": "langgraph_external.record.events",
    "External": "langgraph_external.external",
    "Pipeline": "langgraph_external.pipeline.pipeline",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'langgraph_external' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "ChainConflictError",
    "ConfigurationError",
    "Event",
    "EventKind",
    "External",
    "ExternalCheckpointer",
    "ExternalError",
    "InvalidCheckpointIdError",
    "InvalidFilterError",
    "InvalidThreadIdError",
    "LedgerUnavailableError",
    "Pipeline",
    "SerializationError",
    "SinkError",
    "Workspace",
    "WorkspaceError",
    "__version__",
    "decode_thread_id",
    "encode_thread_id",
    "verify_chain",
]
