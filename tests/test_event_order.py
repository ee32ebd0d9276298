"""Reading a thread's stream: views place events step by step (writes with the step that
wrote them), and show both ``seq`` (the commit order) and ``ts`` (when it happened)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command
from replay_apps import complex_app, react_app
from typer.testing import CliRunner, Result

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.options import Options
from langgraph_external.read.inspection import place_events, step_context


@pytest.fixture
def recorded(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A ReAct run, and a run that fans out, runs a subgraph and is interrupted, then
    resumed in a second run."""
    monkeypatch.setenv("LGX_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        react_app(ext.checkpointer).invoke(
            {"messages": [HumanMessage("Weather?")]}, ext.config("react")
        )
        graph = complex_app(ext.checkpointer)
        graph.invoke({"items": []}, ext.config("hitl"))
        graph.invoke(Command(resume="yes"), ext.config("hitl"))
    yield ws


def lgx(dsn: str, ws: Path, *args: str) -> Result:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "250"})
    return runner.invoke(app, ["--dsn", dsn, "--workspace", str(ws), *args])


def json_lines(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def check_step_order(events: list[dict[str, Any]], ordered: list[dict[str, Any]]) -> None:
    """What step order promises, checked against the record itself."""
    pos = {e["seq"]: i for i, e in enumerate(ordered)}
    starts = [e for e in events if e["kind"] == "node_start"]
    checked = 0
    for w in (e for e in events if e["kind"] == "writes" and e["task_id"]):
        # after the task that wrote it started (the last start of that task before it) ...
        task = [s for s in starts if s["task_id"] == w["task_id"] and s["seq"] < w["seq"]]
        if task:
            assert pos[w["seq"]] > pos[task[-1]["seq"]], (w, task[-1])
        # ... and before the checkpoint its step produced, in its namespace
        parent = next(
            e
            for e in events
            if e["kind"] == "checkpoint"
            and e["checkpoint_id"] == w["checkpoint_id"]
            and e["checkpoint_ns"] == w["checkpoint_ns"]
        )
        produced = [
            e
            for e in events
            if e["kind"] == "checkpoint"
            and e["checkpoint_ns"] == w["checkpoint_ns"]
            and e["payload"].get("parent_checkpoint_id") == parent["checkpoint_id"]
        ]
        for cp in produced:
            assert pos[w["seq"]] < pos[cp["seq"]], (w, cp)
            checked += 1
    assert checked
    # the root graph's steps never go back within a run; runs never interleave
    runs = [e["run_id"] for e in events if e["kind"] == "run_start" and not e["parent_run_id"]]
    last: dict[str, int] = {}
    for e in ordered:
        if e["root_run_id"] in runs:
            assert runs.index(e["root_run_id"]) >= max((runs.index(r) for r in last), default=0), e
        if e["root_run_id"] and not e["checkpoint_ns"] and e["step"] is not None:
            assert e["step"] >= last.get(e["root_run_id"], -2), e
            last[e["root_run_id"]] = e["step"]


def test_step_order_places_writes_with_their_step_and_runs_in_turn(
    dsn: str, recorded: Path
) -> None:
    for thread in ("react", "hitl"):
        by_seq = json_lines(lgx(dsn, recorded, "events", thread, "--json"))
        assert [e["seq"] for e in by_seq] == list(range(1, len(by_seq) + 1))  # the record
        by_step = json_lines(lgx(dsn, recorded, "events", thread, "--json", "--order", "step"))
        assert sorted(e["seq"] for e in by_step) == [e["seq"] for e in by_seq]
        check_step_order(by_seq, by_step)
    # the place of each writes event: its step, derived from the checkpoint it was
    # recorded against, agrees with the step of the task that wrote it
    events = json_lines(lgx(dsn, recorded, "events", "hitl", "--json"))
    steps = {(e["task_id"], e["seq"]): e["step"] for e in events if e["kind"] == "node_start"}
    placed = {p.event["seq"]: p for p in place_events(events)}
    for w in (e for e in events if e["kind"] == "writes"):
        task = [s for (t, q), s in steps.items() if t == w["task_id"] and q < w["seq"]]
        if task:
            assert placed[w["seq"]].own_step == task[-1], w


def test_a_filtered_list_places_writes_with_the_thread_as_context(dsn: str, recorded: Path) -> None:
    every = json_lines(lgx(dsn, recorded, "events", "react", "--json"))
    only = json_lines(
        lgx(dsn, recorded, "events", "react", "--json", "--kind", "writes", "--order", "step")
    )
    assert [e["seq"] for e in only] == [
        e["seq"] for e in (p.event for p in place_events(every)) if e["kind"] == "writes"
    ]
    with psycopg.connect(dsn) as conn:
        context = step_context(conn, "react")
    writes = [e for e in every if e["kind"] == "writes"]
    assert [p.own_step for p in place_events(writes, context)] == [0, 1, 2, 3, 4, 5]


def test_the_events_table_shows_steps_seq_and_ts(dsn: str, recorded: Path) -> None:
    text = lgx(dsn, recorded, "events", "react")
    assert text.exit_code == 0, text.output
    rows = [line for line in text.stdout.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in row.strip("│").split("│")] for row in rows]
    kinds = [c[2] for c in cells]
    # every writes row sits in its step: after the step's node_end, before its checkpoint
    for i, row in enumerate(cells):
        if row[2] == "writes" and row[3] != "__start__":
            assert cells[i + 1][2] == "checkpoint" and cells[i + 1][4] == row[4], row
            assert "node_end" in kinds[:i] and cells[i - 1][4] == row[4], row
    assert all(c[4] for c in cells if c[2] == "writes")  # a step, though the record has none
    header = text.stdout.splitlines()[1]
    assert "seq" in header and "ts (UTC)" in header
    assert "seq: the commit order" in text.stdout and "ts: when the event happened" in text.stdout
    assert "├" in text.stdout  # a rule between steps

    shown = lgx(dsn, recorded, "show", "react", "-n", "8")
    assert shown.exit_code == 0, shown.output
    rows = [line for line in shown.stdout.splitlines() if line.startswith("│ ")]
    tail = [[c.strip() for c in r.strip("│").split("│")][2] for r in rows[-8:]]
    assert tail[-3:] == ["writes", "checkpoint", "run_end"]  # the last step, then the end
    assert "in step order" in shown.stdout and "seq: the commit order" in shown.stdout

    seq_order = lgx(dsn, recorded, "events", "react", "--order", "seq")
    assert "in commit (seq) order" in seq_order.stdout
    bad = lgx(dsn, recorded, "events", "react", "--order", "time")
    assert bad.exit_code == 2 and "--order" in bad.stderr
