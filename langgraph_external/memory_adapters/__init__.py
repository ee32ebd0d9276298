"""Long-term memory adapters: Mem0 over the ledger's Postgres, auditable with SQL.

``mem0ai`` is an optional dependency (``pip install 'langgraph-external[mem0]'``); it is
imported only when an adapter is set up.

Example:
    >>> from langgraph_external.memory_adapters import Mem0Adapter, MemoryScopeError
    >>> issubclass(MemoryScopeError, ValueError)
    True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph_external.memory_adapters.mem0.adapter import (
        EmbeddingDimensionError,
        ErasureReceipt,
        ErasureVerificationError,
        Mem0Adapter,
        MemoryAdapterError,
        MemoryAuditError,
        MemoryNotFoundError,
        MemoryScopeError,
        MemoryTooLargeError,
        PgVectorUnavailableError,
        import_mem0,
    )

__all__ = [
    "EmbeddingDimensionError",
    "ErasureReceipt",
    "ErasureVerificationError",
    "Mem0Adapter",
    "MemoryAdapterError",
    "MemoryAuditError",
    "MemoryNotFoundError",
    "MemoryScopeError",
    "MemoryTooLargeError",
    "PgVectorUnavailableError",
    "import_mem0",
]


def __getattr__(name: str) -> Any:
    """The adapter's names load it on first use: ``memory_adapters.mem0.sql`` (the Mem0
    store's statements, read by ``lgx ui``) imports without the adapter and LangGraph."""
    if name in __all__:
        adapter = importlib.import_module("langgraph_external.memory_adapters.mem0.adapter")
        return getattr(adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
