"""Read what was recorded: ledger queries, event filters and readable states.

The logic behind ``lgx threads``, ``show``, ``events``, ``state`` and ``sql``, usable from
Python too. All SQL text the command line sends to the ledger lives in this module; every
statement takes the ledger schema as ``{schema}`` (see :func:`langgraph_external.ledger.q`).

Example:
    >>> flt = EventFilter(kinds=("checkpoint",), since=parse_time("2026-01-31T12:00"))
    >>> flt.since.isoformat()
    '2026-01-31T12:00:00+00:00'
    >>> try:
    ...     read_state(Workspace("memory://lgx-inspect-doc"), "no-such-thread")
    ... except NotFoundError as exc:
    ...     print(exc)
    thread 'no-such-thread' has no checkpoints in the workspace memory://lgx-inspect-doc
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from langgraph_external import ledger
from langgraph_external.errors import ConfigurationError, ExternalError
from langgraph_external.workspace import Workspace

if TYPE_CHECKING:  # restore pulls in LangGraph: imported where a state is read
    from langgraph_external.restore import CheckpointLog

__all__ = [
    "REPLAY_PREFIX",
    "AmbiguousCheckpointError",
    "EventFilter",
    "NotFoundError",
    "Placed",
    "QueryResult",
    "StateView",
    "example_queries",
    "is_replay_copy",
    "list_threads",
    "parse_time",
    "place_events",
    "prepare_session",
    "query_events",
    "read_state",
    "run_query",
    "step_context",
    "thread_in_ledger",
]


class NotFoundError(ExternalError, LookupError):
    """The thread or checkpoint asked for was not recorded."""


class AmbiguousCheckpointError(ConfigurationError):
    """A checkpoint id prefix matches more than one checkpoint."""


# -- replay copies -----------------------------------------------------------------------
REPLAY_PREFIX = "lgx-replay:"
"""Thread ids starting with this are replay copies (``lgx replay`` runs a recorded thread
again into ``lgx-replay:<thread>:<8 hex digits>``). ``lgx threads`` leaves them out unless
asked (``--replays``), and the Langfuse export never sends them. Ids are compared as
given: a copy is a copy by its id alone, from its first event on."""


def is_replay_copy(thread_id: str) -> bool:
    """Whether ``thread_id`` names a replay copy (see :data:`REPLAY_PREFIX`).

    Example:
        >>> is_replay_copy("lgx-replay:thread-42:1a2b3c4d"), is_replay_copy("thread-42")
        (True, False)
    """
    return thread_id.startswith(REPLAY_PREFIX)


# -- SQL ---------------------------------------------------------------------------------
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

SELECT_THREAD_IDS = "select thread_id from {schema}.threads"

SELECT_THREAD = """
select t.created_at, t.updated_at, t.last_seq, t.deleted_at,
    (select count(*) from {schema}.events e where e.thread_id = t.thread_id) as events,
    (select count(*) from {schema}.checkpoints c where c.thread_id = t.thread_id) as checkpoints
from {schema}.threads t where t.thread_id = %s
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

# every event of a thread, without payloads: what a view needs to place events by step
SELECT_EVENT_PLACES = """
select seq, ts, kind, name, status, checkpoint_ns, checkpoint_id, run_id, parent_run_id,
    root_run_id, node, step, task_id, duration_ms
from {schema}.events where thread_id = %s order by seq
"""

# what placing a subset of a thread's events by step needs to know about the rest
SELECT_STEP_CONTEXT = """
select seq, kind, checkpoint_ns, checkpoint_id, run_id, parent_run_id, root_run_id, step,
    task_id
from {schema}.events
where thread_id = %s and kind in ('run_start', 'node_start', 'checkpoint')
order by seq
"""

SELECT_KIND_COUNTS = """
select kind, count(*) from {schema}.events where thread_id = %s
group by kind order by min(seq)
"""

ENVELOPE_COLUMNS = ledger.ENVELOPE_COLUMNS
"""Keys of an event envelope, in the order of ``events.jsonl``."""

# Every filter is optional: a NULL parameter switches its condition off, so the statement
# stays one fixed text. The newest ``limit`` rows are taken, then returned oldest first.
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

SET_SEARCH_PATH = "set search_path to {schema}, public"
SET_READ_ONLY = "set default_transaction_read_only = on"

