"""The Postgres ledger: schema, versioned migrations, and the queries users run.

All objects live in one schema (default ``langgraph_external``). Migrations are a plain
list whose index is the version, recorded in ``<schema>.migrations``; :func:`setup`
applies what is missing under a transaction-scoped advisory lock, so two processes may
run it at the same time.

Example (SQL a user runs)::

    select seq, kind, node, step, payload
    from langgraph_external.events
    where thread_id = 'thread-42' order by seq;
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from langgraph_external.errors import ConfigurationError, LedgerUnavailableError

DEFAULT_SCHEMA = "langgraph_external"
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# Each entry is one version; never edit a released entry, append a new one.
MIGRATIONS: list[str] = [
    # v0: bookkeeping
    """
    create table if not exists {schema}.migrations (
        v integer primary key,
        applied_at timestamptz not null default now()
    )
    """,
    # v1: threads, events, checkpoint index
    """
    create table if not exists {schema}.threads (
        thread_id text primary key,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        last_seq bigint not null default 0,
        last_hash text,
        deleted_at timestamptz,
        metadata jsonb not null default '{{}}'
    );
    create table if not exists {schema}.events (
        thread_id text not null,
        seq bigint not null,
        event_id uuid not null,
        v smallint not null,
        ts timestamptz not null,
        kind text not null,
        name text,
        status text,
        checkpoint_ns text not null default '',
        checkpoint_id text,
        run_id text,
        parent_run_id text,
        root_run_id text,
        node text,
        step integer,
        task_id text,
        duration_ms double precision,
        payload jsonb not null default '{{}}',
        raw bytea,
        artifact text,
        redactions integer not null default 0,
        prev text,
        hash text not null,
        primary key (thread_id, seq)
    );
    create index if not exists events_kind_ts_idx on {schema}.events (kind, ts);
    create index if not exists events_name_ts_idx on {schema}.events (name, ts)
        where name is not null;
    create index if not exists events_run_idx on {schema}.events (run_id)
        where run_id is not null;
    -- append-only and time-ordered: a BRIN index serves time ranges at almost no write cost
    create index if not exists events_ts_brin on {schema}.events using brin (ts);
    create table if not exists {schema}.checkpoints (
        thread_id text not null,
        checkpoint_ns text not null default '',
        checkpoint_id text not null,
        parent_checkpoint_id text,
        step integer,
        source text,
        run_id text,
        task_ids text[] not null default '{{}}',
        nodes text[] not null default '{{}}',
        channels text[] not null default '{{}}',
        created_at timestamptz not null,
        size_bytes bigint not null default 0,
        workspace_path text,
        event_seq bigint,
        primary key (thread_id, checkpoint_ns, checkpoint_id)
    );
    create index if not exists checkpoints_thread_created_idx
        on {schema}.checkpoints (thread_id, created_at);
    create index if not exists checkpoints_run_idx on {schema}.checkpoints (run_id)
        where run_id is not null;
    """,
    # v2: readable views
    """
    create or replace view {schema}.thread_summary as
    select t.thread_id, t.created_at, t.updated_at, t.last_seq as events, t.deleted_at,
           (select count(*) from {schema}.checkpoints c where c.thread_id = t.thread_id)
               as checkpoints
    from {schema}.threads t;
    create or replace view {schema}.transitions as
    select thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source,
           nodes, task_ids, channels, created_at
    from {schema}.checkpoints;
    """,
    # v3: behaviour views (AuditCallbackHandler)
    """
    create index if not exists events_thread_run_idx on {schema}.events (run_id, kind)
        where kind in ('tool_start', 'tool_end', 'tool_error', 'llm_start', 'llm_end');
    create or replace view {schema}.node_runs as
    select e.thread_id, e.checkpoint_ns, e.step, e.node, e.task_id, e.run_id,
           e.ts - make_interval(secs => coalesce(e.duration_ms, 0) / 1000.0) as started_at,
           e.ts as ended_at, e.duration_ms, e.status, e.payload -> 'update' as update,
           e.seq
    from {schema}.events e where e.kind = 'node_end';
    create or replace view {schema}.tool_calls as
    select s.thread_id, s.node, s.step, s.task_id, s.run_id, s.name as tool,
           s.payload ->> 'tool_call_id' as tool_call_id, s.payload -> 'args' as args,
           s.ts as started_at, e.ts as ended_at, e.duration_ms,
           coalesce(e.status, 'running') as status, e.payload -> 'parsed' as result,
           e.payload ->> 'error' as error, e.payload ->> 'error_type' as error_type,
           e.raw, e.artifact
    from {schema}.events s
    left join {schema}.events e
      on e.run_id = s.run_id and e.kind in ('tool_end', 'tool_error')
    where s.kind = 'tool_start';
    create or replace view {schema}.llm_calls as
    select s.thread_id, s.node, s.step, s.task_id, s.run_id,
           s.payload ->> 'model' as model, s.payload ->> 'prompt_context_hash' as prompt_hash,
           s.payload -> 'messages' as messages, s.ts as started_at, e.duration_ms,
           coalesce(e.status, 'running') as status, e.payload -> 'tool_calls' as tool_calls,
           (e.payload -> 'usage' ->> 'input_tokens')::bigint as input_tokens,
           (e.payload -> 'usage' ->> 'output_tokens')::bigint as output_tokens,
           (e.payload -> 'usage' ->> 'total_tokens')::bigint as total_tokens
    from {schema}.events s
    left join {schema}.events e on e.run_id = s.run_id and e.kind = 'llm_end'
    where s.kind = 'llm_start';
    create or replace view {schema}.hourly_tool_stats as
    select date_trunc('hour', started_at) as bucket, tool, count(*) as calls,
           round(avg(duration_ms)::numeric, 2) as avg_duration_ms,
           round((percentile_cont(0.95) within group (order by duration_ms))::numeric, 2)
               as p95_duration_ms,
           count(*) filter (where status = 'error') as errors
    from {schema}.tool_calls
    group by 1, 2;
    """,
    # v4: the record as an outbox. Events carry what projections need (``detail``); a
    # thread's position advances only from the position its writer saw (no gaps, no
    # interleaving); projections keep their cursor here.
    """
    alter table {schema}.events add column if not exists detail bytea;
    create table if not exists {schema}.projection_cursors (
        projection text not null,
        thread_id text not null,
        seq bigint not null default 0,
        error text,
        updated_at timestamptz not null default now(),
        primary key (projection, thread_id)
    );
    create or replace function {schema}.advance_thread(
        p_thread text, p_expected bigint, p_prev text, p_seq bigint, p_hash text,
        p_ts timestamptz
    ) returns void language plpgsql as $$
    begin
        if p_expected = 0 then
            insert into {schema}.threads as t
                (thread_id, created_at, updated_at, last_seq, last_hash)
            values (p_thread, p_ts, p_ts, p_seq, p_hash)
            on conflict (thread_id) do update
                set last_seq = excluded.last_seq, last_hash = excluded.last_hash,
                    updated_at = greatest(t.updated_at, excluded.updated_at)
                where t.last_seq = 0;
        else
            update {schema}.threads
                set last_seq = p_seq, last_hash = p_hash,
                    updated_at = greatest(updated_at, p_ts)
                where thread_id = p_thread and last_seq = p_expected
                  and last_hash is not distinct from p_prev;
        end if;
        if not found then
            raise exception using errcode = 'LX001', message = format(
                'thread %s is no longer at seq %s: another writer recorded it first',
                p_thread, p_expected);
        end if;
    end
    $$;
    -- which tasks produced each checkpoint: the checkpoint names its nodes (from what it
    -- proves by itself); each task's writes name their task id, node and parent checkpoint
    create or replace view {schema}.checkpoint_tasks as
    select c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.step, w.node, w.task_id,
           w.payload ->> 'task_path' as task_path, w.seq as writes_seq
    from {schema}.checkpoints c
    join {schema}.events w
      on w.thread_id = c.thread_id and w.kind = 'writes'
     and w.checkpoint_ns = c.checkpoint_ns and w.checkpoint_id = c.parent_checkpoint_id
     and w.node = any(c.nodes);
    """,
    # v5: security. Each thread's head carries a keyed tag (HMAC of the deployment key over
    # thread, seq and hash), so an edit re-hashed through the chain, or a truncation, no
    # longer verifies. Head moves and deletions run as the schema owner (security definer):
    # an application role granted only these functions and INSERT on events can append to
    # the record but never update, delete or truncate it (``lgx setup --roles``).
    """
    alter table {schema}.threads add column if not exists head_mac text;
    create or replace function {schema}.advance_thread(
        p_thread text, p_expected bigint, p_prev text, p_seq bigint, p_hash text,
        p_ts timestamptz, p_mac text
    ) returns void language plpgsql security definer
    set search_path = pg_catalog, pg_temp as $$
    begin
        if p_expected = 0 then
            insert into {schema}.threads as t
                (thread_id, created_at, updated_at, last_seq, last_hash, head_mac)
            values (p_thread, p_ts, p_ts, p_seq, p_hash, p_mac)
            on conflict (thread_id) do update
                set last_seq = excluded.last_seq, last_hash = excluded.last_hash,
                    head_mac = excluded.head_mac,
                    updated_at = greatest(t.updated_at, excluded.updated_at)
                where t.last_seq = 0;
        else
            update {schema}.threads
                set last_seq = p_seq, last_hash = p_hash, head_mac = p_mac,
                    updated_at = greatest(updated_at, p_ts)
                where thread_id = p_thread and last_seq = p_expected
                  and last_hash is not distinct from p_prev;
        end if;
        if not found then
            raise exception using errcode = 'LX001', message = format(
                'thread %s is no longer at seq %s: another writer recorded it first',
                p_thread, p_expected);
        end if;
    end
    $$;
    -- a deleted thread's older events go only with its tombstone, which stays
    create or replace function {schema}.forget_thread(
        p_thread text, p_seq bigint, p_ts timestamptz
    ) returns void language plpgsql security definer
    set search_path = pg_catalog, pg_temp as $$
    begin
        if not exists (select 1 from {schema}.events where thread_id = p_thread
                       and seq = p_seq and kind = 'thread_deleted') then
            raise exception using errcode = 'LX002', message = format(
                'thread %s has no tombstone at seq %s', p_thread, p_seq);
        end if;
        delete from {schema}.events where thread_id = p_thread and seq < p_seq;
        delete from {schema}.checkpoints where thread_id = p_thread;
        update {schema}.threads set deleted_at = p_ts where thread_id = p_thread;
    end
    $$;
    """,
    # v6: an event's detail holds exact bytes the saver has just compressed for its own
    # tables (or ciphertext, which does not compress); compressing them again would cost
    # the commit more than writing them
    """
    alter table {schema}.events alter column detail set storage external;
    """,
    # v7: capture in the checkpoint's transaction, seal after commit. The app inserts one
    # ``captures`` row per saver transaction: a reference to the saver's rows (thread,
    # namespace, checkpoint, parent; a task's writes) and the thread's callback events
    # that precede it, already redacted. A sealer turns captures into sequenced, chained
    # events after commit, in commit order per thread (rows whose transaction is below
    # every running one: ``xid < pg_snapshot_xmin(pg_current_snapshot())``), and deletes
    # them in the transaction that stores their events (``seal_thread``).
    """
    create table if not exists {schema}.captures (
        id bigserial primary key,
        xid xid8 not null default pg_current_xact_id(),
        event_id uuid not null,
        thread_id text not null,
        kind text not null,
        checkpoint_ns text not null default '',
        checkpoint_id text,
        parent_checkpoint_id text,
        task_id text,
        task_path text,
        node text,
        changed jsonb,
        idx jsonb,
        riders bytea,
        inline bytea,
        recovered boolean not null default false,
        captured_at timestamptz not null default clock_timestamp()
    );
    alter table {schema}.captures alter column riders set storage external;
    alter table {schema}.captures alter column inline set storage external;
    create index if not exists captures_thread_idx on {schema}.captures (thread_id, id);
    create or replace function {schema}.seal_thread(
        p_thread text, p_expected bigint, p_prev text, p_seq bigint, p_hash text,
        p_ts timestamptz, p_mac text, p_captures bigint[]
    ) returns void language plpgsql security definer
    set search_path = pg_catalog, pg_temp as $$
    declare
        n bigint;
    begin
        perform {schema}.advance_thread(p_thread, p_expected, p_prev, p_seq, p_hash, p_ts,
                                        p_mac);
        if p_captures is not null and cardinality(p_captures) > 0 then
            delete from {schema}.captures where thread_id = p_thread and id = any(p_captures);
            get diagnostics n = row_count;
            if n <> cardinality(p_captures) then
                raise exception using errcode = 'LX001', message = format(
                    'captures of thread %s were sealed by another sealer', p_thread);
            end if;
        end if;
    end
    $$;
    """,
    # v8: what the reviewer's searches need (`lgx ui`: threads with an error, threads of a
    # session) — partial indexes, so only those rows pay for them
    """
    create index if not exists events_errors_idx on {schema}.events (thread_id)
        where status = 'error' or kind in ('error', 'tool_error');
    create index if not exists events_session_idx
        on {schema}.events ((payload -> 'metadata' ->> 'langfuse_session_id'))
        where kind = 'checkpoint';
    """,
]

POSITION_MOVED = "LX001"
"""SQLSTATE raised when a writer's view of a thread's position is stale (see v4)."""


def validate_schema(schema: str) -> str:
    """Return ``schema`` if it is a plain lower-case identifier, else raise.

    Raises:
        ConfigurationError: the name could not be used unquoted in SQL.
    """
    if not isinstance(schema, str) or not _IDENT.match(schema):
        raise ConfigurationError(
            f"schema name {schema!r} must match [a-z_][a-z0-9_]* (at most 63 characters)"
        )
    return schema


def _lock_key(schema: str) -> int:
    return zlib.crc32(f"langgraph_external:{schema}".encode())


def setup(conn: psycopg.Connection[Any], schema: str = DEFAULT_SCHEMA) -> int:
    """Create the schema and apply missing migrations. Returns the schema version.

    Safe to call from several processes at once (serialized by an advisory lock) and
    idempotent.
    """
    validate_schema(schema)
    ident = sql.Identifier(schema)
    if _up_to_date(conn, schema):
        # nothing to create: a role without DDL rights (``lgx setup --roles``) starts too
        return len(MIGRATIONS) - 1
    with conn.transaction():
        conn.execute("select pg_advisory_xact_lock(%s)", (_lock_key(schema),))
        conn.execute(sql.SQL("create schema if not exists {}").format(ident))
        conn.execute(sql.SQL(MIGRATIONS[0]).format(schema=ident))
        rows = conn.execute(sql.SQL("select v from {}.migrations").format(ident)).fetchall()
        done = {int(r[0]) for r in rows}
        for v, text in enumerate(MIGRATIONS):
            if v in done:
                continue
            conn.execute(sql.SQL(text).format(schema=ident))
            conn.execute(sql.SQL("insert into {}.migrations (v) values (%s)").format(ident), (v,))
    return len(MIGRATIONS) - 1


def _up_to_date(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether every migration is recorded already (read-only: needs no DDL rights)."""
    with conn.transaction():
        row = conn.execute("select to_regclass(%s)", (f"{schema}.migrations",)).fetchone()
        if row is None or row[0] is None:
            return False
        done = conn.execute(
            sql.SQL("select count(*) from {}.migrations").format(sql.Identifier(schema))
        ).fetchone()
    return done is not None and int(done[0]) >= len(MIGRATIONS)


