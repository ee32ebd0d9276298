"""The record is faithful under any timing: every checkpoint event names exactly the nodes
that produced it, and ``seq`` follows causality, whatever the durability mode, while
other threads fight for the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langgraph_external import External, verify_chain
from langgraph_external.options import Options
from tests.graphs import REACT_PATH, cpu_burner, fanout_gather, fanout_with_subgraph, react_agent

RUNS = 20


def _root_checkpoints(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == "checkpoint" and e["checkpoint_ns"] == ""]


def _check_causal_order(events: list[dict[str, Any]]) -> None:
    """node_end of step N < checkpoint of step N < anything a task of step N+1 did."""
    for cp in _root_checkpoints(events):
        n = cp["step"]
        for e in events:
            if e["checkpoint_ns"] != "" or e["step"] is None or e["kind"] in ("writes",):
                continue
            if e["kind"] == "node_end" and e["step"] <= n:
                assert e["seq"] < cp["seq"], (e["kind"], e["node"], e["step"], "after", n)
            if e["kind"] != "checkpoint" and e["step"] > n:
                assert e["seq"] > cp["seq"], (e["kind"], e["node"], e["step"], "before", n)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_every_checkpoint_names_the_nodes_that_produced_it(
    durability: str, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        app = react_agent(ext.checkpointer)
        with cpu_burner():
            for i in range(RUNS):
                out = app.invoke(
                    {"messages": [HumanMessage("weather and time in Oslo?")]},
                    ext.config(f"react-{durability}-{i}"),
                    durability=durability,
                )
                assert out["messages"][-1].content == "Sunny at noon in Oslo."
        assert ext.flush()
        for i in range(RUNS):
            events = ext.events(f"react-{durability}-{i}")
            verify_chain(events)
            cps = _root_checkpoints(events)
            if durability == "exit":  # one checkpoint at the end: everything since none
                assert [c["payload"]["nodes"] for c in cps] == [["__start__", "agent", "tools"]]
                continue
            assert [c["step"] for c in cps] == list(range(-1, 6))
            assert [c["payload"]["nodes"] for c in cps] == [[]] + [[n] for n in REACT_PATH]
            assert [c["node"] for c in cps] == [None, *REACT_PATH]
            _check_causal_order(events)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_send_tasks_and_subgraphs_are_named_too(
    durability: str, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        app = fanout_with_subgraph(ext.checkpointer)
        with cpu_burner():
            for i in range(RUNS // 2):
                cfg = ext.config(f"fan-{durability}-{i}")
                assert (
                    app.invoke({"items": [], "total": 0}, cfg, durability=durability)["total"]
                    == 120
                )
        assert ext.flush()
        for i in range(RUNS // 2):
            events = ext.events(f"fan-{durability}-{i}")
            cps = _root_checkpoints(events)
            assert [c["payload"]["nodes"] for c in cps] == [
                [],
                ["__start__"],
                ["split"],
                ["work"],
                ["summarize"],
            ]
            work = cps[3]["payload"]["writers"]
            assert [(w["node"], w["via"], w.get("index")) for w in work] == [
                ("work", "push", 0),
                ("work", "push", 1),
                ("work", "push", 2),
            ]
            sub = [e for e in events if e["kind"] == "checkpoint" and e["checkpoint_ns"]]
            assert sub and all(e["checkpoint_ns"].startswith("summarize:") for e in sub)
            assert [c["payload"]["nodes"] for c in sub] == [[], ["__start__"], ["double"]]
            writes = [e for e in events if e["kind"] == "writes"]
            assert all(e["node"] for e in writes), [e["task_id"] for e in writes if not e["node"]]
            _check_causal_order(events)


def test_a_long_thread_and_a_fork_from_far_back_are_named_right(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """The checkpointer keeps only a thread's recent checkpoints in memory: a thread far
    longer than that still names every checkpoint's producers, and so does a run forked
    from one of its first checkpoints (its parent is read back from the saver)."""
    from langgraph.checkpoint.base import CheckpointTuple

    from langgraph_external.record.checkpoints import PER_THREAD

    turns = PER_THREAD + 8  # well past what the caches keep per thread
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        app = fanout_gather(ext.checkpointer)
        cfg = ext.config("long")
        for _ in range(turns):
            assert app.invoke({"items": [], "total": 0}, cfg)["total"] == 60
        history: list[CheckpointTuple] = list(ext.checkpointer.list(cfg))
        # the input checkpoint of the second run, far back
        early = [t for t in history if t.metadata and t.metadata.get("source") == "input"][-2]
        fork_cfg = {**cfg, "configurable": {**cfg["configurable"], **early.config["configurable"]}}
        assert app.invoke(None, fork_cfg)["total"] == 60
        assert ext.flush()
        events = ext.events("long")
    verify_chain(events)
    cps = _root_checkpoints(events)
    per_run = [[], ["__start__"], ["split"], ["work"], ["gather"]]
    assert [c["payload"]["nodes"] for c in cps[: 5 * turns]] == per_run * turns
    forked = cps[5 * turns :]
    assert (
        forked[0]["payload"]["parent_checkpoint_id"]
        == early.config["configurable"]["checkpoint_id"]
    )
    # LangGraph copies the old checkpoint as a "fork" first: no node produced that one
    assert [(c["payload"]["source"], c["payload"]["nodes"]) for c in forked] == [
        ("fork", []),
        *(("loop", nodes) for nodes in per_run[1:]),
    ]
    work = forked[3]["payload"]["writers"]
    assert [(w["node"], w["via"], w.get("index")) for w in work] == [
        ("work", "push", 0),
        ("work", "push", 1),
        ("work", "push", 2),
    ]
    writes = [e for e in events if e["kind"] == "writes"]
    assert all(e["node"] for e in writes), [e["task_id"] for e in writes if not e["node"]]


def test_a_resume_names_the_node_that_ran_and_no_bookkeeping(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """Resuming records LangGraph's ``__interrupt__`` bookkeeping in the checkpoint's
    ``versions_seen``; it is not a node, so the checkpoint names only the node that ran."""
    from langgraph.types import Command

    from tests.graphs import fanout_with_interrupt

    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        app = fanout_with_interrupt(ext.checkpointer)
        cfg = ext.config("resume")
        assert "__interrupt__" in app.invoke({"items": [], "total": 0}, cfg)
        assert app.invoke(Command(resume="yes"), cfg)["total"] == 120
        assert ext.flush()
        events = ext.events("resume")
    verify_chain(events)
    cps = [e for e in events if e["kind"] == "checkpoint"]
    assert all("__interrupt__" not in c["payload"]["nodes"] for c in cps)
    root = _root_checkpoints(events)
    assert [c["payload"]["nodes"] for c in root] == [
        [],
        ["__start__"],
        ["split"],
        ["work"],
        ["review"],
    ]
    assert root[-1]["node"] == "review"
    sub = [c for c in cps if c["checkpoint_ns"]]
    assert sub[-1]["payload"]["nodes"] == ["ask"] and sub[-1]["node"] == "ask"
