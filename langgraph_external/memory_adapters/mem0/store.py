"""The storage boundary of the Mem0 adapter: audited vectors, Postgres history, context.

Three seams of ``mem0.Memory`` are filled here (Mem0 has no hooks, see FACTS):

* ``memory.vector_store`` becomes an :class:`AuditedVectorStore`. Every insert, update and
  delete writes the vector row and its ``memory_events`` row in one transaction; the
  audit row carries old/new text and hashes, scope ids, actor, reason, source messages
  and the graph provenance of the calling node.
* ``memory.db`` (Mem0's SQLite history) becomes a :class:`PostgresHistory`: history is
  read from ``memory_events`` (written with the vector), and the short message context
  Mem0 keeps goes to ``memory_messages``.
* An *operation* (one adapter call such as ``add``) runs in one Postgres transaction held
  in a context variable; Mem0's individual statements become savepoints inside it, so an
  operation is all-or-nothing even when Mem0 writes several memories.

Nothing here imports ``mem0``: what touches Mem0's internals is in
:mod:`langgraph_external.upstream.mem0`, which imports it on first use.

Example:
    >>> text_hash("I like tea")[:12]
    '66653c22a910'
    >>> parse_session_scope("agent_id=a1&user_id=alice%26bob")
    {'agent_id': 'a1', 'user_id': 'alice&bob'}
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import psycopg
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.config import get_config
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from langgraph_external.errors import ConfigurationError
from langgraph_external.memory_adapters.mem0 import sql as S
from langgraph_external.memory_adapters.mem0.errors import (
    EmbeddingDimensionError,
    MemoryAdapterError,
    MemoryNotFoundError,
    MemoryTooLargeError,
)
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import json_safe, new_id
from langgraph_external.record.keys import memory_hash
from langgraph_external.record.namespaces import where_of
from langgraph_external.record.thread_ids import check_thread_id
from langgraph_external.sources.callbacks import AuditCallbackHandler
from langgraph_external.upstream.langgraph import execution_info
from langgraph_external.upstream.mem0 import parse_session_scope

SCOPE_KEYS = ("user_id", "agent_id", "run_id")
# Payload keys Mem0 manages itself; everything else is the caller's metadata.
_CORE_KEYS = frozenset(
    {"data", "hash", "text_lemmatized", "created_at", "updated_at", "actor_id", "role"}
    | set(SCOPE_KEYS)
)
# what graph_provenance() reports, in the column order of the audit tables
_PROVENANCE_KEYS = (
    "thread_id",
    "run_id",
    "root_run_id",
    "checkpoint_ns",
    "checkpoint_id",
    "node",
    "step",
    "task_id",
)


def text_hash(text: str | None, key: WorkspaceCipher | None = None) -> str | None:
    """The content-free fingerprint of ``text`` (``None`` stays ``None``).

    Keyed (HMAC-SHA256 of the deployment ``key``) in everything the adapter records: a
    plain sha256 of a short memory or query, kept after the text was erased, would let
    anyone confirm a guess of it. Without ``key``: sha256 hex.
    """
    return None if text is None else memory_hash(text, key)


# -- graph provenance ---------------------------------------------------------------------
def graph_provenance() -> dict[str, Any]:
    """Thread, run, checkpoint, node, step and task of the graph task calling us, if any.

    ``run_id`` is the LangChain run id of the node (the ``run_id`` of its ``node_start``
    event in the ledger); ``root_run_id`` the root run id of the graph invocation (the
    ``run_id`` of its ``run_start`` event), asked of the audit callback handler attached
    to the run, else the ``run_id`` the caller put in the config. Outside a graph every
    value is ``None``.

    Raises:
        InvalidThreadIdError: the graph's thread id cannot be recorded (checked before
            the adapter touches Mem0 or its audit tables, as the checkpointer checks it).

    Example:
        >>> graph_provenance()["root_run_id"] is None  # not inside a graph task
        True
    """
    try:
        config = get_config()
    except RuntimeError:  # not inside a runnable
        return dict.fromkeys(_PROVENANCE_KEYS)
    md = config.get("metadata") or {}
    conf = config.get("configurable") or {}
    task_id, parent_ns = where_of(md, conf)
    info = execution_info(config)
    callbacks = config.get("callbacks")
    node_run = getattr(callbacks, "parent_run_id", None)
    checkpoint_id = (
        getattr(info, "checkpoint_id", None)
        or (conf.get("checkpoint_map") or {}).get(parent_ns)
        or conf.get("checkpoint_id")
    )
    root = (
        _audited_root(callbacks, node_run) or getattr(info, "run_id", None) or config.get("run_id")
    )
    thread = conf.get("thread_id") or md.get("thread_id")
    step = md.get("langgraph_step")
    return {
        "thread_id": check_thread_id(thread) if thread is not None else None,
        "run_id": str(node_run) if node_run is not None else None,
        "root_run_id": str(root) if root is not None else None,
        "checkpoint_ns": parent_ns if md.get("langgraph_node") else None,
        "checkpoint_id": str(checkpoint_id) if checkpoint_id else None,
        "node": md.get("langgraph_node"),
        "step": int(step) if step is not None else None,
        "task_id": task_id,
    }


def _audited_root(callbacks: Any, node_run: Any) -> str | None:
    """Root run id of ``node_run`` per the :class:`AuditCallbackHandler` among ``callbacks``
    (LangChain keeps none in a node's config; the handler that recorded ``run_start`` does)."""
    if node_run is None:
        return None
    for h in getattr(callbacks, "handlers", None) or []:
        if isinstance(h, AuditCallbackHandler):
            root = h.root_run_id(node_run)
            if root is not None:
                return root
    return None


@contextmanager
def detached_callbacks() -> Iterator[None]:
    """Hide the graph's callbacks from LangChain calls made inside Mem0.

    Mem0's extraction prompt contains memory text and user messages; recorded by the
    audit handler it would land in the hash-chained ledger, where :meth:`erase` could
    never remove it. The memory adapter records those operations itself instead.
    """
    token = var_child_runnable_config.set(None)
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


# -- operations ---------------------------------------------------------------------------
@dataclass
class Write:
    """One audited vector write, reported to the pipeline after the commit."""

    event: str
    memory_id: str
    audit_id: int
    old_hash: str | None
    new_hash: str | None


@dataclass
class Operation:
    """One adapter call: its transaction, who asked, why, and what it wrote."""

    kind: str
    conn: psycopg.Connection[Any] | None = None
    op_id: str = field(default_factory=lambda: new_id())
    actor: str | None = None
    reason: str | None = None
    infer: bool | None = None
    messages: list[dict[str, Any]] | None = None
    provenance: dict[str, Any] = field(default_factory=graph_provenance)
    writes: list[Write] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)