def connect(dsn: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """Open a connection, turning connection failures into a typed error."""
    try:
        return psycopg.connect(dsn, **kwargs)
    except psycopg.OperationalError as exc:
        raise LedgerUnavailableError(f"cannot connect to the ledger database: {exc}") from exc


def q(text: str, schema: str) -> sql.Composed:
    """Compose ``text`` with ``{schema}`` replaced by the quoted schema identifier."""
    return sql.SQL(text).format(schema=sql.Identifier(schema))


INSERT_EVENT = """
insert into {schema}.events (thread_id, seq, event_id, v, ts, kind, name, status,
    checkpoint_ns, checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id,
    duration_ms, payload, raw, artifact, redactions, prev, hash, detail)
values (%s, %s, %s::uuid, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
    %s::jsonb, %s, %s, %s, %s, %s, %s)
"""

SEAL_THREAD = (
    "select {schema}.seal_thread(%s::text, %s::bigint, %s::text, %s::bigint, %s::text,"
    " %s::timestamptz, %s::text, %s::bigint[])"
)
"""Moves a thread's head (``LX001`` when it moved meanwhile) and deletes the captures
its new events were sealed from, in the transaction that stores them."""

# One statement stores a thread's sealed events: the head move and the captures they
# came from (``seal_thread`` raises LX001 when the thread moved), every event (rows parsed
# from their hashed lines, so nothing is encoded twice) and the checkpoint index rows.
# Used for commits without thread operations.
COMMIT_EVENTS = """
with adv as materialized (
    select {schema}.seal_thread(%s::text, %s::bigint, %s::text, %s::bigint, %s::text,
        %s::timestamptz, %s::text, %s::bigint[]) as ok
), src as (
    select j.doc, j.i from jsonb_array_elements(%s::jsonb) with ordinality as j(doc, i)
), ins as (
    insert into {schema}.events (thread_id, seq, event_id, v, ts, kind, name, status,
        checkpoint_ns, checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id,
        duration_ms, payload, raw, artifact, redactions, prev, hash, detail)
    select r.thread_id, r.seq, r.event_id, r.v, r.ts, r.kind, r.name, r.status,
        r.checkpoint_ns, r.checkpoint_id, r.run_id, r.parent_run_id, r.root_run_id, r.node,
        r.step, r.task_id, r.duration_ms, r.payload, decode(src.doc->>'raw', 'base64'),
        r.artifact, r.redactions, r.prev, r.hash, (%b::bytea[])[src.i]
    from adv, src
    cross join lateral jsonb_populate_record(null::{schema}.events, src.doc - 'raw') as r
    returning 1
), cps as (
    insert into {schema}.checkpoints (thread_id, checkpoint_ns, checkpoint_id,
        parent_checkpoint_id, step, source, run_id, task_ids, nodes, channels, created_at,
        size_bytes, workspace_path, event_seq)
    select c.* from adv, jsonb_to_recordset(%s::jsonb) as c(thread_id text,
        checkpoint_ns text, checkpoint_id text, parent_checkpoint_id text, step integer,
        source text, run_id text, task_ids text[], nodes text[], channels text[],
        created_at timestamptz, size_bytes bigint, workspace_path text, event_seq bigint)
    on conflict (thread_id, checkpoint_ns, checkpoint_id) do update set
        parent_checkpoint_id = excluded.parent_checkpoint_id, step = excluded.step,
        source = excluded.source, run_id = excluded.run_id, task_ids = excluded.task_ids,
        nodes = excluded.nodes, channels = excluded.channels, size_bytes = excluded.size_bytes,
        workspace_path = excluded.workspace_path, event_seq = excluded.event_seq
    returning 1
)
select (select count(*) from ins), (select count(*) from cps)
"""

CHECKPOINT_INDEX_COLUMNS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "step",
    "source",
    "run_id",
    "task_ids",
    "nodes",
    "channels",
    "created_at",
    "size_bytes",
    "workspace_path",
    "event_seq",
)
"""The checkpoint index row's columns, in the order the statements take them."""

