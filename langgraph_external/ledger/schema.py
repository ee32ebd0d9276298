"""The Postgres ledger's schema: versioned migrations, ``setup()``, and envelope rows.

All objects live in one schema (default ``langgraph_external``). Migrations are a plain
list whose index is the version, recorded in ``<schema>.migrations``; :func:`setup`
applies what is missing under a transaction-scoped advisory lock, so two processes may
run it at the same time. The statements the ledger runs are in
:mod:`langgraph_external.ledger.statements`.

Example (SQL a user runs)::

    select seq, kind, node, step, payload
    from langgraph_external.events
    where thread_id = 'thread-42' order by seq;
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Collection, Sequence
from typing import Any

import psycopg

from langgraph_external.errors import ConfigurationError, LedgerUnavailableError
from langgraph_external.ledger.log_schema import LOG_MIGRATION
from langgraph_external.ledger.statements import (
    ENVELOPE_COLUMNS,
    POSITION_MOVED,
    SELECT_LEGACY_NAMED,
    SELECT_THREAD_EVENTS,
    UPSERT_CURSOR,  # lived here before the statements had their module (``ops/repair``)
    q,
)

__all__ = [
    "DEFAULT_SCHEMA",
    "ENVELOPE_COLUMNS",
    "MIGRATIONS",
    "POSITION_MOVED",
    "UPSERT_CURSOR",
    "connect",
    "fetch_events",
    "file_workspace",
    "legacy_named",
    "q",
    "row_to_envelope",
    "setup",
    "validate_schema",
]

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
    # v9: large payload values in SQL. A value the offload step moved to an artifact is
    # stored here too (by the transaction that stores its event), so SQL users read the
    # whole value: ``artifact_text(thread_id, payload -> 'output')`` for a reference
    # ``{"$artifact": sha256, ...}``; ``artifact_bytes`` for a raw tool response. A
    # deleted thread's artifacts go with its older events (``forget_thread``).
    """
    create table if not exists {schema}.artifacts (
        thread_id text not null,
        sha256 text not null,
        media text not null,
        size bigint not null,
        content bytea not null,
        primary key (thread_id, sha256)
    );
    create or replace function {schema}.artifact_text(p_thread text, p_ref jsonb)
    returns text language sql stable
    set search_path = pg_catalog, pg_temp as $$
        select convert_from(a.content, 'UTF8') from {schema}.artifacts a
        where a.thread_id = p_thread and a.media <> 'bytes'
          and a.sha256 = coalesce(p_ref ->> '$artifact', p_ref #>> '{{}}')
    $$;
    create or replace function {schema}.artifact_bytes(p_thread text, p_sha256 text)
    returns bytea language sql stable
    set search_path = pg_catalog, pg_temp as $$
        select a.content from {schema}.artifacts a
        where a.thread_id = p_thread and a.sha256 = p_sha256
    $$;
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
        delete from {schema}.artifacts where thread_id = p_thread;
        update {schema}.threads set deleted_at = p_ts where thread_id = p_thread;
    end
    $$;
    """,
    # v10: text recorded escaped and marked (``{"$escaped": <text>, "as": "text"}``: a NUL
    # or a lone surrogate, which PostgreSQL text cannot hold) reads in SQL as its escaped
    # text, whether inline or offloaded (``{"$escaped": {"$artifact": ...}, ...}``)
    """
    create or replace function {schema}.artifact_text(p_thread text, p_ref jsonb)
    returns text language sql stable
    set search_path = pg_catalog, pg_temp as $$
        select case when jsonb_typeof(p_ref -> '$escaped') = 'string'
                    then p_ref ->> '$escaped'
               else (select convert_from(a.content, 'UTF8') from {schema}.artifacts a
                     where a.thread_id = p_thread and a.media <> 'bytes'
                       and a.sha256 = coalesce(p_ref ->> '$artifact',
                                               p_ref -> '$escaped' ->> '$artifact',
                                               p_ref #>> '{{}}'))
               end
    $$;
    """,
    # v11: readable folder names (``sp-A`` is ``threads/sp-!a``, see
    # ``record/locations.py``). The threads recorded before keep their folders (``~`` +
    # base32): their sealed checkpoint events name them, so a thread is never split
    # across two. Every thread the ledger holds now is marked; new ones are not.
    """
    alter table {schema}.threads add column if not exists legacy_names boolean not null
        default true;
    alter table {schema}.threads alter column legacy_names set default false;
    """,
    # v12: index what is read (issue 32). Each index costs every row it holds an entry
    # (and its WAL); these are the ones no query of the CLI, ``lgx ui``, ``lgx diff``,
    # the exporters or the docs reads: ``events (name, ts)`` (every event has a name;
    # names are filtered within a thread, where the primary key leads) and the checkpoint
    # index's ``(thread_id, created_at)`` and ``run_id`` (a thread's rows come from the
    # primary key; nothing reads checkpoints by run). The session index now holds only
    # the checkpoints that name a session (it held every checkpoint). The plans, before
    # and after: docs/benchmarks.md ("Index what is read").
    """
    drop index if exists {schema}.events_name_ts_idx;
    drop index if exists {schema}.checkpoints_thread_created_idx;
    drop index if exists {schema}.checkpoints_run_idx;
    drop index if exists {schema}.events_session_idx;
    create index if not exists events_session_idx
        on {schema}.events ((payload -> 'metadata' ->> 'langfuse_session_id'))
        where kind = 'checkpoint'
          and payload -> 'metadata' ->> 'langfuse_session_id' is not null;
    """,
    # v13: one recording path for every saver (issue 32). A saver the record cannot join
    # (SQLite, in-memory, yours) is captured *by value* in a ledger transaction of its
    # own: ``material`` holds what the sealer builds the event from (the checkpoint's
    # document, metadata and the exact bytes the saver serialized, encrypted with the
    # deployment key), in place of a reference to the saver's rows. It is deleted with
    # the capture when sealed; kept out of line (``external``: already compact).
    """
    alter table {schema}.captures add column if not exists material bytea;
    alter table {schema}.captures alter column material set storage external;
    """,
    LOG_MIGRATION,  # v14: the auditor's proof (ledger/log_schema.py)
]


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


SETUP_LOCK = "select pg_advisory_xact_lock(%s)"
CREATE_SCHEMA = "create schema if not exists {schema}"
APPLIED_MIGRATIONS = "select v from {schema}.migrations"
RECORD_MIGRATION = "insert into {schema}.migrations (v) values (%s)"
MIGRATIONS_TABLE = "select to_regclass(%s)"
COUNT_MIGRATIONS = "select count(*) from {schema}.migrations"


def _lock_key(schema: str) -> int:
    return zlib.crc32(f"langgraph_external:{schema}".encode())


def setup(conn: psycopg.Connection[Any], schema: str = DEFAULT_SCHEMA) -> int:
    """Create the schema and apply missing migrations. Returns the schema version.

    Safe to call from several processes at once (serialized by an advisory lock) and
    idempotent.
    """
    validate_schema(schema)
    if _up_to_date(conn, schema):
        # nothing to create: a role without DDL rights (``lgx setup --roles``) starts too
        return len(MIGRATIONS) - 1
    with conn.transaction():
        conn.execute(SETUP_LOCK, (_lock_key(schema),))
        conn.execute(q(CREATE_SCHEMA, schema))
        conn.execute(q(MIGRATIONS[0], schema))
        done = {int(r[0]) for r in conn.execute(q(APPLIED_MIGRATIONS, schema)).fetchall()}
        for v, text in enumerate(MIGRATIONS):
            if v not in done:
                conn.execute(q(text, schema))
                conn.execute(q(RECORD_MIGRATION, schema), (v,))
    return len(MIGRATIONS) - 1


def _up_to_date(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether every migration is recorded already (read-only: needs no DDL rights)."""
    with conn.transaction():
        row = conn.execute(MIGRATIONS_TABLE, (f"{schema}.migrations",)).fetchone()
        if row is None or row[0] is None:
            return False
        done = conn.execute(q(COUNT_MIGRATIONS, schema)).fetchone()
    return done is not None and int(done[0]) >= len(MIGRATIONS)


def connect(dsn: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """Open a connection, turning connection failures into a typed error."""
    try:
        return psycopg.connect(dsn, **kwargs)
    except psycopg.OperationalError as exc:
        raise LedgerUnavailableError(f"cannot connect to the ledger database: {exc}") from exc


def fetch_events(
    conn: psycopg.Connection[Any], thread_id: str, schema: str = DEFAULT_SCHEMA
) -> list[dict[str, Any]]:
    """All events of ``thread_id`` in ``seq`` order, as envelopes (same as events.jsonl)."""
    rows = conn.execute(q(SELECT_THREAD_EVENTS, schema), (thread_id,)).fetchall()
    return [row_to_envelope(r) for r in rows]


def row_to_envelope(row: Sequence[Any]) -> dict[str, Any]:
    """A ledger row (columns as in :func:`fetch_events`) as an event envelope."""
    d = dict(zip(ENVELOPE_COLUMNS, row, strict=True))
    d["ts"] = d["ts"].isoformat()
    raw = d.get("raw")
    d["raw"] = base64.b64encode(bytes(raw)).decode() if raw is not None else None
    return d


def legacy_named(
    conn: psycopg.Connection[Any], thread_ids: Collection[str], schema: str = DEFAULT_SCHEMA
) -> set[str]:
    """Which of ``thread_ids`` keep their workspace folders of the old rule (recorded
    before readable folder names: see :mod:`~langgraph_external.record.locations`)."""
    if not thread_ids:
        return set()
    try:
        with conn.transaction():  # a savepoint inside the caller's transaction
            rows = conn.execute(q(SELECT_LEGACY_NAMED, schema), (list(thread_ids),)).fetchall()
    except psycopg.errors.UndefinedColumn:  # a ledger not migrated to v11 yet: all are old
        return set(thread_ids)
    return {r[0] for r in rows}


def file_workspace(
    conn: psycopg.Connection[Any],
    ws: Any,
    thread_ids: Collection[str],
    schema: str = DEFAULT_SCHEMA,
) -> None:
    """Tell the workspace ``ws`` the ledger's word on the folders of ``thread_ids`` (a
    reader of both — ``lgx verify``, ``lgx ui`` — then finds a thread's files where its
    record says they are, even where they are missing)."""
    legacy = legacy_named(conn, thread_ids, schema)
    for tid in thread_ids:
        ws.folders.file_under(tid, legacy=tid in legacy)
