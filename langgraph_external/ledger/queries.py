"""The read statements over the ledger schema that ``lgx``, the readers of
:mod:`langgraph_external.read`, ``lgx ui`` and the exporters run (the ledger's own statements,
its writes among them, are in :mod:`langgraph_external.ledger.statements`; those that join
the official saver's tables, in :mod:`langgraph_external.upstream.saver_ops`).

``{schema}`` is filled in by :func:`langgraph_external.ledger.schema.q`.

Example:
    >>> from langgraph_external.ledger.schema import q
    >>> q(SELECT_THREAD_IDS, "audit").as_string(None)
    'select thread_id from "audit".threads'
"""

from __future__ import annotations

from langgraph_external.ledger.statements import ENVELOPE_SELECT

SET_TIME_ZONE_UTC = "set time zone 'UTC'"
"""Timestamps render in UTC, as they were hashed."""

SELECT_THREAD_IDS = "select thread_id from {schema}.threads"
"""Every thread the ledger knows (``lgx verify --all``)."""

SELECT_THREAD = """
select t.created_at, t.updated_at, t.last_seq, t.deleted_at,
    (select count(*) from {schema}.events e where e.thread_id = t.thread_id) as events,
    (select count(*) from {schema}.checkpoints c where c.thread_id = t.thread_id) as checkpoints
from {schema}.threads t where t.thread_id = %s
"""
"""One thread's summary (``lgx show``)."""

SELECT_EVENT_PLACES = """
select seq, ts, kind, name, status, checkpoint_ns, checkpoint_id, run_id, parent_run_id,
    root_run_id, node, step, task_id, duration_ms
from {schema}.events where thread_id = %s order by seq
"""
"""Every event of a thread without payloads: what placing events by step needs."""

SELECT_KIND_COUNTS = """
select kind, count(*) from {schema}.events where thread_id = %s
group by kind order by min(seq)
"""
"""How many events of each kind a thread has, in the order the kinds first appear."""


# -- listings, filters and readers of langgraph_external.read --------------------
# ``replays`` switches the listing of replay copies on; ``prefix`` is REPLAY_PREFIX
SELECT_THREADS = """
select thread_id, created_at, updated_at, events as last_seq, checkpoints, deleted_at
from {schema}.thread_summary
where (%(replays)s or not starts_with(thread_id, %(prefix)s))
order by updated_at desc, thread_id
limit %(limit)s
"""

COUNT_THREADS = """
select count(*) filter (where not starts_with(thread_id, %(prefix)s)) as n,
       count(*) filter (where starts_with(thread_id, %(prefix)s)) as replays
from {schema}.threads
"""

SELECT_THREAD_POSITION = "select last_seq, last_hash from {schema}.threads where thread_id = %s"

SELECT_THREAD_HEADS = "select thread_id, last_seq from {schema}.threads order by thread_id"
"""Every thread the ledger knows, with its last ``seq`` (the mirror's status)."""

SELECT_LATEST_ROOT_CHECKPOINT = """
select seq, checkpoint_id from {schema}.events
where thread_id = %s and kind = 'checkpoint' and checkpoint_ns = ''
order by seq desc limit 1
"""
"""The latest root checkpoint event of a thread: what its ``state.json`` shows."""

SELECT_TAGGED_HEADS = """
select thread_id, last_seq, last_hash, head_mac from {schema}.threads
where head_mac is not null order by updated_at desc limit %s
"""
"""The newest heads that carry a keyed tag (``lgx verify``: is this the key that wrote them?)."""

THREAD_IN_LEDGER = """
select exists (select 1 from {schema}.threads where thread_id = %(t)s)
    or exists (select 1 from {schema}.events where thread_id = %(t)s)
"""

SELECT_LAST_EVENTS = """
select seq, ts, kind, node, step, name from {schema}.events
where thread_id = %s order by seq desc limit %s
"""

SELECT_EVENTS = f"""
select * from (
    select {ENVELOPE_SELECT}
    from {{schema}}.events
    where thread_id = %(thread_id)s
      and (%(kinds)s::text[] is null or kind = any(%(kinds)s::text[]))
      and (%(nodes)s::text[] is null or node = any(%(nodes)s::text[]))
      and (%(names)s::text[] is null or name = any(%(names)s::text[]))
      and (%(since)s::timestamptz is null or ts >= %(since)s::timestamptz)
      and (%(until)s::timestamptz is null or ts < %(until)s::timestamptz)
    order by seq desc
    limit %(limit)s
) last order by seq
"""


# -- the compare page and ``lgx diff`` (read/calls, read/path_diff, read/diff) -------
SELECT_CALLS = """
select seq, kind, name, status, checkpoint_ns, run_id, node, step, payload
from {schema}.events
where thread_id = %s and kind = any(%s) and seq > %s and (%s::bigint is null or seq <= %s)
order by seq
"""

