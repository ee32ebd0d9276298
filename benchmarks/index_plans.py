#!/usr/bin/env python
"""Index what is read (issue 32): the plans of what the CLI, ``lgx ui`` and the docs read,
and what each 10-node invoke writes into the ledger's indexes.

* **ledger**: a ReAct agent (a scripted model, two tools, one failing now and then; a
  third of the threads in a Langfuse session) and the 10-node chain recorded by
  ``External`` with the audit callbacks, then their rows (``events``, ``checkpoints``,
  ``threads``) copied under new thread and run ids in SQL, spread over 30 days and stored
  in time order, ``vacuum analyze``-d; the Mem0 adapter's tables with a memory per agent
  run (its views join ``events``);
* **plans**: ``EXPLAIN (ANALYZE, BUFFERS)`` of every query family the CLI, ``lgx ui``,
  ``lgx diff``/compare, ``lgx verify``, the exporters and the docs run (every SQL
  block of README.md, docs/sql.md, docs/audit.md, docs/guards.md, docs/memory.md, and
  ``lgx sql --examples``; and docs/sql.md's time range without ``(kind, ts)``, in a
  transaction rolled back): scan nodes, index names, time, buffers — under the v9 index
  set and under the current one (``--sets``);
* **per invoke**: for each index set, ``--invokes`` invokes of the 10-node chain
  (``durability="sync"``, ``ext.config(tid)``: full audit), each on a new thread, after a
  warm-up and a ``checkpoint``, autovacuum off: rows in ``events``/``checkpoints``,
  entries in each index, WAL bytes (``pg_current_wal_lsn()`` around the invokes and
  ``ext.flush()``) and, with ``pg_walinspect``, the WAL of B-tree/BRIN records and of
  full-page images. ``--rounds`` rounds, the sets' order alternating.

The index sets are switched on the populated ledger: ``v9`` drops every secondary index
of ``events``, ``checkpoints`` and ``captures`` and creates those of migrations v0..v9;
``current`` creates what ``setup()`` of this checkout leaves.

    .venv/bin/python benchmarks/index_plans.py [--copies 400] [--invokes 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import psycopg
from _common import NODES, build_graph, invoke_chain, postgres
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_external import External
from langgraph_external.ledger import queries as Q
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger import statements as ST
from langgraph_external.options import Options
from langgraph_external.read.sql_shell import example_queries
from langgraph_external.ui import _queries as UI
from langgraph_external.upstream import saver_ops

S = ledger.DEFAULT_SCHEMA
ROOT = Path(__file__).resolve().parents[1]
DOC_PAGES = ("README.md", "docs/sql.md", "docs/audit.md", "docs/guards.md", "docs/memory.md")
TABLES = ("events", "checkpoints", "captures")
V9 = 10  # migrations v0..v9


# -- the recorded app --------------------------------------------------------------------
class Model(BaseChatModel):
    """Asks for an order lookup, then the weather, then answers (usage reported)."""

    @property
    def _llm_type(self) -> str:
        return "bench"

    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        if done == 0:
            call = {"name": "lookup_order", "args": {"order_id": f"A-{turn}"}, "id": f"l{turn}"}
            msg = AIMessage("Let me look.", tool_calls=[call])
        elif done == 1:
            call = {"name": "weather", "args": {"city": "Oslo"}, "id": f"w{turn}"}
            msg = AIMessage("And the weather.", tool_calls=[call])
        else:
            msg = AIMessage(f"Order A-{turn} ships tomorrow; sunny in Oslo.")
        n = sum(len(str(m.content)) for m in messages) // 4
        msg.usage_metadata = {"input_tokens": n, "output_tokens": 20, "total_tokens": n + 20}
        msg.response_metadata = {"model_name": "gpt-4o-mini"}
        return ChatResult(generations=[ChatGeneration(message=msg)])


@tool
def lookup_order(order_id: str) -> str:
    """Find an order (the warehouse is down for orders ending in 7)."""
    if order_id.endswith("7"):
        raise RuntimeError(f"warehouse timeout for {order_id}")
    return f"order {order_id}: packed"


@tool
def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def react_graph(checkpointer: Any) -> Any:
    model = Model()

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    b: StateGraph[Any] = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([lookup_order, weather], handle_tool_errors=True))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=checkpointer)


def record(dsn: str, tmp: Path, react: int, chains: int) -> None:
    with External(dsn=dsn, workspace=tmp / "ws", options=Options(spool_dir=tmp / "spool")) as ext:
        graph = react_graph(ext.checkpointer)
        for i in range(react):
            extra = {"langfuse_session_id": f"session-{i % 4}"} if i % 3 == 0 else {}
            config = ext.config(f"seed-react-{i}", user_id=f"user-{i % 5}", **extra)
            graph.invoke({"messages": [HumanMessage(f"Where is order A-{i}?")]}, config)
        chain = build_graph(ext.checkpointer)
        for i in range(chains):
            invoke_chain(chain, ext.config(f"seed-chain-{i}"))
        ext.flush()


COPY = """
with ids as (
    select t.thread_id as src, 'copy-' || g || '-' || t.thread_id as dst, g
    from {s}.threads t cross join generate_series(1, %(copies)s) g
    where t.thread_id like 'seed-%%'
), t as (
    insert into {s}.threads (thread_id, created_at, updated_at, last_seq, last_hash)
    select i.dst, t.created_at - make_interval(mins => i.g * %(minutes)s),
           t.updated_at - make_interval(mins => i.g * %(minutes)s), t.last_seq, t.last_hash
    from ids i join {s}.threads t on t.thread_id = i.src
    returning 1
), c as (
    insert into {s}.checkpoints (thread_id, checkpoint_ns, checkpoint_id,
        parent_checkpoint_id, step, source, run_id, task_ids, nodes, channels, created_at,
        size_bytes, workspace_path, event_seq)
    select i.dst, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.step, c.source,
        c.run_id || '-' || i.g, c.task_ids, c.nodes, c.channels,
        c.created_at - make_interval(mins => i.g * %(minutes)s), c.size_bytes, c.workspace_path,
        c.event_seq
    from ids i join {s}.checkpoints c on c.thread_id = i.src
    returning 1
)
insert into {s}.events (thread_id, seq, event_id, v, ts, kind, name, status, checkpoint_ns,
    checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id, duration_ms,
    payload, raw, artifact, redactions, prev, hash, detail)
