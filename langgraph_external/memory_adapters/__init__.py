"""Long-term memory adapters: Mem0 over the ledger's Postgres, auditable with SQL.

``mem0ai`` is an optional dependency (``pip install 'langgraph-external[mem0]'``); it is
imported only when an adapter is set up.

Example:
    >>> from langgraph_external.memory_adapters import Mem0Adapter, MemoryScopeError
    >>> issubclass(MemoryScopeError, ValueError)
    True
"""

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