EXAMPLE_QUERIES = """\
-- Events of a thread, in order
select seq, ts, kind, node, step, name, status
from {s}.events
where thread_id = {t}
order by seq;

-- The path a thread took: its root checkpoints step by step, and the nodes that wrote them
select step, source, nodes, checkpoint_id, parent_checkpoint_id, created_at
from {s}.transitions
where thread_id = {t} and checkpoint_ns = ''
order by created_at;

-- The lineage of the latest checkpoint only (follows parent links, so forks are left out)
with recursive path as (
    (select checkpoint_id, parent_checkpoint_id, step, nodes
     from {s}.checkpoints
     where thread_id = {t} and checkpoint_ns = ''
     order by created_at desc
     limit 1)
    union all
    select c.checkpoint_id, c.parent_checkpoint_id, c.step, c.nodes
    from {s}.checkpoints c
    join path p on c.checkpoint_id = p.parent_checkpoint_id
    where c.thread_id = {t} and c.checkpoint_ns = ''
)
select step, nodes, checkpoint_id from path order by step;

-- Checkpoints written by a node, across all threads
select thread_id, checkpoint_ns, checkpoint_id, step, created_at
from {s}.checkpoints
where {n} = any(nodes)
order by created_at desc
limit 100;

-- What a node wrote (pending writes recorded per task)
select thread_id, seq, ts, checkpoint_id, task_id, payload
from {s}.events
where kind = 'writes' and node = {n}
order by ts desc
limit 100;

-- Event counts per kind in a thread
select kind, count(*) as events
from {s}.events
where thread_id = {t}
group by kind
order by events desc;

-- Threads, most recently updated first
select * from {s}.thread_summary order by updated_at desc;
"""


def example_queries(
    schema: str = ledger.DEFAULT_SCHEMA, thread_id: str = "thread-42", node: str = "agent"
) -> str:
    """Example SQL over the ledger, with the thread id and node quoted as SQL literals.

    Example:
        >>> "'o''brien'" in example_queries(thread_id="o'brien")
        True
    """
    return EXAMPLE_QUERIES.format(
        s=sql.Identifier(ledger.validate_schema(schema)).as_string(),
        t=sql.Literal(thread_id).as_string(),
        n=sql.Literal(node).as_string(),
    )


# -- events ------------------------------------------------------------------------------
def parse_time(text: str) -> datetime:
    """An ISO 8601 date or time; without a UTC offset it is taken as UTC.

    Raises:
        ValueError: not an ISO 8601 date or time.

    Example:
        >>> parse_time("2026-01-31").isoformat()
        '2026-01-31T00:00:00+00:00'
        >>> parse_time("2026-01-31T12:00:00Z").isoformat()
        '2026-01-31T12:00:00+00:00'
    """
    value = datetime.fromisoformat(text.strip())
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class EventFilter:
    """Which events of a thread to return; empty fields do not filter.

    Attributes:
        kinds: event kinds (``checkpoint``, ``writes``, ``node_end``, ``tool_start``, ...).
        nodes: graph node names.
        names: event names (tool or model names, ...).
        since: events at or after this time.
        until: events before this time.
        limit: only the last ``limit`` matching events (``None``: all).
    """

    kinds: Sequence[str] = ()
    nodes: Sequence[str] = ()
    names: Sequence[str] = ()
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None

    def params(self, thread_id: str) -> dict[str, Any]:
        """The parameters of :data:`SELECT_EVENTS`."""
        return {
            "thread_id": thread_id,
            "kinds": list(self.kinds) or None,
            "nodes": list(self.nodes) or None,
            "names": list(self.names) or None,
            "since": self.since,
            "until": self.until,
            "limit": self.limit or None,
        }


def _envelope(row: Sequence[Any]) -> dict[str, Any]:
    env = dict(zip(ENVELOPE_COLUMNS, row, strict=True))
    env["ts"] = env["ts"].isoformat()
    raw = env["raw"]
    env["raw"] = base64.b64encode(bytes(raw)).decode() if raw is not None else None
    return env


def query_events(
    conn: psycopg.Connection[Any],
    thread_id: str,
    flt: EventFilter | None = None,
    schema: str = ledger.DEFAULT_SCHEMA,
) -> list[dict[str, Any]]:
    """The events of ``thread_id`` that pass ``flt``, oldest first, as envelopes.

    The envelopes have the form of ``events.jsonl`` lines (``ts`` in the session's time
    zone, ``raw`` in base64).
    """
    rows = conn.execute(
        ledger.q(SELECT_EVENTS, schema), (flt or EventFilter()).params(thread_id)
    ).fetchall()
    return [_envelope(r) for r in rows]


