"""The statements ``lgx`` runs over the ledger schema itself (the listings, filters and
readers it shares with the library keep theirs in :mod:`langgraph_external.read.inspection`).

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