UPSERT_CHECKPOINT = """
insert into {schema}.checkpoints (thread_id, checkpoint_ns, checkpoint_id,
    parent_checkpoint_id, step, source, run_id, task_ids, nodes, channels, created_at,
    size_bytes, workspace_path, event_seq)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
on conflict (thread_id, checkpoint_ns, checkpoint_id) do update set
    parent_checkpoint_id = excluded.parent_checkpoint_id, step = excluded.step,
    source = excluded.source, run_id = excluded.run_id, task_ids = excluded.task_ids,
    nodes = excluded.nodes, channels = excluded.channels, size_bytes = excluded.size_bytes,
    workspace_path = excluded.workspace_path, event_seq = excluded.event_seq
"""

INSERT_CAPTURE = """
insert into {schema}.captures (event_id, thread_id, kind, checkpoint_ns, checkpoint_id,
    parent_checkpoint_id, task_id, task_path, node, changed, idx, riders, inline)
values (%s::uuid, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s)
"""
"""One capture (:class:`~langgraph_external.capture.Capture`): the one statement the
record adds to a saver's transaction."""

# The sealer's claim: the threads with captures every running transaction is younger
# than (their order can no longer change), oldest first, each locked for the claiming
# transaction; a thread another sealer holds is skipped.
CLAIM_THREADS = """
select thread_id from (
    select thread_id, min(id) as first from {schema}.captures
    where xid < pg_snapshot_xmin(pg_current_snapshot())
    group by thread_id order by first limit %s
) c where pg_try_advisory_xact_lock(%s, hashtext(thread_id))
"""

