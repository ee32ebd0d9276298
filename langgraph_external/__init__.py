"""langgraph-external: make any LangGraph app auditable.

Every checkpoint, node transition, tool result, LLM call and memory operation lands as
an ordered, hash-chained record in Postgres (the system of record) and as readable
files in an external workspace (its mirror).

Example:
    >>> from langgraph_external import External, ExternalCheckpointer, Event
"""

from langgraph_external.checkpointers import ExternalCheckpointer
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
from langgraph_external.events import Event, EventKind, verify_chain
from langgraph_external.external import External
from langgraph_external.pipeline import Pipeline
from langgraph_external.workspace import Workspace, decode_thread_id, encode_thread_id

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
