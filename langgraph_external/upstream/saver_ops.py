"""The official Postgres saver's tables: their names, and the SQL the record runs on them.

``copy_thread`` and ``delete_for_runs`` — the official savers have neither. Each runs in
one transaction on the saver's own connection (and under its lock), so it is
all-or-nothing and never races the saver's own statements on a shared connection.

Also here, as named statements: what the sealer reads back of a captured checkpoint or
task write (one index look-up per request), the saver's migration version, and what the
operations read and change in the saver's tables (``lgx verify`` compares them with the
ledger, ``lgx repair`` captures what the ledger lacks of them, ``lgx prune`` deletes
checkpoints, ``lgx import`` checks a thread is new, ``lgx setup --roles`` grants on them);
those that join the ledger's tables name its schema ``{schema}``. The tables live in the
search path's first schema (``public``) of the saver's database; the table layout was
checked against langgraph-checkpoint-postgres 3.2.0 (``tests/test_compat.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
"""The official Postgres saver's tables (schema ``public``)."""

# the official Postgres saver's channel values, by (thread, namespace, channel, version);
# unqualified like the saver's own statements (the same connection settings find them)
SAVER_BLOBS_SQL = (
    "select channel, version, blob from checkpoint_blobs where thread_id = %s"
    " and checkpoint_ns = %s and channel = any(%s) and version = any(%s)"
)

# What the sealer reads back to build a captured checkpoint's or writes' event (same
# tables, unqualified like the saver's own statements). The requests are one JSON array of
# 4-item arrays; rows come back by the position ``i`` of the request they answer; a
# checkpoint the saver no longer holds (deleted, pruned) comes back with nulls.
_REQUESTS = """
(select r ->> 0 as a, r ->> 1 as b, r ->> 2 as c, r ->> 3 as d, i
 from jsonb_array_elements(%s::jsonb) with ordinality as j(r, i))"""

SAVER_CHECKPOINT_ROWS_SQL = f"""
select t.i, c.checkpoint, c.metadata, p.checkpoint
from {_REQUESTS} as t(tid, ns, cid, pid, i)
left join lateral (
    select checkpoint, metadata from checkpoints
    where thread_id = t.tid and checkpoint_ns = t.ns and checkpoint_id = t.cid offset 0
) c on true
left join lateral (
    select checkpoint from checkpoints
    where thread_id = t.tid and checkpoint_ns = t.ns and checkpoint_id = t.pid offset 0
) p on true
"""

# (each request is its own index look-up: a lateral subquery kept apart by ``offset 0``,
# so the planner cannot turn it into a hash join over a scan of the saver's whole table,
# which it prefers for its guess of 100 requests and which costs what the saver holds)
SAVER_BLOB_ROWS_SQL = f"""
select t.i, b.type, b.blob
from {_REQUESTS} as t(tid, ns, ch, ver, i)
cross join lateral (
    select type, blob from checkpoint_blobs
    where thread_id = t.tid and checkpoint_ns = t.ns and channel = t.ch and version = t.ver offset 0
) b
"""

SAVER_WRITE_ROWS_SQL = f"""
select t.i, w.idx, w.channel, w.type, w.blob, w.task_path
from {_REQUESTS} as t(tid, ns, cid, task, i)
cross join lateral (
    select idx, channel, type, blob, task_path from checkpoint_writes
    where thread_id = t.tid and checkpoint_ns = t.ns and checkpoint_id = t.cid
        and task_id = t.task offset 0
) w
"""

SAVER_VERSION_SQL = (
    "select case when to_regclass('checkpoint_migrations') is null then -1"
    " else (select coalesce(max(v), -1) from checkpoint_migrations) end as v"
)
"""The last migration the official saver's ``setup()`` ran here (-1: none, no table)."""

# Returns (thread_id, checkpoint_ns, checkpoint_id) of the removed checkpoints.
SELECT_RUN_CHECKPOINTS = """
select thread_id, checkpoint_ns, checkpoint_id from checkpoints
where metadata->>'run_id' = any(%s)
"""

