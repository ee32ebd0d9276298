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

import asyncio
import hashlib
import logging
import os
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from langgraph_external import ledger
from langgraph_external._pools import check_idle
from langgraph_external.callbacks import NO_THREAD
from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.errors import ConfigurationError, LedgerUnavailableError
from langgraph_external.events import Event, EventKind, canonical_json, json_safe, new_id
from langgraph_external.keys import load_key
from langgraph_external.ledger import q
from langgraph_external.memory_adapters import _mem0_sql as S
from langgraph_external.memory_adapters._mem0_errors import (
    EmbeddingDimensionError,
    ErasureVerificationError,
    MemoryAdapterError,
    MemoryAuditError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryTooLargeError,
    PgVectorUnavailableError,
)
from langgraph_external.memory_adapters._mem0_store import (
    CURRENT_OP,
    SCOPE_KEYS,
    AuditedVectorStore,
    Operation,
    PostgresHistory,
    detached_callbacks,
    graph_provenance,
    new_pgvector,
    text_hash,
    use_connection,
)
from langgraph_external.pipeline import Pipeline
from langgraph_external.workspace import Workspace

if TYPE_CHECKING:
    from langgraph_external.external import External

__all__ = [
    "EmbeddingDimensionError",
    "ErasureReceipt",
    "ErasureVerificationError",
    "Mem0Adapter",
    "MemoryAdapterError",
    "MemoryNotFoundError",
    "MemoryScopeError",
    "MemoryTooLargeError",
    "PgVectorUnavailableError",
    "import_mem0",
]

_KIND = {"ADD": EventKind.MEMORY_ADD, "UPDATE": EventKind.MEMORY_UPDATE}
_KIND["DELETE"] = EventKind.MEMORY_DELETE

logger = logging.getLogger("langgraph_external")


def import_mem0(mem0_dir: str | os.PathLike[str] | None = None) -> Any:
    """Import ``mem0`` with telemetry forced off and its files under ``mem0_dir``.

    Mem0 reads ``MEM0_TELEMETRY`` and ``MEM0_DIR`` once, at import (it writes
    ``config.json`` there). The first import decides; later calls only re-assert that
    telemetry is off.

    Example:
        >>> import_mem0().Memory.__name__                   # doctest: +SKIP
        'Memory'
    """
    os.environ["MEM0_TELEMETRY"] = "False"
    if "mem0" not in sys.modules:
        if mem0_dir is not None:
            Path(mem0_dir).mkdir(parents=True, exist_ok=True)
            os.environ["MEM0_DIR"] = str(mem0_dir)
        elif "MEM0_DIR" not in os.environ:
            default = Path(os.path.expanduser("~")) / ".cache" / "langgraph-external" / "mem0"
            default.mkdir(parents=True, exist_ok=True)
            os.environ["MEM0_DIR"] = str(default)
    import mem0
    import mem0.memory.main as mem0_main
    import mem0.memory.telemetry as mem0_telemetry

    mem0_telemetry.MEM0_TELEMETRY = False  # in case mem0 was imported before us
    mem0_main.MEM0_TELEMETRY = False
    return mem0


@dataclass(frozen=True)
class ErasureReceipt:
    """Content-free proof of an erasure (a row of ``memory_erasures``).

    ``receipt_hash`` is the sha256 of the canonical JSON of every other field; it lets
    anyone holding the receipt check that the stored row was not altered.
    """

    erasure_id: str
    collection: str
    requested_at: str
    completed_at: str
    erased_by: str | None
    reason: str | None
    subject_kind: str
    subject_hash: str
    memory_ids: list[str]
    content_hashes: list[str]
    row_counts: dict[str, int]
    receipt_hash: str = ""

    def body(self) -> dict[str, Any]:
        """Every field but ``receipt_hash`` (what the hash covers)."""
        d = asdict(self)
        d.pop("receipt_hash")
        return d

    def sealed(self) -> ErasureReceipt:
        """This receipt with its ``receipt_hash`` computed.

        Example:
            >>> r = ErasureReceipt("e", "c", "t0", "t1", None, None, "user_id", "h", [], [], {})
            >>> len(r.sealed().receipt_hash)
            64
        """
        digest = hashlib.sha256(canonical_json(self.body()).encode()).hexdigest()
        return ErasureReceipt(**{**self.body(), "receipt_hash": digest})


