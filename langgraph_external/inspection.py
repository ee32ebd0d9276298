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
    "AmbiguousCheckpointError",
    "EventFilter",
    "NotFoundError",
    "QueryResult",
    "StateView",
    "example_queries",
    "parse_time",
    "prepare_session",
    "query_events",
    "read_state",
    "run_query",
    "thread_in_ledger",
]


class NotFoundError(ExternalError, LookupError):
    """The thread or checkpoint asked for was not recorded."""


class AmbiguousCheckpointError(ConfigurationError):
    """A checkpoint id prefix matches more than one checkpoint."""


# -- SQL ---------------------------------------------------------------------------------
SELECT_THREADS = """
select thread_id, created_at, updated_at, events as last_seq, checkpoints, deleted_at
from {schema}.thread_summary
order by updated_at desc, thread_id
limit %s
"""

COUNT_THREADS = "select count(*) as n from {schema}.threads"

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