ASYNC_COMMIT = "set local synchronous_commit = off"
"""For transactions whose loss in a server crash loses nothing (they are derived from what
committed synchronously, and made again): sealing, projection cursors."""

LOCK_THREADS = "select pg_try_advisory_xact_lock(%s, hashtext(t)) from unnest(%s::text[]) t"

WAIT_THREAD = "select pg_advisory_xact_lock(%s, hashtext(%s))"
"""Waits for (and holds, until the transaction ends) the right to seal a thread: writers
that append to a thread directly (prune, restore) take it too."""

SELECT_CAPTURES = """
select id, event_id::text, thread_id, kind, checkpoint_ns, checkpoint_id,
    parent_checkpoint_id, task_id, task_path, node, changed, idx, riders, captured_at,
    recovered, inline
from {schema}.captures
where thread_id = any(%s) and xid < pg_snapshot_xmin(pg_current_snapshot())
order by id limit %s
"""

PENDING_CAPTURES = """
select count(*), min(captured_at), count(distinct thread_id),
    count(*) filter (where xid >= pg_snapshot_xmin(pg_current_snapshot()))
from {schema}.captures
"""
"""Captures waiting for a sealer: how many, since when, of how many threads, and how
many of them are not sealable yet (a transaction older than them is still running)."""

