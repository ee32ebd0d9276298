"""SQL of ``lgx ui``: the threads list (search, sort, pages) and one thread's rows.

Every statement takes the ledger schema as ``{schema}`` and reads only ``threads`` and
``events`` (and the Mem0 views, when present). A search is a list of ``key:value`` terms;
a NULL parameter switches its condition off, so each statement is one fixed text.
"""

from __future__ import annotations

import shlex
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from langgraph_external.ledger import schema as ledger
from langgraph_external.read.prices import PriceTable

SEARCH_KEYS = ("thread", "user", "session", "tag", "status", "node", "tool", "error", "violation")
"""What a search term may name (``user:alice``); a bare word is part of a thread id."""
SORTS = ("time", "created", "duration", "tokens", "cost")
STATUSES = ("ok", "error", "interrupted", "running")
PAGE_SIZE = 50


class SearchError(ValueError):
    """A search the threads list cannot run (unknown key, bad value)."""


@dataclass
class Search:
    """A parsed search: one value per key (a bare word is ``thread``)."""

    terms: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Search:
        """``user:alice tag:beta refund`` -> terms; the last value of a key wins.

        Raises:
            SearchError: an unknown key or status.

        Example:
            >>> Search.parse('user:alice "tag:needs review" refund').terms
            {'user': 'alice', 'tag': 'needs review', 'thread': 'refund'}
        """
        try:
            words = shlex.split(text)
        except ValueError:
            words = text.split()
        terms: dict[str, str] = {}
        for w in words:
            key, sep, value = w.partition(":")
            if not sep or key.lower() not in SEARCH_KEYS:
                if sep and key.isidentifier() and key.lower() not in SEARCH_KEYS:
                    raise SearchError(f"unknown search key {key!r}; use {', '.join(SEARCH_KEYS)}")
                terms["thread"] = w
                continue
            key = key.lower()
            if key == "status" and value not in STATUSES:
                raise SearchError(f"status is one of {', '.join(STATUSES)}, not {value!r}")
            terms[key] = value
        return cls(terms)

    def params(self) -> dict[str, Any]:
        """Parameters of :data:`SELECT_MATCHES` (``None``: no condition)."""
        t = self.terms

        def like(v: str | None) -> str | None:
            if v is None:
                return None
            return "%" + v.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

        return {
            "thread": like(t.get("thread")),
            "user": t.get("user"),
            "session": t.get("session"),
            "tag": t.get("tag"),
            "node": t.get("node"),
            "tool": t.get("tool"),
            "error": t.get("error") if "error" in t else None,
            "error_like": like(t.get("error") or ""),
            "violation": t.get("violation") if "violation" in t else None,
            "status": t.get("status"),
        }


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

# Tokens per model of a set of threads (for costs): a model call's start names the model,
# its end the usage.
MODEL_TOKENS = """
select s.thread_id, coalesce(s.payload ->> 'model', s.name) as model,
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

EVENTS_AT = """
select v, seq, ts, event_id::text, kind, name, status, thread_id, checkpoint_ns,
    checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id, duration_ms,
    payload, raw, artifact, redactions, prev, hash
