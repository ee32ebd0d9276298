"""SQL of the Mem0 adapter: its own versioned migrations, views and statements.

The tables live in the ledger schema (default ``langgraph_external``) next to the run
ledger; Mem0's vector tables stay where Mem0 looks for them (schema ``public``). The
migrations are a plain list whose index is the version, recorded in
``<schema>.memory_migrations`` (separate from the ledger's own ``migrations``).

Every statement the adapter runs is a constant here. Identifiers are placeholders that
:func:`compose` fills, quoted: ``{schema}`` (the ledger schema), ``{collection}`` (Mem0's
vector table) and ``{entities}`` (its entity table, ``<collection>_entities``).

Example:
    >>> len(MIGRATIONS) >= 2
    True
    >>> "memory_events" in MIGRATIONS[1]
    True
"""

from __future__ import annotations

from psycopg import sql


def compose(
    text: str,
    schema: str | None = None,
    *,
    collection: str | None = None,
    entities: str | None = None,
) -> sql.Composed:
    """``text`` with its identifier placeholders replaced by quoted identifiers.

    Example:
        >>> stmt = compose(DELETE_VECTORS, collection="mem0_memories")
        >>> stmt.as_string(None)[:32]
        'delete from "mem0_memories" wher'
    """
    names = {"schema": schema, "collection": collection, "entities": entities}
    idents = {k: sql.Identifier(v) for k, v in names.items() if v is not None}
    return sql.SQL(text).format(**idents)