select i.dst, e.seq, gen_random_uuid(), e.v,
    e.ts - make_interval(mins => i.g * %(minutes)s), e.kind, e.name, e.status,
    e.checkpoint_ns, e.checkpoint_id, e.run_id || '-' || i.g,
    e.parent_run_id || '-' || i.g, e.root_run_id || '-' || i.g, e.node, e.step, e.task_id,
    e.duration_ms,
    case when e.kind = 'checkpoint' and e.payload -> 'metadata' ? 'langfuse_session_id'
         then jsonb_set(e.payload, '{{metadata,langfuse_session_id}}',
                        to_jsonb('session-' || (i.g %% 400)))
         else e.payload end,
    e.raw, e.artifact, e.redactions, e.prev, e.hash, e.detail
from ids i join {s}.events e on e.thread_id = i.src
order by e.ts - make_interval(mins => i.g * %(minutes)s)
"""


def populate(dsn: str, tmp: Path, copies: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    record(dsn, tmp, react=12, chains=4)
    t1 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        # copies spread over 30 days, stored in time order (as the ledger appends)
        minutes = max(1, 30 * 24 * 60 // copies)
        conn.execute(COPY.format(s=S), {"copies": copies, "minutes": minutes})  # type: ignore[arg-type]
        memories(conn)
        conn.execute(f"vacuum analyze {S}.events, {S}.checkpoints, {S}.threads")
        counts = {
            t: one(conn, f"select count(*) from {S}.{t}")
            for t in ("threads", "events", "checkpoints")
        }
    counts["record_s"] = round(t1 - t0, 1)
    counts["copy_s"] = round(time.perf_counter() - t1, 1)
    return counts


MEMORIES = """
insert into {s}.memory_events (op_id, collection, memory_id, event, new_text, new_hash,
    user_id, thread_id, run_id, node, step, task_id)
select gen_random_uuid(), 'memories', gen_random_uuid(), 'ADD', 'likes ' || e.seq, 'h',
    'user-' || (row_number() over () % 50), e.thread_id, e.run_id, e.node, e.step, e.task_id
