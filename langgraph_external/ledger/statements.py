"""The ledger's statements: every SQL text the Postgres ledger runs, as named constants.

Each statement names the ledger schema as ``{schema}``; :class:`LedgerStatements` holds
them composed for one schema, as the bytes psycopg sends (what
:class:`~langgraph_external.ledger.postgres.PostgresLedger` executes). The schema itself —
tables, views, functions — is built by the migrations in
:mod:`langgraph_external.ledger.schema`.

Example:
    >>> LedgerStatements("lgx").insert_event.split(b"(")[0].strip()
    b'insert into "lgx".events'
"""

from __future__ import annotations

from psycopg import sql

from langgraph_external.record.events import ENVELOPE_KEYS

POSITION_MOVED = "LX001"
"""SQLSTATE raised when a writer's view of a thread's position is stale (see the v4
migration's ``advance_thread``)."""


def compose(text: str, schema: str) -> bytes:
    """:func:`q` as the bytes psycopg sends (composed once; a statement run often).

    Example:
        >>> compose("select 1 from {schema}.events", "s")
        b'select 1 from "s".events'
    """
    return q(text, schema).as_bytes(None)


def q(text: str, schema: str) -> sql.Composed:
    """Compose ``text`` with ``{schema}`` replaced by the quoted schema identifier.

    Example:
        >>> q("select 1 from {schema}.events", "s").as_string(None)
        'select 1 from "s".events'
    """
    return sql.SQL(text).format(schema=sql.Identifier(schema))


ENVELOPE_COLUMNS = ENVELOPE_KEYS
"""The events table's envelope columns: the envelope's keys, in the order of ``events.jsonl``."""

ENVELOPE_SELECT = ", ".join("event_id::text" if c == "event_id" else c for c in ENVELOPE_COLUMNS)
"""The select list of an event's envelope columns (in :data:`ENVELOPE_COLUMNS` order)."""

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

_INDEX = ", ".join(CHECKPOINT_INDEX_COLUMNS)

EVENT_COLUMNS = (
    "thread_id, seq, event_id, v, ts, kind, name, status, checkpoint_ns, checkpoint_id, run_id,"
    " parent_run_id, root_run_id, node, step, task_id, duration_ms, payload, raw, artifact,"
    " redactions, prev, hash, detail"
)
"""The events table's columns as ``INSERT_EVENT`` takes them (``rows.event_row``)."""

_INDEX_UPSERT = """on conflict (thread_id, checkpoint_ns, checkpoint_id) do update set
    parent_checkpoint_id = excluded.parent_checkpoint_id, step = excluded.step,
    source = excluded.source, run_id = excluded.run_id, task_ids = excluded.task_ids,
    nodes = excluded.nodes, channels = excluded.channels, size_bytes = excluded.size_bytes,
    workspace_path = excluded.workspace_path, event_seq = excluded.event_seq"""

INSERT_EVENT = f"""
insert into {{schema}}.events ({EVENT_COLUMNS})
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
COMMIT_EVENTS = f"""
with adv as materialized (
    {SEAL_THREAD} as ok
), src as (
    select j.doc, j.i from jsonb_array_elements(%s::jsonb) with ordinality as j(doc, i)
), ins as (
    insert into {{schema}}.events ({EVENT_COLUMNS})
    select r.thread_id, r.seq, r.event_id, r.v, r.ts, r.kind, r.name, r.status,
        r.checkpoint_ns, r.checkpoint_id, r.run_id, r.parent_run_id, r.root_run_id, r.node,
        r.step, r.task_id, r.duration_ms, r.payload, decode(src.doc->>'raw', 'base64'),
        r.artifact, r.redactions, r.prev, r.hash, (%b::bytea[])[src.i]
    from adv, src
    cross join lateral jsonb_populate_record(null::{{schema}}.events, src.doc - 'raw') as r
    returning 1
), cps as (
    insert into {{schema}}.checkpoints ({_INDEX})
    select c.* from adv, jsonb_to_recordset(%s::jsonb) as c(thread_id text,
        checkpoint_ns text, checkpoint_id text, parent_checkpoint_id text, step integer,
        source text, run_id text, task_ids text[], nodes text[], channels text[],
        created_at timestamptz, size_bytes bigint, workspace_path text, event_seq bigint)
    {_INDEX_UPSERT}
    returning 1
)
select (select count(*) from ins), (select count(*) from cps)
"""

UPSERT_CHECKPOINT = f"""
insert into {{schema}}.checkpoints ({_INDEX})
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
{_INDEX_UPSERT}
"""

INSERT_CAPTURE = """
insert into {schema}.captures (event_id, thread_id, kind, checkpoint_ns, checkpoint_id,
    parent_checkpoint_id, task_id, task_path, node, changed, idx, riders, inline, material)
