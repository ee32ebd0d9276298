"""Typed errors of the Mem0 adapter (all catchable as :class:`ExternalError`).

Example:
    >>> issubclass(MemoryScopeError, ValueError)
    True
"""

from __future__ import annotations

from langgraph_external.errors import ConfigurationError, ExternalError


class MemoryAdapterError(ExternalError):
    """Base class of the memory adapter's errors."""


class PgVectorUnavailableError(MemoryAdapterError, ConfigurationError):
    """The server has no pgvector, or this role may not create the extension."""


class EmbeddingDimensionError(MemoryAdapterError, ValueError):
    """An embedding's length differs from the collection's ``vector(N)`` column."""


class MemoryTooLargeError(MemoryAdapterError, ValueError):
    """A memory's text is longer than ``max_memory_chars``."""


class MemoryScopeError(MemoryAdapterError, ValueError):
    """An operation lacks a ``user_id``, ``agent_id`` or ``run_id`` to scope it."""


class MemoryNotFoundError(MemoryAdapterError, LookupError):
    """No memory with that id exists (it may have been deleted or erased)."""


class ErasureVerificationError(MemoryAdapterError):
    """An erasure receipt does not verify: its hash or the erased rows do not match."""


class MemoryAuditError(MemoryAdapterError):
    """A memory read record could not be written to the audit tables (after retries)."""