DELETE_RUN_ROWS = (
    """
    delete from checkpoint_writes w using checkpoints c
    where c.metadata->>'run_id' = any(%(runs)s)
      and w.thread_id = c.thread_id and w.checkpoint_ns = c.checkpoint_ns
      and w.checkpoint_id = c.checkpoint_id
    """,
    "delete from checkpoints where metadata->>'run_id' = any(%(runs)s)",
    # blobs no remaining checkpoint of the affected threads refers to
    """
    delete from checkpoint_blobs b
    where b.thread_id = any(%(threads)s)
      and not exists (
        select 1 from checkpoints c
        where c.thread_id = b.thread_id and c.checkpoint_ns = b.checkpoint_ns
          and c.checkpoint -> 'channel_versions' ->> b.channel = b.version
      )
    """,
)

COPY_THREAD_ROWS = (
    """
    insert into checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
        type, checkpoint, metadata)
    select %(dst)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
        metadata
    from checkpoints where thread_id = %(src)s
    on conflict do nothing
    """,
    """
    insert into checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    select %(dst)s, checkpoint_ns, channel, version, type, blob
    from checkpoint_blobs where thread_id = %(src)s
    on conflict do nothing
    """,
    """
    insert into checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,
        task_path, idx, channel, type, blob)
    select %(dst)s, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type,
        blob
    from checkpoint_writes where thread_id = %(src)s
    on conflict do nothing
    """,
)


def bulk_insert(saver: Any, rows: Mapping[str, Sequence[Any]]) -> None:
    """Write the official saver's rows in one transaction, one ``executemany`` per table.

    ``rows`` maps a key of :func:`langgraph_external.upstream.langgraph.saver_statements` (blobs,
    checkpoints, writes_upsert, writes_insert) to the rows of that statement, shaped by
    ``_compat.saver_put_rows`` / ``saver_write_rows``. psycopg sends each
    ``executemany`` as one pipeline: a few round trips instead of two per checkpoint.
    All or nothing, on the saver's own connection and under its lock.
    """
    from langgraph_external.upstream import langgraph as _compat  # lazy: start-up time

    sql = _compat.saver_statements()
    with _sync_conn(saver) as conn, conn.transaction(), conn.cursor() as cur:
        for key in ("blobs", "checkpoints", "writes_insert", "writes_upsert"):
            if rows.get(key):
                cur.executemany(sql[key], rows[key])


LIST_THREAD_CHECKPOINTS = """
select checkpoint_ns, checkpoint_id from checkpoints where thread_id = %s
"""


@contextmanager
def _sync_conn(saver: Any) -> Iterator[psycopg.Connection[Any]]:
    with saver.lock:
        conn = saver.conn
        if isinstance(conn, ConnectionPool):
            with conn.connection() as c:
                yield c
        else:
            yield conn


@asynccontextmanager
async def _async_conn(saver: Any) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with saver.lock:
        conn = saver.conn
        if isinstance(conn, AsyncConnectionPool):
            async with conn.connection() as c:
                yield c
        else:
            yield conn


Removed = dict[str, dict[str, list[str]]]  # thread -> ns -> checkpoint ids