def thread_in_ledger(
    conn: psycopg.Connection[Any], thread_id: str, schema: str = ledger.DEFAULT_SCHEMA
) -> bool:
    """Whether the ledger has a thread row or any event for ``thread_id``."""
    row = conn.execute(ledger.q(THREAD_IN_LEDGER, schema), {"t": thread_id}).fetchone()
    return bool(row and row[0])


def list_threads(
    conn: psycopg.Connection[Any],
    schema: str = ledger.DEFAULT_SCHEMA,
    *,
    limit: int | None = 50,
    replays: bool = False,
) -> tuple[list[dict[str, Any]], int, int]:
    """Recorded threads, most recently updated first: ``(rows, total, replay copies)``.

    Each row has ``thread_id``, ``created_at``, ``updated_at``, ``last_seq``,
    ``checkpoints`` and ``deleted_at``. Replay copies (:func:`is_replay_copy`) are left
    out unless ``replays``; ``total`` counts the other threads, ``replay copies`` those.

    Example:
        >>> with ledger.connect(dsn) as conn:                       # doctest: +SKIP
        ...     rows, total, copies = list_threads(conn, limit=10)
    """
    from psycopg.rows import dict_row

    cur = conn.cursor(row_factory=dict_row)
    rows = cur.execute(
        ledger.q(SELECT_THREADS, schema),
        {"replays": replays, "prefix": REPLAY_PREFIX, "limit": limit or None},
    ).fetchall()
    counts = cur.execute(ledger.q(COUNT_THREADS, schema), {"prefix": REPLAY_PREFIX}).fetchone()
    total, copies = (int(counts["n"]), int(counts["replays"])) if counts else (len(rows), 0)
    return rows, total, copies


# -- events by step ----------------------------------------------------------------------
@dataclass(frozen=True)
class Placed:
    """Where a view places one event of a thread (see :func:`place_events`).

    Attributes:
        event: the event (an envelope, or a row with the envelope's column names).
        run: the run (top-level invocation) it belongs to: 1 for the thread's first,
            0 for events before any run.
        step: the root graph's step it belongs to (``None``: none, e.g. a run's start).
        own_step: its step in its own namespace; for a ``writes`` event, which records
            none, the step of the task that wrote it (its checkpoint's step + 1).
    """

    event: Mapping[str, Any]
    run: int
    step: int | None
    own_step: int | None


_PHASE = {"writes": 1, "checkpoint": 2, "interrupt": 3}
"""Within a step: the tasks' events, then their writes, the checkpoint, an interrupt."""


def step_context(
    conn: psycopg.Connection[Any], thread_id: str, schema: str = ledger.DEFAULT_SCHEMA
) -> list[dict[str, Any]]:
    """The events :func:`place_events` needs to place any subset of ``thread_id``'s events:
    run starts, node starts and checkpoints, without payloads."""
    cols = "seq kind checkpoint_ns checkpoint_id run_id parent_run_id root_run_id step task_id"
    rows = conn.execute(ledger.q(SELECT_STEP_CONTEXT, schema), (thread_id,)).fetchall()
    return [dict(zip(cols.split(), r, strict=True)) for r in rows]


