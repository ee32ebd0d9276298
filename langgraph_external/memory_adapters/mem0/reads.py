"""The read log: who searched memories for what, and which memories came back, with scores.

Every search writes one ``memory_retrievals`` row and one ``memory_retrieval_hits`` row per
hit (:data:`~langgraph_external.memory_adapters.mem0.sql.INSERT_RETRIEVAL`, one round
trip), before ``search`` returns: durably by default, without waiting for the WAL flush
with the adapter's ``durable_reads=False``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from langgraph_external.memory_adapters.mem0 import sql as S
from langgraph_external.memory_adapters.mem0.errors import MemoryAuditError
from langgraph_external.record.events import json_safe

logger = logging.getLogger("langgraph_external")


def retrieval_row(
    *,
    search_id: str,
    collection: str,
    query: str,
    query_hash: str | None,
    filters: Mapping[str, Any],
    top_k: int,
    threshold: float,
    hits: Sequence[Mapping[str, Any]],
    duration_ms: float,
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """The parameters of :data:`~langgraph_external.memory_adapters.mem0.sql.INSERT_RETRIEVAL`.

    Example:
        >>> row = retrieval_row(search_id="s", collection="c", query="tea", query_hash="h",
        ...     filters={"user_id": "u"}, top_k=5, threshold=0.1,
        ...     hits=[{"id": "m1", "score": 0.7}], duration_ms=1.0, provenance={})
        >>> row["user_id"], row["ranks"], row["ids"], row["scores"]
        ('u', [1], ['m1'], [0.7])
    """
    return {
        "search_id": search_id,
        "collection": collection,
        "query": query,
        "query_hash": query_hash,
        "filters": Jsonb(json_safe(dict(filters))),
        "top_k": top_k,
        "threshold": threshold,
        "user_id": filters.get("user_id"),
        "agent_id": filters.get("agent_id"),
        "scope_run_id": filters.get("run_id"),
        "hit_count": len(hits),
        "duration_ms": duration_ms,
        **provenance,
        "ranks": list(range(1, len(hits) + 1)),
        "ids": [h["id"] for h in hits],
        "scores": [h.get("score") for h in hits],
    }


class RetrievalLog:
    """Writes retrieval rows before ``search`` returns.

    A row is written by one statement in a transaction of its own (one round trip),
    ``durable``: waiting for its WAL flush, so no server crash can lose a row whose
    ``memory_search`` event the app goes on to record; else not (see the adapter's
    ``durable_reads``).
    Errors are retried a few times, then raised (:class:`MemoryAuditError`): a search is
    never answered without its record.

    Args:
        schema: the ledger schema holding ``memory_retrievals``.

    Example:
        >>> log = RetrievalLog("langgraph_external")
        >>> log.record(pool, row, durable=False)  # doctest: +SKIP
    """

    ATTEMPTS = 4
    """Tries of one row before :class:`MemoryAuditError` (0.05, 0.1, 0.2 s apart)."""

    def __init__(self, schema: str) -> None:
        self._insert = S.compose(S.INSERT_RETRIEVAL, schema)

    def record(self, pool: ConnectionPool[Any], row: dict[str, Any], *, durable: bool) -> None:
        """Write ``row`` (see :func:`retrieval_row`); ``durable``: wait for the WAL flush.

        Raises:
            MemoryAuditError: the row could not be written (after :attr:`ATTEMPTS` tries).
        """
        params = {**row, "durable": durable}
        for attempt in range(self.ATTEMPTS):
            try:
                with pool.connection() as conn:
                    # one statement, its own transaction: one round trip
                    conn.autocommit = True
                    try:
                        conn.execute(self._insert, params)
                    finally:
                        if not conn.closed:
                            conn.autocommit = False
                return
            except psycopg.Error as exc:
                if attempt == self.ATTEMPTS - 1:
                    logger.error("could not record a memory search: %s", exc)
                    raise MemoryAuditError(
                        f"the memory search could not be recorded: {exc}"
                    ) from exc
                time.sleep(0.05 * 2**attempt)