SELECT_PATH = """
select checkpoint_ns, checkpoint_id, step, nodes, source, event_seq
from {schema}.checkpoints where thread_id = %s order by event_seq
"""

SELECT_RUN = """
select thread_id, kind, seq from {schema}.events
where run_id = %s and kind in ('run_start', 'run_end') and parent_run_id is null
order by seq
"""

# -- the thread views (read/event_order) -----------------------------------------------
# what placing a subset of a thread's events by step needs to know about the rest
SELECT_STEP_CONTEXT = """
select seq, kind, checkpoint_ns, checkpoint_id, run_id, parent_run_id, root_run_id, step,
    task_id
from {schema}.events
where thread_id = %s and kind in ('run_start', 'node_start', 'checkpoint')
order by seq
"""


# -- ``lgx ui``: the threads list and one thread's rows (ui/_queries) -------------------
# Every statement reads only ``threads`` and ``events``. A search is a list of ``key:value``
# terms; a NULL parameter switches its condition off, so each statement is one fixed text.

# Threads matching the terms only the events can answer (error text, session); the other
# terms are answered from the threads' summaries (see Summaries).
MATCHES = """
select t.thread_id
from {schema}.threads t
where t.last_seq > 0
  and (%(session)s::text is null or t.thread_id = %(session)s or t.thread_id in (
        select thread_id from {schema}.events
        where kind = 'checkpoint'
          and payload -> 'metadata' ->> 'langfuse_session_id' = %(session)s))
  and (%(error)s::text is null or t.thread_id in (
        select thread_id from {schema}.events
        where (status = 'error' or kind in ('error', 'tool_error'))
          and (%(error)s = '' or payload ->> 'error' ilike %(error_like)s
               or payload ->> 'error_type' ilike %(error_like)s)))
"""

HEADS = """
select thread_id, last_seq, created_at, updated_at from {schema}.threads where last_seq > 0
"""

# Headline numbers of a set of threads, from their runs, nodes, model and tool calls,
# interrupts and violations. The status of a thread is that of its last run:
# interrupted (an interrupt after its start), else how it ended, else running.
AGGREGATES = """
select e.thread_id,
    count(*) filter (where e.kind = 'run_start' and e.parent_run_id is null) as runs,
    coalesce(sum(e.duration_ms)
             filter (where e.kind = 'run_end' and e.parent_run_id is null), 0) as duration_ms,
    coalesce(sum(coalesce((e.payload -> 'usage' ->> 'input_tokens')::bigint,
                          (e.payload -> 'usage' ->> 'prompt_tokens')::bigint))
             filter (where e.kind = 'llm_end'), 0)::bigint as input_tokens,
    coalesce(sum(coalesce((e.payload -> 'usage' ->> 'output_tokens')::bigint,
                          (e.payload -> 'usage' ->> 'completion_tokens')::bigint))
             filter (where e.kind = 'llm_end'), 0)::bigint as output_tokens,
    count(*) filter (where e.kind = 'llm_end') as llm_calls,
    count(*) filter (where e.kind = 'policy_violation') as violations,
    array_agg(distinct e.name) filter (where e.kind = 'policy_violation') as violation_rules,
    count(*) filter (where e.kind in ('error', 'tool_error')
                     or (e.status = 'error' and e.kind in ('run_end', 'llm_end'))) as errors,
    max(e.seq) filter (where e.kind = 'run_start' and e.parent_run_id is null) as last_start,
    max(e.seq) filter (where e.kind = 'run_end' and e.parent_run_id is null) as last_end,
    max(e.seq) filter (where e.kind = 'interrupt') as last_interrupt,
    (array_agg(e.status order by e.seq desc)
        filter (where e.kind = 'run_end' and e.parent_run_id is null))[1] as last_status,
    array_agg(distinct e.payload ->> 'user_id')
        filter (where e.kind = 'run_start' and e.payload ? 'user_id') as users,
    jsonb_agg(e.payload -> 'tags') filter (where e.kind = 'run_start' and e.payload ? 'tags')
        as tags,
    array_agg(distinct e.node) filter (where e.kind = 'node_start') as nodes,
    array_agg(distinct e.name) filter (where e.kind = 'tool_start') as tools
from {schema}.events e
where e.thread_id = any(%(ids)s)
  and e.kind in ('run_start', 'run_end', 'llm_end', 'policy_violation', 'error', 'tool_error',
                 'interrupt', 'node_start', 'tool_start')
group by e.thread_id
"""