def place_events(
    events: Sequence[Mapping[str, Any]], context: Sequence[Mapping[str, Any]] | None = None
) -> list[Placed]:
    """A thread's events in step order, each with the run and step it belongs to.

    The record's order (``seq``) is the order events were committed; it is the hash
    chain's order and never changes. A step's ``writes`` are committed after the step's
    tasks ran, sometimes after later steps, and they carry no step themselves. This
    order is the one to read a run in: run by run; within a run, step by step; within a
    step, the tasks' events in commit order, then their writes, then the checkpoint the
    step produced, then an interrupt. A subgraph's events come right after the start of
    the root task that ran the subgraph, ordered the same way by the subgraph's own
    steps. A run's start comes first and its end last.

    Args:
        events: the events to place (any subset of one thread's, e.g. filtered).
        context: the thread's run starts, node starts and checkpoints
            (:func:`step_context`); default: found in ``events`` themselves.

    Example:
        >>> evs = [
        ...     {"seq": 1, "kind": "run_start", "run_id": "r", "root_run_id": "r"},
        ...     {"seq": 2, "kind": "checkpoint", "checkpoint_id": "c0", "step": 0},
        ...     {"seq": 3, "kind": "node_start", "node": "a", "step": 1, "task_id": "t1",
        ...      "root_run_id": "r"},
        ...     {"seq": 4, "kind": "checkpoint", "checkpoint_id": "c1", "step": 1},
        ...     {"seq": 5, "kind": "node_start", "node": "b", "step": 2, "task_id": "t2",
        ...      "root_run_id": "r"},
        ...     {"seq": 6, "kind": "writes", "checkpoint_id": "c0", "task_id": "t1"},
        ...     {"seq": 7, "kind": "checkpoint", "checkpoint_id": "c2", "step": 2},
        ...     {"seq": 8, "kind": "run_end", "run_id": "r", "root_run_id": "r"},
        ... ]
        >>> [(p.event["seq"], p.step) for p in place_events(evs)]
        [(1, None), (2, 0), (3, 1), (6, 1), (4, 1), (5, 2), (7, 2), (8, None)]
    """
    import bisect
    import math

    ctx = sorted(context if context is not None else events, key=lambda e: int(e["seq"]))
    starts = [e for e in ctx if e.get("kind") == "run_start" and not e.get("parent_run_id")]
    rank = {str(e.get("run_id")): i + 1 for i, e in enumerate(starts)}
    start_seqs = [int(e["seq"]) for e in starts]
    tasks: dict[str, list[Mapping[str, Any]]] = {}
    checkpoint_steps: dict[tuple[str, str], int] = {}
    for e in ctx:
        if e.get("kind") == "node_start" and e.get("task_id"):
            tasks.setdefault(str(e["task_id"]), []).append(e)
        elif e.get("kind") == "checkpoint" and e.get("step") is not None:
            at = (str(e.get("checkpoint_ns") or ""), str(e.get("checkpoint_id")))
            checkpoint_steps[at] = int(e["step"])

    def task(task_id: Any, seq: int) -> Mapping[str, Any] | None:
        found = tasks.get(str(task_id)) if task_id else None
        if not found:
            return None
        before = [t for t in found if int(t["seq"]) < seq]
        return before[-1] if before else found[0]

    def run_of(e: Mapping[str, Any], seq: int) -> int:
        rid = e.get("root_run_id")
        if rid and str(rid) in rank:
            return rank[str(rid)]
        if e.get("kind") == "writes":
            t = task(e.get("task_id"), seq)
            if t is not None and str(t.get("root_run_id")) in rank:
                return rank[str(t.get("root_run_id"))]
        return bisect.bisect_right(start_seqs, seq)

    def own_step(e: Mapping[str, Any], seq: int) -> int | None:
        if e.get("step") is not None:
            return int(e["step"])
        if e.get("kind") != "writes":
            return None
        ns = str(e.get("checkpoint_ns") or "")
        parent = checkpoint_steps.get((ns, str(e.get("checkpoint_id"))))
        if parent is not None:
            return parent + 1
        t = task(e.get("task_id"), seq)
        return int(t["step"]) if t is not None and t.get("step") is not None else None

    def root_task(e: Mapping[str, Any], seq: int) -> Mapping[str, Any] | None:
        """The root graph's task a subgraph's event ran under (``None`` for the root's)."""
        ns = str(e.get("checkpoint_ns") or "")
        if not ns:
            return None
        first = ns.split("|", 1)[0]
        return task(first.split(":", 1)[1] if ":" in first else None, seq)

    keyed = []
    carry: dict[int, float] = {}
    for e in sorted(events, key=lambda e: int(e["seq"])):
        seq, kind = int(e["seq"]), e.get("kind")
        run = run_of(e, seq)
        own = own_step(e, seq)
        phase = _PHASE.get(str(kind), 0)
        nested = bool(e.get("checkpoint_ns"))
        step = own
        if nested:  # with its root task, right after that task's start, in its own steps
            t = root_task(e, seq)
            step = int(t["step"]) if t is not None and t.get("step") is not None else None
            anchor = int(t["seq"]) if t is not None else seq
            inner = (anchor, -math.inf if own is None else float(own), phase, seq)
            phase = 0
        else:
            inner = (seq, -math.inf, 0, seq)
        if step is not None:
            key = float(step)
            carry[run] = key
        elif kind in ("run_start", "resume") and not nested:
            key, phase = -math.inf, -1
        elif kind == "run_end" and not e.get("parent_run_id"):
            key, phase = math.inf, 9
        else:
            key = carry.get(run, -math.inf)
        keyed.append(((run, key, phase, *inner), Placed(e, run, step, own)))
    keyed.sort(key=lambda k: k[0])
    return [p for _, p in keyed]


