"""SQL of the Mem0 adapter: its own versioned migrations, views and statements.

The tables live in the ledger schema (default ``langgraph_external``) next to the run
ledger; Mem0's vector tables stay where Mem0 looks for them (schema ``public``). The
migrations are a plain list whose index is the version, recorded in
``<schema>.memory_migrations`` (separate from the ledger's own ``migrations``).

Example:
    >>> len(MIGRATIONS) >= 2
    True
    >>> "memory_events" in MIGRATIONS[1]
    True
"""

from __future__ import annotations

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
    values (%(search_id)s, %(collection)s, %(query)s, %(query_hash)s, %(filters)s,
        %(top_k)s, %(threshold)s, %(user_id)s, %(agent_id)s, %(scope_run_id)s,
        %(hit_count)s, %(duration_ms)s, %(thread_id)s, %(run_id)s, %(root_run_id)s,
        %(checkpoint_ns)s, %(checkpoint_id)s, %(node)s, %(step)s, %(task_id)s)
    returning search_id
)
insert into {schema}.memory_retrieval_hits (search_id, rank, memory_id, score)
select r.search_id, h.rank, h.memory_id, h.score
from r, unnest(%(ranks)s::integer[], %(ids)s::uuid[], %(scores)s::float8[])
    as h(rank, memory_id, score)
"""
