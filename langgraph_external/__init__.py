"""langgraph-external: make any LangGraph app auditable.

Every checkpoint, node transition, tool result, LLM call and memory operation lands as
an ordered, hash-chained record in Postgres (the system of record) and as readable
files in an external workspace (its mirror).

Example:
    >>> from langgraph_external import External, ExternalCheckpointer, Options, restore_thread
"""

from typing import TYPE_CHECKING, Any

from langgraph_external.errors import (
    ConfigurationError,
    ExternalError,
    InvalidCheckpointIdError,
    InvalidFilterError,
    InvalidThreadIdError,
    LedgerUnavailableError,
    RestoreError,
    SerializationError,
    WorkspaceError,
)
from langgraph_external.workspace.files import Workspace, decode_thread_id, encode_thread_id

if TYPE_CHECKING:
    from langgraph_external.checkpointers import ExternalCheckpointer
    from langgraph_external.external import External
    from langgraph_external.ops.restore import restore_thread
    from langgraph_external.options import Options
    from langgraph_external.record.events import Event, EventKind, verify_chain

# Imported on first use: they pull in LangGraph and langchain-core (over a second), which
# the command line's reading commands never need.
_LAZY = {
    "ExternalCheckpointer": "langgraph_external.checkpointers",
    "Event": "langgraph_external.record.events",
    "EventKind": "langgraph_external.record.events",
    "verify_chain": "langgraph_external.record.events",
    "External": "langgraph_external.external",
    "Options": "langgraph_external.options",
    "restore_thread": "langgraph_external.ops.restore",
}

# Names this module exported that a user does not need (an internal, words of v0.1 that
# nothing raises): they keep working, with a warning, until 0.3 (CHANGELOG).
_DEPRECATED = {
    "Pipeline": ("langgraph_external.pipeline.pipeline", "an internal: use External"),
    "SinkError": ("langgraph_external.errors", "nothing raises it since 0.1"),
    "ChainConflictError": ("langgraph_external.errors", "nothing raises it since 0.1"),
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _DEPRECATED:
        import warnings

        where, why = _DEPRECATED[name]
        warnings.warn(
            f"langgraph_external.{name} is deprecated ({why}) and goes in 0.3; "
            f"it stays importable from {where}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(where), name)
    raise AttributeError(f"module 'langgraph_external' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
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
    "Options",
    "RestoreError",
    "SerializationError",
    "Workspace",
    "WorkspaceError",
    "__version__",
    "decode_thread_id",
    "encode_thread_id",
    "restore_thread",
    "verify_chain",
]