# -- ad-hoc SQL --------------------------------------------------------------------------
@dataclass
class QueryResult:
    """The outcome of one statement.

    Attributes:
        columns: column names; empty for a statement that returns no rows (``set``, ...).
        rows: the rows, as tuples.
        status: the server's command tag (``SELECT 3``, ``UPDATE 1``, ``SET``).
    """

    columns: list[str]
    rows: list[tuple[Any, ...]]
    status: str | None


def prepare_session(
    conn: psycopg.Connection[Any], schema: str = ledger.DEFAULT_SCHEMA, *, read_only: bool = True
) -> None:
    """Put the ledger schema first on the search path; make transactions read-only.

    Read-only protects against accidents (a stray ``delete``), not against a user who
    turns it off again in SQL.
    """
    conn.execute(ledger.q(SET_SEARCH_PATH, schema))
    if read_only:
        conn.execute(SET_READ_ONLY)


def run_query(conn: psycopg.Connection[Any], query: str) -> list[QueryResult]:
    """Run ``query`` (one or more statements, no parameters) and return every result.

    Raises:
        psycopg.Error: the server rejected a statement (earlier statements of an
            autocommit connection stay applied).
    """
    results: list[QueryResult] = []
    with conn.cursor() as cur:
        cur.execute(query.encode())  # bytes: the text is the user's, no placeholders
        while True:
            if cur.description is None:
                results.append(QueryResult([], [], cur.statusmessage))
            else:
                results.append(
                    QueryResult(
                        [c.name for c in cur.description],
                        list(cur.fetchall()),
                        cur.statusmessage,
                    )
                )
            if not cur.nextset():
                break
    return results


# -- readable states ---------------------------------------------------------------------
_INTERNAL_CHANNELS = ("__", "branch:")  # LangGraph's own channels; never rendered readable


@dataclass
class StateView:
    """The readable state of a thread at one checkpoint, from the workspace.

    Values are the workspace's readable renderings (redacted like ``state.json``), not
    the exact bytes.

    Attributes:
        thread_id: the thread.
        checkpoint_ns: the namespace (``""`` for the root graph).
        checkpoint_id: the checkpoint.
        parent_checkpoint_id: its parent, if any.
        step: the step that produced it (``-1`` for the input).
        source: ``input``, ``loop``, ``update`` or ``fork``.
        ts: the checkpoint's own timestamp.
        nodes: the nodes whose writes produced it.
        latest: it is the newest checkpoint of the namespace.
        values: channel -> readable value (``None`` for an empty channel).
        pending_writes: writes recorded against it (by tasks of the next step).
        path: the checkpoint log it was read from, relative to the workspace root.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    step: int | None
    source: str | None
    ts: str | None
    nodes: list[str]
    latest: bool
    values: dict[str, Any]
    pending_writes: list[dict[str, Any]] = field(default_factory=list)
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def _resolve_checkpoint(log: CheckpointLog, wanted: str) -> str:
    if wanted in log.docs:
        return wanted
    found = [cid for cid in log.docs if cid.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    where = f"thread {log.thread_id!r}" + (
        f" (namespace {log.checkpoint_ns!r})" if log.checkpoint_ns else ""
    )
    if not found:
        raise NotFoundError(f"checkpoint {wanted!r} is not in the workspace for {where}")
    raise AmbiguousCheckpointError(
        f"checkpoint prefix {wanted!r} matches {len(found)} checkpoints of {where}; "
        "give more characters"
    )


def _renderings(log: CheckpointLog) -> dict[tuple[str, str], Any]:
    """(channel, sha256) -> readable value, from every checkpoint line's ``updates``."""
    known: dict[tuple[str, str], Any] = {}
    for doc in log.docs.values():
        channels: Mapping[str, Any] = doc.get("channels") or {}
        for ch, value in (doc.get("updates") or {}).items():
            sha = (channels.get(ch) or {}).get("sha256")
            if sha and not (isinstance(value, dict) and "$large" in value):
                known[(ch, sha)] = value
    return known