class Mem0Adapter:
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
            :mod:`langgraph_external.keys`). A plain sha256 of an erased memory would let
            anyone confirm a guess of it.
        durable_reads: write retrieval rows before ``search`` returns, durably. Off by
            default: a background writer records them (retrying; :meth:`flush` waits
            and raises if one could not be written) without waiting for the WAL flush,
            so a search costs no extra round trip; a *server crash* can lose the last
            fraction of a second of read records (never a memory write, whose audit row
            always commits durably with the vector).

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
        durable_reads: bool = False,
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
        self._reads: ThreadPoolExecutor | None = None
        self._reads_lock = threading.Lock()
        self._read_failures: list[BaseException] = []

    @classmethod
    def from_external(cls, ext: External, *, llm: Any, embedder: Any, **kwargs: Any) -> Mem0Adapter:
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
        pool: ConnectionPool[Any] = ConnectionPool(
            self.dsn,
            min_size=1,
            max_size=self.pool_size,
            check=check_idle,  # died in a database restart: replaced
            open=False,
            name="lgx-mem0",
        )
        try:
            pool.open(wait=True, timeout=10)
        except PoolTimeout as exc:
            pool.close()
            raise LedgerUnavailableError(f"cannot connect to {self.dsn!r}: {exc}") from exc
        try:
            inner = new_pgvector(pool, self.collection, dims)
            entities = new_pgvector(pool, self.entity_collection, dims)
            with pool.connection() as conn:
                self._migrate(conn, inner, entities, dims)
            inner._collection_ensured = True
            entities._collection_ensured = True
            self.vector_store = AuditedVectorStore(
                inner, pool, self.schema, max_memory_chars=self.max_memory_chars, key=self.key
            )
            self.memory = self._build_memory(pool, entities, dims)
        except BaseException:
            pool.close()
            raise
        self._pool = pool
        return self

    def _migrate(self, conn: psycopg.Connection[Any], inner: Any, entities: Any, dims: int) -> None:
        ident = sql.Identifier(self.schema)
        with conn.transaction():
            lock = zlib.crc32(f"langgraph_external:mem0:{self.schema}".encode())
            conn.execute("select pg_advisory_xact_lock(%s)", (lock,))
            self._ensure_pgvector(conn)
            ledger.setup(conn, self.schema)  # the views join the run ledger
            conn.execute(sql.SQL(S.MIGRATIONS[0]).format(schema=ident))
            done = {
                int(r[0])
                for r in conn.execute(
                    sql.SQL("select v from {}.memory_migrations").format(ident)
                ).fetchall()
            }
            for v, text in enumerate(S.MIGRATIONS):
                if v not in done:
                    conn.execute(sql.SQL(text).format(schema=ident))
                    conn.execute(
                        sql.SQL("insert into {}.memory_migrations (v) values (%s)").format(ident),
                        (v,),
                    )
            for name in (self.collection, self.entity_collection):
                found = _vector_dims(conn, name)
                if found is not None and found != dims:
                    raise EmbeddingDimensionError(
                        f"collection {name!r} stores vector({found}) but the adapter was "
                        f"configured with embedding_dims={dims}"
                    )
            with use_connection(conn):
                inner.create_col()
                entities.create_col()

    def _ensure_pgvector(self, conn: psycopg.Connection[Any]) -> None:
        if conn.execute("select 1 from pg_extension where extname = 'vector'").fetchone():
            return
        available = conn.execute(
            "select 1 from pg_available_extensions where name = 'vector'"
        ).fetchone()
        where = f"database {conn.info.dbname!r} on {conn.info.host or 'localhost'}"
        if not available:
            raise PgVectorUnavailableError(
                f"the PostgreSQL server of {where} has no pgvector extension installed; "
                "install pgvector (or use the embedded server: dsn=None) and retry"
            )
        if not self.create_extension:
            raise PgVectorUnavailableError(
                f"pgvector is not enabled in {where}; run CREATE EXTENSION vector "
                "(or pass create_extension=True)"
            )
        try:
            with conn.transaction():
                conn.execute("create extension if not exists vector")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise PgVectorUnavailableError(
                f"pgvector is available but not enabled in {where}, and role "
                f"{conn.info.user!r} may not create it ({exc.diag.message_primary}); "
                "ask a superuser to run: CREATE EXTENSION vector"
            ) from exc

    def _build_memory(self, pool: ConnectionPool[Any], entities: Any, dims: int) -> Any:
        mem0 = import_mem0()
        # Mem0 builds its own PGVector and SQLite history in __init__. Give it a pool
        # that never opens (its PGVector closes its pool when collected) and an
        # in-memory SQLite (no file); both are replaced right after.
        throwaway: ConnectionPool[Any] = ConnectionPool(
            self.dsn, min_size=0, max_size=1, open=False
        )
        config = {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_pool": throwaway,
                    "collection_name": self.collection,
                    "embedding_model_dims": dims,
                },
            },
            "llm": {"provider": "langchain", "config": {"model": self.llm}},
            "embedder": {
                "provider": "langchain",
                "config": {"model": self.embedder, "embedding_dims": dims},
            },
            "history_db_path": ":memory:",
        }
        memory = mem0.Memory.from_config(config)
        memory.db.close()
        memory.db = PostgresHistory(pool, self.schema, self.collection)
        memory.vector_store = self.vector_store
        memory._entity_store = entities
        return memory

    def close(self) -> None:
        """Write pending read records, close the pool. The adapter is unusable afterwards."""
        if self._reads is not None:
            self._reads.shutdown(wait=True)
            self._reads = None
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
    def _operation(
        self,
        kind: str,
        *,
        actor: str | None = None,
        reason: str | None = None,
        infer: bool | None = None,
        messages: list[dict[str, Any]] | None = None,
    ) -> Iterator[Operation]:
        op = Operation(
            kind=kind,
            actor=actor if actor is not None else self.actor,
            reason=reason,
            infer=infer,
            messages=messages,
        )
        token = CURRENT_OP.set(op)
        try:
            with self.pool.connection() as conn:
                op.conn = conn
                try:
                    with conn.transaction(), self._maybe_detached():
                        yield op
                        if op.errors:  # Mem0 swallowed a typed error: all or nothing
                            raise op.errors[0]
                except MemoryAdapterError:
                    raise
                except Exception as exc:
                    if op.errors:
                        raise op.errors[0] from exc
                    raise
        finally:
            op.conn = None
            CURRENT_OP.reset(token)
        self._emit_writes(op)

    @contextmanager
    def _maybe_detached(self) -> Iterator[None]:
        if self.trace_llm:
            yield
        else:
            with detached_callbacks():
                yield

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
            result: dict[str, Any] = self.memory.add(
                msgs,
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
                metadata=dict(metadata) if metadata is not None else None,
                infer=infer,
                **kwargs,
            )
        return result

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
        try:
            with self._operation("update", actor=actor, reason=reason):
                result: dict[str, Any] = self.memory.update(
                    memory_id, text, metadata=dict(metadata) if metadata else None
                )
        except ValueError as exc:
            if "not found" in str(exc) and not isinstance(exc, MemoryAdapterError):
                raise MemoryNotFoundError(f"memory {memory_id} does not exist") from exc
            raise
        return result

    def delete(
        self, memory_id: str, *, reason: str | None = None, actor: str | None = None
    ) -> dict[str, Any]:
        """Delete one memory (``Memory.delete``), audited. History text stays until erased.

        Raises:
            MemoryNotFoundError: no such memory.
        """
        try:
            with self._operation("delete", actor=actor, reason=reason):
                result: dict[str, Any] = self.memory.delete(memory_id)
        except ValueError as exc:
            if "not found" in str(exc) and not isinstance(exc, MemoryAdapterError):
                raise MemoryNotFoundError(f"memory {memory_id} does not exist") from exc
            raise
        return result

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """One memory by id (``Memory.get``), or ``None``."""
        result: dict[str, Any] | None = self.memory.get(memory_id)
        return result

    def get_all(self, *, filters: Mapping[str, Any], top_k: int = 100) -> dict[str, Any]:
        """Memories matching ``filters`` (which must name a user, agent or run)."""
        self._scope(*(filters.get(k) for k in SCOPE_KEYS))
        result: dict[str, Any] = self.memory.get_all(filters=dict(filters), top_k=top_k)
        return result

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """Mem0-shaped change history of one memory, from ``memory_events``."""
        result: list[dict[str, Any]] = self.memory.history(memory_id)
        return result

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
        hits = result.get("results", [])
        search_id = new_id()
        params = {
            "search_id": search_id,
            "collection": self.collection,
            "query": query,
            "query_hash": text_hash(query, self.key),
            "filters": Jsonb(json_safe(filters)),
            "top_k": top_k,
            "threshold": threshold,
            "user_id": filters.get("user_id"),
            "agent_id": filters.get("agent_id"),
            "scope_run_id": filters.get("run_id"),
            "hit_count": len(hits),
            "duration_ms": duration,
            **prov,
            "ranks": list(range(1, len(hits) + 1)),
            "ids": [h["id"] for h in hits],
            "scores": [h.get("score") for h in hits],
        }
        if self.durable_reads:
            self._write_retrieval(params)
        else:
            # a read log, not state: written by a background writer (see durable_reads)
            self._read_log().submit(self._write_retrieval_retrying, params)
        self._emit(
            EventKind.MEMORY_SEARCH,
            "mem0.search",
            prov,
            {
                "search_id": search_id,
                "collection": self.collection,
                "query_hash": params["query_hash"],
                "top_k": top_k,
                "threshold": threshold,
                "hits": [
                    {"rank": r, "memory_id": i, "score": s}
                    for r, i, s in zip(
                        params["ranks"], params["ids"], params["scores"], strict=True
                    )
                ],
            },
            duration,
        )
        return result

    def _write_retrieval(self, params: dict[str, Any]) -> None:
        with self.pool.connection() as conn, conn.pipeline():
            if not self.durable_reads:
                conn.execute("set local synchronous_commit = off")
            conn.execute(q(S.INSERT_RETRIEVAL, self.schema), params)

    def _write_retrieval_retrying(self, params: dict[str, Any]) -> None:
        for attempt in range(4):
            try:
                self._write_retrieval(params)
                return
            except psycopg.Error as exc:
                if attempt == 3:
                    self._read_failures.append(exc)
                    logger.error("could not record a memory search: %s", exc)
                    return
                time.sleep(0.05 * 2**attempt)

    def _read_log(self) -> ThreadPoolExecutor:
        with self._reads_lock:
            if self._reads is None:
                self._reads = ThreadPoolExecutor(1, thread_name_prefix="lgx-mem0-reads")
            return self._reads

    def flush(self) -> None:
        """Wait until every search so far is in ``memory_retrievals``.

        Raises:
            MemoryAuditError: a retrieval row could not be written (after retries).
        """
        if self._reads is not None:
            self._reads.submit(lambda: None).result()
        if self._read_failures:
            failures, self._read_failures = self._read_failures, []
            raise MemoryAuditError(
                f"{len(failures)} memory search record(s) could not be written: {failures[0]}"
            )

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
        if (user_id is None) == (memory_ids is None):
            raise MemoryScopeError("erase needs exactly one of user_id=... or memory_ids=[...]")
        if user_id is not None and not (isinstance(user_id, str) and user_id.strip()):
            raise MemoryScopeError("erase(user_id=...) needs a non-empty user id")
        ids: list[str] = []
        if memory_ids is not None:
            try:
                ids = sorted({str(uuid.UUID(str(m))) for m in memory_ids})
            except ValueError as exc:
                raise MemoryScopeError(f"memory_ids must be UUIDs: {exc}") from exc
            if not ids:
                raise MemoryScopeError("erase(memory_ids=...) needs at least one id")
        prov = graph_provenance()
        self.flush()  # pending read records may hold the text about to be erased
        requested = datetime.now(timezone.utc)
        erasure_id = new_id()
        with self.pool.connection() as conn, conn.transaction():
            receipt = self._erase_in(conn, erasure_id, requested, user_id, ids, erased_by, reason)
        if vacuum:
            self._vacuum()
        self._write_receipt_file(receipt)
        self._emit(
            EventKind.MEMORY_ERASE,
            "mem0.erase",
            prov,
            {
                "erasure_id": receipt.erasure_id,
                "collection": self.collection,
                "subject_kind": receipt.subject_kind,
                "memories": len(receipt.memory_ids),
                "row_counts": receipt.row_counts,
                "receipt_hash": receipt.receipt_hash,
            },
            None,
        )
        return receipt

    def _erase_in(
        self,
        conn: psycopg.Connection[Any],
        erasure_id: str,
        requested: datetime,
        user_id: str | None,
        ids: list[str],
        erased_by: str | None,
        reason: str | None,
    ) -> ErasureReceipt:
        s = sql.Identifier(self.schema)
        col = sql.Identifier(self.collection)
        ent = sql.Identifier(self.entity_collection)
        c = self.collection
        if user_id is not None:
            rows = conn.execute(
                sql.SQL(
                    "select id::text from {col} where payload->>'user_id' = %(u)s union "
                    "select memory_id::text from {s}.memory_events "
                    "where collection = %(c)s and user_id = %(u)s"
                ).format(col=col, s=s),
                {"u": user_id, "c": c},
            ).fetchall()
            ids = sorted({r[0] for r in rows})
            subject = "user_id"
            subject_hash = text_hash(f"user_id:{user_id}", self.key)
        else:
            subject = "memory_ids"
            subject_hash = text_hash("memory_ids:" + ",".join(ids), self.key)
        assert subject_hash is not None
        # lock the vector rows first: a concurrent update waits, then finds nothing
        vec_rows = conn.execute(
            sql.SQL(
                "select id::text, payload from {} where id = any(%s::uuid[]) for update"
            ).format(col),
            (ids,),
        ).fetchall()
        texts: set[str] = set()
        scopes: set[tuple[str | None, str | None, str | None]] = set()
        for _, payload in vec_rows:
            payload = payload or {}
            if isinstance(payload.get("data"), str):
                texts.add(payload["data"])
            scopes.add(tuple(payload.get(k) for k in SCOPE_KEYS))  # type: ignore[arg-type]
        for old_t, new_t, u, a, r in conn.execute(
            sql.SQL(
                "select old_text, new_text, user_id, agent_id, scope_run_id "
                "from {}.memory_events where collection = %s and memory_id = any(%s::uuid[])"
            ).format(s),
            (c, ids),
        ).fetchall():
            texts.update(t for t in (old_t, new_t) if t is not None)
            scopes.add((u, a, r))
        counts: dict[str, int] = {}
        counts["vectors"] = conn.execute(
            sql.SQL("delete from {} where id = any(%s::uuid[])").format(col), (ids,)
        ).rowcount
        counts["entities"] = self._erase_entities(conn, ent, user_id, ids)
        counts["audit_rows"] = conn.execute(
            sql.SQL(
                "update {}.memory_events set old_text = null, new_text = null, "
                "messages = null, metadata = null, reason = null, user_id = null, "
                "erased_at = now(), erasure_id = %s "
                "where collection = %s and memory_id = any(%s::uuid[])"
            ).format(s),
            (erasure_id, c, ids),
        ).rowcount
        counts["messages"] = self._erase_messages(conn, s, user_id, scopes)
        counts["retrievals"] = conn.execute(
            sql.SQL(
                "update {s}.memory_retrievals set query = null, filters = null, "
                "user_id = null, erased_at = now() "
                "where collection = %(c)s and (user_id = %(u)s or search_id in ("
                "select search_id from {s}.memory_retrieval_hits "
                "where memory_id = any(%(ids)s::uuid[])))"
            ).format(s=s),
            {"c": c, "u": user_id, "ids": ids},
        ).rowcount
        last = {
            str(r[0]): r[1]
            for r in conn.execute(
                sql.SQL(
                    "select distinct on (memory_id) memory_id, coalesce(new_hash, old_hash) "
                    "from {}.memory_events where collection = %s and "
                    "memory_id = any(%s::uuid[]) order by memory_id, event_id desc"
                ).format(s),
                (c, ids),
            ).fetchall()
        }
        with conn.cursor() as cur:
            cur.executemany(
                q(S.INSERT_EVENT, self.schema),
                [
                    (
                        new_id(),
                        c,
                        m,
                        "ERASE",
                        None,
                        None,
                        last.get(m),
                        None,
                        None,
                        None,
                        None,
                        erased_by,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                    )
                    for m in ids
                ],
            )
            cur.execute(
                sql.SQL(
                    "update {}.memory_events set erased_at = now(), erasure_id = %s "
                    "where event = 'ERASE' and erasure_id is null and collection = %s "
                    "and memory_id = any(%s::uuid[])"
                ).format(s),
                (erasure_id, c, ids),
            )
        receipt = ErasureReceipt(
            erasure_id=erasure_id,
            collection=c,
            requested_at=requested.isoformat(),
            completed_at=datetime.now(timezone.utc).isoformat(),
            erased_by=erased_by,
            reason=reason,
            subject_kind=subject,
            subject_hash=subject_hash,
            memory_ids=ids,
            content_hashes=sorted(h for h in (text_hash(t, self.key) for t in texts) if h),
            row_counts=counts,
        ).sealed()
        conn.execute(
            sql.SQL(
                "insert into {}.memory_erasures (erasure_id, collection, requested_at, "
                "completed_at, erased_by, reason, subject_kind, subject_hash, memory_ids, "
                "content_hashes, row_counts, receipt_hash) values "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s::uuid[], %s, %s, %s)"
            ).format(s),
            (
                receipt.erasure_id,
                c,
                receipt.requested_at,
                receipt.completed_at,
                erased_by,
                reason,
                subject,
                subject_hash,
                ids,
                receipt.content_hashes,
                Jsonb(counts),
                receipt.receipt_hash,
            ),
        )
        return receipt

    def _erase_entities(
        self,
        conn: psycopg.Connection[Any],
        ent: sql.Identifier,
        user_id: str | None,
        ids: list[str],
    ) -> int:
        n = 0
        if user_id is not None:
            n += conn.execute(
                sql.SQL("delete from {} where payload->>'user_id' = %s").format(ent), (user_id,)
            ).rowcount
        # entity rows linked only to erased memories go; others just lose the links
        n += conn.execute(
            sql.SQL(
                "delete from {} where payload ? 'linked_memory_ids' and not exists ("
                "select 1 from jsonb_array_elements_text(payload->'linked_memory_ids') l "
                "where l <> all(%s::text[]))"
                " and exists (select 1 from jsonb_array_elements_text("
                "payload->'linked_memory_ids') l where l = any(%s::text[]))"
            ).format(ent),
            (ids, ids),
        ).rowcount
        n += conn.execute(
            sql.SQL(
                "update {} set payload = jsonb_set(payload, '{{linked_memory_ids}}', "
                "(select coalesce(jsonb_agg(l), '[]'::jsonb) from "
                "jsonb_array_elements_text(payload->'linked_memory_ids') l "
                "where l <> all(%s::text[]))) "
                "where payload->'linked_memory_ids' ?| %s::text[]"
            ).format(ent),
            (ids, ids),
        ).rowcount
        return n

    def _erase_messages(
        self,
        conn: psycopg.Connection[Any],
        s: sql.Identifier,
        user_id: str | None,
        scopes: set[tuple[str | None, str | None, str | None]],
    ) -> int:
        n = 0
        if user_id is not None:
            n += conn.execute(
                sql.SQL(
                    "delete from {}.memory_messages where collection = %s and user_id = %s"
                ).format(s),
                (self.collection, user_id),
            ).rowcount
        for u, a, r in scopes:
            if u is None and a is None and r is None:
                continue
            n += conn.execute(
                sql.SQL(
                    "delete from {}.memory_messages where collection = %s "
                    "and user_id is not distinct from %s and agent_id is not distinct from %s "
                    "and scope_run_id is not distinct from %s"
                ).format(s),
                (self.collection, u, a, r),
            ).rowcount
        return n

    def _vacuum(self) -> None:
        s = self.schema
        tables = [
            sql.Identifier(self.collection),
            sql.Identifier(self.entity_collection),
            *(
                sql.Identifier(s, t)
                for t in ("memory_events", "memory_messages", "memory_retrievals")
            ),
        ]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for t in tables:
                conn.execute(sql.SQL("vacuum {}").format(t))

    def _write_receipt_file(self, receipt: ErasureReceipt) -> None:
        if self.workspace is None:
            return
        path = self.workspace.path("memory", "erasures", f"{receipt.erasure_id}.json")
        self.workspace.write_json(path, asdict(receipt))

    def verify_erasure(self, erasure_id: str) -> ErasureReceipt:
        """Re-check a receipt: its hash, and that no erased content is left anywhere.

        Raises:
            ErasureVerificationError: naming every check that failed.
        """
        s = sql.Identifier(self.schema)
        problems: list[str] = []
        with self.pool.connection() as conn:
            row = conn.execute(
                sql.SQL(
                    "select erasure_id::text, collection, requested_at, completed_at, "
                    "erased_by, reason, subject_kind, subject_hash, memory_ids::text[], "
                    "content_hashes, row_counts, receipt_hash from {}.memory_erasures "
                    "where erasure_id = %s"
                ).format(s),
                (erasure_id,),
            ).fetchone()
            if row is None:
                raise ErasureVerificationError(f"no erasure receipt {erasure_id}")
            stored = ErasureReceipt(
                erasure_id=row[0],
                collection=row[1],
                requested_at=row[2].astimezone(timezone.utc).isoformat(),
                completed_at=row[3].astimezone(timezone.utc).isoformat(),
                erased_by=row[4],
                reason=row[5],
                subject_kind=row[6],
                subject_hash=row[7],
                memory_ids=list(row[8]),
                content_hashes=list(row[9]),
                row_counts=dict(row[10]),
            )
            if stored.sealed().receipt_hash != row[11]:
                problems.append("receipt_hash does not match the receipt's content")
            ids = stored.memory_ids
            checks = {
                "vectors remain": sql.SQL(
                    "select count(*) from {} where id = any(%s::uuid[])"
                ).format(sql.Identifier(stored.collection)),
                "audit rows still hold text": sql.SQL(
                    "select count(*) from {}.memory_events where memory_id = any(%s::uuid[]) "
                    "and (old_text is not null or new_text is not null or messages is not null "
                    "or metadata is not null or user_id is not null)"
                ).format(s),
                "entity rows still link the memories": sql.SQL(
                    "select count(*) from {} where payload->'linked_memory_ids' ?| %s::text[]"
                ).format(sql.Identifier(f"{stored.collection}_entities")),
            }
            for label, stmt in checks.items():
                n = conn.execute(stmt, (ids,)).fetchone()
                if n is not None and n[0]:
                    problems.append(f"{label}: {n[0]}")
            erase_rows = conn.execute(
                sql.SQL(
                    "select count(*) from {}.memory_events where event = 'ERASE' "
                    "and erasure_id = %s"
                ).format(s),
                (erasure_id,),
            ).fetchone()
            if erase_rows is None or erase_rows[0] != len(ids):
                problems.append("missing ERASE audit rows")
            present = conn.execute(
                sql.SQL(
                    "select count(*) from {}.memory_events where memory_id = any(%s::uuid[]) "
                    "and (old_hash = any(%s) or new_hash = any(%s)) and erasure_id is null"
                ).format(s),
                (ids, stored.content_hashes, stored.content_hashes),
            ).fetchone()
            if present is not None and present[0]:
                problems.append(f"events written after the erasure: {present[0]}")
        if problems:
            raise ErasureVerificationError(f"erasure {erasure_id}: " + "; ".join(problems))
        return stored.sealed()

    # -- async twins ----------------------------------------------------------------------
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

    # -- events -------------------------------------------------------------------------
    def _emit_writes(self, op: Operation) -> None:
        for w in op.writes:
            self._emit(
                _KIND[w.event],
                f"mem0.{op.kind}",
                op.provenance,
                {
                    "op_id": op.op_id,
                    "audit_event_id": w.audit_id,
                    "collection": self.collection,
                    "memory_id": w.memory_id,
                    "event": w.event,
                    "old_hash": w.old_hash,
                    "new_hash": w.new_hash,
                    "infer": op.infer,
                },
                None,
            )

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
        event = Event.new(
            kind,
            prov.get("thread_id") or NO_THREAD,
            name=name,
            status="ok",
            payload=payload,
            run_id=prov.get("run_id"),
            root_run_id=prov.get("root_run_id"),
            checkpoint_ns=prov.get("checkpoint_ns") or "",
            checkpoint_id=prov.get("checkpoint_id"),
            node=prov.get("node"),
            step=prov.get("step"),
            task_id=prov.get("task_id"),
            duration_ms=duration,
        )
        self.pipeline.emit(event)


