"""SQL of the exporters: reads of the ledger, and their cursors in ``projection_cursors``."""

from __future__ import annotations

SELECT_CURSOR = """
select seq, error from {schema}.projection_cursors where projection = %s and thread_id = %s
"""

SELECT_RUN_MARKERS = """
select seq, kind, payload from {schema}.events
where thread_id = %s and seq <= %s and kind in ('run_start', 'interrupt')
order by seq
"""

SELECT_THREADS = """
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

RESET_CURSORS = """
insert into {schema}.projection_cursors as c (projection, thread_id, seq, error, updated_at)
select %(projection)s, t, 0, null, now() from unnest(%(threads)s::text[]) as t
on conflict (projection, thread_id) do update set seq = 0, error = null, updated_at = now()
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
