"""SQL of ``lgx ui``: the threads list (search, sort, pages) and one thread's rows.

Every statement takes the ledger schema as ``{schema}`` and reads only ``threads`` and
``events`` (and the Mem0 views, when present). A search is a list of ``key:value`` terms;
a NULL parameter switches its condition off, so each statement is one fixed text.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from langgraph_external import ledger
from langgraph_external.prices import PriceTable

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


# Threads matching a search, newest first. The status of a thread is that of its last
# run: interrupted (an interrupt after its start), else how it ended, else running.
STATUS_OF = """
(select case
    when max(e.seq) filter (where e.kind = 'interrupt')
         > coalesce(max(e.seq) filter (where e.kind = 'run_start' and e.parent_run_id is null), 0)
        then 'interrupted'
    when max(e.seq) filter (where e.kind = 'run_end' and e.parent_run_id is null)
         > coalesce(max(e.seq) filter (where e.kind = 'run_start' and e.parent_run_id is null), 0)
        then coalesce((array_agg(e.status order by e.seq desc)
                       filter (where e.kind = 'run_end' and e.parent_run_id is null))[1], 'ok')
    when count(*) filter (where e.kind = 'run_start') > 0 then 'running'
    else 'ok' end
 from {schema}.events e
 where e.thread_id = t.thread_id and e.kind in ('run_start', 'run_end', 'interrupt'))
"""

MATCHES = (
    """
select t.thread_id, t.created_at, t.updated_at
from {schema}.threads t
where t.last_seq > 0
  and (%(thread)s::text is null or t.thread_id ilike %(thread)s)
  and (%(user)s::text is null or t.thread_id in (
        select thread_id from {schema}.events
        where kind = 'run_start' and payload ->> 'user_id' = %(user)s))
  and (%(tag)s::text is null or t.thread_id in (
        select thread_id from {schema}.events
        where kind = 'run_start' and payload -> 'tags' ? %(tag)s))
  and (%(session)s::text is null or t.thread_id = %(session)s or t.thread_id in (
        select thread_id from {schema}.events
        where kind = 'checkpoint'
          and payload -> 'metadata' ->> 'langfuse_session_id' = %(session)s))
  and (%(node)s::text is null or t.thread_id in (
        select thread_id from {schema}.events where kind = 'node_start' and node = %(node)s))
  and (%(tool)s::text is null or t.thread_id in (
        select thread_id from {schema}.events where kind = 'tool_start' and name = %(tool)s))
  and (%(error)s::text is null or t.thread_id in (
        select thread_id from {schema}.events
        where kind in ('error', 'tool_error', 'node_end', 'llm_end', 'run_end')
          and (kind in ('error', 'tool_error') or status = 'error')
          and (%(error)s = '' or payload ->> 'error' ilike %(error_like)s
               or payload ->> 'error_type' ilike %(error_like)s)))
  and (%(violation)s::text is null or t.thread_id in (
        select thread_id from {schema}.events
        where kind = 'policy_violation' and (%(violation)s = '' or name = %(violation)s)))
  and (%(status)s::text is null or """
    + STATUS_OF
    + """ = %(status)s)
"""
)

# Headline numbers of a set of threads, from their runs, model calls and violations.
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
                     or (e.status = 'error' and e.kind in ('node_end', 'run_end', 'llm_end')))
        as errors,
    max(e.seq) filter (where e.kind = 'run_start' and e.parent_run_id is null) as last_start,
    max(e.seq) filter (where e.kind = 'run_end' and e.parent_run_id is null) as last_end,
    max(e.seq) filter (where e.kind = 'interrupt') as last_interrupt,
    (array_agg(e.status order by e.seq desc)
        filter (where e.kind = 'run_end' and e.parent_run_id is null))[1] as last_status,
    array_agg(distinct e.payload ->> 'user_id')
        filter (where e.kind = 'run_start' and e.payload ? 'user_id') as users,
    jsonb_agg(e.payload -> 'tags') filter (where e.kind = 'run_start' and e.payload ? 'tags')
        as tags
from {schema}.events e
where e.thread_id = any(%(ids)s)
  and e.kind in ('run_start', 'run_end', 'llm_end', 'policy_violation', 'error', 'tool_error',
                 'interrupt', 'node_end')
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

THREAD_ROW = """
select thread_id, created_at, updated_at, last_seq, deleted_at
from {schema}.threads where thread_id = %s
"""

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
    cost: float | None = None
    unknown_price_models: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


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


def aggregates(
    conn: psycopg.Connection[Any], schema: str, ids: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Headline numbers of ``ids`` (runs, duration, tokens, violations, errors, status)."""
    if not ids:
        return {}
    cur = conn.execute(ledger.q(AGGREGATES, schema), {"ids": list(ids)})
    names = [d.name for d in cur.description or ()]
    out: dict[str, dict[str, Any]] = {}
    for row in cur.fetchall():
        d = dict(zip(names, row, strict=True))
        tags: list[str] = []
        for group in d.pop("tags") or ():
            for tag in group or ():
                if str(tag) not in tags:
                    tags.append(str(tag))
        d["tags"] = tags
        d["users"] = sorted(u for u in d["users"] or () if u)
        d["violation_rules"] = sorted(r for r in d["violation_rules"] or () if r)
        d["status"] = _status(
            d.pop("last_start"), d.pop("last_end"), d.pop("last_interrupt"), d.pop("last_status")
        )
        d["duration_ms"] = float(d["duration_ms"] or 0)
        out[str(d.pop("thread_id"))] = d
    return out