PENDING_OF_THREADS = """
select thread_id, count(*) from {schema}.captures
where thread_id = any(%s) and xid < %s::xid8 group by thread_id
"""

CURRENT_XMAX = "select pg_snapshot_xmax(pg_current_snapshot())::text"

SELECT_POSITIONS = """
select thread_id, last_seq, last_hash from {schema}.threads
where thread_id = any(%s) and last_seq > 0
"""

SELECT_EVENTS_AFTER = """
select v, seq, ts, event_id::text, kind, name, status, thread_id, checkpoint_ns,
    checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id,
    duration_ms, payload, raw, artifact, redactions, prev, hash, detail
from {schema}.events where thread_id = %s and seq > %s order by seq limit %s
"""

SELECT_RECORDED = (
    "select event_id::text from {schema}.events where thread_id = %s and event_id = any(%s::uuid[])"
    " union select event_id::text from {schema}.captures"
    " where thread_id = %s and event_id = any(%s::uuid[])"
)

SELECT_LAGGING = """
select t.thread_id, t.last_seq, coalesce(c.seq, 0)
from {schema}.threads t
left join {schema}.projection_cursors c
    on c.projection = %s and c.thread_id = t.thread_id
where t.last_seq > coalesce(c.seq, 0) and c.error is null
order by t.updated_at
limit %s
"""

