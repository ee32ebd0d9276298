"""Legal runs behave exactly as without the guard: same outputs, same checkpoints."""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from langgraph_external.guards import TransitionPolicy, guard


class S(TypedDict):
    topic: str
    items: Annotated[list[str], operator.add]
    approved: bool


class Sub(TypedDict):
    items: Annotated[list[str], operator.add]


def subgraph() -> Any:
    sb: StateGraph[Any] = StateGraph(Sub)
    sb.add_node("inner", lambda s: {"items": ["inner"]})
    sb.add_edge(START, "inner")
    return sb.compile()


def builder() -> StateGraph[Any]:
    """Send fan-out, parallel branches with a join, a subgraph, an interrupt, a Command."""
    b: StateGraph[Any] = StateGraph(S)
    b.add_node("plan", lambda s: {"items": ["plan"]})
    b.add_node("work", lambda s: {"items": [f"work:{s['topic']}"]})
    b.add_node("left", lambda s: {"items": ["left"]})
    b.add_node("right", lambda s: {"items": ["right"]})
    b.add_node("join", lambda s: {"items": ["join"]})
    b.add_node("sub", subgraph())

    def review(state: S) -> Command[Any]:
        ok = interrupt({"question": "approve?"})
        return Command(goto="sub" if ok else END, update={"approved": bool(ok)})

    b.add_node("review", review, destinations=("sub", END))
    b.add_edge(START, "plan")
    b.add_conditional_edges(
        "plan", lambda s: [Send("work", {"topic": t}) for t in ("x", "y", "z")], ["work"]
    )
    b.add_edge("work", "left")
    b.add_edge("work", "right")
    b.add_edge(["left", "right"], "join")
    b.add_conditional_edges("join", lambda s: "review", {"review": "review", "stop": END})
    b.add_edge("sub", END)
    return b


POLICY = TransitionPolicy.from_dict(
    {
        "states": ["plan", "work", "left", "right", "join", "review", "sub", "rescue"],
        "transitions": {
            "START": ["plan"],
            "plan": ["work"],
            "work": ["left", "right"],
            "left": ["join"],
            "right": ["join"],
            "join": ["review", "END"],
            "review": ["sub", "END"],
            "sub": ["END"],
            "rescue": ["END"],
        },
        "nodes": {"work": {"max_visits": 3, "writes": ["items"]}},
        "on_violation": {"action": "route", "fallback": "rescue"},
    }
)


def history(graph: Any, config: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            snap.values,
            snap.next,
            snap.metadata.get("step") if snap.metadata else None,
            snap.metadata.get("source") if snap.metadata else None,
            sorted(snap.config["configurable"].keys()),
        )
        for snap in graph.get_state_history(config)
    ]


def same(out: dict[str, Any]) -> dict[str, Any]:
    """Interrupt ids derive from time-based checkpoint ids: differ between any two runs."""
    return {k: [i.value for i in v] if k == "__interrupt__" else v for k, v in out.items()}


def run_both(plain: Any, guarded: Any, inputs: list[Any]) -> None:
    thread = str(uuid.uuid4())  # same id on both sides: interrupt ids derive from it
    thread_a = {"configurable": {"thread_id": thread}}
    thread_b = {"configurable": {"thread_id": thread}}
    for inp in inputs:
        out_a = plain.invoke(inp, thread_a)
        out_b = guarded.invoke(inp, thread_b)
        assert same(out_b) == same(out_a)
    assert history(guarded, thread_b) == history(plain, thread_a)


@pytest.mark.parametrize("resume", [True, False])
def test_guarded_graph_matches_the_plain_graph(resume: bool) -> None:
    b_plain = builder()
    b_plain.add_node("rescue", lambda s: {"items": ["rescue"]})
    b_guard = builder()
    b_guard.add_node("rescue", lambda s: {"items": ["rescue"]})
    events: list[Any] = []
    guard(b_guard, POLICY, on_violation=lambda v, o: events.append((v, o)))
    plain = b_plain.compile(checkpointer=InMemorySaver())
    guarded = b_guard.compile(checkpointer=InMemorySaver())
    run_both(plain, guarded, [{"topic": "t", "items": []}, Command(resume=resume)])
    assert events == []


async def test_guarded_graph_matches_the_plain_graph_async() -> None:
    b_plain = builder()
    b_plain.add_node("rescue", lambda s: {"items": ["rescue"]})
    b_guard = builder()
    b_guard.add_node("rescue", lambda s: {"items": ["rescue"]})
    guard(b_guard, POLICY)
    plain = b_plain.compile(checkpointer=InMemorySaver())
    guarded = b_guard.compile(checkpointer=InMemorySaver())
    ta: Any = {"configurable": {"thread_id": "a"}}
    tb: Any = {"configurable": {"thread_id": "a"}}
    inputs: list[Any] = [{"topic": "t", "items": []}, Command(resume=True)]
    for inp in inputs:
        assert same(await guarded.ainvoke(inp, tb)) == same(await plain.ainvoke(inp, ta))
    final = await guarded.aget_state(tb)
    assert final.values["items"][-1] == "inner"


def test_send_fan_out_counts_each_task_as_a_visit() -> None:
    b = builder()
    b.add_node("rescue", lambda s: {"items": ["rescue"]})
    strict = POLICY.model_copy(update={})
    data = strict.model_dump()
    data["nodes"]["work"]["max_visits"] = 2
    guard(b, TransitionPolicy.from_dict(data))
    out = b.compile(checkpointer=InMemorySaver()).invoke(
        {"topic": "t", "items": []}, {"configurable": {"thread_id": "t"}}
    )
    # the third Send task is rerouted; the two others ran
    assert sorted(i for i in out["items"] if i.startswith("work")) == ["work:x", "work:y"]
    assert "rescue" in out["items"]


def test_subgraph_stays_visible_to_langgraph() -> None:
    b = builder()
    b.add_node("rescue", lambda s: {"items": ["rescue"]})
    graph = guard(b, POLICY).compile(checkpointer=InMemorySaver())
    assert [name for name, _ in graph.get_subgraphs()] == ["sub"]
