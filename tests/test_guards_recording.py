"""Violations land as ``policy_violation`` events in the Postgres ledger and the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.types import Command

from langgraph_external import External
from langgraph_external.guards import TransitionPolicy, guard
from tests.test_guards_runtime import START_STATE, build


def test_violations_are_recorded_in_ledger_and_workspace(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ran: list[str] = []
    builder, spec = build("illegal_edge", ran)
    spec["on_violation"] = {"action": "interrupt", "fallback": "fallback"}
    spec["name"] = "recorded"
    policy = TransitionPolicy.from_dict(spec)
    with External(dsn=dsn, workspace=tmp_path / "ws", spool_dir=spool_dir) as ext:
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