CURRENT_OP: contextvars.ContextVar[Operation | None] = contextvars.ContextVar(
    "lgx_mem0_operation", default=None
)
# Set inside one audited write: statements run on it directly (no extra savepoint).
_UNIT_CONN: contextvars.ContextVar[psycopg.Connection[Any] | None] = contextvars.ContextVar(
    "lgx_mem0_unit_conn", default=None
)


@contextmanager
def run_operation(
    pool: ConnectionPool[Any], op: Operation, *, detached: bool
) -> Iterator[Operation]:
    """Run ``op`` as one transaction: every statement Mem0 makes meanwhile joins it.

    All or nothing: a typed error Mem0 swallowed (:meth:`AuditedVectorStore.check_text`
    and the others note theirs in ``op.errors``) rolls the transaction back and is raised.
    ``detached`` hides the graph's callbacks from Mem0's LLM calls
    (:func:`detached_callbacks`).
    """
    token = CURRENT_OP.set(op)
    try:
        with pool.connection() as conn:
            op.conn = conn
            try:
                with conn.transaction(), detached_callbacks() if detached else nullcontext():
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


@contextmanager
def use_connection(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Run Mem0's statements on ``conn`` (inside the caller's transaction)."""
    token = _UNIT_CONN.set(conn)
    try:
        yield
    finally:
        _UNIT_CONN.reset(token)


@contextmanager
def unit_of_work(pool: ConnectionPool[Any]) -> Iterator[psycopg.Connection[Any]]:
    """A transaction: a savepoint in the current operation, else a fresh one from ``pool``."""
    unit = _UNIT_CONN.get()
    if unit is not None:
        with unit.transaction():
            yield unit
        return
    op = CURRENT_OP.get()
    if op is not None and op.conn is not None:
        with op.conn.transaction(), use_connection(op.conn):
            yield op.conn
        return
    with pool.connection() as conn, conn.transaction(), use_connection(conn):
        yield conn


def joined_cursor() -> AbstractContextManager[Any] | None:
    """The cursor Mem0's ``PGVector`` runs a statement on (see ``upstream.mem0.new_pgvector``).

    Inside one audited write: its connection, as it is. Inside an operation: a savepoint
    of the operation's transaction (Mem0 swallows some errors, keyword search for one,
    and carries on). Elsewhere ``None``: the store takes a connection of its own.
    """
    unit = _UNIT_CONN.get()
    if unit is not None:
        return unit.cursor()
    op = CURRENT_OP.get()
    if op is not None and op.conn is not None:
        return _savepoint_cursor(op.conn)
    return None


@contextmanager
def _savepoint_cursor(conn: psycopg.Connection[Any]) -> Iterator[Any]:
    with conn.transaction(), conn.cursor() as cur:
        yield cur


# -- the audited vector store ---------------------------------------------------------------
class AuditedVectorStore:
    """Mem0's pgvector store with an audit row written in the same transaction.

    Placed in ``memory.vector_store``. Reads go straight to the wrapped store; ``insert``,
    ``update`` and ``delete`` check their input (dimensions, size), then write the vector
    row and the ``memory_events`` row inside one transaction (a savepoint of the current
    operation when there is one). Anything else is delegated unchanged.
    """

    def __init__(
        self,
        inner: Any,
        pool: ConnectionPool[Any],
        schema: str,
        *,
        max_memory_chars: int,
        key: WorkspaceCipher | None = None,
    ) -> None:
        self.inner = inner
        self.key = key
        self.pool = pool
        self.schema = schema
        self.collection_name: str = inner.collection_name
        self.embedding_model_dims: int = inner.embedding_model_dims
        self.max_memory_chars = max_memory_chars
        self._insert_event = S.compose(S.INSERT_EVENT_RETURNING_ID, schema)
        self._select_for_update = S.compose(S.LOCK_VECTOR_PAYLOAD, collection=self.collection_name)
        # test seam: runs after the vector statement, before the audit row
        self.before_audit: Callable[[str, str], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # -- checks ------------------------------------------------------------------------
    def check_vector(self, vector: Sequence[float] | None) -> None:
        """Raise :class:`EmbeddingDimensionError` unless ``vector`` fits ``vector(N)``."""
        if vector is not None and len(vector) != self.embedding_model_dims:
            raise self._fail(
                EmbeddingDimensionError(
                    f"the embedder returned {len(vector)} dimensions but collection "
                    f"{self.collection_name!r} stores vector({self.embedding_model_dims})"
                )
            )

    def check_text(self, text: Any) -> None:
        """Raise :class:`MemoryTooLargeError` when ``text`` exceeds ``max_memory_chars``."""
        if isinstance(text, str) and len(text) > self.max_memory_chars:
            raise self._fail(
                MemoryTooLargeError(
                    f"memory of {len(text)} characters exceeds max_memory_chars="
                    f"{self.max_memory_chars}"
                )
            )

    @staticmethod
    def _fail(exc: Exception) -> Exception:
        op = CURRENT_OP.get()
        if op is not None:
            op.errors.append(exc)  # Mem0 may swallow it; the adapter re-raises it
        return exc

    # -- reads -------------------------------------------------------------------------
    def search(
        self, query: str, vectors: Sequence[float], top_k: int = 5, filters: Any = None
    ) -> Any:
        """Similarity search (dimension-checked)."""
        self.check_vector(vectors)
        return self.inner.search(query=query, vectors=vectors, top_k=top_k, filters=filters)

    # -- audited writes ----------------------------------------------------------------
    def insert(
        self, vectors: Sequence[Sequence[float]], payloads: Any = None, ids: Any = None
    ) -> None:
        """Insert vectors and one ``ADD`` audit row each, in one transaction."""
        payloads = list(payloads or [{} for _ in vectors])
        ids = [str(i) for i in (ids or [new_id() for _ in vectors])]
        for vector, payload in zip(vectors, payloads, strict=True):
            self.check_vector(vector)
            self.check_text(payload.get("data"))
        with unit_of_work(self.pool) as conn:
            self.inner.insert(vectors=vectors, payloads=payloads, ids=ids)
            for memory_id, payload in zip(ids, payloads, strict=True):
                self._audit(conn, "ADD", memory_id, None, payload)

    def update(
        self, vector_id: str, vector: Sequence[float] | None = None, payload: Any = None
    ) -> None:
        """Update a vector/payload and write an ``UPDATE`` audit row, in one transaction."""
        self.check_vector(vector)
        if payload is not None:
            self.check_text(payload.get("data"))
        with unit_of_work(self.pool) as conn:
            old = self._lock_row(conn, vector_id)
            self.inner.update(vector_id=vector_id, vector=vector, payload=payload)
            self._audit(conn, "UPDATE", str(vector_id), old, payload if payload else old)

    def delete(self, vector_id: str) -> None:
        """Delete a vector and write a ``DELETE`` audit row, in one transaction."""
        with unit_of_work(self.pool) as conn:
            old = self._lock_row(conn, vector_id)
            self.inner.delete(vector_id=vector_id)
            self._audit(conn, "DELETE", str(vector_id), old, None)

    def _lock_row(self, conn: psycopg.Connection[Any], vector_id: str) -> dict[str, Any]:
        row = conn.execute(self._select_for_update, (str(vector_id),)).fetchone()
        if row is None:
            raise self._fail(MemoryNotFoundError(f"memory {vector_id} does not exist"))
        return dict(row[0] or {})

    def _audit(
        self,
        conn: psycopg.Connection[Any],
        event: str,
        memory_id: str,
        old: Mapping[str, Any] | None,
        new: Mapping[str, Any] | None,
    ) -> None:
        if self.before_audit is not None:
            self.before_audit(event, memory_id)
        # outside an operation (Mem0 called directly) the write is an operation of its own
        op = CURRENT_OP.get() or Operation(kind=event.lower())
        scope = new or old or {}
        old_text = old.get("data") if old else None
        new_text = new.get("data") if new else None
        old_hash, new_hash = text_hash(old_text, self.key), text_hash(new_text, self.key)
        meta = {k: v for k, v in scope.items() if k not in _CORE_KEYS}
        row = conn.execute(
            self._insert_event,
            (
                op.op_id,
                self.collection_name,
                memory_id,
                event,
                old_text,
                new_text,
                old_hash,
                new_hash,
                scope.get("user_id"),
                scope.get("agent_id"),
                scope.get("run_id"),
                op.actor,
                scope.get("actor_id"),
                scope.get("role"),
                op.reason,
                op.infer,
                Jsonb(op.messages) if op.messages is not None else None,
                Jsonb(json_safe(meta)) if meta else None,
                *(op.provenance[k] for k in _PROVENANCE_KEYS),
            ),
        ).fetchone()
        assert row is not None
        op.writes.append(Write(event, memory_id, int(row[0]), old_hash, new_hash))


# -- Mem0's history, in Postgres --------------------------------------------------------------
class PostgresHistory:
    """Drop-in for Mem0's ``SQLiteManager`` (``memory.db``), backed by the ledger's Postgres.

    History rows are the ``memory_events`` rows the :class:`AuditedVectorStore` wrote in the
    vector's own transaction, so ``add_history`` has nothing left to do; stored messages go
    to ``memory_messages`` inside the current operation.
    """

    def __init__(self, pool: ConnectionPool[Any], schema: str, collection: str) -> None:
        self.pool = pool
        self.schema = schema
        self.collection = collection

    def add_history(
        self, memory_id: str, old_memory: Any, new_memory: Any, event: str, **_: Any
    ) -> None:
        """Already recorded with the vector write (same transaction); nothing to do."""
        del memory_id, old_memory, new_memory, event  # Mem0's signature

    def batch_add_history(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Already recorded with the vector writes (same transaction); nothing to do."""
        del records  # Mem0's signature

    def get_history(self, memory_id: str) -> list[dict[str, Any]]:
        """Mem0-shaped history of ``memory_id``, oldest first (erased text reads ``None``)."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                S.compose(S.SELECT_HISTORY, self.schema), (str(memory_id), self.collection)
            ).fetchall()
        return [
            {
                "id": str(r[0]),
                "memory_id": str(r[1]),
                "old_memory": r[2],
                "new_memory": r[3],
                "event": r[4],
                "created_at": r[5].isoformat(),
                "updated_at": r[5].isoformat(),
                "is_deleted": r[4] in ("DELETE", "ERASE"),
                "actor_id": r[6],
                "role": r[7],
            }
            for r in rows
        ]

    def save_messages(self, messages: Sequence[Mapping[str, Any]], session_scope: str) -> None:
        """Keep the last ten messages of ``session_scope`` (Mem0's extraction context)."""
        if not messages:
            return
        scope = parse_session_scope(session_scope)
        rows = [
            (
                self.collection,
                session_scope,
                scope.get("user_id"),
                scope.get("agent_id"),
                scope.get("run_id"),
                m.get("role"),
                m.get("content")
                if isinstance(m.get("content"), str)
                else json.dumps(m.get("content")),
                m.get("name"),
            )
            for m in messages
        ]
        with unit_of_work(self.pool) as conn:
            with conn.cursor() as cur:
                cur.executemany(S.compose(S.INSERT_MESSAGE, self.schema), rows)
            conn.execute(
                S.compose(S.EVICT_MESSAGES, self.schema), {"c": self.collection, "s": session_scope}
            )

    def get_last_messages(self, session_scope: str, limit: int = 10) -> list[dict[str, Any]]:
        """The most recent ``limit`` messages of ``session_scope``, oldest first."""
        with unit_of_work(self.pool) as conn:
            rows = conn.execute(
                S.compose(S.SELECT_LAST_MESSAGES, self.schema),
                (self.collection, session_scope, limit),
            ).fetchall()
        return [
            {"role": r[0], "content": r[1], "name": r[2], "created_at": r[3].isoformat()}
            for r in rows
        ]

    def reset(self) -> None:
        """Refused: it would drop the audit trail. Use ``Mem0Adapter.erase`` instead."""
        raise ConfigurationError(
            "Memory.reset() would drop the audit trail and fall back to SQLite; "
            "use Mem0Adapter.erase(user_id=... | memory_ids=...) instead"
        )

    def close(self) -> None:
        """Nothing to close: the connection pool belongs to the adapter."""
