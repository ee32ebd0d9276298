"""The guard blocks every kind of violation before the forbidden target runs.

Matrix: violation kind x action (raise / route / interrupt then resume) x sync/async.
``ran`` records which node bodies (and tool bodies) executed.
"""

from __future__ import annotations

import asyncio
import operator
import uuid
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send

from langgraph_external.guards import TransitionPolicy, TransitionViolation, guard

KINDS = [
    "illegal_edge",
    "unknown_goto",
    "unmapped_router",
    "send",
    "loop_limit",
    "tool_tier",
    "state_write",
]
RULES = {
    "illegal_edge": "illegal_transition",
    "unknown_goto": "unknown_target",
    "unmapped_router": "unmapped_route",
    "send": "illegal_transition",
    "loop_limit": "visit_limit",
    "tool_tier": "tool_tier",
    "state_write": "state_write",
}


class S(TypedDict):
    n: int
    log: Annotated[list[str], operator.add]
    secret: NotRequired[str]


def build(kind: str, ran: list[str]) -> tuple[StateGraph[Any], dict[str, Any]]:
    """A graph in which node ``a`` makes one decision of ``kind`` that the policy forbids."""

    @tool
    def refund(amount: int) -> str:
        """Pay money back."""
        ran.append("refund")
        return "refunded"

    def body(name: str, update: dict[str, Any] | None = None) -> Any:
        def fn(state: S) -> Any:
            ran.append(name)
            return {"log": [name], **(update or {})}

        return fn

    b: StateGraph[Any] = StateGraph(S)
    for name in ("ok", "forbidden", "fallback"):
        b.add_node(name, body(name))
        b.add_edge(name, END)
    transitions: dict[str, list[str]] = {
        "START": ["a"],
        "a": ["ok"],
        "ok": ["END"],
        "forbidden": ["END"],
        "fallback": ["END"],
    }
    nodes: dict[str, Any] = {}
    policy: dict[str, Any] = {"states": ["a", "ok", "forbidden", "fallback"]}

    if kind == "illegal_edge":
        b.add_node("a", body("a"))
        b.add_conditional_edges("a", lambda s: "forbidden", ["ok", "forbidden"])
    elif kind == "unknown_goto":

        def goto_nowhere(state: S) -> Command[Any]:
            ran.append("a")
            return Command(goto="nowhere", update={"log": ["a"]})

        b.add_node("a", goto_nowhere)
    elif kind == "unmapped_router":
        b.add_node("a", body("a"))
        b.add_conditional_edges("a", lambda s: "bogus", {"ok": "ok"})
    elif kind == "send":
        b.add_node("a", body("a"))
        b.add_conditional_edges("a", lambda s: [Send("forbidden", s)], ["ok"])
    elif kind == "loop_limit":

        def loop(state: S) -> dict[str, Any]:
            ran.append("a")
            return {"n": state["n"] + 1, "log": ["a"]}

        b.add_node("a", loop)
        b.add_conditional_edges("a", lambda s: "a" if s["n"] < 5 else "ok", ["a", "ok"])
        transitions["a"] = ["a", "ok"]
        nodes["a"] = {"max_visits": 2}
    elif kind == "tool_tier":

        def a(state: S) -> dict[str, Any]:
            ran.append("a")
            return {"log": [refund.invoke({"amount": 5})]}

        b.add_node("a", a)
        b.add_edge("a", "ok")
        policy["tools"] = {"refund": "remote_write"}
    elif kind == "state_write":
        b.add_node("a", body("a", {"n": 1, "secret": "leaked"}))
        b.add_edge("a", "ok")
        nodes["a"] = {"writes": ["n", "log"]}
    else:  # pragma: no cover
        raise AssertionError(kind)
    b.add_edge(START, "a")
    policy.update(transitions=transitions, nodes=nodes)
    return b, policy


def forbidden_ran(kind: str, ran: list[str]) -> bool:
    """Whether the blocked target executed."""
    if kind == "loop_limit":
        return ran.count("a") > 2
    if kind == "tool_tier":
        return "refund" in ran
    if kind == "state_write":  # the refused update never reaches the state (asserted apart)
        return False
    return "forbidden" in ran


def run(graph: Any, inp: Any, config: dict[str, Any], mode: str) -> Any:
    if mode == "sync":
        return graph.invoke(inp, config)
    return asyncio.run(graph.ainvoke(inp, config))


def compiled(kind: str, action: dict[str, Any], ran: list[str], outcomes: list[Any]) -> Any:
    builder, spec = build(kind, ran)
    spec["on_violation"] = action
    policy = TransitionPolicy.from_dict(spec)
    hook = lambda v, outcome: outcomes.append((v.rule, outcome))  # noqa: E731
    guard(builder, policy, on_violation=hook)
    return builder.compile(checkpointer=InMemorySaver())


def cfg() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