def costs(
    conn: psycopg.Connection[Any], schema: str, ids: Sequence[str], prices: PriceTable
) -> dict[str, tuple[float | None, list[str]]]:
    """Thread -> (cost of its priced calls or None, models without a price)."""
    if not ids:
        return {}
    out: dict[str, tuple[float | None, list[str]]] = {}
    rows = conn.execute(ledger.q(MODEL_TOKENS, schema), {"ids": list(ids)}).fetchall()
    for thread_id, model, i, o in rows:
        cost, unknown = out.get(thread_id, (None, []))
        c = prices.cost(model, input_tokens=i, output_tokens=o)
        if c is None:
            if i is not None or o is not None:
                unknown = sorted({*unknown, str(model)})
        else:
            cost = (cost or 0.0) + c
        out[thread_id] = (cost, unknown)
    return out


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
) -> ThreadPage:
    """One page of the threads that match ``search``, sorted by ``sort``.

    ``time`` is the last update, ``created`` the first event, ``duration`` the time the
    thread's runs took (waiting for a human between runs left out), ``tokens`` the model
    tokens, ``cost`` their price (threads with unknown prices count what is priced).

    Raises:
        SearchError: an unknown sort.
    """
    if sort not in SORTS:
        raise SearchError(f"sort is one of {', '.join(SORTS)}, not {sort!r}")
    prices = prices or PriceTable()
    rows = conn.execute(ledger.q(MATCHES, schema), search.params()).fetchall()
    total = len(rows)
    pages = max(1, -(-total // page_size))
    page = min(max(1, page), pages)
    lo = (page - 1) * page_size
    if sort in ("time", "created"):
        col = 2 if sort == "time" else 1
        rows.sort(key=lambda r: (r[col], r[0]), reverse=desc)
        chosen = rows[lo : lo + page_size]
        ids = [r[0] for r in chosen]
        aggs = aggregates(conn, schema, ids)
        spent = costs(conn, schema, ids, prices)
    else:
        all_ids = [r[0] for r in rows]
        aggs = aggregates(conn, schema, all_ids)
        spent = costs(conn, schema, all_ids, prices) if sort == "cost" else {}

        def key(r: Any) -> Any:
            a = aggs.get(r[0], {})
            if sort == "duration":
                return a.get("duration_ms") or 0.0
            if sort == "tokens":
                return (a.get("input_tokens") or 0) + (a.get("output_tokens") or 0)
            c = spent.get(r[0], (None, []))[0]
            return -1.0 if c is None else c

        rows.sort(key=lambda r: (key(r), r[2], r[0]), reverse=desc)
        chosen = rows[lo : lo + page_size]
        if sort != "cost":
            spent = costs(conn, schema, [r[0] for r in chosen], prices)
    out = []
    for thread_id, created, updated in chosen:
        a = aggs.get(thread_id, {})
        cost, unknown = spent.get(thread_id, (None, []))
        out.append(
            ThreadRow(thread_id, created, updated, cost=cost, unknown_price_models=unknown, **a)
        )
    return ThreadPage(out, total, page, pages, sort, desc)


def memory_details(
    conn: psycopg.Connection[Any], schema: str, memory_ids: Sequence[str], search_ids: Sequence[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Current text of memories and the text of searches, when the Mem0 tables are here
    (erased memories and other databases give nothing)."""
    row = conn.execute("select to_regclass(%s)", (f"{schema}.memory_current",)).fetchone()
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
    import uuid

    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


def thread_row(conn: psycopg.Connection[Any], schema: str, thread_id: str) -> Mapping[str, Any]:
    """The ``threads`` row of ``thread_id`` (empty when the ledger lacks it)."""
    cur = conn.execute(ledger.q(THREAD_ROW, schema), (thread_id,))
    row = cur.fetchone()
    if row is None:
        return {}
    return dict(zip([d.name for d in cur.description or ()], row, strict=True))