def _group(rows: Sequence[Any]) -> Removed:
    out: Removed = {}
    for r in rows:
        tid, ns, cid = (
            (r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"]) if isinstance(r, dict) else r
        )
        out.setdefault(tid, {}).setdefault(ns, []).append(cid)
    return out


def delete_for_runs(saver: Any, run_ids: Sequence[str]) -> Removed:
    """Delete every checkpoint (with its writes and orphaned blobs) of ``run_ids``."""
    runs = [str(r) for r in run_ids]
    if not runs:
        return {}
    with _sync_conn(saver) as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute(SELECT_RUN_CHECKPOINTS, (runs,))
        removed = _group(cur.fetchall())
        if removed:
            params = {"runs": runs, "threads": list(removed)}
            for stmt in DELETE_RUN_ROWS:
                cur.execute(stmt, params)
    return removed


async def adelete_for_runs(saver: Any, run_ids: Sequence[str]) -> Removed:
    """Async twin of :func:`delete_for_runs`."""
    runs = [str(r) for r in run_ids]
    if not runs:
        return {}
    async with _async_conn(saver) as conn, conn.transaction(), conn.cursor() as cur:
        await cur.execute(SELECT_RUN_CHECKPOINTS, (runs,))
        removed = _group(await cur.fetchall())
        if removed:
            params = {"runs": runs, "threads": list(removed)}
            for stmt in DELETE_RUN_ROWS:
                await cur.execute(stmt, params)
    return removed


def copy_thread(saver: Any, source: str, target: str) -> int:
    """Copy all checkpoints, blobs and writes of ``source`` to ``target``; returns count."""
    params = {"src": str(source), "dst": str(target)}
    with _sync_conn(saver) as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute(COPY_THREAD_ROWS[0], params)
        n = cur.rowcount
        for stmt in COPY_THREAD_ROWS[1:]:
            cur.execute(stmt, params)
    return n


async def acopy_thread(saver: Any, source: str, target: str) -> int:
    """Async twin of :func:`copy_thread`."""
    params = {"src": str(source), "dst": str(target)}
    async with _async_conn(saver) as conn, conn.transaction(), conn.cursor() as cur:
        await cur.execute(COPY_THREAD_ROWS[0], params)
        n = cur.rowcount
        for stmt in COPY_THREAD_ROWS[1:]:
            await cur.execute(stmt, params)
    return n


def list_checkpoint_ids(saver: Any, thread_id: str) -> dict[str, set[str]]:
    """ns -> checkpoint ids currently stored for ``thread_id``."""
    with _sync_conn(saver) as conn, conn.cursor() as cur:
        cur.execute(LIST_THREAD_CHECKPOINTS, (str(thread_id),))
        return _ids(cur.fetchall())


async def alist_checkpoint_ids(saver: Any, thread_id: str) -> dict[str, set[str]]:
    """Async twin of :func:`list_checkpoint_ids`."""
    async with _async_conn(saver) as conn, conn.cursor() as cur:
        await cur.execute(LIST_THREAD_CHECKPOINTS, (str(thread_id),))
        return _ids(await cur.fetchall())


def _ids(rows: Sequence[Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in rows:
        ns, cid = (r["checkpoint_ns"], r["checkpoint_id"]) if isinstance(r, dict) else r
        out.setdefault(ns, set()).add(cid)
    return out


# -- what the operations run on the saver's tables -------------------------------------
HAS_WRITES_TABLE = "select to_regclass('public.checkpoint_writes')"
HAS_CHECKPOINTS_TABLE = "select to_regclass('public.checkpoints')"
HAS_BLOBS_TABLE = "select to_regclass('public.checkpoint_blobs')"
# both tables ``lgx repair`` and ``lgx prune`` need (ops/repair, cli/prune)
SAVER_TABLES = "select to_regclass('public.checkpoints'), to_regclass('public.checkpoint_writes')"

SAVER_THREAD_IDS = "select distinct thread_id from public.checkpoints"
SAVER_THREADS_ORDERED = "select distinct thread_id from checkpoints order by thread_id"
SAVER_HAS_THREAD = "select exists (select 1 from checkpoints where thread_id = %s)"

LEDGER_AGREEMENT = """
select
  (select count(*) from public.checkpoints c where c.thread_id = %(t)s and not exists (
     select 1 from {schema}.checkpoints l where l.thread_id = c.thread_id
       and l.checkpoint_ns = c.checkpoint_ns and l.checkpoint_id = c.checkpoint_id)
     and not exists (
     select 1 from {schema}.captures k where k.thread_id = c.thread_id
       and k.kind = 'checkpoint' and k.checkpoint_ns = c.checkpoint_ns
       and k.checkpoint_id = c.checkpoint_id)),
  (select count(*) from (select distinct checkpoint_ns, checkpoint_id, task_id
     from public.checkpoint_writes where thread_id = %(t)s) w where not exists (
     select 1 from {schema}.events e where e.thread_id = %(t)s and e.kind = 'writes'
       and e.checkpoint_ns = w.checkpoint_ns and e.checkpoint_id = w.checkpoint_id
       and e.task_id = w.task_id)
     and not exists (
     select 1 from {schema}.captures k where k.thread_id = %(t)s and k.kind = 'writes'
       and k.checkpoint_ns = w.checkpoint_ns and k.checkpoint_id = w.checkpoint_id
       and k.task_id = w.task_id)
     -- writes that came with a copied checkpoint (copy_thread): the copy's index row
     -- (no event_seq) stands for the source's records, as for the checkpoint itself
     and not exists (
     select 1 from {schema}.checkpoints l where l.thread_id = %(t)s
       and l.checkpoint_ns = w.checkpoint_ns and l.checkpoint_id = w.checkpoint_id
       and l.event_seq is null)),
  (select count(*) from {schema}.checkpoints l where l.thread_id = %(t)s and not exists (
     select 1 from public.checkpoints c where c.thread_id = l.thread_id
       and c.checkpoint_ns = l.checkpoint_ns and c.checkpoint_id = l.checkpoint_id))
"""
"""A thread's saver rows without their ledger record (checkpoints, task writes; captured
counts as recorded) and ledger checkpoints the saver does not hold (``{schema}``: the
ledger's)."""

# -- ``lgx repair`` (ops/repair): the saver's rows the ledger lacks, captured now ------------
# what the official saver holds that nothing captured or recorded (a plain saver wrote it,
# or a write's capture was lost with its process before v7): captured now, in order, and
# sealed like any capture (``"recovered": true`` in the event)
CAPTURE_MISSING_CHECKPOINTS = """
insert into {schema}.captures (event_id, thread_id, kind, checkpoint_ns, checkpoint_id,
    parent_checkpoint_id, recovered)
select gen_random_uuid(), c.thread_id, 'checkpoint', c.checkpoint_ns, c.checkpoint_id,
    c.parent_checkpoint_id, true
from public.checkpoints c
where not exists (
    select 1 from {schema}.checkpoints l
    where l.thread_id = c.thread_id and l.checkpoint_ns = c.checkpoint_ns
      and l.checkpoint_id = c.checkpoint_id)
  and not exists (
    select 1 from {schema}.captures k
    where k.thread_id = c.thread_id and k.kind = 'checkpoint'
      and k.checkpoint_ns = c.checkpoint_ns and k.checkpoint_id = c.checkpoint_id)
order by c.thread_id, c.checkpoint_ns, c.checkpoint_id
"""

CAPTURE_MISSING_WRITES = """
insert into {schema}.captures (event_id, thread_id, kind, checkpoint_ns, checkpoint_id,
    task_id, task_path, idx, recovered)
select gen_random_uuid(), w.thread_id, 'writes', w.checkpoint_ns, w.checkpoint_id, w.task_id,
    min(w.task_path), jsonb_agg(w.idx order by w.idx), true
from public.checkpoint_writes w
where not exists (
    select 1 from {schema}.events e
    where e.thread_id = w.thread_id and e.kind = 'writes'
      and e.checkpoint_ns = w.checkpoint_ns and e.checkpoint_id = w.checkpoint_id
      and e.task_id = w.task_id)
  and not exists (
    select 1 from {schema}.captures k
    where k.thread_id = w.thread_id and k.kind = 'writes' and k.checkpoint_ns = w.checkpoint_ns
      and k.checkpoint_id = w.checkpoint_id and k.task_id = w.task_id)
group by w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id
order by w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id
"""

PRUNE_SELECT_CHECKPOINTS = """
select checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint ->> 'ts' as ts,
    coalesce(metadata -> 'counters_since_delta_snapshot', '{}'::jsonb) as counters,
    metadata -> 'parents' ->> '' as root, checkpoint -> 'channel_versions' as versions
from checkpoints where thread_id = %s
"""
PRUNE_DELETE_WRITES = """
delete from checkpoint_writes
where thread_id = %s and checkpoint_ns = %s and checkpoint_id = any(%s)
"""
PRUNE_DELETE_CHECKPOINTS = """
delete from checkpoints where thread_id = %s and checkpoint_ns = %s and checkpoint_id = any(%s)
"""
PRUNE_DELETE_BLOBS = """
delete from checkpoint_blobs
where thread_id = %s and checkpoint_ns = %s and channel = %s and version = any(%s)
"""