values (%s::uuid, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s)
"""
"""One capture (:class:`~langgraph_external.record.capture.Capture`): the one statement the
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

SELECT_CAPTURES = """
select id, event_id::text, thread_id, kind, checkpoint_ns, checkpoint_id,
    parent_checkpoint_id, task_id, task_path, node, changed, idx, riders, captured_at,
    recovered, inline, material
from {schema}.captures
where thread_id = any(%s) and xid < pg_snapshot_xmin(pg_current_snapshot())
order by id limit %s
"""

CHECKPOINT_REFS = """
select e.payload -> 'channels' from {schema}.checkpoints c
join {schema}.events e on e.thread_id = c.thread_id and e.seq = c.event_seq
where c.thread_id = %s and c.checkpoint_ns = %s and c.checkpoint_id = %s
"""
"""The channel references of a sealed checkpoint: a by-value capture of its child carries
only the changed channels (:mod:`langgraph_external.record.by_value`)."""

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

SELECT_SEAL_HEADS = """
select thread_id, last_seq, last_hash, legacy_names from {schema}.threads
where thread_id = any(%s)
"""
"""The heads of threads being sealed, and whether each keeps its folder of the old rule."""

SELECT_LEGACY_NAMED = """
select thread_id from {schema}.threads where thread_id = any(%s) and legacy_names
"""
"""Which threads keep the folder names of the old rule (recorded before v11)."""

MARK_LEGACY_NAMED = "update {schema}.threads set legacy_names = true where thread_id = %s"
"""An imported thread whose record names folders of the old rule keeps them."""

SELECT_NAMESPACES = """
select distinct checkpoint_ns from {schema}.checkpoints where thread_id = %s
"""
"""The namespaces of a thread's indexed checkpoints (what a copy of it holds)."""

SELECT_EVENTS_AFTER = f"""
select {ENVELOPE_SELECT}, detail
from {{schema}}.events where thread_id = %s and seq > %s order by seq limit %s
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

# an export's cursors of some threads set back to the start (resend: exporters/reader)
RESET_CURSORS = """
insert into {schema}.projection_cursors as c (projection, thread_id, seq, error, updated_at)
select %(projection)s, t, 0, null, now() from unnest(%(threads)s::text[]) as t
on conflict (projection, thread_id) do update set seq = 0, error = null, updated_at = now()
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

INSERT_ARTIFACT = """
insert into {schema}.artifacts (thread_id, sha256, media, size, content)
values (%s, %s, %s, %s, %s)
on conflict (thread_id, sha256) do nothing
"""

DELETE_CHECKPOINT_ROWS = """
delete from {schema}.checkpoints
where thread_id = %s and checkpoint_ns = %s and checkpoint_id = any(%s)
"""

COPY_CHECKPOINT_ROWS = f"""
insert into {{schema}}.checkpoints ({_INDEX})
select %(dst)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, run_id,
    task_ids, nodes, channels, created_at, size_bytes,
    coalesce(%(paths)s::jsonb ->> checkpoint_ns,
             regexp_replace(workspace_path, '^threads/[^/]+/', %(dst_dir)s)), null
from {{schema}}.checkpoints where thread_id = %(src)s
on conflict do nothing
"""