# Each entry is one version; never edit a released entry, append a new one.
MIGRATIONS: list[str] = [
    # v0: bookkeeping
    """
    create table if not exists {schema}.memory_migrations (
        v integer primary key,
        applied_at timestamptz not null default now()
    )
    """,
    # v1: audit log (also Mem0's history), stored messages, retrievals, erasure receipts
    """
    create table if not exists {schema}.memory_events (
        event_id bigint generated always as identity primary key,
        op_id uuid not null,
        collection text not null,
        memory_id uuid not null,
        event text not null check (event in ('ADD', 'UPDATE', 'DELETE', 'ERASE')),
        old_text text,
        new_text text,
        old_hash text,
        new_hash text,
        user_id text,
        agent_id text,
        scope_run_id text,
        actor text,
        actor_id text,
        role text,
        reason text,
        infer boolean,
        messages jsonb,
        metadata jsonb,
        thread_id text,
        run_id text,
        root_run_id text,
        checkpoint_ns text,
        checkpoint_id text,
        node text,
        step integer,
        task_id text,
        created_at timestamptz not null default clock_timestamp(),
        erased_at timestamptz,
        erasure_id uuid
    );
    create index if not exists memory_events_memory_idx
        on {schema}.memory_events (memory_id, event_id);
    create index if not exists memory_events_user_idx
        on {schema}.memory_events (user_id, created_at);
    create index if not exists memory_events_thread_idx
        on {schema}.memory_events (thread_id, created_at);
    create index if not exists memory_events_run_idx
        on {schema}.memory_events (run_id) where run_id is not null;

    create table if not exists {schema}.memory_messages (
        message_id bigint generated always as identity primary key,
        collection text not null,
        session_scope text not null,
        user_id text,
        agent_id text,
        scope_run_id text,
        role text,
        content text,
        name text,
        created_at timestamptz not null default clock_timestamp()
    );
    create index if not exists memory_messages_scope_idx
        on {schema}.memory_messages (collection, session_scope, created_at);

    create table if not exists {schema}.memory_retrievals (
        search_id uuid primary key,
        collection text not null,
        query text,
        query_hash text not null,
        filters jsonb,
        top_k integer,
        threshold double precision,
        user_id text,
        agent_id text,
        scope_run_id text,
        hit_count integer not null,
        duration_ms double precision,
        thread_id text,
        run_id text,
        root_run_id text,
        checkpoint_ns text,
        checkpoint_id text,
        node text,
        step integer,
        task_id text,
        created_at timestamptz not null default clock_timestamp(),
        erased_at timestamptz
    );
    create index if not exists memory_retrievals_user_idx
        on {schema}.memory_retrievals (user_id, created_at);
    create index if not exists memory_retrievals_thread_idx
        on {schema}.memory_retrievals (thread_id, created_at);

    create table if not exists {schema}.memory_retrieval_hits (
        search_id uuid not null references {schema}.memory_retrievals (search_id)
            on delete cascade,
        rank integer not null,
        memory_id uuid not null,
        score double precision,
        primary key (search_id, rank)
    );
    create index if not exists memory_retrieval_hits_memory_idx
        on {schema}.memory_retrieval_hits (memory_id);

    create table if not exists {schema}.memory_erasures (
        erasure_id uuid primary key,
        collection text not null,
        requested_at timestamptz not null,
        completed_at timestamptz not null,
        erased_by text,
        reason text,
        subject_kind text not null check (subject_kind in ('user_id', 'memory_ids')),
        subject_hash text not null,
        memory_ids uuid[] not null,
        content_hashes text[] not null,
        row_counts jsonb not null,
        receipt_hash text not null
    );
    """,
    # v2: views (see docs/memory.md for the recipes)
    """
    create or replace view {schema}.memory_current as
    select s.memory_id, s.collection, s.new_text as memory, s.new_hash as hash, s.user_id,
           s.agent_id, s.scope_run_id, s.actor, s.thread_id, s.run_id, s.node, s.step,
           (select min(c.created_at) from {schema}.memory_events c
             where c.memory_id = s.memory_id) as created_at,
           s.created_at as updated_at
    from (
        select distinct on (e.memory_id) e.*
        from {schema}.memory_events e
        order by e.memory_id, e.event_id desc
    ) s
    where s.event in ('ADD', 'UPDATE');

    create or replace view {schema}.memory_audit as
    select e.event_id, e.op_id, e.collection, e.memory_id, e.event, e.old_text, e.new_text,
           e.old_hash, e.new_hash, e.user_id, e.agent_id, e.scope_run_id, e.actor,
           e.actor_id, e.role, e.reason, e.infer, e.messages, e.metadata, e.thread_id,
           e.run_id, coalesce(e.root_run_id, (
               select l.root_run_id from {schema}.events l
               where l.run_id = e.run_id and l.kind = 'node_start' limit 1)) as root_run_id,
           e.checkpoint_ns, e.checkpoint_id, e.node, e.step, e.task_id, e.created_at,
           e.erased_at, e.erasure_id
    from {schema}.memory_events e;

    create or replace view {schema}.memory_history as
    select memory_id, event_id, event, old_text, new_text, old_hash, new_hash, actor,
           reason, thread_id, run_id, node, step, created_at, erased_at
    from {schema}.memory_events;

    create or replace view {schema}.memory_reads as
    select h.memory_id, h.score, h.rank, r.search_id, r.query, r.query_hash, r.filters,
           r.user_id, r.thread_id, r.run_id, r.root_run_id, r.checkpoint_id, r.node,
           r.step, r.task_id, r.created_at as read_at
    from {schema}.memory_retrieval_hits h
    join {schema}.memory_retrievals r using (search_id);

    create or replace view {schema}.memory_created_by as
    select e.memory_id, e.new_text as memory, e.user_id, e.thread_id, e.run_id,
           e.root_run_id, e.checkpoint_id, e.node, e.step, e.task_id, e.actor, e.reason,
           e.infer, e.created_at
    from {schema}.memory_events e
    where e.event = 'ADD';

    create or replace function {schema}.memories_as_of(p_user_id text, p_at timestamptz)
    returns table (memory_id uuid, memory text, hash text, changed_at timestamptz,
                   thread_id text, node text)
    language sql stable as $$
        select s.memory_id, s.new_text, s.new_hash, s.created_at, s.thread_id, s.node
        from (
            select distinct on (e.memory_id) e.memory_id, e.event, e.new_text, e.new_hash,
                   e.created_at, e.thread_id, e.node
            from {schema}.memory_events e
            where e.user_id = p_user_id and e.created_at <= p_at
            order by e.memory_id, e.event_id desc
        ) s
        where s.event in ('ADD', 'UPDATE')
    $$;
    """,
]

INSERT_EVENT = """
insert into {schema}.memory_events (op_id, collection, memory_id, event, old_text, new_text,
    old_hash, new_hash, user_id, agent_id, scope_run_id, actor, actor_id, role, reason, infer,
    messages, metadata, thread_id, run_id, root_run_id, checkpoint_ns, checkpoint_id, node,
    step, task_id)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
    %s, %s, %s, %s, %s)
"""

SELECT_HISTORY = """
select event_id, memory_id, old_text, new_text, event, created_at, actor_id, role
from {schema}.memory_events
where memory_id = %s and collection = %s
order by event_id
"""

