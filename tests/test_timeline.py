"""``lgx timeline``: one self-contained HTML page per thread, checked in headless Chromium."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt
from typer.testing import CliRunner

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.ledger import schema as ledger
from langgraph_external.options import Options
from langgraph_external.ui.timeline import build_timeline, render_timeline, timeline_html
from tests import browser
from tests.graphs import fanout_with_subgraph, react_agent
from tests.test_guards_runtime import START_STATE, build

needs_chromium = pytest.mark.skipif(
    browser.chromium_path() is None,
    reason="chromium is not installed (scripts/test.sh installs Debian's chromium package; "
    "apt-get install chromium failed or is not possible here)",
)


class Review(TypedDict):
    draft: str
    verdict: str


def _review_graph(checkpointer: Any, store: Any) -> Any:
    def remember(s: Review) -> dict[str, str]:
        store = get_store()
        store.put(("notes",), "draft", {"text": s["draft"]})
        found = store.search(("notes",))
        return {"draft": s["draft"] + f" ({len(found)} notes)"}

    def review(s: Review) -> dict[str, str]:
        return {"verdict": interrupt({"please_review": s["draft"]})}

    g = StateGraph(Review)
    g.add_node("remember", remember)
    g.add_node("review", review)
    g.add_edge(START, "remember")
    g.add_edge("remember", "review")
    g.add_edge("review", END)
    return g.compile(checkpointer=checkpointer, store=store)


@dataclass
class Recorded:
    dsn: str
    ws: Path


@pytest.fixture
def recorded(dsn: str, tmp_path: Path, spool_dir: Path) -> Recorded:
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        react_agent(ext.checkpointer).invoke(
            {"messages": [HumanMessage("weather in Oslo? </script><script>alert(1)</script>")]},
            ext.config("react"),
        )
        fanout_with_subgraph(ext.checkpointer).invoke({"items": [], "total": 0}, ext.config("fan"))
        review = _review_graph(ext.checkpointer, ext.store(InMemoryStore()))
        review.invoke({"draft": "otters", "verdict": ""}, ext.config("review"))
        review.invoke(Command(resume="approved"), ext.config("review"))
        from langgraph_external.guards import TransitionPolicy, guard

        builder, spec = build("illegal_edge", [])
        spec["on_violation"] = {"action": "interrupt", "fallback": "fallback"}
        graph = guard(builder, TransitionPolicy.from_dict(spec), pipeline=ext.pipeline)
        guarded = graph.compile(checkpointer=ext.checkpointer)
        guarded.invoke(START_STATE, ext.config("guard"))
        guarded.invoke(Command(resume=False), ext.config("guard"))
    return Recorded(dsn, ws)


def envelopes(rec: Recorded, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(rec.dsn, options="-c timezone=UTC") as conn:
        return ledger.fetch_events(conn, thread_id)


def node_lanes(envs: list[dict[str, Any]]) -> set[str]:
    """The lanes a user expects: one per node that ran, nested under its subgraph's caller."""
    lanes = set()
    for e in envs:
        if e["kind"] == "node_start":
            callers = [p.split(":", 1)[0] for p in e["checkpoint_ns"].split("|") if p]
            lanes.add(" › ".join([*callers, e["node"]]))
    return lanes


