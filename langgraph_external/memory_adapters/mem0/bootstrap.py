"""Setting up the adapter's storage: its pool, pgvector, the migrations, Mem0's vector stores.

The tables are created in one transaction under an advisory lock per schema, so two
processes setting up at once do not race and a failure leaves nothing behind.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from langgraph_external.errors import LedgerUnavailableError
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.pools import POOL_MAX_IDLE, check_idle
from langgraph_external.memory_adapters.mem0 import sql as S
from langgraph_external.memory_adapters.mem0.errors import (
    EmbeddingDimensionError,
    PgVectorUnavailableError,
)
from langgraph_external.memory_adapters.mem0.store import joined_cursor, use_connection
from langgraph_external.upstream.mem0 import mark_collection_ensured, new_pgvector


def open_pool(dsn: str, size: int) -> ConnectionPool[Any]:
    """The adapter's connection pool, open.

    Raises:
        LedgerUnavailableError: Postgres cannot be reached within 10 s.
    """
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn,
        min_size=1,
        max_size=size,
        max_idle=POOL_MAX_IDLE,
        check=check_idle,  # died in a database restart: replaced
        open=False,
        name="lgx-mem0",
    )
    try:
        pool.open(wait=True, timeout=10)
    except PoolTimeout as exc:
        pool.close()
        raise LedgerUnavailableError(f"cannot connect to {dsn!r}: {exc}") from exc
    return pool


def open_stores(
    pool: ConnectionPool[Any], schema: str, collection: str, dims: int, *, create_extension: bool
) -> tuple[Any, Any]:
    """Mem0 vector stores of ``collection`` and of its entities, their tables set up.

    Their statements join the adapter's transactions (``store.joined_cursor``).
    """
    inner = new_pgvector(pool, collection, dims, joined_cursor)
    entities = new_pgvector(pool, f"{collection}_entities", dims, joined_cursor)
    with pool.connection() as conn:
        migrate(conn, schema, (inner, entities), dims, create_extension=create_extension)
    mark_collection_ensured(inner)
    mark_collection_ensured(entities)
    return inner, entities


def migrate(
    conn: psycopg.Connection[Any],
    schema: str,
    stores: Sequence[Any],
    dims: int,
    *,
    create_extension: bool,
) -> None:
    """Create (or upgrade) the adapter's tables and the ``stores``' vector tables.

    ``stores`` are Mem0 ``PGVector`` stores; each keeps its table in schema ``public``.

    Raises:
        PgVectorUnavailableError: the server lacks pgvector, or it is not enabled and
            ``create_extension`` is false or this role may not create it.
        EmbeddingDimensionError: a store's table exists with another dimension.
    """
    with conn.transaction():
        lock = zlib.crc32(f"langgraph_external:mem0:{schema}".encode())
        conn.execute(S.SETUP_LOCK, (lock,))
        ensure_pgvector(conn, create_extension=create_extension)
        ledger.setup(conn, schema)  # the views join the run ledger
        conn.execute(S.compose(S.MIGRATIONS[0], schema))
        done = {int(r[0]) for r in conn.execute(S.compose(S.SELECT_MIGRATIONS, schema))}
        for v, text in enumerate(S.MIGRATIONS):
            if v not in done:
                conn.execute(S.compose(text, schema))
                conn.execute(S.compose(S.INSERT_MIGRATION, schema), (v,))
        for store in stores:
            name = store.collection_name
            found = vector_dims(conn, name)
            if found is not None and found != dims:
                raise EmbeddingDimensionError(
                    f"collection {name!r} stores vector({found}) but the adapter was "
                    f"configured with embedding_dims={dims}"
                )
        with use_connection(conn):
            for store in stores:
                store.create_col()


def ensure_pgvector(conn: psycopg.Connection[Any], *, create_extension: bool) -> None:
    """Make sure pgvector is enabled in ``conn``'s database.

    Raises:
        PgVectorUnavailableError: with what to do about it.
    """
    if conn.execute(S.PGVECTOR_ENABLED).fetchone():
        return
    available = conn.execute(S.PGVECTOR_AVAILABLE).fetchone()
    where = f"database {conn.info.dbname!r} on {conn.info.host or 'localhost'}"
    if not available:
        raise PgVectorUnavailableError(
            f"the PostgreSQL server of {where} has no pgvector extension installed; "
            "install pgvector (or use the embedded server: dsn=None) and retry"
        )
    if not create_extension:
        raise PgVectorUnavailableError(
            f"pgvector is not enabled in {where}; run CREATE EXTENSION vector "
            "(or pass create_extension=True)"
        )
    try:
        with conn.transaction():
            conn.execute(S.CREATE_PGVECTOR)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise PgVectorUnavailableError(
            f"pgvector is available but not enabled in {where}, and role "
            f"{conn.info.user!r} may not create it ({exc.diag.message_primary}); "
            "ask a superuser to run: CREATE EXTENSION vector"
        ) from exc


def vector_dims(conn: psycopg.Connection[Any], table: str) -> int | None:
    """``N`` of the ``vector(N)`` column of ``public.<table>``; ``None`` if there is none."""
    row = conn.execute(S.VECTOR_DIMS, (table,)).fetchone()
    return int(row[0]) if row is not None and row[0] > 0 else None
