"""Mem0 long-term memory in the ledger's Postgres, auditable with plain SQL.

:class:`Mem0Adapter` builds a real ``mem0.Memory`` configured for pgvector on the same
database as the run ledger and changes three things about where Mem0 keeps its data:

* every ADD / UPDATE / DELETE writes a ``memory_events`` row (old and new text and their
  sha256, user/agent/run scope, actor, reason, source messages, and the thread, run,
  checkpoint, node and step of the calling graph node) **in the same transaction** as
  the vector row; one adapter call is one transaction;
* Mem0's history and message context live in Postgres (no SQLite file anywhere);
* every search writes retrieval rows (query, filters, each hit's id, rank and score) and
  emits a ``memory_search`` event into the run ledger, so memory reads show up in the
  thread's timeline.

:meth:`Mem0Adapter.erase` removes a subject's vectors, history text and stored messages
and leaves a content-free, hash-sealed receipt. Events sent to the hash-chained ledger
and the workspace carry only ids, hashes and scores, so erasing never breaks the chain.

Example:
    >>> from langgraph_external import External                        # doctest: +SKIP
    >>> with External(dsn=dsn, workspace="./ws") as ext:                 # doctest: +SKIP
    ...     memory = Mem0Adapter.from_external(ext, llm=chat_model, embedder=embeddings)
    ...     memory.add("I prefer window seats", user_id="alice", infer=False)
    ...     memory.search("seat preference", filters={"user_id": "alice"})["results"]
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from psycopg_pool import ConnectionPool

from langgraph_external.errors import ConfigurationError
from langgraph_external.ledger import schema as ledger
from langgraph_external.memory_adapters.mem0.aio import AsyncMemoryMethods
from langgraph_external.memory_adapters.mem0.bootstrap import open_pool, open_stores
from langgraph_external.memory_adapters.mem0.erasure import (
    Eraser,
    ErasureReceipt,
    erasure_subject,
)
from langgraph_external.memory_adapters.mem0.errors import (
    EmbeddingDimensionError,
    ErasureVerificationError,
    MemoryAdapterError,
    MemoryAuditError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryTooLargeError,
    PgVectorUnavailableError,
)
from langgraph_external.memory_adapters.mem0.events import MemoryEvents
from langgraph_external.memory_adapters.mem0.reads import RetrievalLog, retrieval_row
from langgraph_external.memory_adapters.mem0.store import (
    SCOPE_KEYS,
    AuditedVectorStore,
    Operation,
    PostgresHistory,
    graph_provenance,
    run_operation,
    text_hash,
)
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import json_safe, new_id
from langgraph_external.record.keys import load_key
from langgraph_external.upstream.mem0 import (
    build_memory,
    import_mem0,
)
from langgraph_external.workspace.files import Workspace

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


class ExternalLike(Protocol):
    """What :meth:`Mem0Adapter.from_external` reads of an ``External`` that was set up."""

    @property
    def dsn(self) -> str | None: ...

    @property
    def schema(self) -> str: ...

    @property
    def workspace(self) -> Workspace | None: ...

    @property
    def pipeline(self) -> Pipeline | None: ...


class Mem0Adapter(AsyncMemoryMethods):
    """A ``mem0.Memory`` whose storage is the ledger's Postgres, audited with SQL.

    Args:
        dsn: PostgreSQL connection string (the ledger's database; needs pgvector).
        llm: a LangChain ``BaseChatModel`` Mem0 uses to extract memories (``infer=True``).
        embedder: a LangChain ``Embeddings``.
        embedding_dims: length of the embedder's vectors; probed once when ``None``.
        schema: ledger schema holding the adapter's tables and views.
        collection: name of Mem0's vector table (schema ``public``, as Mem0 expects).
        workspace: a :class:`Workspace` or local path; Mem0's own files go under
            ``<workspace>/.mem0`` and erasure receipts under ``<workspace>/memory``.
        pipeline: where ``memory_*`` events go (the run ledger and the workspace).
        actor: recorded as ``actor`` of every write unless a call names another.
        max_memory_chars: longest memory text accepted.
        pool_size: most connections used at once.
        create_extension: run ``CREATE EXTENSION vector`` in :meth:`setup` when missing.
        trace_llm: let the graph's callbacks see Mem0's LLM calls. Off by default: those
            prompts hold memory text, and the ledger they would land in is append-only.
        key: the deployment key that keys every hash of memory or query text (default:
            the pipeline's, else ``$LGX_KEY`` or the key file; see
            :mod:`langgraph_external.record.keys`). A plain sha256 of an erased memory would let
            anyone confirm a guess of it.
        durable_reads: ``search`` writes its retrieval rows before it returns, in one
            round trip, and (by default) waits for their WAL flush, so a search the
            record names always has its row. ``False`` skips that wait: a *server* crash
            then loses the read rows of the last fraction of a second (up to 3 ×
            ``wal_writer_delay``) while their ``memory_search`` events, which the app
            still holds, reach the ledger after it — a record naming searches whose rows
            are gone. A memory write's audit row always commits durably with the vector.

    The adapter is thread-safe; async methods run the same code in a worker thread.
    """

    def __init__(
        self,
        dsn: str,
        *,
        llm: Any,
        embedder: Any,
        embedding_dims: int | None = None,
        schema: str = ledger.DEFAULT_SCHEMA,
        collection: str = "mem0_memories",
        workspace: Workspace | str | os.PathLike[str] | None = None,
        pipeline: Pipeline | None = None,
        actor: str | None = None,
        max_memory_chars: int = 8_000,
        pool_size: int = 8,
        create_extension: bool = True,
        trace_llm: bool = False,
        durable_reads: bool = True,
        key: str | bytes | None = None,
    ) -> None:
        self.dsn = dsn
        self.schema = ledger.validate_schema(schema)
        self.collection = ledger.validate_schema(collection)  # a plain identifier too
        self.entity_collection = f"{collection}_entities"
        self.llm = llm
        self.embedder = embedder
        self.embedding_dims = embedding_dims
        if workspace is not None and not isinstance(workspace, Workspace):
            workspace = Workspace(workspace)
        self.workspace: Workspace | None = workspace
        self.pipeline = pipeline
        given = getattr(pipeline, "cipher", None) if key is None else None
        self.key: WorkspaceCipher = given or load_key(
            key,
            workspace_root=workspace.root if workspace is not None and workspace.is_local else None,
        )
        self.actor = actor
        self.max_memory_chars = max_memory_chars
        self.pool_size = pool_size
        self.create_extension = create_extension
        self.trace_llm = trace_llm
        self.durable_reads = durable_reads
        self.memory: Any = None
        self.vector_store: AuditedVectorStore | None = None
        self._pool: ConnectionPool[Any] | None = None
        self._reads = RetrievalLog(self.schema)
        self._events = MemoryEvents(pipeline, self.collection)
        self._eraser = Eraser(self.schema, self.collection, self.key)

    @classmethod
    def from_external(
        cls, ext: ExternalLike, *, llm: Any, embedder: Any, **kwargs: Any
    ) -> Mem0Adapter:
        """An adapter on ``ext``'s database, schema, pipeline and workspace, set up.

        Example:
            >>> with External(dsn=dsn, workspace="./ws") as ext:          # doctest: +SKIP
            ...     memory = Mem0Adapter.from_external(ext, llm=llm, embedder=emb)
        """
        if ext.pipeline is None or ext.dsn is None:
            raise ConfigurationError("call ext.setup() (or use `with External(...)`) first")
        kwargs.setdefault("schema", ext.schema)
        kwargs.setdefault("workspace", ext.workspace)
        kwargs.setdefault("pipeline", ext.pipeline)
        return cls(ext.dsn, llm=llm, embedder=embedder, **kwargs).setup()

    # -- lifecycle ----------------------------------------------------------------------
    def setup(self) -> Mem0Adapter:
        """Check pgvector, create tables/views (idempotent), build ``mem0.Memory``.

        Everything is created in one transaction: on any error nothing is left behind.

        Raises:
            PgVectorUnavailableError: the server lacks pgvector or the role may not
                create it.
            EmbeddingDimensionError: the collection exists with another dimension.
            LedgerUnavailableError: Postgres cannot be reached.
        """
        if self.memory is not None:
            return self
        mem0_dir = None
        if self.workspace is not None and self.workspace.is_local:
            mem0_dir = Path(self.workspace.root) / ".mem0"
        import_mem0(mem0_dir)
        if self.embedding_dims is None:
            self.embedding_dims = len(self.embedder.embed_query("dimension probe"))
        dims = int(self.embedding_dims)
        pool = open_pool(self.dsn, self.pool_size)
        try:
            inner, entities = open_stores(
                pool, self.schema, self.collection, dims, create_extension=self.create_extension
            )
            self.vector_store = AuditedVectorStore(
                inner, pool, self.schema, max_memory_chars=self.max_memory_chars, key=self.key
            )
            self.memory = build_memory(
                self.dsn,
                collection=self.collection,
                dims=dims,
                llm=self.llm,
                embedder=self.embedder,
                vector_store=self.vector_store,
                history=PostgresHistory(pool, self.schema, self.collection),
                entity_store=entities,
            )
        except BaseException:
            pool.close()
            raise
        self._pool = pool
        return self

    def close(self) -> None:
        """Close the pool. The adapter is unusable afterwards."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self.memory = None

    def __enter__(self) -> Mem0Adapter:
        return self.setup()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pool(self) -> ConnectionPool[Any]:
        """The adapter's connection pool (after :meth:`setup`)."""
        if self._pool is None:
            raise ConfigurationError("call setup() (or use `with Mem0Adapter(...)`) first")
        return self._pool

    # -- operations ---------------------------------------------------------------------
    @contextmanager
    def _operation(self, kind: str, *, actor: str | None, **details: Any) -> Iterator[Operation]:
        op = Operation(kind=kind, actor=actor if actor is not None else self.actor, **details)
        with run_operation(self.pool, op, detached=not self.trace_llm):
            yield op
        self._events.writes(op)

    def _scope(self, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
        if not any(isinstance(v, str) and v.strip() for v in (user_id, agent_id, run_id)):
            raise MemoryScopeError(
                "a memory operation needs user_id, agent_id or run_id (got none)"
            )

    def add(
        self,
        messages: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        reason: str | None = None,
        actor: str | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Add memories (``Memory.add``), audited; all-or-nothing.

        Args:
            messages: text, a message dict or a list of them.
            user_id / agent_id / run_id: Mem0's scope; at least one is required.
            infer: let the LLM extract facts (``True``) or store each message as is.
            reason: why the memory is written (stored in the audit row).
            actor: who writes it (default: the adapter's ``actor``).

        Returns:
            Mem0's result: ``{"results": [{"id", "memory", "event"}, ...]}``.

        Example:
            >>> memory.add("I prefer tea", user_id="alice", infer=False)  # doctest: +SKIP
            {'results': [{'id': '...', 'memory': 'I prefer tea', 'event': 'ADD', ...}]}
        """
        self._scope(user_id, agent_id, run_id)
        msgs = _normalize_messages(messages)
        if not infer:
            for m in msgs:
                if self.vector_store is not None and m.get("role") != "system":
                    self.vector_store.check_text(m.get("content"))
        with self._operation(
            "add", actor=actor, reason=reason, infer=infer, messages=json_safe(msgs)
        ):
            return self.memory.add(
                msgs,
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
                metadata=dict(metadata) if metadata is not None else None,
                infer=infer,
                **kwargs,
            )

    def update(
        self,
        memory_id: str,
        text: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        reason: str | None = None,
        actor: str | None = None,
    ) -> dict[str, Any]:
        """Replace a memory's text (``Memory.update``), audited.

        Raises:
            MemoryNotFoundError: no such memory.
            MemoryTooLargeError: ``text`` is longer than ``max_memory_chars``.
        """
        if self.vector_store is not None:
            self.vector_store.check_text(text)
        meta = dict(metadata) if metadata else None
        operation = self._operation("update", actor=actor, reason=reason)
        with _not_found_as_lookup_error(memory_id), operation:
            return self.memory.update(memory_id, text, metadata=meta)

    def delete(
        self, memory_id: str, *, reason: str | None = None, actor: str | None = None
    ) -> dict[str, Any]:
        """Delete one memory (``Memory.delete``), audited. History text stays until erased.

        Raises:
            MemoryNotFoundError: no such memory.
        """
        operation = self._operation("delete", actor=actor, reason=reason)
        with _not_found_as_lookup_error(memory_id), operation:
            return self.memory.delete(memory_id)

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """One memory by id (``Memory.get``), or ``None``."""
        return self.memory.get(memory_id)

    def get_all(self, *, filters: Mapping[str, Any], top_k: int = 100) -> dict[str, Any]:
        """Memories matching ``filters`` (which must name a user, agent or run)."""
        self._scope(*(filters.get(k) for k in SCOPE_KEYS))
        return self.memory.get_all(filters=dict(filters), top_k=top_k)

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """Mem0-shaped change history of one memory, from ``memory_events``."""
        return self.memory.history(memory_id)

    def search(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | None = None,
        top_k: int = 20,
        threshold: float = 0.1,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Search memories (``Memory.search``); records who read what with which score.

        Writes one ``memory_retrievals`` row and one ``memory_retrieval_hits`` row per
        hit, and emits a ``memory_search`` event (ids, ranks, scores; no text).

        Raises:
            MemoryScopeError: ``filters`` name no user, agent or run.

        Example:
            >>> memory.search("drinks", filters={"user_id": "alice"})  # doctest: +SKIP
            {'results': [{'id': '...', 'memory': 'I prefer tea', 'score': 0.61, ...}]}
        """
        filters = dict(filters or {})
        self._scope(*(filters.get(k) for k in SCOPE_KEYS))
        prov = graph_provenance()
        started = time.perf_counter()
        result: dict[str, Any] = self.memory.search(
            query, top_k=top_k, filters=filters, threshold=threshold, **kwargs
        )
        duration = round((time.perf_counter() - started) * 1000.0, 3)
        row = retrieval_row(
            search_id=new_id(),
            collection=self.collection,
            query=query,
            query_hash=text_hash(query, self.key),
            filters=filters,
            top_k=top_k,
            threshold=threshold,
            hits=result.get("results", []),
            duration_ms=duration,
            provenance=prov,
        )
        # before the event and before returning: the record never names a search
        # whose row a crash of this process lost (durable_reads: see the class)
        self._reads.record(self.pool, row, durable=self.durable_reads)
        self._events.search(row, prov)
        return result

    # -- erase --------------------------------------------------------------------------
    def erase(
        self,
        *,
        user_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
        erased_by: str | None = None,
        reason: str | None = None,
        vacuum: bool = False,
    ) -> ErasureReceipt:
        """Remove a subject's memories everywhere and return a content-free receipt.

        ``user_id=...`` erases every memory the user ever had (including deleted ones,
        whose text Mem0 keeps in history), the user's stored messages and the text of
        the user's searches. ``memory_ids=[...]`` erases those memories, the text of
        searches that returned them and the message context of their scopes. Vector
        rows, entity rows and stored messages are deleted; audit rows keep ids, hashes,
        times and provenance but lose text, messages, metadata, reason and user id. One
        ``ERASE`` audit row per memory and one ``memory_erasures`` receipt row are
        written in the same transaction. ``vacuum=True`` then vacuums the touched tables
        so that no dead tuple keeps the text on disk.

        Example:
            >>> receipt = memory.erase(user_id="alice", erased_by="dpo")  # doctest: +SKIP
            >>> memory.verify_erasure(receipt.erasure_id).row_counts       # doctest: +SKIP
            {'vectors': 3, 'entities': 0, 'audit_rows': 5, 'messages': 2, ...}
        """
        ids = erasure_subject(user_id, memory_ids)
        prov = graph_provenance()
        requested = datetime.now(timezone.utc)
        with self.pool.connection() as conn, conn.transaction():
            receipt = self._eraser.erase_in(conn, requested, user_id, ids, erased_by, reason)
        if vacuum:
            self._eraser.vacuum(self.dsn)
        if self.workspace is not None:
            path = self.workspace.path("memory", "erasures", f"{receipt.erasure_id}.json")
            self.workspace.write_json(path, asdict(receipt))
        self._events.erasure(receipt, prov)
        return receipt

    def verify_erasure(self, erasure_id: str) -> ErasureReceipt:
        """Re-check a receipt: its hash, and that no erased content is left anywhere.

        Raises:
            ErasureVerificationError: naming every check that failed.
        """
        with self.pool.connection() as conn:
            return self._eraser.verify(conn, erasure_id)


def _normalize_messages(messages: Any) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        return [dict(messages)]
    if isinstance(messages, Sequence):
        for m in messages:
            if not isinstance(m, Mapping):
                raise MemoryAdapterError(
                    f"messages must be text, a dict or a list of dicts (got {type(m).__name__})"
                )
        return [dict(m) for m in messages]
    raise MemoryAdapterError(f"messages must be text, a dict or a list of dicts, not {messages!r}")


@contextmanager
def _not_found_as_lookup_error(memory_id: str) -> Iterator[None]:
    """Mem0's ``ValueError("... not found")`` as :class:`MemoryNotFoundError`."""
    try:
        yield
    except ValueError as exc:
        if "not found" in str(exc) and not isinstance(exc, MemoryAdapterError):
            raise MemoryNotFoundError(f"memory {memory_id} does not exist") from exc
        raise
