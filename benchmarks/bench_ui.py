#!/usr/bin/env python
"""``lgx ui``: how long each page takes on a 5 000-event thread and a 10 000-thread ledger.

* **record**: a guarded ReAct agent (a model reporting token usage, two tools, a policy
  violation that pauses the run, a human rejecting it) recorded by ``External`` on
  embedded PostgreSQL: one thread run again and again until it holds 5 000+ events, and
  a few short threads;
* **10 000 threads**: the short threads' rows copied under new thread ids in SQL (the
  copies' hash chains do not verify: the list page does not verify);
* **pages**: each page requested through the app (Starlette's test client: routing,
  middleware, read-only sessions, rendering), median of ``--n`` requests; the threads
  list unfiltered, searched by each key and sorted by each column, the thread view and
  the compare view of the long thread, ``lgx timeline``'s file, and (with Chromium) the
  time the browser takes to load and lay out the thread page.

The two partial indexes the ``error:`` and ``session:`` searches use come with the
ledger's v8 migration (``--no-index`` drops them first, to show the numbers without them).
The other searches and sorts read the app's per-thread summaries and need no index.

    .venv/bin/python benchmarks/bench_ui.py [--n 5] [--dsn ...] [--no-index]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from _common import postgres
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from langgraph_external import External
from langgraph_external.guards import TransitionPolicy, guard
from langgraph_external.options import Options
from langgraph_external.read.prices import PriceTable
from langgraph_external.workspace.files import Workspace

S = "langgraph_external"
POLICY = {
    "name": "support",
    "states": ["agent", "tools", "escalate"],
    "transitions": {
        "START": ["agent"],
        "agent": ["tools", "END"],
        "tools": ["agent"],
        "escalate": ["END"],
    },
    "tools": {"lookup_order": "read_only", "refund": "remote_write"},
    "default_tier": "read_only",
    "on_violation": {"action": "interrupt", "fallback": "escalate"},
}
INDEXES = ("events_session_idx", "events_errors_idx")  # the v8 migration's


class Model(BaseChatModel):
    """Asks for a lookup (and, every fifth turn, a forbidden refund), then answers."""

    @property
    def _llm_type(self) -> str:
        return "bench"

    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = messages[-1]
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        if isinstance(last, HumanMessage):
            calls = [{"name": "lookup_order", "args": {"order_id": f"A-{turn}"}, "id": f"l{turn}"}]
            if turn % 5 == 0:
                calls.append(
                    {"name": "refund", "args": {"order_id": f"A-{turn}"}, "id": f"r{turn}"}
                )
            msg = AIMessage("Let me look.", tool_calls=calls)
        else:
            msg = AIMessage(f"Order A-{turn} shipped yesterday.")
        n = sum(len(str(m.content)) for m in messages) // 4
        msg.usage_metadata = {"input_tokens": n, "output_tokens": 20, "total_tokens": n + 20}
        msg.response_metadata = {"model_name": "gpt-4o-mini"}
        return ChatResult(generations=[ChatGeneration(message=msg)])


@tool
def lookup_order(order_id: str) -> str:
    """Find an order."""
    return f"order {order_id}: shipped"


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"order {order_id}: refunded"


def app(ext: External) -> Any:
    model = Model()

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"][-6:])]}  # a window, as apps do

    def escalate(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("A human will look at this refund.")]}

    b: StateGraph[Any] = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([lookup_order, refund], handle_tool_errors=True))
    b.add_node("escalate", escalate)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    b.add_edge("tools", "agent")
    b.add_edge("escalate", END)
    policy = TransitionPolicy.from_dict(POLICY)
    return guard(b, policy, pipeline=ext.pipeline).compile(checkpointer=ext.checkpointer), policy


def turn(graph: Any, ext: External, policy: Any, thread: str, i: int, user: str) -> None:
    config = ext.config(thread, user_id=user, tags=["bench", f"cohort-{i % 7}"], policy=policy)
    out = graph.invoke({"messages": [HumanMessage(f"Where is order A-{i}?")]}, config)
    if "__interrupt__" in out:
        graph.invoke(Command(resume=False), config)


def events_of(dsn: str, thread: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            f"select count(*) from {S}.events where thread_id = %s", (thread,)
        ).fetchone()
    return int(row[0]) if row else 0


CLONE = f"""
with src as (select thread_id from {S}.threads where thread_id like 'short-%%'),
ids as (
    select s.thread_id as src, 'copy-' || g || '-' || s.thread_id as dst, g
    from src s cross join generate_series(1, %s) g
), t as (
    insert into {S}.threads (thread_id, created_at, updated_at, last_seq, last_hash)
    select i.dst, t.created_at - make_interval(mins => i.g),
           t.updated_at - make_interval(mins => i.g), t.last_seq, t.last_hash
    from ids i join {S}.threads t on t.thread_id = i.src
    returning 1
)
insert into {S}.events (thread_id, seq, event_id, v, ts, kind, name, status, checkpoint_ns,
    checkpoint_id, run_id, parent_run_id, root_run_id, node, step, task_id, duration_ms,
    payload, raw, artifact, redactions, prev, hash)