# The run starts of a set of threads recorded whole-payload offloaded by an older version
# (``{"$artifact", "size"}``: their user and tags are in the artifact), with the artifact
# when the database holds it (recorded since v9; older ones are in the workspace only).
WHOLE_PAYLOAD_RUN_STARTS = """
select e.thread_id, e.payload ->> '$artifact', a.content
from {schema}.events e
left join {schema}.artifacts a
  on a.thread_id = e.thread_id and a.sha256 = e.payload ->> '$artifact'
where e.thread_id = any(%(ids)s) and e.kind = 'run_start'
  and e.payload ? '$artifact' and not e.payload ? 'as'
"""

# Tokens per model of a set of threads (for costs): a model call's start names the model (its
# parameters' model; else the model its answer names; else the model class), its end the usage.
MODEL_TOKENS = """
select s.thread_id,
    coalesce(s.payload -> 'params' ->> 'model', s.payload -> 'params' ->> 'model_name',
             s.payload -> 'params' ->> 'model_id', e.payload ->> 'model_name',
             s.payload ->> 'model', s.name) as model,
    sum(coalesce((e.payload -> 'usage' ->> 'input_tokens')::bigint,
                 (e.payload -> 'usage' ->> 'prompt_tokens')::bigint))::bigint as input_tokens,
    sum(coalesce((e.payload -> 'usage' ->> 'output_tokens')::bigint,
                 (e.payload -> 'usage' ->> 'completion_tokens')::bigint))::bigint as output_tokens
from {schema}.events s
join {schema}.events e on e.run_id = s.run_id and e.kind = 'llm_end' and e.thread_id = s.thread_id
where s.kind = 'llm_start' and s.thread_id = any(%(ids)s)
group by 1, 2
"""

# A thread's events as the view reads them: the exact copies (``exact``), the checkpoints'
# channel maps and raw bytes stay in the database (the page fetches whole events on demand).
VIEW_EVENTS = """
select v, seq, ts, event_id::text, kind, name, status, thread_id, checkpoint_ns,
    checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id, duration_ms,
    payload - 'exact' - 'channels', null::bytea, artifact, redactions, null::text, null::text
from {schema}.events where thread_id = %s order by seq
"""

EVENTS_AT = f"""
select {ENVELOPE_SELECT}
from {{schema}}.events where thread_id = %s and seq = any(%s::bigint[]) order by seq
"""

THREAD_ROW = """
select thread_id, created_at, updated_at, last_seq, deleted_at
from {schema}.threads where thread_id = %s
"""


# -- the exporters: their threads, cursors and lean events (exporters/reader) ----------
SELECT_CURSOR = """
select seq, error from {schema}.projection_cursors where projection = %s and thread_id = %s
"""

SELECT_RUN_MARKERS = """
select seq, kind, payload from {schema}.events
where thread_id = %s and seq <= %s and kind in ('run_start', 'interrupt')
order by seq
"""

SELECT_EXPORT_THREADS = """
select t.thread_id, t.last_seq, coalesce(c.seq, 0)
from {schema}.threads t
left join {schema}.projection_cursors c on c.projection = %(projection)s
    and c.thread_id = t.thread_id
where (%(all)s or t.thread_id = any(%(threads)s) or t.last_seq > coalesce(c.seq, 0))
  and (%(since)s::timestamptz is null or t.updated_at >= %(since)s::timestamptz)
  and (cardinality(%(threads)s::text[]) = 0 or t.thread_id = any(%(threads)s))
  and not starts_with(t.thread_id, %(replays)s)
order by t.updated_at
"""

OPEN_CHAIN = """
select seq, kind, run_id, payload from {schema}.events
where thread_id = %s and kind in ('run_start', 'interrupt') order by seq
"""

# what the exporter maps: checkpoint and writes events without their (bulky) payload/detail
SELECT_EVENTS_LEAN = """
select v, seq, ts, event_id::text, kind, name, status, thread_id, checkpoint_ns,
    checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id, duration_ms,
    case when kind in ('checkpoint', 'writes') then '{{}}'::jsonb else payload end,
    case when kind in ('checkpoint', 'writes') then null else raw end,
    artifact, redactions, prev, hash,
    case when kind in ('checkpoint', 'writes') then null else detail end
from {schema}.events where thread_id = %s and seq > %s order by seq limit %s
"""

# spans waiting per thread: the events after the cursor that complete a span (the mapper's
# END_KINDS with a run id, and its POINT_KINDS)
COUNT_WAITING = """
select t.thread_id, count(e.seq)
from {schema}.threads t
left join {schema}.projection_cursors c on c.projection = %(projection)s
    and c.thread_id = t.thread_id
join {schema}.events e on e.thread_id = t.thread_id and e.seq > coalesce(c.seq, 0)
where t.last_seq > coalesce(c.seq, 0)
  and (cardinality(%(threads)s::text[]) = 0 or t.thread_id = any(%(threads)s))
  and ((e.kind = any(%(ends)s) and e.run_id is not null) or e.kind = any(%(points)s))
group by t.thread_id
"""