from {s}.events e where e.kind = 'node_start' and e.node = 'agent' and e.seq < 20
"""


def memories(conn: psycopg.Connection[Any]) -> None:
    """The Mem0 adapter's tables (its views join ``events``) with a memory per agent run."""
    from langgraph_external.memory_adapters.mem0.bootstrap import migrate

    try:
        migrate(conn, S, (), 8, create_extension=True)
    except Exception as exc:  # no pgvector: the memory recipes are not planned
        print(f"(no Mem0 tables: {exc})")
        return
    conn.execute(MEMORIES.format(s=S).encode())
    conn.execute(f"analyze {S}.memory_events".encode())


def one(conn: psycopg.Connection[Any], query: str, params: Any = None) -> Any:
    row = conn.execute(query.encode() if params is None else query, params).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]


# -- index sets ---------------------------------------------------------------------------
_CREATE_INDEX = re.compile(r"create index if not exists .*?(?:;|\Z)", re.S | re.I)


def v9_indexes() -> list[str]:
    """The ``create index`` statements of migrations v0..v9 (their secondary indexes)."""
    text = "\n".join(ledger.MIGRATIONS[:V9])
    return [m.group(0).rstrip(";").format(schema=S) for m in _CREATE_INDEX.finditer(text)]


def secondary_indexes(conn: psycopg.Connection[Any]) -> list[tuple[str, str, str]]:
    """``(table, index, definition)`` of every non-unique index of the three tables."""
    return [
        (str(t), str(i), str(d))
        for t, i, d in conn.execute(
            """
            select c.relname, ic.relname, pg_get_indexdef(x.indexrelid)
            from pg_index x join pg_class ic on ic.oid = x.indexrelid
            join pg_class c on c.oid = x.indrelid join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = %s and c.relname = any(%s) and not x.indisprimary
            order by c.relname, ic.relname
            """,
            (S, list(TABLES)),
        ).fetchall()
    ]


def use_set(conn: psycopg.Connection[Any], statements: list[str]) -> float:
    t = time.perf_counter()
    for _, name, _ in secondary_indexes(conn):
        conn.execute(f"drop index {S}.{name}".encode())
    for stmt in statements:
        conn.execute(stmt.encode())
    conn.execute(f"analyze {S}.events, {S}.checkpoints".encode())
    return time.perf_counter() - t


# -- plans ---------------------------------------------------------------------------------
def doc_statements() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for page in DOC_PAGES:
        for block in re.findall(r"```sql\n(.*?)```", (ROOT / page).read_text(), re.S):
            for part in block.split(";"):
                lines = [ln for ln in part.strip().splitlines() if not ln.strip().startswith("--")]
                if any(ln.strip() for ln in lines):
                    out.append((page, "\n".join(lines).strip()))
    for part in example_queries(S, "copy-1-seed-react-3", "tools").split(";"):
        lines = [ln for ln in part.strip().splitlines() if not ln.strip().startswith("--")]
        if any(ln.strip() for ln in lines):
            out.append(("lgx sql --examples", "\n".join(lines).strip()))
    return out