from {schema}.events where thread_id = %s and seq = any(%s::bigint[]) order by seq
"""

THREAD_ROW = """
select thread_id, created_at, updated_at, last_seq, deleted_at
from {schema}.threads where thread_id = %s
"""

# Mem0's tables (memory_adapters/mem0/sql.py creates them) are there only where the adapter ran
MEMORY_TABLES_PRESENT = "select to_regclass(%s)"

MEMORY_TEXTS = """
select memory_id::text, memory from {schema}.memory_current where memory_id = any(%s::uuid[])
"""

MEMORY_QUERIES = """
select search_id::text, query from {schema}.memory_retrievals where search_id = any(%s::uuid[])
"""


@dataclass
class ThreadRow:
    """One line of the threads list."""

    thread_id: str
    created_at: datetime
    updated_at: datetime
    runs: int = 0
    duration_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    violations: int = 0
    violation_rules: list[str] = field(default_factory=list)
    errors: int = 0
    status: str = "ok"
    users: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    model_tokens: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    cost: float | None = None
    unknown_price_models: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def priced(self, prices: PriceTable) -> ThreadRow:
        """This row with its cost under ``prices``."""
        cost: float | None = None
        unknown: list[str] = []
        for model, (i, o) in sorted(self.model_tokens.items()):
            c = prices.cost(model, input_tokens=i, output_tokens=o)
            if c is None:
                if i is not None or o is not None:
                    unknown.append(model)
            else:
                cost = (cost or 0.0) + c
        self.cost, self.unknown_price_models = cost, unknown
        return self


@dataclass
class ThreadPage:
    """A page of the threads list."""

    rows: list[ThreadRow]
    total: int
    page: int
    pages: int
    sort: str
    desc: bool


def _status(last_start: Any, last_end: Any, last_interrupt: Any, last_status: Any) -> str:
    start = last_start or 0
    if last_interrupt is not None and last_interrupt > start:
        return "interrupted"
    if last_end is not None and last_end > start:
        return str(last_status or "ok")
    return "running" if last_start else "ok"


def _summaries(
    conn: psycopg.Connection[Any], schema: str, heads: Mapping[str, tuple[Any, ...]]
) -> dict[str, ThreadRow]:
    """:class:`ThreadRow` of the threads ``heads`` names (thread -> (seq, created, updated))."""
    ids = list(heads)
    out = {t: ThreadRow(t, heads[t][1], heads[t][2]) for t in ids}
    cur = conn.execute(ledger.q(AGGREGATES, schema), {"ids": ids})
    names = [d.name for d in cur.description or ()]
    for row in cur.fetchall():
        d = dict(zip(names, row, strict=True))
        r = out[str(d["thread_id"])]
        tags: list[str] = []
        for group in d["tags"] or ():
            for tag in group if isinstance(group, list) else ():
                if str(tag) not in tags:
                    tags.append(str(tag))
        r.runs, r.llm_calls = int(d["runs"]), int(d["llm_calls"])
        r.duration_ms = float(d["duration_ms"] or 0)
        r.input_tokens, r.output_tokens = int(d["input_tokens"]), int(d["output_tokens"])
        r.violations, r.errors = int(d["violations"]), int(d["errors"])
        r.violation_rules = sorted(x for x in d["violation_rules"] or () if x)
        r.users = sorted(u for u in d["users"] or () if u)
        r.tags = tags
        r.nodes = sorted(n for n in d["nodes"] or () if n)
        r.tools = sorted(n for n in d["tools"] or () if n)
        r.status = _status(d["last_start"], d["last_end"], d["last_interrupt"], d["last_status"])
    for thread_id, model, i, o in conn.execute(ledger.q(MODEL_TOKENS, schema), {"ids": ids}):
        out[thread_id].model_tokens[str(model)] = (i, o)
    return out


class Summaries:
    """The headline numbers of every thread, each kept until its thread moves on.

    :meth:`refresh` reads the ``threads`` table (one row per thread) and recomputes only
    the threads whose last ``seq`` changed since, so a ledger of many threads is read in
    full once (at start), and a list after that costs the threads that changed.
    """

    CHUNK = 2000

    def __init__(self) -> None:
        self.rows: dict[str, tuple[int, ThreadRow]] = {}
        self.lock = threading.Lock()
        self.computed = 0
        """How many thread summaries were computed so far (each refresh adds the stale)."""

    def refresh(self, conn: psycopg.Connection[Any], schema: str) -> dict[str, ThreadRow]:
        """Every thread's summary, up to date with the ledger now."""
        heads = {
            str(t): (int(seq), created, updated)
            for t, seq, created, updated in conn.execute(ledger.q(HEADS, schema)).fetchall()
        }
        with self.lock:  # one refresh at a time: the others then find it done
            stale = [t for t, h in heads.items() if self.rows.get(t, (None,))[0] != h[0]]
            self.computed += len(stale)
            for i in range(0, len(stale), self.CHUNK):
                chunk = {t: heads[t] for t in stale[i : i + self.CHUNK]}
                for t, row in _summaries(conn, schema, chunk).items():
                    self.rows[t] = (heads[t][0], row)
            for gone in set(self.rows) - set(heads):
                del self.rows[gone]
            return {t: row for t, (_, row) in self.rows.items()}


def _keeps(r: ThreadRow, t: Mapping[str, str]) -> bool:
    """Whether a thread's summary passes the terms the summaries answer."""
    if "thread" in t and t["thread"].casefold() not in r.thread_id.casefold():
        return False
    if "user" in t and t["user"] not in r.users:
        return False
    if "tag" in t and t["tag"] not in r.tags:
        return False
    if "node" in t and t["node"] not in r.nodes:
        return False
    if "tool" in t and t["tool"] not in r.tools:
        return False
    if "status" in t and r.status != t["status"]:
        return False
    rules = r.violation_rules
    return "violation" not in t or bool(rules if t["violation"] == "" else t["violation"] in rules)