SELECT_QUARANTINED = """
select thread_id, seq, error, updated_at from {schema}.projection_cursors
where projection = %s and error is not null order by thread_id
"""

UPSERT_CURSOR = """
insert into {schema}.projection_cursors as c (projection, thread_id, seq, error, updated_at)
values (%s, %s, %s, %s, now())
on conflict (projection, thread_id) do update
    set seq = excluded.seq, error = excluded.error, updated_at = now()
"""

CLEAR_QUARANTINE = """
update {schema}.projection_cursors set error = null, updated_at = now()
where projection = %s and error is not null
"""

UPSERT_CURSORS_UNLOCK = """
with cursors as (
    insert into {schema}.projection_cursors as c (projection, thread_id, seq, error, updated_at)
    select %s, t, s, null, now() from unnest(%s::text[], %s::bigint[]) as u(t, s)
    on conflict (projection, thread_id) do update
        set seq = excluded.seq, error = null, updated_at = now()
    returning 1
)
select (select count(*) from cursors),
       (select count(pg_advisory_unlock(hashtextextended(k, 0))) from unnest(%s::text[]) as k)
"""

TRY_PROJECTION_LOCKS = (
    "select k, pg_try_advisory_lock(hashtextextended(k, 0)) from unnest(%s::text[]) as k"
)
TRY_PROJECTION_LOCK = "select pg_try_advisory_lock(hashtextextended(%s, 0))"
PROJECTION_UNLOCK = "select pg_advisory_unlock(hashtextextended(%s, 0))"

