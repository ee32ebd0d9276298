"""Decisions that arrive from outside the deciding node: a subgraph's ``Command(graph=PARENT)``
and a ``Command(goto=...)`` given as the input of a run."""

from __future__ import annotations

import asyncio
import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from langgraph_external.guards import TransitionPolicy, TransitionViolation, guard


class S(TypedDict):
    log: Annotated[list[str], operator.add]


def run(graph: Any, inp: Any, config: dict[str, Any], mode: str) -> Any:
    if mode == "sync":
        return graph.invoke(inp, config)
    return asyncio.run(graph.ainvoke(inp, config))


def cfg() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def leaves(b: StateGraph[Any], ran: list[str]) -> None:
    for name in ("ok", "forbidden", "fallback"):

        def body(state: S, name: str = name) -> dict[str, Any]:
            ran.append(name)
            return {"log": [name]}

        b.add_node(name, body)
        b.add_edge(name, END)


def policy(action: dict[str, Any], first: str) -> TransitionPolicy:
    return TransitionPolicy.from_dict(
        {
            "states": [first, "ok", "forbidden", "fallback"],
            "transitions": {
                "START": [first],
                first: ["ok"],
                "ok": ["END"],
                "forbidden": ["END"],
                "fallback": ["END"],
            },
            "on_violation": action,
        }
    )


def parent_with_subgraph(target: str, action: dict[str, Any], ran: list[str]) -> Any:
    """``sub`` is a compiled subgraph whose node sends ``Command(graph=PARENT, goto=target)``."""

    def inner(state: S) -> Command[Any]:
        ran.append("inner")
        return Command(graph=Command.PARENT, goto=target, update={"log": ["inner"]})

    sb: StateGraph[Any] = StateGraph(S)
    sb.add_node("inner", inner)
    sb.add_edge(START, "inner")
    b: StateGraph[Any] = StateGraph(S)
    b.add_node("sub", sb.compile(), destinations=("ok", "forbidden"))
    leaves(b, ran)
    b.add_edge(START, "sub")
    guard(b, policy(action, "sub"), check_graph="ignore")
    return b.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_parent_command_from_a_subgraph_is_checked_against_the_parent_policy(mode: str) -> None:
    ran: list[str] = []
    graph = parent_with_subgraph("forbidden", {"action": "raise"}, ran)
    with pytest.raises(TransitionViolation) as info:
        run(graph, {"log": []}, cfg(), mode)
    assert (info.value.source, info.value.target) == ("sub", "forbidden")
    assert "forbidden" not in ran


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_parent_command_route_goes_to_the_fallback(mode: str) -> None:
    ran: list[str] = []
    graph = parent_with_subgraph("forbidden", {"action": "route", "fallback": "fallback"}, ran)
    out = run(graph, {"log": []}, cfg(), mode)
    assert ran == ["inner", "fallback"]
    assert out["log"] == ["fallback"]  # the refused command's update is discarded with it


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_allowed_parent_command_is_applied_as_before(mode: str) -> None:
    ran: list[str] = []
    graph = parent_with_subgraph("ok", {"action": "raise"}, ran)
    out = run(graph, {"log": []}, cfg(), mode)
    assert ran == ["inner", "ok"] and out["log"] == ["inner", "ok"]


def input_graph(action: dict[str, Any], ran: list[str]) -> Any:
    b: StateGraph[Any] = StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_edge(START, "a")
    b.add_edge("a", "ok")
    leaves(b, ran)
    return guard(b, policy(action, "a")).compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_command_goto_given_as_input_is_checked_as_a_decision_of_start(mode: str) -> None:
    ran: list[str] = []
    graph = input_graph({"action": "raise"}, ran)
    config = cfg()
    run(graph, {"log": []}, config, mode)
    with pytest.raises(TransitionViolation) as info:
        run(graph, Command(goto="forbidden"), config, mode)
    assert (info.value.source, info.value.target) == ("__start__", "forbidden")
    assert "forbidden" not in ran
    # copies made with with_config keep the check
    with pytest.raises(TransitionViolation):
        run(graph.with_config(recursion_limit=5), Command(goto="forbidden"), config, mode)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_command_goto_input_routes_to_the_fallback(mode: str) -> None:
    ran: list[str] = []
    graph = input_graph({"action": "route", "fallback": "fallback"}, ran)
    config = cfg()
    run(graph, {"log": []}, config, mode)
    out = run(graph, Command(goto="forbidden"), config, mode)
    assert "forbidden" not in ran and ran[-1] == "fallback"
    assert out["log"][-1] == "fallback"