def list_threads(
    conn: psycopg.Connection[Any],
    schema: str,
    search: Search,
    *,
    sort: str = "time",
    desc: bool = True,
    page: int = 1,
    page_size: int = PAGE_SIZE,
    prices: PriceTable | None = None,
    summaries: Summaries | None = None,
) -> ThreadPage:
    """One page of the threads that match ``search``, sorted by ``sort``.

    ``time`` is the last update, ``created`` the first event, ``duration`` the time the
    thread's runs took (waiting for a human between runs left out), ``tokens`` the model
    tokens, ``cost`` their price (a thread whose models have no price sorts as cheapest).
    ``summaries``: the app's :class:`Summaries` (a new one reads every thread).

    Raises:
        SearchError: an unknown sort.
    """
    if sort not in SORTS:
        raise SearchError(f"sort is one of {', '.join(SORTS)}, not {sort!r}")
    prices = prices or PriceTable()
    every = (summaries or Summaries()).refresh(conn, schema)
    terms = search.terms
    rows = [r for r in every.values() if _keeps(r, terms)]
    if "error" in terms or "session" in terms:
        found = {r[0] for r in conn.execute(ledger.q(MATCHES, schema), search.params())}
        rows = [r for r in rows if r.thread_id in found]
    if sort == "cost":
        for r in rows:
            r.priced(prices)

    def key(r: ThreadRow) -> Any:
        if sort == "time":
            return r.updated_at
        if sort == "created":
            return r.created_at
        if sort == "duration":
            return r.duration_ms
        if sort == "tokens":
            return r.tokens
        return -1.0 if r.cost is None else r.cost

    rows.sort(key=lambda r: (key(r), r.updated_at, r.thread_id), reverse=desc)
    total = len(rows)
    pages = max(1, -(-total // page_size))
    page = min(max(1, page), pages)
    chosen = rows[(page - 1) * page_size : page * page_size]
    return ThreadPage([r.priced(prices) for r in chosen], total, page, pages, sort, desc)


def memory_details(
    conn: psycopg.Connection[Any], schema: str, memory_ids: Sequence[str], search_ids: Sequence[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Current text of memories and the text of searches, when the Mem0 tables are here
    (erased memories and other databases give nothing)."""
    row = conn.execute(MEMORY_TABLES_PRESENT, (f"{schema}.memory_current",)).fetchone()
    if row is None or row[0] is None:
        return {}, {}
    texts: dict[str, str] = {}
    queries: dict[str, str] = {}
    valid = [m for m in memory_ids if _is_uuid(m)]
    if valid:
        texts = dict(conn.execute(ledger.q(MEMORY_TEXTS, schema), (valid,)).fetchall())
    valid = [s for s in search_ids if _is_uuid(s)]
    if valid:
        queries = dict(conn.execute(ledger.q(MEMORY_QUERIES, schema), (valid,)).fetchall())
    return texts, queries


def _is_uuid(text: Any) -> bool:
    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


def view_events(conn: psycopg.Connection[Any], schema: str, thread_id: str) -> list[dict[str, Any]]:
    """The events of a thread for its view (see :data:`VIEW_EVENTS`)."""
    rows = conn.execute(ledger.q(VIEW_EVENTS, schema), (thread_id,)).fetchall()
    return [ledger.row_to_envelope(r) for r in rows]


def events_at(
    conn: psycopg.Connection[Any], schema: str, thread_id: str, seqs: Sequence[int]
) -> list[dict[str, Any]]:
    """Whole envelopes of some events of a thread (as ``lgx events --json`` prints them)."""
    rows = conn.execute(ledger.q(EVENTS_AT, schema), (thread_id, list(seqs))).fetchall()
    return [ledger.row_to_envelope(r) for r in rows]


def thread_row(conn: psycopg.Connection[Any], schema: str, thread_id: str) -> Mapping[str, Any]:
    """The ``threads`` row of ``thread_id`` (empty when the ledger lacks it)."""
    cur = conn.execute(ledger.q(THREAD_ROW, schema), (thread_id,))
    row = cur.fetchone()
    if row is None:
        return {}
    return dict(zip([d.name for d in cur.description or ()], row, strict=True))
