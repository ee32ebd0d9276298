"""The reads of ``lgx ui``: the threads list (search, sort, pages) and one thread's rows.

The statements are those of ``lgx ui`` in :mod:`langgraph_external.ledger.queries` (over
``threads`` and ``events``) and, for memories, in
:mod:`langgraph_external.memory_adapters.mem0.sql` (the Mem0 views, when present); one
more, :data:`RECORD_FAILURES`, counts the events each thread could not record.
"""

from __future__ import annotations

import json
import shlex
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.queries import (
    AGGREGATES,
    EVENTS_AT,
    HEADS,
    MATCHES,
    MODEL_TOKENS,
    THREAD_ROW,
    VIEW_EVENTS,
    WHOLE_PAYLOAD_RUN_STARTS,
)
from langgraph_external.memory_adapters.mem0 import sql as mem0_sql
from langgraph_external.read.offloaded import with_whole_payloads, workspace_fetch
from langgraph_external.read.prices import PriceTable

SEARCH_KEYS = ("thread", "user", "session", "tag", "status", "node", "tool", "error", "violation")
"""What a search term may name (``user:alice``); a bare word is part of a thread id."""
SORTS = ("time", "created", "duration", "tokens", "cost")
STATUSES = ("ok", "error", "interrupted", "running")
PAGE_SIZE = 50

RECORD_FAILURES = """
select thread_id, count(*),
    max(seq) filter (where payload ->> 'kind' = 'run_end' and parent_run_id is null)
from {schema}.events
where thread_id = any(%(ids)s) and kind = 'record_failed'
group by thread_id
"""
"""How many events of each of a set of threads could not be recorded (``record_failed``),
and the last graph run end among them (the run ended, its end is not recorded)."""


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
                if sep and key.isidentifier():
                    raise SearchError(f"unknown search key {key!r}; use {', '.join(SEARCH_KEYS)}")
                terms["thread"] = w
                continue
            key = key.lower()
            if key == "status" and value not in STATUSES:
                raise SearchError(f"status is one of {', '.join(STATUSES)}, not {value!r}")
            terms[key] = value
        return cls(terms)

    def params(self) -> dict[str, Any]:
        """Parameters of :data:`~langgraph_external.ledger.queries.MATCHES` (``None``: no
        condition)."""
        t = self.terms

        def like(v: str | None) -> str | None:
            if v is None:
                return None
            return "%" + v.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

        as_given = ("user", "session", "tag", "node", "tool", "error", "violation", "status")
        return {
            **{k: t.get(k) for k in as_given},
            "thread": like(t.get("thread")),
            "error_like": like(t.get("error") or ""),
        }


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
    record_failures: int = 0
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