INSERT_MESSAGE = """
insert into {schema}.memory_messages (collection, session_scope, user_id, agent_id,
    scope_run_id, role, content, name)
values (%s, %s, %s, %s, %s, %s, %s, %s)
"""

# Mem0 keeps the ten most recent messages per session scope; so do we.
EVICT_MESSAGES = """
delete from {schema}.memory_messages
where collection = %(c)s and session_scope = %(s)s and message_id not in (
    select message_id from {schema}.memory_messages
    where collection = %(c)s and session_scope = %(s)s
    order by message_id desc limit 10)
"""

SELECT_LAST_MESSAGES = """
select role, content, name, created_at from (
    select message_id, role, content, name, created_at from {schema}.memory_messages
    where collection = %s and session_scope = %s
    order by message_id desc limit %s
) m order by message_id
"""

# One round trip for the retrieval row and all its hits.
INSERT_RETRIEVAL = """
with r as (
    insert into {schema}.memory_retrievals (search_id, collection, query, query_hash,
        filters, top_k, threshold, user_id, agent_id, scope_run_id, hit_count, duration_ms,
        thread_id, run_id, root_run_id, checkpoint_ns, checkpoint_id, node, step, task_id)
    select %(search_id)s, %(collection)s, %(query)s, %(query_hash)s, %(filters)s,
        %(top_k)s, %(threshold)s, %(user_id)s, %(agent_id)s, %(scope_run_id)s,
        %(hit_count)s, %(duration_ms)s, %(thread_id)s, %(run_id)s, %(root_run_id)s,
        %(checkpoint_ns)s, %(checkpoint_id)s, %(node)s, %(step)s, %(task_id)s
    from (select set_config('synchronous_commit', case when %(durable)s
        then current_setting('synchronous_commit') else 'off' end, true)) as commit_mode
    returning search_id
)
insert into {schema}.memory_retrieval_hits (search_id, rank, memory_id, score)
select r.search_id, h.rank, h.memory_id, h.score
from r, unnest(%(ranks)s::integer[], %(ids)s::uuid[], %(scores)s::float8[])
    as h(rank, memory_id, score)
"""

INSERT_EVENT_RETURNING_ID = INSERT_EVENT + "returning event_id\n"

# Whether an audited change may be written: the row locked first (a concurrent erasure
# makes a later update find nothing).
LOCK_VECTOR_PAYLOAD = "select payload from {collection} where id = %s for update"

# -- setup -----------------------------------------------------------------------------------
# One setup at a time per schema (the key is crc32 of "langgraph_external:mem0:<schema>").
SETUP_LOCK = "select pg_advisory_xact_lock(%s)"

SELECT_MIGRATIONS = "select v from {schema}.memory_migrations"

INSERT_MIGRATION = "insert into {schema}.memory_migrations (v) values (%s)"

PGVECTOR_ENABLED = "select 1 from pg_extension where extname = 'vector'"

PGVECTOR_AVAILABLE = "select 1 from pg_available_extensions where name = 'vector'"

CREATE_PGVECTOR = "create extension if not exists vector"

# ``vector(N)`` keeps N in the column's type modifier; no row: the table does not exist.
VECTOR_DIMS = """
select a.atttypmod from pg_attribute a join pg_class c on c.oid = a.attrelid
join pg_namespace n on n.oid = c.relnamespace
where n.nspname = 'public' and c.relname = %s and a.attname = 'vector'
and not a.attisdropped
"""

# -- erasure ---------------------------------------------------------------------------------
# Every memory a user ever had: current vectors, and deleted ones history still names.
USER_MEMORY_IDS = """
select id::text from {collection} where payload->>'user_id' = %(u)s
union
select memory_id::text from {schema}.memory_events where collection = %(c)s and user_id = %(u)s
"""

# Locked first: a concurrent update waits, then finds nothing.
LOCK_VECTORS = "select id::text, payload from {collection} where id = any(%s::uuid[]) for update"

EVENT_TEXTS_AND_SCOPES = """
select old_text, new_text, user_id, agent_id, scope_run_id
from {schema}.memory_events where collection = %s and memory_id = any(%s::uuid[])
"""

DELETE_VECTORS = "delete from {collection} where id = any(%s::uuid[])"

ERASE_EVENT_TEXT = """
update {schema}.memory_events set old_text = null, new_text = null, messages = null,
    metadata = null, reason = null, user_id = null, erased_at = now(), erasure_id = %s
where collection = %s and memory_id = any(%s::uuid[])
"""