SELECT_THREAD_EVENTS = (
    f"select {ENVELOPE_SELECT} from {{schema}}.events where thread_id = %s order by seq"
)
"""Every event of a thread as an envelope row (:data:`ENVELOPE_COLUMNS`)."""

# -- what the operations (``lgx verify``, ``prune``, ``export``/``import``) read --------
SELECT_HEAD_TAG = "select last_seq, last_hash, head_mac from {schema}.threads where thread_id = %s"

SELECT_CHECKPOINT_ROWS = """
select checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, run_id, nodes,
    channels, size_bytes, workspace_path, event_seq
from {schema}.checkpoints where thread_id = %s
"""

PENDING_OF_THREAD = "select count(*) from {schema}.captures where thread_id = %s"
"""Captures of a thread a sealer has not turned into events yet (``lgx verify``: pending,
not a failure: they commit with the saver's rows and are sealed moments later)."""

SELECT_HEADS = "select thread_id, last_seq, last_hash, deleted_at from {schema}.threads"
SELECT_EVENT_HASH = "select hash from {schema}.events where thread_id = %s and seq = %s"

LOCK_HEAD = "select last_seq, last_hash from {schema}.threads where thread_id = %s for update"
"""A thread's head row, locked for a transaction that appends to it directly (prune)."""

SELECT_DETAILS = """
select seq, detail from {schema}.events
where thread_id = %s and detail is not null order by seq
"""

THREAD_EXISTS = "select exists (select 1 from {schema}.threads where thread_id = %s)"


class LedgerStatements:
    """The statements of the write, seal and projection paths, composed for one schema.

    Composed once per ledger, to bytes: the hot path (a capture in the saver's
    transaction) only passes parameters. (psycopg composes an ``sql.Composed`` anew at
    every execution and cannot cache its conversion: ~10 µs a statement.)
    """

    def __init__(self, schema: str) -> None:
        self.seal = compose(SEAL_THREAD, schema)
        self.capture = compose(INSERT_CAPTURE, schema)
        self.claim = compose(CLAIM_THREADS, schema)
        self.captures = compose(SELECT_CAPTURES, schema)
        self.checkpoint_refs = compose(CHECKPOINT_REFS, schema)
        self.pending = compose(PENDING_CAPTURES, schema)
        self.pending_of = compose(PENDING_OF_THREADS, schema)
        self.insert_event = compose(INSERT_EVENT, schema)
        self.checkpoint = compose(UPSERT_CHECKPOINT, schema)
        self.positions = compose(SELECT_POSITIONS, schema)
        self.seal_heads = compose(SELECT_SEAL_HEADS, schema)
        self.namespaces = compose(SELECT_NAMESPACES, schema)
        self.mark_legacy_named = compose(MARK_LEGACY_NAMED, schema)
        self.after = compose(SELECT_EVENTS_AFTER, schema)
        self.lagging = compose(SELECT_LAGGING, schema)
        self.quarantined = compose(SELECT_QUARANTINED, schema)
        self.commit = compose(COMMIT_EVENTS, schema)
        self.recorded = compose(SELECT_RECORDED, schema)
        self.cursor = compose(UPSERT_CURSOR, schema)
        self.cursors = compose(UPSERT_CURSORS_UNLOCK, schema)
        self.clear = compose(CLEAR_QUARANTINE, schema)
        self.delete_checkpoints = compose(DELETE_CHECKPOINT_ROWS, schema)
        self.forget = compose(FORGET_THREAD, schema)
        self.artifact = compose(INSERT_ARTIFACT, schema)
        self.copy_checkpoints = compose(COPY_CHECKPOINT_ROWS, schema)
