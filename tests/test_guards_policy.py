"""Loading policies (errors name file, path and problem), the static check, Mermaid, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner

from langgraph_external.cli import app
from langgraph_external.guards import PolicyError, TransitionPolicy, guard

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

GOOD = """
states: [START, a, b, END]
transitions:
  START: [a]
  a: [b, END]
  b: [END]
"""


def write(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [
        (GOOD + "colour: red\n", "colour", "unknown key"),
        (GOOD + "nodes: {a: {max_vists: 2}}\n", "nodes.a.max_vists", "unknown key"),
        (GOOD + "nodes: {a: {max_visits: lots}}\n", "nodes.a.max_visits", "valid integer"),
        (GOOD + "nodes: {a: {max_visits: 0}}\n", "nodes.a.max_visits", "greater than 0"),
        (GOOD + "tools: {pay: root}\n", "tools.pay", "'read_only', 'local_write'"),
        (GOOD.replace("[START, a, b, END]", "[START, a, b, a, END]"), "states[3]", "duplicate"),
        (GOOD.replace("a: [b, END]", "a: [b, c]"), "transitions.a[1]", "'c' is not a declared"),
        (GOOD.replace("b: [END]", "c: [END]"), "transitions.c", "'c' is not a declared state"),
        (GOOD + "on_violation: {action: route}\n", "on_violation.fallback", "needs a fallback"),
        (GOOD + "on_violation: {action: route, fallback: zz}\n", "on_violation.fallback", "'zz'"),
        (GOOD + "nodes: {a: {tools: [pay]}}\n", "nodes.a.tools[0]", "not listed under tools"),
        (GOOD.replace("  b: [END]", "  b: [END]\n  b: [a]"), "line 7", "duplicate key 'b'"),
        ("states: [a\n", "line", "expected"),
        ("- a\n- b\n", "", "expected a mapping"),
    ],
)
def test_malformed_policy_file_names_file_path_and_problem(
    tmp_path: Path, text: str, path: str, problem: str
) -> None:
    f = write(tmp_path, text)
    with pytest.raises(PolicyError) as info:
        TransitionPolicy.from_file(f)
    message = str(info.value)
    assert str(f) in message
    assert path in message
    assert problem in message
    assert info.value.source == str(f)


def test_json_policy_and_yaml_policy_hash_alike(tmp_path: Path) -> None:
    y = TransitionPolicy.from_file(write(tmp_path, GOOD))
    data = {"states": ["a", "b"], "transitions": {"START": ["a"], "a": ["b", "END"], "b": ["END"]}}
    j = TransitionPolicy.from_file(write(tmp_path, json.dumps(data), "p.json"))
    assert y.hash == j.hash
    assert TransitionPolicy.from_yaml(GOOD + "name: other\n").hash != y.hash


def test_missing_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        TransitionPolicy.from_file(tmp_path / "nope.yaml")


def test_tool_permissions_follow_tiers_and_named_tools() -> None:
    p = TransitionPolicy.from_dict(
        {
            "states": ["reader", "writer", "payer", "mute"],
            "transitions": {"START": ["reader"]},
            "tools": {"get": "read_only", "save": "local_write", "pay": "remote_write"},
            "nodes": {
                "writer": {"tier": "local_write"},
                "payer": {"tools": ["pay"]},
                "mute": {"tier": "none"},
            },
        }
    )
    table = {
        n: [t for t in ("get", "save", "pay", "unlisted") if p.may_call(n, t)]
        for n in ("reader", "writer", "payer", "mute")
    }
    assert table == {
        "reader": ["get"],
        "writer": ["get", "save"],
        "payer": ["get", "pay"],
        "mute": [],
    }


class S(TypedDict):
    x: int


def drift_graph() -> StateGraph[Any]:
    b: StateGraph[Any] = StateGraph(S)
    for n in ("a", "b", "extra"):
        b.add_node(n, lambda s: s)
    b.add_edge(START, "a")
    b.add_edge("a", "extra")
    b.add_conditional_edges("extra", lambda s: "b", ["b", END])
    b.add_conditional_edges("b", lambda s: END)
    return b


DRIFT_POLICY = """
name: drift
states: [a, b, ghost, island]
transitions: {START: [a], a: [b], b: [END], ghost: [END], island: [END]}
"""


def test_check_reports_every_kind_of_drift() -> None:
    report = TransitionPolicy.from_yaml(DRIFT_POLICY).check(drift_graph())
    codes = sorted((i.severity, i.code, i.source or "", i.target or "") for i in report.issues)
    assert codes == [
        ("error", "forbidden_edge", "a", "extra"),
        ("error", "missing_state", "ghost", ""),
        ("error", "missing_state", "island", ""),
        ("error", "undeclared_node", "extra", ""),
        ("warning", "forbidden_route", "extra", "__end__"),
        ("warning", "forbidden_route", "extra", "b"),
        ("warning", "undeclared_router", "b", ""),
        ("warning", "unreachable_state", "ghost", ""),
        ("warning", "unreachable_state", "island", ""),
    ]
    assert not report.ok
    assert "a -> extra is an edge of the graph the policy forbids" in report.text()


def test_check_warns_about_router_destinations_the_policy_forbids() -> None:
    b: StateGraph[Any] = StateGraph(S)
    b.add_node("a", lambda s: s)
    b.add_node("b", lambda s: s)
    b.add_edge(START, "a")
    b.add_conditional_edges("a", lambda s: "b", ["b", END])
    b.add_edge("b", END)
    p = TransitionPolicy.from_yaml("states: [a, b]\ntransitions: {START: [a], a: [b], b: [END]}")
    report = p.check(b.compile())
    assert report.ok and not report.passed(strict=True)
    assert [(i.code, i.source, i.target) for i in report.issues] == [
        ("forbidden_route", "a", "__end__")
    ]


def test_guard_refuses_a_graph_whose_static_edges_break_the_policy() -> None:
    with pytest.raises(PolicyError, match="a -> extra is an edge of the graph"):
        guard(drift_graph(), TransitionPolicy.from_yaml(DRIFT_POLICY))


def test_guard_warns_instead_when_asked() -> None:
    with pytest.warns(UserWarning, match="forbidden_edge"):
        guard(drift_graph(), TransitionPolicy.from_yaml(DRIFT_POLICY), check_graph="warn")


def test_check_of_a_guarded_graph_sees_the_declared_structure() -> None:
    policy = TransitionPolicy.from_file(EXAMPLES / "refund_policy.yaml")
    import examples.refund_flow as flow

    before = policy.check(flow.build_graph())
    after = policy.check(guard(flow.build_graph(), policy).compile())
    assert before == after and before.passed(strict=True)


def test_mermaid_marks_forbidden_and_policy_only_edges() -> None:
    text = TransitionPolicy.from_yaml(DRIFT_POLICY).mermaid(drift_graph())
    assert text.startswith("flowchart TD")
    assert "-- forbidden -->" in text  # a -> extra
    assert ":::undeclared" in text and ":::missing" in text
    assert "stroke:#c92a2a" in text


runner = CliRunner()


def test_cli_policy_check_passes_on_the_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES.parent)
    res = runner.invoke(
        app,
        [
            "policy",
            "check",
            "examples/refund_policy.yaml",
            "--graph",
            "examples.refund_flow:build_graph",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "matches the policy" in res.output


def test_cli_policy_check_fails_with_exit_1_on_drift(tmp_path: Path) -> None:
    f = write(tmp_path, DRIFT_POLICY)
    res = runner.invoke(
        app,
        ["policy", "check", str(f), "--graph", "tests.test_guards_policy:drift_graph", "--json"],
    )
    assert res.exit_code == 1, res.output
    report = json.loads(res.output)
    assert report["ok"] is False and report["policy"] == "drift"


def test_cli_policy_check_fails_on_a_malformed_file(tmp_path: Path) -> None:
    f = write(tmp_path, GOOD + "colour: red\n")
    res = runner.invoke(app, ["policy", "check", str(f)])
    assert res.exit_code == 1
    assert "colour: unknown key" in res.output


def test_cli_policy_mermaid_prints_a_flowchart(tmp_path: Path) -> None:
    res = runner.invoke(app, ["policy", "mermaid", str(write(tmp_path, GOOD))])
    assert res.exit_code == 0 and res.output.startswith("flowchart TD")


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    text = GOOD.replace("a: [b, END]", "a: [b, c]") + (
        "nodes: {a: {max_visits: 0, tools: [pay]}, ghost: {}}\n"
        "on_violation: {action: route, fallback: zz}\n"
    )
    f = write(tmp_path, text)
    with pytest.raises(PolicyError) as info:
        TransitionPolicy.from_file(f)
    assert info.value.source == str(f)
    assert [path for path, _ in info.value.problems] == [
        "transitions.a[1]",  # a reference error ...
        "nodes.a.max_visits",  # ... a schema error, in file order
        "nodes.a.tools[0]",
        "nodes.ghost",
        "on_violation.fallback",
    ]
    message = str(info.value)
    assert f"invalid policy {f}:" in message
    assert "transitions.a[1]: 'c' is not a declared state" in message
    assert "nodes.a.max_visits: Input should be greater than 0 (got 0)" in message


def test_cli_policy_check_exits_2_when_the_file_cannot_be_read(tmp_path: Path) -> None:
    res = runner.invoke(app, ["policy", "check", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2
    assert "cannot read the file" in res.output