FORGET_THREAD = "select {schema}.forget_thread(%s::text, %s::bigint, %s::timestamptz)"

DELETE_CHECKPOINT_ROWS = """
delete from {schema}.checkpoints
where thread_id = %s and checkpoint_ns = %s and checkpoint_id = any(%s)
"""

COPY_CHECKPOINT_ROWS = """
insert into {schema}.checkpoints (thread_id, checkpoint_ns, checkpoint_id,
    parent_checkpoint_id, step, source, run_id, task_ids, nodes, channels, created_at,
    size_bytes, workspace_path, event_seq)
select %(dst)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, run_id,
    task_ids, nodes, channels, created_at, size_bytes,
    replace(workspace_path, %(src_dir)s, %(dst_dir)s), null
from {schema}.checkpoints where thread_id = %(src)s
on conflict do nothing
"""


ENVELOPE_COLUMNS = (
    "v",
    "seq",
    "ts",
    "event_id",
    "kind",
    "name",
    "status",
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "run_id",
    "parent_run_id",
    "root_run_id",
    "node",
    "step",
    "task_id",
    "duration_ms",
    "payload",
    "raw",
    "artifact",
    "redactions",
    "prev",
    "hash",
)
"""Keys of an event envelope, in the order of ``events.jsonl``."""


def fetch_events(
    conn: psycopg.Connection[Any], thread_id: str, schema: str = DEFAULT_SCHEMA
) -> list[dict[str, Any]]:
    """All events of ``thread_id`` in ``seq`` order, as envelopes (same as events.jsonl)."""
    rows = conn.execute(
        q(
            """select v, seq, ts, event_id::text, kind, name, status, thread_id, checkpoint_ns,
            checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id,
            duration_ms, payload, raw, artifact, redactions, prev, hash
            from {schema}.events where thread_id = %s order by seq""",
            schema,
        ),
        (thread_id,),
    ).fetchall()
    return [row_to_envelope(r) for r in rows]


def row_to_envelope(row: Sequence[Any]) -> dict[str, Any]:
    """A ledger row (columns as in :func:`fetch_events`) as an event envelope."""
    import base64

    d = dict(zip(ENVELOPE_COLUMNS, row, strict=True))
    d["ts"] = d["ts"].isoformat()
    raw = d.get("raw")
    d["raw"] = base64.b64encode(bytes(raw)).decode() if raw is not None else None
    return d