def _normalize_messages(messages: Any) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        return [dict(messages)]
    if isinstance(messages, Sequence):
        out = []
        for m in messages:
            if not isinstance(m, Mapping):
                raise MemoryAdapterError(
                    f"messages must be text, a dict or a list of dicts (got {type(m).__name__})"
                )
            out.append(dict(m))
        return out
    raise MemoryAdapterError(f"messages must be text, a dict or a list of dicts, not {messages!r}")


def _vector_dims(conn: psycopg.Connection[Any], table: str) -> int | None:
    row = conn.execute(
        "select a.atttypmod from pg_attribute a join pg_class c on c.oid = a.attrelid "
        "join pg_namespace n on n.oid = c.relnamespace "
        "where n.nspname = 'public' and c.relname = %s and a.attname = 'vector' "
        "and not a.attisdropped",
        (table,),
    ).fetchone()
    return int(row[0]) if row is not None and row[0] > 0 else None


def dumps_receipt(receipt: ErasureReceipt) -> str:
    """The receipt as canonical JSON (what a data-protection officer archives).

    Example:
        >>> import json
        >>> r = ErasureReceipt("e", "c", "t0", "t1", None, None, "user_id", "h", [], [], {})
        >>> json.loads(dumps_receipt(r))["subject_kind"]
        'user_id'
    """
    return canonical_json(asdict(receipt))