def samples(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Values the parameterized queries are run with: a copied thread, its runs, a session."""
    thread = "copy-7-seed-react-3"
    run = one(
        conn,
        f"select run_id from {S}.events where thread_id = %s and kind = 'run_start' limit 1",
        (thread,),
    )
    ids = [
        r[0]
        for r in conn.execute(
            f"select thread_id from {S}.threads order by updated_at desc limit 50"
        ).fetchall()
    ]
    try:
        memory = one(conn, f"select memory_id::text from {S}.memory_events limit 1")
    except psycopg.Error:
        memory = None
    return {"thread": thread, "run": run, "ids": ids, "session": "session-7", "memory": memory}


def families(v: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """``(name, statement, parameters)`` of the product's reads."""
    t, ids = v["thread"], v["ids"]
    lean = {"limit": 1000}
    search = UI.Search.parse(f"session:{v['session']}").params()
    error = UI.Search.parse("error:timeout").params()
    return [
        ("lgx show: SELECT_THREAD", Q.SELECT_THREAD, (t,)),
        ("lgx show/events: SELECT_EVENT_PLACES", Q.SELECT_EVENT_PLACES, (t,)),
        ("lgx show: SELECT_KIND_COUNTS", Q.SELECT_KIND_COUNTS, (t,)),
        ("lgx show: SELECT_LAST_EVENTS", Q.SELECT_LAST_EVENTS, (t, 20)),
        (
            "lgx threads: SELECT_THREADS",
            Q.SELECT_THREADS,
            {"replays": False, "prefix": "replay:", "limit": 50},
        ),
        (
            "lgx events --kind: SELECT_EVENTS",
            Q.SELECT_EVENTS,
            {
                "thread_id": t,
                "kinds": ["tool_start", "tool_end"],
                "nodes": None,
                "names": None,
                "since": None,
                "until": None,
                "limit": 100,
            },
        ),
        (
            "lgx events --name: SELECT_EVENTS",
            Q.SELECT_EVENTS,
            {
                "thread_id": t,
                "kinds": None,
                "nodes": None,
                "names": ["weather"],
                "since": None,
                "until": None,
                "limit": 100,
            },
        ),
        ("lgx diff/compare: SELECT_RUN", Q.SELECT_RUN, (v["run"],)),
        (
            "lgx diff/compare: SELECT_CALLS",
            Q.SELECT_CALLS,
            (t, ["tool_start", "tool_end", "llm_start", "llm_end"], 0, None, None),
        ),
        ("lgx diff/compare: SELECT_PATH", Q.SELECT_PATH, (t,)),
        ("views: SELECT_STEP_CONTEXT", Q.SELECT_STEP_CONTEXT, (t,)),
        ("lgx ui: HEADS", Q.HEADS, None),
        ("lgx ui search session: MATCHES", Q.MATCHES, search),
        ("lgx ui search error: MATCHES", Q.MATCHES, error),
        ("lgx ui list: AGGREGATES", Q.AGGREGATES, {"ids": ids}),
        ("lgx ui list: MODEL_TOKENS", Q.MODEL_TOKENS, {"ids": ids}),
        ("lgx ui list: RECORD_FAILURES", UI.RECORD_FAILURES, {"ids": ids}),
        ("lgx ui thread: VIEW_EVENTS", Q.VIEW_EVENTS, (t,)),
        ("lgx verify: SELECT_THREAD_EVENTS", ST.SELECT_THREAD_EVENTS, (t,)),
        ("lgx verify: SELECT_CHECKPOINT_ROWS", ST.SELECT_CHECKPOINT_ROWS, (t,)),
        ("lgx verify: LEDGER_AGREEMENT", saver_ops.LEDGER_AGREEMENT, {"t": t}),
        ("exporter: SELECT_EVENTS_LEAN", Q.SELECT_EVENTS_LEAN, (t, 0, lean["limit"])),
        ("exporter: OPEN_CHAIN", Q.OPEN_CHAIN, (t,)),
        ("sealer: SELECT_CAPTURES", ST.SELECT_CAPTURES, ([t], 100)),
        ("sealer: PENDING_OF_THREAD", ST.PENDING_OF_THREAD, (t,)),
    ]


def summarize(plan: dict[str, Any]) -> tuple[str, float, int]:
    """Scan nodes (with index names), execution time (ms), shared buffers."""
    scans: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        kind = node["Node Type"]
        if "Scan" in kind or kind in ("Bitmap Heap Scan",):
            label = kind.replace(" Scan", "")
            rel = node.get("Relation Name", "")
            idx = node.get("Index Name")
            scans.append(f"{label} {idx}" if idx else f"{label} {rel}".strip())
        for child in node.get("Plans", ()):
            walk(child)

    walk(plan["Plan"])
    top = plan["Plan"]
    buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    seen: list[str] = []
    for s in scans:
        if s not in seen:
            seen.append(s)
    return ", ".join(seen), float(plan["Execution Time"]), buffers


def explain(conn: psycopg.Connection[Any], text: str, params: Any) -> tuple[str, float, int]:
    query = ledger.q("explain (analyze, buffers, format json) " + text, S)
    best: tuple[str, float, int] | None = None
    for _ in range(3):  # the best of three: the plan, warm
        with conn.transaction():
            row = conn.execute(query, params).fetchone()
        assert row is not None
        got = summarize(row[0][0])
        if best is None or got[1] < best[1]:
            best = got
    assert best is not None
    return best


def plans(dsn: str) -> dict[str, tuple[str, float, int]]:
    out: dict[str, tuple[str, float, int]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path to langgraph_external, public")
        v = samples(conn)
        for name, text, params in families(v):
            out[name] = explain(conn, text, params)
        for page, text in doc_statements():
            text = text.replace("'thread-42'", f"'{v['thread']}'")
            text = text.replace("'…'", f"'{v['memory']}'")
            text = text.replace("{", "{{").replace("}", "}}")
            name = f"{page}: {' '.join(text.split())[:90]}"
            try:
                out[name] = explain(conn, text, None)
            except psycopg.Error as exc:  # the Mem0 views are there only where the adapter ran
                out[name] = (f"(not run: {type(exc).__name__})", 0.0, 0)
        out.update(without_kind_ts(conn))
    return out


BUSIEST = """
select thread_id, count(*) as events, max(ts) as last_event
from {schema}.events
where ts > now() - interval '1 day'
group by thread_id order by events desc limit 20
"""
"""docs/sql.md's time range across threads."""


def without_kind_ts(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, float, int]]:
    """The time range of docs/sql.md when ``(kind, ts)`` cannot serve it (a server
    before PostgreSQL 18 has no skip scan): the index dropped in a transaction rolled
    back."""
    if not any(name == "events_kind_ts_idx" for _, name, _ in secondary_indexes(conn)):
        return {}
    conn.autocommit = False
    try:
        conn.execute(f"drop index {S}.events_kind_ts_idx".encode())
        query = ledger.q("explain (analyze, buffers, format json) " + BUSIEST, S)
        row = conn.execute(query).fetchone()
        assert row is not None
        return {"docs/sql.md busiest threads, without (kind, ts)": summarize(row[0][0])}
    finally:
        conn.rollback()
        conn.autocommit = True


# -- per invoke ---------------------------------------------------------------------------
def walinspect(conn: psycopg.Connection[Any]) -> bool:
    try:
        conn.execute("create extension if not exists pg_walinspect")
    except psycopg.Error:
        return False
    return True


def wal_stats(conn: psycopg.Connection[Any], start: str, end: str) -> dict[str, int]:
    rows = conn.execute(
        'select "resource_manager/record_type", combined_size, fpi_size'
        " from pg_get_wal_stats(%s, %s)",
        (start, end),
    ).fetchall()
    out = {"fpi": 0}
    for rmgr, combined, fpi in rows:
        out[str(rmgr)] = int(combined)
        out["fpi"] += int(fpi)
    return out


def per_invoke(dsn: str, tmp: Path, n: int, label: str) -> dict[str, Any]:
    prefix = f"wal-{label}-{uuid.uuid4().hex[:8]}"
    with External(
        dsn=dsn,
        workspace=tmp / f"ws-{prefix}",
        options=Options(spool_dir=tmp / "spool"),
    ) as ext:
        graph = build_graph(ext.checkpointer)
        for i in range(5):
            invoke_chain(graph, ext.config(f"warm-{prefix}-{i}"))
        ext.flush()
        with psycopg.connect(dsn, autocommit=True) as conn:
            inspect = walinspect(conn)
            conn.execute("checkpoint")
            start = one(conn, "select pg_current_wal_lsn()::text")
            t = time.perf_counter()
            for i in range(n):
                invoke_chain(graph, ext.config(f"{prefix}-{i}"))
            ext.flush()
            wall = time.perf_counter() - t
            end = one(conn, "select pg_current_wal_lsn()::text")
            wal = int(one(conn, "select %s::pg_lsn - %s::pg_lsn", (end, start)))
            stats = wal_stats(conn, start, end) if inspect else {}
            like = prefix + "-%"
            events = int(
                one(conn, f"select count(*) from {S}.events where thread_id like %s", (like,))
            )
            cps = int(
                one(conn, f"select count(*) from {S}.checkpoints where thread_id like %s", (like,))
            )
            entries: dict[str, float] = {}
            for table, name, _ in secondary_indexes(conn):
                if table == "captures":
                    continue  # a capture row is deleted when sealed (one per saver write)
                am, pred = conn.execute(
                    "select am.amname, pg_get_expr(x.indpred, x.indrelid) from pg_index x"
                    " join pg_class c on c.oid = x.indexrelid join pg_am am on am.oid = c.relam"
                    " where x.indexrelid = %s::regclass",
                    (f"{S}.{name}",),
                ).fetchone()  # type: ignore[misc]
                if am == "brin":
                    entries[name] = 0.0  # a summary per 128 pages, not an entry per row
                    continue
                where = f" and ({pred})" if pred else ""
                k = one(
                    conn,
                    f"select count(*) from {S}.{table} where thread_id like %s{where}",
                    (like,),
                )
                entries[name] = int(k) / n
    return {
        "events": events / n,
        "checkpoints": cps / n,
        "entries": entries,
        "index_entries": sum(entries.values()),
        "wal": wal / n,
        "wal_btree": stats.get("Btree", 0) / n,
        "wal_brin": stats.get("BRIN", 0) / n,
        "wal_heap": (stats.get("Heap", 0) + stats.get("Heap2", 0)) / n,
        "wal_fpi": stats.get("fpi", 0) / n,
        "ms_per_invoke": wall / n * 1000,
    }


def sizes(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            name: int(one(conn, "select pg_relation_size(%s::regclass)", (f"{S}.{name}",)))
            for _, name, _ in secondary_indexes(conn)
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("LGX_BENCH_DSN"))
    ap.add_argument("--copies", type=int, default=400, help="copies of each recorded thread")
    ap.add_argument("--invokes", type=int, default=100, help="invokes per WAL measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sets", default="v9,current", help="index sets, in the first round's order")
    ap.add_argument("--no-plans", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="lgx-index-plans-") as d:
        run(args, Path(d))


def run(args: argparse.Namespace, tmp: Path) -> None:
    with postgres(args.dsn, tmp) as (dsn, kind):
        with psycopg.connect(dsn, autocommit=True) as conn:
            ledger.setup(conn, S)
            current = [d for _, _, d in secondary_indexes(conn)]
        index_sets = {"v9": v9_indexes(), "current": current}
        order = [s for s in args.sets.split(",") if s]
        print(f"server: {kind}; migrations v0..v{len(ledger.MIGRATIONS) - 1}")
        for name in order:
            print(f"index set {name}:")
            for stmt in index_sets[name]:
                print("   ", " ".join(stmt.split()))
        counts = populate(dsn, tmp, args.copies)
        print(f"ledger: {counts}")
        result: dict[str, Any] = {"ledger": counts, "plans": {}, "sizes": {}, "rounds": []}
        if not args.no_plans:
            for name in order:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    took = use_set(conn, index_sets[name])
                result["sizes"][name] = sizes(dsn)
                print(f"\n== plans, index set {name} (built in {took:.1f} s) ==")
                print(
                    "index sizes (KiB):", {k: v // 1024 for k, v in result["sizes"][name].items()}
                )
                result["plans"][name] = plans(dsn)
                for q, (scans, ms, buf) in result["plans"][name].items():
                    print(f"  {q}\n      {scans}  {ms:.2f} ms  {buf} buffers")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("alter system set autovacuum = off")
            conn.execute("select pg_reload_conf()")
        print(f"\n== per 10-node invoke ({NODES} nodes, {args.invokes} invokes, full audit) ==")
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else list(reversed(order)):
                with psycopg.connect(dsn, autocommit=True) as conn:
                    use_set(conn, index_sets[name])
                m = per_invoke(dsn, tmp, args.invokes, name)
                result["rounds"].append({"round": r + 1, "set": name, **m})
                print(
                    f"round {r + 1} {name:8s} events {m['events']:.1f} checkpoints "
                    f"{m['checkpoints']:.1f} index entries {m['index_entries']:.1f} | WAL "
                    f"{m['wal'] / 1024:.1f} KiB (btree {m['wal_btree'] / 1024:.1f}, brin "
                    f"{m['wal_brin'] / 1024:.2f}, heap {m['wal_heap'] / 1024:.1f}, fpi "
                    f"{m['wal_fpi'] / 1024:.1f}) | {m['ms_per_invoke']:.1f} ms/invoke"
                )
                print("      entries:", {k: round(v, 1) for k, v in m["entries"].items()})
        if args.json:
            args.json.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