def _whole_payload_runs(
    conn: psycopg.Connection[Any], schema: str, ids: Sequence[str], workspace: Any
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(thread, payload)`` of each run start an older version offloaded whole, read back
    from the database's artifacts or else ``workspace`` (one it cannot read is left out)."""
    rows = conn.execute(ledger.q(WHOLE_PAYLOAD_RUN_STARTS, schema), {"ids": list(ids)})
    for thread_id, digest, content in rows.fetchall():
        data = bytes(content) if content is not None else None
        if data is None and workspace is not None:
            data = workspace_fetch(workspace, str(thread_id))(str(digest))
        try:
            payload = json.loads(data) if data is not None else None
        except ValueError:
            payload = None
        if isinstance(payload, Mapping):
            yield str(thread_id), payload


def _unique(values: Iterable[Any]) -> list[str]:
    """``values`` as text, each once, in order."""
    return list(dict.fromkeys(str(v) for v in values))


def _summaries(
    conn: psycopg.Connection[Any],
    schema: str,
    heads: Mapping[str, tuple[Any, ...]],
    workspace: Any = None,
) -> dict[str, ThreadRow]:
    """:class:`ThreadRow` of the threads ``heads`` names (thread -> (seq, created, updated));
    the user and tags of an older record's whole run start from :func:`_whole_payload_runs`."""
    ids = list(heads)
    out = {t: ThreadRow(t, heads[t][1], heads[t][2]) for t in ids}
    starts: dict[str, Any] = {}
    cur = conn.cursor(row_factory=dict_row)
    for d in cur.execute(ledger.q(AGGREGATES, schema), {"ids": ids}).fetchall():
        r = out[str(d["thread_id"])]
        r.runs, r.llm_calls = int(d["runs"]), int(d["llm_calls"])
        r.duration_ms = float(d["duration_ms"] or 0)
        r.input_tokens, r.output_tokens = int(d["input_tokens"]), int(d["output_tokens"])
        r.violations, r.errors = int(d["violations"]), int(d["errors"])
        r.violation_rules = sorted(x for x in d["violation_rules"] or () if x)
        r.users = sorted(u for u in d["users"] or () if u)
        r.tags = _unique(t for group in d["tags"] or () if isinstance(group, list) for t in group)
        r.nodes = sorted(n for n in d["nodes"] or () if n)
        r.tools = sorted(n for n in d["tools"] or () if n)
        r.status = _status(d["last_start"], d["last_end"], d["last_interrupt"], d["last_status"])
        starts[r.thread_id] = d["last_start"]
    for thread_id, payload in _whole_payload_runs(conn, schema, ids, workspace):
        r = out[thread_id]
        user = payload.get("user_id")
        if isinstance(user, str) and user and user not in r.users:
            r.users = sorted([*r.users, user])
        given = payload.get("tags")
        r.tags = _unique([*r.tags, *(given if isinstance(given, list) else ())])
    for thread_id, model, i, o in conn.execute(ledger.q(MODEL_TOKENS, schema), {"ids": ids}):
        out[thread_id].model_tokens[str(model)] = (i, o)
    for thread_id, n, failed_end in conn.execute(ledger.q(RECORD_FAILURES, schema), {"ids": ids}):
        r = out[str(thread_id)]
        r.record_failures = int(n)
        if r.status == "running" and (failed_end or 0) > (starts.get(r.thread_id) or 0):
            r.status = "error"  # its last run ended, and its end could not be recorded
    return out


class Summaries:
    """The headline numbers of every thread, each kept until its thread moves on.

    :meth:`refresh` reads the ``threads`` table (one row per thread) and recomputes only
    the threads whose last ``seq`` changed since, so a ledger of many threads is read in
    full once (at start), and a list after that costs the threads that changed.
    """

    CHUNK = 2000

    def __init__(self, workspace: Any = None) -> None:
        self.workspace = workspace
        """Where an older record's whole payloads are, when the database does not hold them."""
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
                for t, row in _summaries(conn, schema, chunk, self.workspace).items():
                    self.rows[t] = (heads[t][0], row)
            for gone in set(self.rows) - set(heads):
                del self.rows[gone]
            return {t: row for t, (_, row) in self.rows.items()}


def _keeps(r: ThreadRow, t: Mapping[str, str]) -> bool:
    """Whether a thread's summary passes the terms the summaries answer."""
    if "thread" in t and t["thread"].casefold() not in r.thread_id.casefold():
        return False
    listed = {"user": r.users, "tag": r.tags, "node": r.nodes, "tool": r.tools}
    if any(key in t and t[key] not in values for key, values in listed.items()):
        return False
    if "status" in t and r.status != t["status"]:
        return False
    rules = r.violation_rules
    return "violation" not in t or bool(rules if t["violation"] == "" else t["violation"] in rules)


_SORT_KEYS: dict[str, Callable[[ThreadRow], Any]] = {
    "time": lambda r: r.updated_at,
    "created": lambda r: r.created_at,
    "duration": lambda r: r.duration_ms,
    "tokens": lambda r: r.tokens,
    "cost": lambda r: -1.0 if r.cost is None else r.cost,
}


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
    workspace: Any = None,
) -> ThreadPage:
    """One page of the threads that match ``search``, sorted by ``sort``.

    ``time`` is the last update, ``created`` the first event, ``duration`` the time the
    thread's runs took (waiting for a human between runs left out), ``tokens`` the model
    tokens, ``cost`` their price (a thread whose models have no price sorts as cheapest).
    ``summaries``: the app's :class:`Summaries` (a new one reads every thread, and an older
    record's whole payloads from the database or ``workspace``).

    Raises:
        SearchError: an unknown sort.
    """
    if sort not in SORTS:
        raise SearchError(f"sort is one of {', '.join(SORTS)}, not {sort!r}")
    prices = prices or PriceTable()
    every = (summaries or Summaries(workspace)).refresh(conn, schema)
    terms = search.terms
    rows = [r for r in every.values() if _keeps(r, terms)]
    if "error" in terms or "session" in terms:
        found = {r[0] for r in conn.execute(ledger.q(MATCHES, schema), search.params())}
        rows = [r for r in rows if r.thread_id in found]
    if sort == "cost":
        for r in rows:
            r.priced(prices)

    key = _SORT_KEYS[sort]
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
    row = conn.execute(mem0_sql.MEMORY_TABLES_PRESENT, (f"{schema}.memory_current",)).fetchone()
    if row is None or row[0] is None:
        return {}, {}

    def texts(statement: str, ids: Sequence[str]) -> dict[str, str]:
        valid = [i for i in ids if _is_uuid(i)]
        if not valid:
            return {}
        return dict(conn.execute(mem0_sql.compose(statement, schema), (valid,)).fetchall())

    return texts(mem0_sql.MEMORY_TEXTS, memory_ids), texts(mem0_sql.MEMORY_QUERIES, search_ids)


def _is_uuid(text: Any) -> bool:
    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


def view_events(conn: psycopg.Connection[Any], schema: str, thread_id: str) -> list[dict[str, Any]]:
    """The events of a thread for its view (see
    :data:`~langgraph_external.ledger.queries.VIEW_EVENTS`)."""
    rows = conn.execute(ledger.q(VIEW_EVENTS, schema), (thread_id,)).fetchall()
    return [ledger.row_to_envelope(r) for r in rows]


def read_back(
    workspace: Any, thread_id: str, envs: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """A thread's envelopes as the views read them: each whole payload an older version
    offloaded (``{"$artifact", "size"}``) read back from ``workspace``, its long values
    shown as offloaded values are
    (:func:`~langgraph_external.read.offloaded.with_whole_payloads`); without a workspace
    they stay references."""
    if workspace is None:
        return list(envs)
    return with_whole_payloads(envs, workspace_fetch(workspace, thread_id))


def events_at(
    conn: psycopg.Connection[Any], schema: str, thread_id: str, seqs: Sequence[int]
) -> list[dict[str, Any]]:
    """Whole envelopes of some events of a thread (as ``lgx events --json`` prints them)."""
    rows = conn.execute(ledger.q(EVENTS_AT, schema), (thread_id, list(seqs))).fetchall()
    return [ledger.row_to_envelope(r) for r in rows]


def thread_row(conn: psycopg.Connection[Any], schema: str, thread_id: str) -> Mapping[str, Any]:
    """The ``threads`` row of ``thread_id`` (empty when the ledger lacks it)."""
    cur = conn.cursor(row_factory=dict_row)
    return cur.execute(ledger.q(THREAD_ROW, schema), (thread_id,)).fetchone() or {}