START_STATE = {"n": 0, "log": []}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_raise_blocks_before_the_target_runs(kind: str, mode: str) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = compiled(kind, {"action": "raise"}, ran, outcomes)
    with pytest.raises(TransitionViolation) as info:
        run(graph, START_STATE, cfg(), mode)
    assert info.value.rule == RULES[kind]
    assert info.value.policy_hash
    assert not forbidden_ran(kind, ran)
    assert "ok" not in ran and "fallback" not in ran
    assert outcomes == [(RULES[kind], "raised")]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_route_replaces_the_decision_with_the_fallback(kind: str, mode: str) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = compiled(kind, {"action": "route", "fallback": "fallback"}, ran, outcomes)
    config = cfg()
    out = run(graph, START_STATE, config, mode)
    assert not forbidden_ran(kind, ran)
    assert ran[-1] == "fallback" and ran.count("fallback") == 1
    assert "ok" not in ran  # the offending decision is replaced, not added to
    assert out["log"][-1] == "fallback"
    assert "secret" not in out  # a refused update is discarded as a whole
    assert outcomes == [(RULES[kind], "routed")]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_interrupt_then_reject_goes_to_the_fallback(kind: str, mode: str) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = compiled(kind, {"action": "interrupt", "fallback": "fallback"}, ran, outcomes)
    config = cfg()
    first = run(graph, START_STATE, config, mode)
    (pending,) = first["__interrupt__"]
    assert pending.value["type"] == "policy_violation"
    assert pending.value["rule"] == RULES[kind]
    assert not forbidden_ran(kind, ran) and "fallback" not in ran
    out = run(graph, Command(resume=False), config, mode)
    assert not forbidden_ran(kind, ran)
    assert ran[-1] == "fallback"
    assert "secret" not in out
    assert outcomes == [(RULES[kind], "interrupted"), (RULES[kind], "rejected")]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["illegal_edge", "send", "loop_limit", "tool_tier", "state_write"])
def test_interrupt_then_approve_lets_the_decision_through(kind: str, mode: str) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = compiled(kind, {"action": "interrupt"}, ran, outcomes)
    config = cfg()
    assert "__interrupt__" in run(graph, START_STATE, config, mode)
    assert not forbidden_ran(kind, ran)
    out = run(graph, Command(resume=True), config, mode)
    if kind == "loop_limit":  # every visit beyond the limit needs its own approval
        assert ran.count("a") == 3 and "__interrupt__" in out
        out = run(graph, Command(resume=True), config, mode)
        assert ran.count("a") == 4 and "__interrupt__" in out
    elif kind == "state_write":
        assert out["secret"] == "leaked"
    else:
        assert forbidden_ran(kind, ran)
    assert outcomes[:2] == [(RULES[kind], "interrupted"), (RULES[kind], "approved")]


def test_interrupt_rejected_without_fallback_raises() -> None:
    ran: list[str] = []
    graph = compiled("illegal_edge", {"action": "interrupt"}, ran, [])
    config = cfg()
    graph.invoke(START_STATE, config)
    with pytest.raises(TransitionViolation):
        graph.invoke(Command(resume=False), config)
    assert "forbidden" not in ran


def test_per_node_action_overrides_the_policy_action() -> None:
    ran: list[str] = []
    builder, spec = build("illegal_edge", ran)
    spec["on_violation"] = {"action": "raise"}
    spec["nodes"]["a"] = {"on_violation": {"action": "route", "fallback": "fallback"}}
    graph = guard(builder, TransitionPolicy.from_dict(spec)).compile()
    assert graph.invoke(START_STATE)["log"] == ["a", "fallback"]


def test_violation_carries_from_to_and_would_be_payload() -> None:
    ran: list[str] = []
    graph = compiled("state_write", {"action": "raise"}, ran, [])
    with pytest.raises(TransitionViolation) as info:
        graph.invoke(START_STATE, cfg())
    v = info.value
    assert (v.source, v.target, v.node) == ("a", "secret", "a")
    assert v.would_be == {"log": ["a"], "n": 1, "secret": "leaked"}


@pytest.mark.parametrize(
    ("kind", "log"),
    [
        # the decision is the router's or an edge's, made after the node's update was
        # written: the update stays, only the target is replaced
        ("illegal_edge", ["a", "fallback"]),
        ("unmapped_router", ["a", "fallback"]),
        ("send", ["a", "fallback"]),
        # the decision is part of the node's own output: the whole output is discarded
        ("unknown_goto", ["fallback"]),
        ("state_write", ["fallback"]),
        # the node was stopped while running: nothing it would have returned is kept
        ("tool_tier", ["fallback"]),
    ],
)
def test_route_keeps_the_update_only_when_the_decision_came_after_it(
    kind: str, log: list[str]
) -> None:
    ran: list[str] = []
    graph = compiled(kind, {"action": "route", "fallback": "fallback"}, ran, [])
    assert graph.invoke(START_STATE, cfg())["log"] == log
