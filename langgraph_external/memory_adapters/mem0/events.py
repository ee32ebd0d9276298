"""The ``memory_*`` events the adapter sends to the run ledger: ids, hashes and scores only.

The ledger is hash-chained and append-only, so nothing that an erasure must remove (memory
text, queries, messages) goes there: an event names the audit row, the memory and the
keyed hashes of its text; a search names its hits by id, rank and score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_external.memory_adapters.mem0.erasure import ErasureReceipt
from langgraph_external.memory_adapters.mem0.store import Operation
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.events import Event, EventKind
from langgraph_external.sources.callbacks import NO_THREAD

_KIND = {
    "ADD": EventKind.MEMORY_ADD,
    "UPDATE": EventKind.MEMORY_UPDATE,
    "DELETE": EventKind.MEMORY_DELETE,
}


class MemoryEvents:
    """Emits the events of one collection's operations into ``pipeline`` (if any)."""

    def __init__(self, pipeline: Pipeline | None, collection: str) -> None:
        self.pipeline = pipeline
        self.collection = collection

    def writes(self, op: Operation) -> None:
        """One ``memory_add``/``memory_update``/``memory_delete`` per audited write of ``op``."""
        for w in op.writes:
            payload = {
                "op_id": op.op_id,
                "audit_event_id": w.audit_id,
                "collection": self.collection,
                "memory_id": w.memory_id,
                "event": w.event,
                "old_hash": w.old_hash,
                "new_hash": w.new_hash,
                "infer": op.infer,
            }
            self._emit(_KIND[w.event], f"mem0.{op.kind}", op.provenance, payload, None)

    def search(self, row: Mapping[str, Any], provenance: Mapping[str, Any]) -> None:
        """A ``memory_search`` for a retrieval ``row`` (``reads.retrieval_row``)."""
        payload = {
            "search_id": row["search_id"],
            "collection": self.collection,
            "query_hash": row["query_hash"],
            "top_k": row["top_k"],
            "threshold": row["threshold"],
            "hits": [
                {"rank": r, "memory_id": i, "score": s}
                for r, i, s in zip(row["ranks"], row["ids"], row["scores"], strict=True)
            ],
        }
        self._emit(EventKind.MEMORY_SEARCH, "mem0.search", provenance, payload, row["duration_ms"])

    def erasure(self, receipt: ErasureReceipt, provenance: Mapping[str, Any]) -> None:
        """A ``memory_erase`` naming the receipt (no ids of what was erased beyond it)."""
        payload = {
            "erasure_id": receipt.erasure_id,
            "collection": self.collection,
            "subject_kind": receipt.subject_kind,
            "memories": len(receipt.memory_ids),
            "row_counts": receipt.row_counts,
            "receipt_hash": receipt.receipt_hash,
        }
        self._emit(EventKind.MEMORY_ERASE, "mem0.erase", provenance, payload, None)

    def _emit(
        self,
        kind: EventKind,
        name: str,
        prov: Mapping[str, Any],
        payload: dict[str, Any],
        duration: float | None,
    ) -> None:
        if self.pipeline is None:
            return
        ids = ("run_id", "root_run_id", "checkpoint_id", "node", "step", "task_id")
        event = Event.new(
            kind,
            prov.get("thread_id") or NO_THREAD,
            name=name,
            status="ok",
            payload=payload,
            checkpoint_ns=prov.get("checkpoint_ns") or "",
            duration_ms=duration,
            **{k: prov.get(k) for k in ids},
        )
        self.pipeline.emit(event)
