"""The guard inside real tool-calling agents: its actions do what their names say.

Matrix: tool node (prebuilt ``ToolNode`` with and without ``handle_tool_errors``, a
hand-written tool node declared with ``tool_nodes=``, one that is not declared and
swallows tool errors, LangChain's ``create_agent``) x action (raise / route / interrupt)
x sync/async. The model asks for an allowed ``lookup_order`` and a forbidden
``remote_write`` in one message; ``ran`` records which bodies executed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_external.guards import TransitionPolicy, TransitionViolation, guard
from tests.guard_agents import (
    POLICY,
    QUESTION,
    make_tools,
    react_agent,
    scripted_model,
    tool_answer,
    unanswered_tool_calls,
)

TOOL_NODES = ["toolnode_handle_errors", "toolnode_raise_errors", "hand_written"]
MODES = ["sync", "async"]


def run(graph: Any, inp: Any, config: dict[str, Any], mode: str) -> Any:
    if mode == "sync":
        return graph.invoke(inp, config)
    return asyncio.run(graph.ainvoke(inp, config))


def policy(action: dict[str, Any]) -> TransitionPolicy:
    return TransitionPolicy.from_dict({**POLICY, "on_violation": action})


def agent(
    tool_node: str, action: dict[str, Any], ran: list[str], outcomes: list[Any], **kw: Any
) -> Any:
    builder = react_agent(ran, tool_node)
    if tool_node.startswith("hand_written") and tool_node != "hand_written_swallowing":
        kw.setdefault("tool_nodes", ["tools"])
    hook = lambda v, outcome: outcomes.append((v.rule, v.target, outcome))  # noqa: E731
    guard(builder, policy(action), on_violation=hook, **kw)
    return builder.compile(checkpointer=InMemorySaver())


def cfg() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


ROUTE = {"action": "route", "fallback": "escalate"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool_node", TOOL_NODES)
def test_raise_stops_the_agent_and_the_forbidden_tool_never_runs(tool_node: str, mode: str) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = agent(tool_node, {"action": "raise"}, ran, outcomes)
    config = cfg()
    with pytest.raises(TransitionViolation) as info:
        run(graph, QUESTION, config, mode)
    v = info.value
    assert (v.rule, v.node, v.target) == ("tool_tier", "tools", "remote_write")
    assert v.where["tool_call_id"] == "call_write"
    assert "remote_write" not in ran
    assert "lookup_order" not in ran  # decided before the tool node ran at all
    assert ran == ["agent"]
    assert outcomes == [("tool_tier", "remote_write", "raised")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool_node", TOOL_NODES)
def test_route_answers_the_refused_call_keeps_allowed_results_and_ends_at_fallback(
    tool_node: str, mode: str
) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = agent(tool_node, ROUTE, ran, outcomes, refusal="refused: {tool} is {tier}")
    out = run(graph, QUESTION, cfg(), mode)
    messages = out["messages"]
    assert "remote_write" not in ran and ran.count("lookup_order") == 1
    assert tool_answer(messages, "call_lookup").content == "order A-1: shipped"
    refusal = tool_answer(messages, "call_write")
    assert refusal.content == "refused: remote_write is remote_write"
    assert refusal.status == "error" and refusal.name == "remote_write"
    assert unanswered_tool_calls(messages) == []  # valid for any chat model API
    assert ran == ["agent", "lookup_order", "escalate"]  # the agent is not asked again
    assert messages[-1].content == "A human will look at this order."
    assert outcomes == [("tool_tier", "remote_write", "routed")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool_node", TOOL_NODES)
def test_interrupt_shows_the_pending_violation_then_reject_routes(
    tool_node: str, mode: str
) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = agent(tool_node, {"action": "interrupt", "fallback": "escalate"}, ran, outcomes)
    config = cfg()
    first = run(graph, QUESTION, config, mode)
    (pending,) = first["__interrupt__"]
    value = pending.value
    assert value["type"] == "policy_violation" and value["rule"] == "tool_tier"
    assert value["to"] == "remote_write"
    assert value["would_be"]["input"] == {"order_id": "A-1"}
    assert value["where"]["node"] == "tools" and value["where"]["tool_call_id"] == "call_write"
    assert isinstance(value["where"]["step"], int)
    assert value["policy_rule"]["path"] == "default_tier"
    assert value["policy_rule"]["value"] == "read_only"
    assert value["policy_rule"]["tool_tier"] == {
        "path": "tools.remote_write",
        "value": "remote_write",
    }
    assert ran == ["agent"]  # nothing ran while the human decides
    out = run(graph, Command(resume=False), config, mode)
    assert "remote_write" not in ran and ran[-1] == "escalate"
    assert unanswered_tool_calls(out["messages"]) == []
    assert tool_answer(out["messages"], "call_lookup").content == "order A-1: shipped"
    assert outcomes == [
        ("tool_tier", "remote_write", "interrupted"),
        ("tool_tier", "remote_write", "rejected"),
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool_node", TOOL_NODES)
def test_interrupt_then_approve_runs_the_tool(tool_node: str, mode: str) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = agent(tool_node, {"action": "interrupt"}, ran, outcomes)
    config = cfg()
    assert "__interrupt__" in run(graph, QUESTION, config, mode)
    out = run(graph, Command(resume=True), config, mode)
    assert ran == ["agent", "lookup_order", "remote_write", "agent"]
    assert tool_answer(out["messages"], "call_write").content == "order A-1: changed"
    assert out["messages"][-1].content == "done"
    assert outcomes == [
        ("tool_tier", "remote_write", "interrupted"),
        ("tool_tier", "remote_write", "approved"),
    ]


# -- a tool node the guard was not told about: the tool callback is the backstop --------
@pytest.mark.parametrize("mode", MODES)
def test_raise_stops_an_undeclared_node_that_swallows_tool_errors(mode: str) -> None:
    ran: list[str] = []
    graph = agent("hand_written_swallowing", {"action": "raise"}, ran, [])
    with pytest.raises(TransitionViolation) as info:
        run(graph, QUESTION, cfg(), mode)
    assert info.value.target == "remote_write"
    assert "remote_write" not in ran and "escalate" not in ran
    assert ran == ["agent", "lookup_order"]  # its own loop ran the allowed tool first


@pytest.mark.parametrize("mode", MODES)
def test_route_from_an_undeclared_node_answers_every_call_and_ends_at_fallback(
    mode: str,
) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = agent("hand_written_swallowing", ROUTE, ran, outcomes)
    out = run(graph, QUESTION, cfg(), mode)
    messages = out["messages"]
    assert "remote_write" not in ran and ran[-1] == "escalate"
    assert unanswered_tool_calls(messages) == []
    assert "refused" in str(tool_answer(messages, "call_write").content)
    # the node was stopped midway, so its update (the lookup result) is not kept
    assert "discarded" in str(tool_answer(messages, "call_lookup").content)
    assert outcomes == [("tool_tier", "remote_write", "routed")]


@pytest.mark.parametrize("mode", MODES)
def test_interrupt_from_an_undeclared_node_then_reject_routes(mode: str) -> None:
    ran: list[str] = []
    outcomes: list[Any] = []
    graph = agent(
        "hand_written_swallowing", {"action": "interrupt", "fallback": "escalate"}, ran, outcomes
    )
    config = cfg()
    (pending,) = run(graph, QUESTION, config, mode)["__interrupt__"]
    assert pending.value["where"]["tool_call_id"] == "call_write"
    out = run(graph, Command(resume=False), config, mode)
    assert "remote_write" not in ran and ran[-1] == "escalate"
    assert unanswered_tool_calls(out["messages"]) == []
    assert [o[2] for o in outcomes] == ["interrupted", "rejected"]


@pytest.mark.parametrize("mode", MODES)
def test_other_callback_handlers_never_see_a_refused_tool_start(mode: str) -> None:
    """The audit handler must not record a tool call that never ran."""

    class ToolStarts(BaseCallbackHandler):
        run_inline = True

        def __init__(self) -> None:
            self.started: list[str] = []

        def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kw: Any) -> None:
            self.started.append(serialized["name"])

    starts = ToolStarts()
    config: dict[str, Any] = {**cfg(), "callbacks": [starts]}
    run(agent("hand_written_swallowing", ROUTE, [], []), QUESTION, config, mode)
    assert starts.started == ["lookup_order"]


# -- LangChain's create_agent: one tool task per call (Send) -----------------------------
def create_agent_graph(ran: list[str], action: dict[str, Any]) -> Any:
    agents = pytest.importorskip("langchain.agents")
    compiled = agents.create_agent(scripted_model(), tools=make_tools(ran))
    builder = compiled.builder

    def escalate(state: dict[str, Any]) -> dict[str, Any]:
        ran.append("escalate")
        return {"messages": [AIMessage("A human will look at this order.")]}

    builder.add_node("escalate", escalate)
    builder.add_edge("escalate", "__end__")
    spec = {
        **POLICY,
        "states": ["model", "tools", "escalate"],
        "transitions": {
            "START": ["model"],
            "model": ["tools", "END"],
            "tools": ["model", "END"],
            "escalate": ["END"],
        },
        "on_violation": action,
    }
    guard(builder, TransitionPolicy.from_dict(spec), check_graph="warn")
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("mode", MODES)
def test_create_agent_raise_stops_before_the_forbidden_tool_runs(mode: str) -> None:
    ran: list[str] = []
    graph = create_agent_graph(ran, {"action": "raise"})
    with pytest.raises(TransitionViolation):
        run(graph, QUESTION, cfg(), mode)
    assert "remote_write" not in ran


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("mode", MODES)
def test_create_agent_route_answers_the_refused_call_and_escalates(mode: str) -> None:
    ran: list[str] = []
    graph = create_agent_graph(ran, ROUTE)
    out = run(graph, QUESTION, cfg(), mode)
    messages = out["messages"]
    assert "remote_write" not in ran and "escalate" in ran
    assert unanswered_tool_calls(messages) == []
    assert tool_answer(messages, "call_lookup").content == "order A-1: shipped"
    assert "refused" in str(tool_answer(messages, "call_write").content).lower()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("mode", MODES)
def test_create_agent_interrupt_then_reject_escalates(mode: str) -> None:
    ran: list[str] = []
    graph = create_agent_graph(ran, {"action": "interrupt", "fallback": "escalate"})
    config = cfg()
    (pending,) = run(graph, QUESTION, config, mode)["__interrupt__"]
    assert pending.value["to"] == "remote_write"
    out = run(graph, Command(resume=False), config, mode)
    assert "remote_write" not in ran and "escalate" in ran
    assert unanswered_tool_calls(out["messages"]) == []


# -- noise --------------------------------------------------------------------------------
@pytest.mark.parametrize("action", [{"action": "raise"}, ROUTE])
def test_one_warning_record_per_violation_and_nothing_from_langchain(
    action: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    graph = agent("toolnode_handle_errors", action, [], [])
    caplog.set_level(logging.DEBUG)
    with contextlib.suppress(TransitionViolation):
        graph.invoke(QUESTION, cfg())
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.name, r.levelname) for r in records] == [("langgraph_external.guards", "WARNING")]
    payload = records[0].lgx_policy_violation  # type: ignore[attr-defined]
    assert payload["rule"] == "tool_tier" and payload["to"] == "remote_write"
    assert not [r for r in caplog.records if "callback" in r.getMessage()]


@pytest.mark.parametrize("mode", MODES)
def test_route_gives_the_same_state_on_every_repeat(mode: str) -> None:
    """ToolNode runs tool calls on worker threads (sync) or as concurrent tasks (async)."""
    seen = set()
    for _ in range(25):
        ran: list[str] = []
        out = run(agent("toolnode_handle_errors", ROUTE, ran, []), QUESTION, cfg(), mode)
        seen.add(
            (
                tuple(ran),
                tuple((type(m).__name__, str(m.content)) for m in out["messages"]),
            )
        )
    assert len(seen) == 1
