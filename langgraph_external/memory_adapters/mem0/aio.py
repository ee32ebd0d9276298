"""The adapter's async API: each method runs its sync twin in a worker thread.

``asyncio.to_thread`` copies the caller's context into the thread, so the graph task's
config (its provenance) and the adapter's operation context are kept. The sync methods
hold their connection for the whole operation, so a thread per call is what Postgres
would cost anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from langgraph_external.memory_adapters.mem0.erasure import ErasureReceipt


class AsyncMemoryMethods:
    """``a``-prefixed twins of :class:`~langgraph_external.memory_adapters.Mem0Adapter`'s
    methods (the class mixes them in)."""

    add: Callable[..., dict[str, Any]]
    search: Callable[..., dict[str, Any]]
    update: Callable[..., dict[str, Any]]
    delete: Callable[..., dict[str, Any]]
    get: Callable[..., dict[str, Any] | None]
    get_all: Callable[..., dict[str, Any]]
    history: Callable[..., list[dict[str, Any]]]
    erase: Callable[..., ErasureReceipt]

    async def aadd(self, messages: Any, **kwargs: Any) -> dict[str, Any]:
        """Async :meth:`add` (runs in a worker thread; provenance is kept)."""
        return await asyncio.to_thread(self.add, messages, **kwargs)

    async def asearch(self, query: str, **kwargs: Any) -> dict[str, Any]:
        """Async :meth:`search`."""
        return await asyncio.to_thread(self.search, query, **kwargs)

    async def aupdate(self, memory_id: str, text: str, **kwargs: Any) -> dict[str, Any]:
        """Async :meth:`update`."""
        return await asyncio.to_thread(self.update, memory_id, text, **kwargs)

    async def adelete(self, memory_id: str, **kwargs: Any) -> dict[str, Any]:
        """Async :meth:`delete`."""
        return await asyncio.to_thread(self.delete, memory_id, **kwargs)

    async def aget(self, memory_id: str) -> dict[str, Any] | None:
        """Async :meth:`get`."""
        return await asyncio.to_thread(self.get, memory_id)

    async def aget_all(self, **kwargs: Any) -> dict[str, Any]:
        """Async :meth:`get_all`."""
        return await asyncio.to_thread(self.get_all, **kwargs)

    async def ahistory(self, memory_id: str) -> list[dict[str, Any]]:
        """Async :meth:`history`."""
        return await asyncio.to_thread(self.history, memory_id)

    async def aerase(self, **kwargs: Any) -> ErasureReceipt:
        """Async :meth:`erase`."""
        return await asyncio.to_thread(self.erase, **kwargs)