def write_page(rec: Recorded, thread_id: str, path: Path) -> dict[str, Any]:
    result = CliRunner(env={"LGX_DSN": None}).invoke(
        app,
        [
            "--dsn",
            rec.dsn,
            "--workspace",
            str(rec.ws),
            "timeline",
            thread_id,
            "-o",
            str(path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


# -- the data -----------------------------------------------------------------------------
def test_spans_pair_starts_with_ends_and_calls_sit_in_their_nodes_lane(
    recorded: Recorded,
) -> None:
    envs = envelopes(recorded, "react")
    tl = build_timeline("react", envs)
    labels = {lane["id"]: lane["label"] for lane in tl["lanes"]}
    assert set(labels.values()) == {"(graph)"} | node_lanes(envs) == {"(graph)", "agent", "tools"}
    kinds = [(i["kind"], labels[i["lane"]], i["name"], i["status"]) for i in tl["items"]]
    assert [k for k in kinds if k[0] == "tool"] == [
        ("tool", "tools", "get_weather", "ok"),
        ("tool", "tools", "get_time", "ok"),
    ]
    assert [k[1] for k in kinds if k[0] == "llm"] == ["agent"] * 3
    assert sum(k[0] == "node" for k in kinds) == sum(e["kind"] == "node_end" for e in envs)
    for item in tl["items"]:
        assert item["t1"] >= item["t0"] and item["s1"] >= item["s0"]
        if item["kind"] in ("node", "tool", "llm"):
            assert [tl["envelopes"][i]["kind"].split("_")[1] for i in item["events"]] == [
                "start",
                "end",
            ]
    # every event is in the page exactly once
    assert sorted(s for i in tl["items"] for s in i["events"]) == list(range(len(envs)))


def test_lanes_follow_time_when_a_later_steps_writes_were_committed_first(
    recorded: Recorded,
) -> None:
    """LangGraph (durability "async") may commit a later step's task writes before the
    checkpoint, and the node events riding on it, of an earlier step (seen in CI: the
    ``tools`` writes at seq 4, the ``agent`` node's start at seq 10). The lanes still
    read in the order the nodes ran."""
    envs = envelopes(recorded, "react")
    writes = [e for e in envs if e["kind"] == "writes" and e["node"] in ("agent", "tools")]
    writes.sort(key=lambda e: e["node"] != "tools")  # the tools task's writes first
    rest = [e for e in envs if e not in writes]
    committed = [rest[0], *writes, *rest[1:]]
    as_committed = [{**e, "seq": n} for n, e in enumerate(committed, 1)]
    assert as_committed[1]["node"] == "tools"
    for order in (envs, as_committed):
        tl = build_timeline("react", order)
        assert [lane["label"] for lane in tl["lanes"]] == ["(graph)", "agent", "tools"]


def test_subgraphs_memory_interrupts_and_violations_get_their_items(recorded: Recorded) -> None:
    fan = build_timeline("fan", envelopes(recorded, "fan"))
    nested = {lane["label"]: lane["depth"] for lane in fan["lanes"]}
    assert nested == {"(graph)": 0, "split": 0, "work": 0, "summarize": 0, "summarize › double": 1}
    assert sum(i["kind"] == "node" and i["name"] == "work" for i in fan["items"]) == 3

    review = build_timeline("review", envelopes(recorded, "review"))
    kinds = {i["kind"] for i in review["items"]}
    assert {"memory", "interrupt", "checkpoint", "node"} <= kinds
    guard = build_timeline("guard", envelopes(recorded, "guard"))
    violations = [i for i in guard["items"] if i["kind"] == "policy"]
    assert [v["name"] for v in violations] == ["illegal_transition"] * 2


def test_recorded_text_cannot_close_the_script_element() -> None:
    hostile = "</script><script>alert(1)</script>\u2028<!-- & -->"
    t = datetime(2026, 1, 31, 12).isoformat()
    page = timeline_html(
        "x</title><b>", [{"seq": 1, "ts": t, "kind": "error", "payload": {"text": hostile}}]
    )
    assert page.count("</script>") == 2  # the data's and the program's, nothing else
    assert "x&lt;/title&gt;&lt;b&gt;" in page and "<b>" not in page
    data = page.split('id="lgx-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["envelopes"][0]["payload"]["text"] == hostile


def test_a_node_update_shows_its_values_not_the_dicts_update_method() -> None:
    # Jinja's `d.update` finds dict.update before the "update" key: the page showed
    # "<built-in method update of dict object at 0x...>" for every node and checkpoint
    t0, t1 = (datetime(2026, 1, 31, 12) + timedelta(milliseconds=ms) for ms in (0, 5))
    node = {"node": "agent", "task_id": "t1", "name": "agent", "checkpoint_ns": "", "step": 1}
    page = timeline_html(
        "t",
        [
            {"seq": 1, "ts": t0.isoformat(), "kind": "node_start", **node},
            {
                "seq": 2,
                "ts": t1.isoformat(),
                "kind": "node_end",
                "status": "ok",
                **node,
                "payload": {"update": {"counter": 41}},
            },
            {
                "seq": 3,
                "ts": t1.isoformat(),
                "kind": "checkpoint",
                "checkpoint_id": "c1",
                "checkpoint_ns": "",
                "step": 1,
                "name": "loop",
                "payload": {"nodes": ["agent"]},
            },
        ],
    )
    assert "built-in method" not in page
    assert "&#34;counter&#34;: 41" in page or '"counter": 41' in page


def test_a_huge_event_is_cut_in_the_page_and_says_where_to_get_it_whole() -> None:
    t = datetime(2026, 1, 31, 12).isoformat()
    tl = build_timeline(
        "t", [{"seq": 1, "ts": t, "kind": "llm_start", "payload": {"m": "x" * 200_000}}]
    )
    cut = tl["envelopes"][0]["payload"]
    assert "lgx events THREAD --json" in cut["$truncated"] and len(cut["preview"]) < 40_000


def test_cli_timeline_exit_codes(recorded: Recorded, tmp_path: Path) -> None:
    runner = CliRunner(env={"LGX_DSN": None})
    base = ["--dsn", recorded.dsn, "--workspace", str(recorded.ws), "timeline"]
    missing = runner.invoke(app, [*base, "nope", "-o", str(tmp_path / "n.html")])
    assert missing.exit_code == 1 and missing.stderr.startswith("error:")
    assert not (tmp_path / "n.html").exists()
    stdout = runner.invoke(app, [*base, "react", "-o", "-"])
    assert stdout.exit_code == 0 and stdout.stdout.startswith("<!DOCTYPE html>")
    info = write_page(recorded, "react", tmp_path / "r.html")
    assert info["lanes"] == ["(graph)", "agent", "tools"] and info["source"] == "ledger"
    assert info["events"] == len(envelopes(recorded, "react"))
    unreachable = runner.invoke(
        app,
        ["--dsn", "postgresql://nobody@127.0.0.1:1/x?connect_timeout=1", "timeline", "react"],
    )
    assert unreachable.exit_code == 2


# -- in the browser -----------------------------------------------------------------------
ROWS_JS = """[...document.querySelectorAll('#tree .row')].map(r => ({
    kind: r.dataset.kind, depth: Number(r.dataset.depth),
    label: r.querySelector('.lbl .text').textContent,
    tag: (r.querySelector('.tag') || {}).textContent || '',
    visible: r.getBoundingClientRect().height > 0}))"""


@needs_chromium
def test_the_page_labels_every_row_shows_the_conversation_and_clicks_show_readable_details(
    recorded: Recorded, tmp_path: Path
) -> None:
    for thread in ("react", "fan", "review", "guard"):
        envs = envelopes(recorded, thread)
        path = tmp_path / f"{thread}.html"
        write_page(recorded, thread, path)
        with browser.browser() as page:
            page.goto(path.as_uri())
            assert page.errors == [], (thread, page.errors)
            rows = page.eval(ROWS_JS)
            assert page.eval("document.body.dataset.rendered") == str(len(rows))
            # every node run is a row that names its node and step, nested in its subgraph
            runs = [e for e in envs if e["kind"] == "node_start"]
            nodes = [r for r in rows if r["kind"] == "node"]
            assert sorted(r["label"] for r in nodes) == sorted(
                f"{e['node']} · step {e['step']}" for e in runs
            ), thread
            assert all(r["visible"] and r["label"] for r in rows), thread
            # the details pane shows the conversation, not JSON envelopes
            assert page.eval("document.getElementById('pane-conversation').hidden") is False
            assert page.eval("document.querySelectorAll('#details pre.payload').length") == 0
            if thread == "fan":
                depth = {r["label"].split(" · ")[0]: r["depth"] for r in nodes}
                assert depth["double"] == depth["summarize"] + 1
            if thread == "guard":
                violations = [r for r in rows if r["kind"] == "violation"]
                assert len(violations) == 2
                for v in violations:  # labelled with the rule, on the row and next to its mark
                    assert v["label"].startswith("policy violation: illegal_transition")
                    assert v["tag"] == "⚠ illegal_transition"
            if thread == "review":
                kinds = {r["kind"] for r in rows}
                assert {"memory", "interrupt", "resume", "checkpoint"} <= kinds
            if thread != "react":
                continue
            chat = page.eval(
                "[...document.querySelectorAll('#conversation .msg')].map(m => m.dataset.role)"
            )
            assert chat == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
            # the page uses its width: run tree and details side by side, edge to edge
            used = page.eval(
                """(() => { const a = document.getElementById('tree-panel').getBoundingClientRect();
                   const b = document.getElementById('details').getBoundingClientRect();
                   return (b.right - a.left) / window.innerWidth; })()"""
            )
            assert used > 0.95
            # click the first tool call: its arguments and result, readable; the recorded
            # events one click further, exactly as stored
            x, y = page.eval(
                """(() => { const r = document.querySelector('#tree .row.k-tool .lbl')
                   .getBoundingClientRect(); return [r.left + 20, r.top + r.height / 2]; })()"""
            )
            page.click(x, y)
            shown = page.eval(
                "[...document.querySelectorAll('#details section:not([hidden]) pre')]"
                ".map(p => p.textContent)"
            )
            assert json.loads(shown[0]) == {"city": "Oslo"} and shown[1] == "sunny in Oslo"
            page.eval(
                "document.querySelector('#details section:not([hidden]) details.raw').open = true"
            )
            page.pump(0.2)
            raw = page.eval(
                "[...document.querySelectorAll('#details section:not([hidden]) pre.payload')]"
                ".map(p => p.textContent)"
            )
            tool_events = [e for e in envs if e["kind"] in ("tool_start", "tool_end")][:2]
            assert [json.loads(r) for r in raw] == tool_events
            assert page.errors == []
            # the hostile user message stays text: no script ran, no element was made
            assert page.eval("document.querySelectorAll('script').length") == 2
            assert "</script><script>alert(1)</script>" in page.eval(
                "document.querySelector('#conversation .msg.user .body').textContent"
            )


@needs_chromium
def test_a_thread_of_5000_events_renders_in_the_browser(recorded: Recorded, tmp_path: Path) -> None:
    """The real shape of a ReAct run, repeated until the thread has over 5 000 events."""
    envs = repeated(envelopes(recorded, "react"), 5000)
    tl = build_timeline("big", envs)
    path = tmp_path / "big.html"
    path.write_text(render_timeline(tl), encoding="utf-8")
    with browser.browser() as page:
        page.goto(path.as_uri() + "#seq=4000")
        assert page.errors == []
        rows = int(page.eval("document.body.dataset.rendered"))
        assert rows == page.eval("document.querySelectorAll('#tree .row').length") > 2000
        selected = page.eval("({...document.querySelector('#tree .row.sel').dataset})")
        assert "4000" in (selected["s0"], selected["s1"])
        assert page.eval("document.getElementById('pane-conversation').hidden") is True
        page.eval("window.lgx.setAxis('seq')")
        assert page.eval("document.getElementById('tree-panel').classList.contains('axis-seq')")
        assert page.errors == []


def repeated(one: list[dict[str, Any]], at_least: int) -> list[dict[str, Any]]:
    """``one`` thread's events again and again (fresh run, task and message ids)."""
    envs: list[dict[str, Any]] = []
    start = datetime.fromisoformat(one[0]["ts"])
    while len(envs) < at_least:
        n = len(envs) // len(one)
        shift = timedelta(seconds=n)

        def fresh(v: Any, n: int = n) -> Any:
            return f"{v}-{n}" if v else v

        for e in one:
            envs.append(
                {
                    **e,
                    "seq": len(envs) + 1,
                    "ts": (datetime.fromisoformat(e["ts"]) - start + start + shift).isoformat(),
                    "task_id": fresh(e["task_id"]),
                    "run_id": fresh(e["run_id"]),
                    "parent_run_id": fresh(e["parent_run_id"]),
                    "root_run_id": fresh(e["root_run_id"]),
                }
            )
    return envs