def _rendered_blob(ws: Workspace, thread_id: str, channel: str, ref: Mapping[str, Any]) -> Any:
    """A large value the checkpoint log does not render (``$large``), decoded from its
    blob file and redacted like ``state.json`` (under its channel's name); ``None`` when
    it cannot be (encrypted)."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_external.redaction import as_redactor, redact_at
    from langgraph_external.render import to_readable

    path = ws.blob_path(thread_id, ref["sha256"])
    if ref.get("inline") or not ws.exists(path):
        return None
    try:
        data = ws.read_bytes(path)
        if ref.get("enc"):  # sealed with the deployment key: open it if this machine has it
            from langgraph_external.keys import load_key

            data = load_key(create=False).decrypt(data, ref["sha256"].encode())
        value = JsonPlusSerializer().loads_typed((ref.get("type") or "", data))
    except Exception:  # no key here, or bytes this version cannot decode
        return None
    redact = as_redactor("standard")
    assert redact is not None
    return redact_at(redact, [channel], to_readable(value))[0]


def read_state(
    ws: Workspace,
    thread_id: str,
    checkpoint_id: str | None = None,
    *,
    checkpoint_ns: str = "",
) -> StateView:
    """The readable state of ``thread_id`` at ``checkpoint_id`` (default: the latest).

    Read from the workspace's checkpoint log (``checkpoints/<ns>.jsonl``): each channel's
    value is the rendering recorded with the checkpoint that stored it. For the latest
    root checkpoint ``state.json`` is used, so a pruned history loses nothing.

    Args:
        ws: the workspace.
        thread_id: the thread.
        checkpoint_id: a checkpoint id, or an unambiguous prefix of one.
        checkpoint_ns: the namespace of a subgraph (``""``: the root graph).

    Raises:
        NotFoundError: the thread or the checkpoint is not in the workspace.
        AmbiguousCheckpointError: the prefix matches several checkpoints.
    """
    from langgraph_external.restore import CheckpointLog

    log = CheckpointLog(ws, thread_id, checkpoint_ns)
    if not log.docs:
        raise NotFoundError(
            f"thread {thread_id!r} has no checkpoints in the workspace {ws.location}"
            + (f" (namespace {checkpoint_ns!r})" if checkpoint_ns else "")
        )
    newest = next(reversed(log.docs))
    cid = newest if checkpoint_id is None else _resolve_checkpoint(log, checkpoint_id)
    doc = log.doc(cid)

    state_json: Mapping[str, Any] = {}
    state_path = f"{ws.thread_dir(thread_id)}/state.json"
    if checkpoint_ns == "" and ws.exists(state_path):
        try:
            loaded = ws.read_json(state_path)
        except (OSError, ValueError):
            loaded = None
        if isinstance(loaded, dict) and loaded.get("checkpoint_id") == cid:
            state_json = loaded

    values: dict[str, Any]
    if isinstance(state_json.get("values"), dict):
        values = dict(state_json["values"])
    else:
        known = _renderings(log)
        values = {}
        for ch, ref in (doc.get("channels") or {}).items():
            if ch.startswith(_INTERNAL_CHANNELS):
                continue
            sha = ref.get("sha256")
            if sha is None:
                values[ch] = (
                    None if ref.get("type") == "empty" else {"$unmirrored": ref.get("version")}
                )
            elif (ch, sha) in known:
                values[ch] = known[(ch, sha)]
            else:
                rendered = _rendered_blob(ws, thread_id, ch, ref)
                values[ch] = {"$unrendered": sha} if rendered is None else rendered

    writes = [
        {
            "node": w.get("node"),
            "task_id": w.get("task_id"),
            "channel": w.get("channel"),
            "value": w.get("value"),
        }
        for w in log.pending_writes(cid)
    ]
    skel = doc.get("checkpoint") or {}
    return StateView(
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=cid,
        parent_checkpoint_id=doc.get("parent_checkpoint_id"),
        step=doc.get("step"),
        source=doc.get("source"),
        ts=skel.get("ts"),
        nodes=[str(w["node"]) for w in doc.get("writers") or [] if w.get("node")],
        latest=cid == newest,
        values=values,
        pending_writes=writes,
        path=ws.relative(ws.checkpoint_log_path(thread_id, checkpoint_ns)),
    )
