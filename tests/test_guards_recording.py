"""Violations land as ``policy_violation`` events in the Postgres ledger and the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.types import Command

from langgraph_external import External
from langgraph_external.guards import TransitionPolicy, guard
from langgraph_external.options import Options
from tests.test_guards_runtime import START_STATE, build


def test_violations_are_recorded_in_ledger_and_workspace(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ran: list[str] = []
    builder, spec = build("illegal_edge", ran)
    spec["on_violation"] = {"action": "interrupt", "fallback": "fallback"}
    spec["name"] = "recorded"
    policy = TransitionPolicy.from_dict(spec)
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        graph = guard(builder, policy, pipeline=ext.pipeline).compile(checkpointer=ext.checkpointer)
        config = ext.config("thread-guard")
        graph.invoke(START_STATE, config)
        graph.invoke(Command(resume=False), config)
        ledger = [e for e in ext.events("thread-guard") if e["kind"] == "policy_violation"]
        files = [
            e for e in ext.workspace.iter_events("thread-guard") if e["kind"] == "policy_violation"
        ]
    assert "forbidden" not in ran and ran[-1] == "fallback"
    assert [(e["name"], e["status"], e["node"]) for e in ledger] == [
        ("illegal_transition", "interrupted", "a"),
        ("illegal_transition", "rejected", "a"),
    ]
    payload: dict[str, Any] = ledger[-1]["payload"]
    assert payload["from"] == "a" and payload["to"] == "forbidden"
    assert payload["rule"] == "illegal_transition" and payload["action"] == "interrupt"
    assert payload["fallback"] == "fallback"
    assert payload["policy_hash"] == policy.hash and payload["policy_name"] == "recorded"
    assert all(isinstance(e["step"], int) for e in ledger)
    assert [e["hash"] for e in files] == [e["hash"] for e in ledger]


def test_a_run_with_the_audit_handler_records_violations_without_pipeline(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph_external.guards import TransitionViolation
    from tests.guard_agents import POLICY, QUESTION, react_agent

    ran: list[str] = []
    routed = TransitionPolicy.from_dict(
        {**POLICY, "on_violation": {"action": "route", "fallback": "escalate"}}
    )
    raising = TransitionPolicy.from_dict({**POLICY, "on_violation": {"action": "raise"}})
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        for thread, policy in (("routed", routed), ("raised", raising)):
            graph = guard(react_agent(ran), policy).compile(checkpointer=ext.checkpointer)
            try:
                graph.invoke(QUESTION, ext.config(thread))
            except TransitionViolation:
                assert thread == "raised"
        ext.flush()
        events = {t: ext.events(t) for t in ("routed", "raised")}
    for thread, policy in (("routed", routed), ("raised", raising)):
        violations = [e for e in events[thread] if e["kind"] == "policy_violation"]
        assert [(e["name"], e["status"], e["node"]) for e in violations] == [
            ("tool_tier", thread, "tools")
        ]
        payload = violations[0]["payload"]
        assert payload["to"] == "remote_write" and payload["policy_hash"] == policy.hash
        assert payload["where"]["tool_call_id"] == "call_write"
        # the refused tool never started, so nothing records it as a tool call
        tools = {e["name"] for e in events[thread] if e["kind"].startswith("tool_")}
        assert "remote_write" not in tools
    assert "lookup_order" in {e["name"] for e in events["routed"] if e["kind"] == "tool_end"}
    assert "remote_write" not in ran


def test_pipeline_argument_records_runs_without_the_audit_handler() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_external.ledger.memory import InMemoryLedger
    from langgraph_external.pipeline.pipeline import Pipeline
    from langgraph_external.testing import capture_events
    from tests.guard_agents import POLICY, QUESTION, react_agent

    policy = TransitionPolicy.from_dict(
        {**POLICY, "on_violation": {"action": "route", "fallback": "escalate"}}
    )
    with Pipeline(InMemoryLedger()) as pipeline:
        graph = guard(react_agent([]), policy, pipeline=pipeline).compile(
            checkpointer=InMemorySaver()
        )
        with capture_events(pipeline, kinds={"policy_violation"}) as events:
            graph.invoke(QUESTION, {"configurable": {"thread_id": "plain"}})
    assert [(e.thread_id, e.name, e.status, e.node) for e in events] == [
        ("plain", "tool_tier", "routed", "tools")
    ]