select i.dst, e.seq, gen_random_uuid(), e.v, e.ts - make_interval(mins => i.g), e.kind, e.name,
    e.status, e.checkpoint_ns, e.checkpoint_id, e.run_id || '-' || i.g,
    e.parent_run_id || '-' || i.g, e.root_run_id || '-' || i.g, e.node, e.step, e.task_id,
    e.duration_ms,
    case when e.kind = 'run_start' and e.payload ? 'user_id'
         then jsonb_set(e.payload, '{{user_id}}', to_jsonb('user-' || (i.g %% 500)))
         else e.payload end,
    e.raw, e.artifact, e.redactions, e.prev, e.hash
from ids i join {S}.events e on e.thread_id = i.src
"""


def median_ms(fn: Callable[[], Any], n: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5, help="requests per page (median)")
    ap.add_argument("--events", type=int, default=5000, help="events of the long thread")
    ap.add_argument("--threads", type=int, default=10_000, help="threads in the ledger")
    ap.add_argument("--dsn", default=os.environ.get("LGX_BENCH_DSN"))
    ap.add_argument("--no-index", action="store_true", help="drop the v8 search indexes first")
    args = ap.parse_args()
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="lgx-bench-ui-") as d:
        run(args, Path(d))


def run(args: argparse.Namespace, tmp: Path) -> None:
    with postgres(args.dsn, tmp) as (dsn, kind):
        ws = tmp / "ws"
        t0 = time.perf_counter()
        with External(dsn=dsn, workspace=ws, options=Options(spool_dir=tmp / "spool")) as ext:
            graph, policy = app(ext)
            for k in range(6):
                for i in range(1, 6):
                    turn(graph, ext, policy, f"short-{k}", i, f"user-{k}")
            i = 0
            while True:
                i += 1
                turn(graph, ext, policy, "long", i, "alice")
                if i % 20 == 0 and events_of(dsn, "long") >= args.events:
                    break
        long_events = events_of(dsn, "long")
        print(
            f"recorded: thread 'long' {long_events} events ({i} turns), 6 short threads "
            f"({events_of(dsn, 'short-0')} events each) in {time.perf_counter() - t0:.0f} s; "
            f"server: {kind}"
        )
        copies = max(0, (args.threads - 7) // 6)
        with psycopg.connect(dsn, autocommit=True) as conn:
            t = time.perf_counter()
            conn.execute(CLONE, (copies,))
            conn.execute(f"analyze {S}.events")
            conn.execute(f"analyze {S}.threads")
            n_threads = conn.execute(f"select count(*) from {S}.threads").fetchone()[0]  # type: ignore[index]
            n_events = conn.execute(f"select count(*) from {S}.events").fetchone()[0]  # type: ignore[index]
            print(
                f"ledger: {n_threads} threads, {n_events} events "
                f"(copies made in {time.perf_counter() - t:.0f} s)"
            )
            if args.no_index:
                for name in INDEXES:
                    conn.execute(f"drop index if exists {S}.{name}")
                print("without the v8 indexes " + ", ".join(INDEXES))
        run_pages(dsn, ws, args.n)


def run_pages(dsn: str, ws: Path, n: int) -> None:
    from starlette.testclient import TestClient

    from langgraph_external import ui
    from langgraph_external.ui import UiConfig

    prices = PriceTable.from_mapping({"gpt-4o-mini*": {"input": 0.15, "output": 0.6}}, "bench")
    cfg = UiConfig(dsn=dsn, workspace=Workspace(str(ws)), prices=prices)
    results: list[tuple[str, float, float, str]] = []
    with TestClient(ui.create_app(cfg), base_url="http://127.0.0.1") as client:

        def page(name: str, url: str, check: str) -> None:
            def get() -> Any:
                r = client.get(url)
                assert r.status_code == 200, (url, r.status_code)
                return r

            first, _ = median_ms(get, 1)  # cold: nothing of it cached yet
            ms, r = median_ms(get, n)
            assert check in r.text, (url, check)
            results.append((name, first, ms, f"{len(r.content) / 1024:.0f} KiB"))

        t = time.perf_counter()
        client.get("/")  # the app summarizes every thread once, at start
        print(
            f"first threads list after start: {(time.perf_counter() - t) * 1000:.0f} ms "
            "(every thread summarized; later lists recompute only threads that changed)"
        )
        page("threads: newest first, page 1", "/", "threads")
        page("threads: page 150", "/?page=150", "page ")
        for q in (
            "user:user-7",
            "tag:cohort-3",
            "tool:refund",
            "node:escalate",
            "violation:tool_tier",
            "status:ok",
            "error:",
            "session:long",
            "short-3",
        ):
            page(f"threads: search {q}", "/?q=" + q.replace(":", "%3A"), "thread")
        for s in ("duration", "tokens", "cost"):
            page(f"threads: sort by {s}", f"/?sort={s}", "thread")
        page("thread view: 'long'", "/thread?id=long", "verifying")
        page("thread view: a row's details", "/thread/row?id=long&row=40", "conversation")
        page("thread view: its verification", "/thread/verify.json?id=long", "hash chain")
        page("thread view: 2 recorded events", "/thread/events.json?id=long&seq=40,41", "seq")
        page("compare: 'long' with 'short-0'", "/compare?a=long&b=short-0", "Path")
        page("timeline file: 'long'", "/thread/timeline.html?id=long", "lgx-data")
        body = client.get("/thread?id=long").text
        standalone = client.get("/thread/timeline.html?id=long").text
    width = max(len(r[0]) for r in results)
    print(f"\n{'page':<{width}}  {'first ms':>8}  {'median ms':>9}  size")
    for name, first, ms, size in results:
        flag = "" if max(first, ms) < 1000 else "  ← over 1 s"
        print(f"{name:<{width}}  {first:8.0f}  {ms:9.0f}  {size}{flag}")
    load = os.getloadavg()[0]
    print(f"(machine load average {load:.1f} on {os.cpu_count()} cores while measuring)")
    browser_load(body, standalone)


def browser_load(page_html: str, standalone: str) -> None:
    """The thread page's and the timeline file's load in headless Chromium (parse, style,
    layout, script)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    try:
        from tests import browser
    except ImportError:
        return
    if browser.chromium_path() is None:
        print("browser: chromium not installed, not measured")
        return
    from langgraph_external.ui._render import asset

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "thread.html"
        # the server page's assets, inlined, so the file loads without the server
        html = page_html.replace(
            '<link rel="stylesheet" href="/static/lgx.css">', f"<style>{asset('lgx.css')}</style>"
        )
        html = html.replace(
            '<script src="/static/lgx.js"></script>', f"<script>{asset('lgx.js')}</script>"
        )
        assert 'id="verify-live"' in html
        html = html.replace('id="verify-live"', 'id="verify-off"')  # no server to verify
        path.write_text(html)
        (Path(d) / "timeline.html").write_text(standalone)
        with browser.browser() as page:
            for name, file in (("thread view", path), ("timeline file", Path(d) / "timeline.html")):
                times = []
                page.errors.clear()
                for _ in range(3):
                    page.goto("about:blank")
                    t = time.perf_counter()
                    page.goto(file.as_uri())
                    rows = None
                    while rows is None and time.perf_counter() - t < 60:
                        rows = page.eval("document.body && document.body.dataset.rendered")
                    times.append((time.perf_counter() - t) * 1000)
                print(
                    f"browser: {name} of 'long' ({rows} rows) loaded, laid out and its script "
                    f"run in {statistics.median(times):.0f} ms (median of 3); "
                    f"console errors: {page.errors or 0}"
                )


if __name__ == "__main__":
    main()