ERASE_RETRIEVAL_TEXT = """
update {schema}.memory_retrievals set query = null, filters = null, user_id = null,
    erased_at = now()
where collection = %(c)s and (user_id = %(u)s or search_id in (
    select search_id from {schema}.memory_retrieval_hits
    where memory_id = any(%(ids)s::uuid[])))
"""

# The hash each memory was last known by: what its ERASE audit row names.
LAST_HASHES = """
select distinct on (memory_id) memory_id, coalesce(new_hash, old_hash)
from {schema}.memory_events where collection = %s and memory_id = any(%s::uuid[])
order by memory_id, event_id desc
"""

MARK_ERASE_EVENTS = """
update {schema}.memory_events set erased_at = now(), erasure_id = %s
where event = 'ERASE' and erasure_id is null and collection = %s
    and memory_id = any(%s::uuid[])
"""

INSERT_ERASURE = """
insert into {schema}.memory_erasures (erasure_id, collection, requested_at, completed_at,
    erased_by, reason, subject_kind, subject_hash, memory_ids, content_hashes, row_counts,
    receipt_hash)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s::uuid[], %s, %s, %s)
"""

DELETE_USER_ENTITIES = "delete from {entities} where payload->>'user_id' = %s"

# Entity rows linked only to erased memories go; others just lose the links.
DELETE_ENTITIES_LINKED_ONLY_TO = """
delete from {entities} where payload ? 'linked_memory_ids'
    and not exists (select 1 from jsonb_array_elements_text(payload->'linked_memory_ids') l
        where l <> all(%s::text[]))
    and exists (select 1 from jsonb_array_elements_text(payload->'linked_memory_ids') l
        where l = any(%s::text[]))
"""

UNLINK_ENTITIES = """
update {entities} set payload = jsonb_set(payload, '{{linked_memory_ids}}',
    (select coalesce(jsonb_agg(l), '[]'::jsonb)
     from jsonb_array_elements_text(payload->'linked_memory_ids') l
     where l <> all(%s::text[])))
where payload->'linked_memory_ids' ?| %s::text[]
"""

DELETE_USER_MESSAGES = "delete from {schema}.memory_messages where collection = %s and user_id = %s"

DELETE_SCOPE_MESSAGES = """
delete from {schema}.memory_messages where collection = %s
    and user_id is not distinct from %s and agent_id is not distinct from %s
    and scope_run_id is not distinct from %s
"""

# Dead tuples keep erased text on disk until vacuumed (``erase(vacuum=True)``).
VACUUM_ERASED = (
    "vacuum {collection}",
    "vacuum {entities}",
    "vacuum {schema}.memory_events",
    "vacuum {schema}.memory_messages",
    "vacuum {schema}.memory_retrievals",
)

# -- erasure verification --------------------------------------------------------------------
SELECT_ERASURE = """
select erasure_id::text, collection, requested_at, completed_at, erased_by, reason,
    subject_kind, subject_hash, memory_ids::text[], content_hashes, row_counts, receipt_hash
from {schema}.memory_erasures where erasure_id = %s
"""

COUNT_VECTORS_LEFT = "select count(*) from {collection} where id = any(%s::uuid[])"

COUNT_EVENTS_WITH_TEXT = """
select count(*) from {schema}.memory_events where memory_id = any(%s::uuid[])
    and (old_text is not null or new_text is not null or messages is not null
         or metadata is not null or user_id is not null)
"""

COUNT_ENTITIES_LINKED = (
    "select count(*) from {entities} where payload->'linked_memory_ids' ?| %s::text[]"
)

COUNT_ERASE_EVENTS = (
    "select count(*) from {schema}.memory_events where event = 'ERASE' and erasure_id = %s"
)

COUNT_EVENTS_AFTER_ERASURE = """
select count(*) from {schema}.memory_events where memory_id = any(%s::uuid[])
    and (old_hash = any(%s) or new_hash = any(%s)) and erasure_id is null
"""

# -- what ``lgx ui`` shows of memories (ui/_queries) -----------------------------------------
# The adapter's tables (MIGRATIONS above) are there only where the adapter ran.
MEMORY_TABLES_PRESENT = "select to_regclass(%s)"

MEMORY_TEXTS = """
select memory_id::text, memory from {schema}.memory_current where memory_id = any(%s::uuid[])
"""

MEMORY_QUERIES = """
select search_id::text, query from {schema}.memory_retrievals where search_id = any(%s::uuid[])
"""
