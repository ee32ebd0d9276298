"""The read statements over the ledger schema that ``lgx`` and the readers of
:mod:`langgraph_external.read` run (the ledger's own are in
:mod:`langgraph_external.ledger.statements`).

``{schema}`` is filled in by :func:`langgraph_external.ledger.schema.q`.

Example:
    >>> from langgraph_external.ledger.schema import q
    >>> q(SELECT_THREAD_IDS, "audit").as_string(None)
    'select thread_id from "audit".threads'
"""

from __future__ import annotations

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

THREAD_IN_LEDGER = """
select exists (select 1 from {schema}.threads where thread_id = %(t)s)
    or exists (select 1 from {schema}.events where thread_id = %(t)s)
"""

SELECT_LAST_EVENTS = """
select seq, ts, kind, node, step, name from {schema}.events
where thread_id = %s order by seq desc limit %s
"""

SELECT_EVENTS = """
select * from (
    select v, seq, ts, event_id::text, kind, name, status, thread_id, checkpoint_ns,
        checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id,
        duration_ms, payload, raw, artifact, redactions, prev, hash
    from {schema}.events
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
