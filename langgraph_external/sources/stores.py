"""An auditing wrapper for LangGraph's long-term memory (any ``BaseStore``).

Every ``search``, ``get``, ``put`` and ``delete`` (sync or async) goes to the wrapped
store unchanged and is recorded: namespace, key or query, filter, the hit keys with rank
and score, attributed to the graph thread, node, step and task that made the call (taken
from the running graph's config; ``_no_thread`` outside a graph). A thread id the record
cannot store is refused with :class:`~langgraph_external.errors.InvalidThreadIdError`
before the wrapped store is called, as the checkpointer refuses it.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from langgraph_external.pipeline.pipeline import Pipeline
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> sink = InMemoryLedger()
    >>> store = AuditedStore(InMemoryStore(), Pipeline(sink))
    >>> store.put(("users", "u1"), "lang", {"value": "fr"})
    >>> [i.key for i in store.search(("users",))]
    ['lang']
    >>> store.pipeline.flush()
    True
    >>> [e.kind for e in sink.events]
    ['memory_put', 'memory_search']
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.events import Event, EventKind
from langgraph_external.record.render import to_readable
from langgraph_external.sources.run_context import graph_context

__all__ = ["AuditedStore"]


class AuditedStore(BaseStore):
    """Wrap ``inner`` so every memory operation is recorded into ``pipeline``.

    Use ``External.store(inner)`` to get one bound to the facade's pipeline, then pass it
    to ``builder.compile(store=...)`` as usual.
    """

    def __init__(self, inner: BaseStore, pipeline: Pipeline) -> None:
        self.inner = inner
        self.pipeline = pipeline

    @property
    def supports_ttl(self) -> bool:  # type: ignore[override]
        """Whatever the wrapped store supports."""
        return bool(getattr(self.inner, "supports_ttl", False))

    @property
    def ttl_config(self) -> Any:  # type: ignore[override]
        """The wrapped store's TTL configuration."""
        return getattr(self.inner, "ttl_config", None)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the wrapped store and record each."""
        ops = list(ops)
        ctx = graph_context()  # an invalid thread id is refused before the store runs
        started = time.perf_counter()
        results = self.inner.batch(ops)
        self._record(ops, results, started, ctx)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch`."""
        ops = list(ops)
        ctx = graph_context()
        started = time.perf_counter()
        results = await self.inner.abatch(ops)
        self._record(ops, results, started, ctx)
        return results

    def _record(
        self, ops: list[Op], results: list[Result], started: float, ctx: dict[str, Any]
    ) -> None:
        duration = round((time.perf_counter() - started) * 1000.0, 3)
        for op, result in zip(ops, results, strict=False):
            event = _event_for(op, result, ctx, duration)
            if event is None:
                continue
            try:
                self.pipeline.emit(event)
            except Exception:
                if self.pipeline.strict:
                    raise


def _event_for(op: Op, result: Result, ctx: dict[str, Any], duration: float) -> Event | None:
    payload: dict[str, Any]
    if isinstance(op, SearchOp):
        items: list[SearchItem] = list(result or [])  # type: ignore[arg-type]
        kind, name = EventKind.MEMORY_SEARCH, "store.search"
        payload = {
            "namespace": list(op.namespace_prefix),
            "query": op.query,
            "filter": to_readable(op.filter),
            "limit": op.limit,
            "offset": op.offset,
            "hits": [
                {
                    "rank": i,
                    "namespace": list(item.namespace),
                    "key": item.key,
                    "score": getattr(item, "score", None),
                    "value": to_readable(item.value),
                }
                for i, item in enumerate(items, 1)
            ],
        }
    elif isinstance(op, GetOp):
        kind, name = EventKind.MEMORY_GET, "store.get"
        payload = {"namespace": list(op.namespace), "key": op.key, "found": result is not None}
    elif isinstance(op, PutOp):
        deleting = op.value is None
        kind = EventKind.MEMORY_DELETE if deleting else EventKind.MEMORY_PUT
        name = "store.delete" if deleting else "store.put"
        payload = {
            "namespace": list(op.namespace),
            "key": op.key,
            "value": None if deleting else to_readable(op.value),
            "index": to_readable(op.index),
        }
    else:
        return None  # listing namespaces (ListNamespacesOp) reads no memory content
    return Event(
        kind=kind.value,
        thread_id=ctx["thread_id"],
        node=ctx.get("node"),
        step=ctx.get("step"),
        task_id=ctx.get("task_id"),
        checkpoint_ns=ctx.get("checkpoint_ns") or "",
        checkpoint_id=ctx.get("checkpoint_id"),
        duration_ms=duration,
        status="ok",
        name=name,
        payload=payload,
    )
