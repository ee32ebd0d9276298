"""The read log: who searched memories for what, and which memories came back, with scores.

Every search writes one ``memory_retrievals`` row and one ``memory_retrieval_hits`` row per
hit (:data:`~langgraph_external.memory_adapters.mem0.sql.INSERT_RETRIEVAL`, one round
trip). By default a background writer does it without waiting for the WAL flush, retrying
(:meth:`RetrievalLog.flush` waits and raises if one could not be written); a durable
record is written before ``search`` returns (the adapter's ``durable_reads``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
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
    """Writes retrieval rows, durably before returning or in the background.

    Args:
        schema: the ledger schema holding ``memory_retrievals``.
    """

    def __init__(self, schema: str) -> None:
        self._insert = S.compose(S.INSERT_RETRIEVAL, schema)
        self._writer: ThreadPoolExecutor | None = None
        self._writer_lock = threading.Lock()
        self._failures: list[BaseException] = []

    def record(self, pool: ConnectionPool[Any], row: dict[str, Any], *, durable: bool) -> None:
        """Write ``row`` (see :func:`retrieval_row`): ``durable``, before returning and
        waiting for the WAL flush; else handed to the background writer."""
        if durable:
            self._write(pool, row, durable=True)
        else:
            self._background().submit(self._write_retrying, pool, row)

    def flush(self) -> None:
        """Wait until every row so far is written.

        Raises:
            MemoryAuditError: a retrieval row could not be written (after retries).
        """
        if self._writer is not None:
            self._writer.submit(lambda: None).result()
        if self._failures:
            failures, self._failures = self._failures, []
            raise MemoryAuditError(
                f"{len(failures)} memory search record(s) could not be written: {failures[0]}"
            )

    def close(self) -> None:
        """Write what is pending and stop the writer."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    def _write(self, pool: ConnectionPool[Any], row: dict[str, Any], *, durable: bool) -> None:
        with pool.connection() as conn, conn.pipeline():
            if not durable:
                conn.execute(S.ASYNC_COMMIT)
            conn.execute(self._insert, row)

    def _write_retrying(self, pool: ConnectionPool[Any], row: dict[str, Any]) -> None:
        for attempt in range(4):
            try:
                self._write(pool, row, durable=False)
                return
            except psycopg.Error as exc:
                if attempt == 3:
                    self._failures.append(exc)
                    logger.error("could not record a memory search: %s", exc)
                    return
                time.sleep(0.05 * 2**attempt)

    def _background(self) -> ThreadPoolExecutor:
        with self._writer_lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="lgx-mem0-reads")
            return self._writer
