"""Small guarded apps the tests run in fresh processes (``python -m tests.guard_apps ...``).

``visits DB THREAD start|resume sync|async``: a loop whose ``work`` node may run 3 times
per run; a ``gate`` node pauses the run once (an ordinary ``interrupt``) after two visits.
The second process resumes it from the SQLite checkpoints and prints what happened.

``stderr raise|route``: a ReAct agent whose model calls a forbidden tool, run with
``logging.basicConfig()`` as an app would; the test reads this process's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_external.guards import TransitionPolicy, TransitionViolation, guard

VISITS_POLICY = {
    "states": ["work", "gate"],
    "transitions": {"START": ["work"], "work": ["gate"], "gate": ["work", "END"]},
    "nodes": {"work": {"max_visits": 3}},
}


class Loop(TypedDict):
    n: int


def visits_graph() -> StateGraph[Any]:
    def work(state: Loop) -> dict[str, int]:
        return {"n": state["n"] + 1}

    def gate(state: Loop) -> dict[str, int]:
        if state["n"] == 2:
            interrupt("continue?")  # a human pauses the run after two visits of work
        return {}

    b: StateGraph[Any] = StateGraph(Loop)
    b.add_node("work", work)
    b.add_node("gate", gate)
    b.add_edge(START, "work")
    b.add_edge("work", "gate")
    b.add_conditional_edges("gate", lambda s: "work" if s["n"] < 10 else END, ["work", END])
    return guard(b, TransitionPolicy.from_dict(VISITS_POLICY))


def _outcome(graph: Any, config: dict[str, Any], run: Any) -> dict[str, Any]:
    try:
        out = run()
    except TransitionViolation as v:
        result: dict[str, Any] = {"violation": v.rule, "message": str(v)}
    else:
        result = {"interrupted": "__interrupt__" in out}
    result["n"] = graph.get_state(config).values["n"]
    return result


def visits(db: str, thread: str, phase: str, mode: str) -> dict[str, Any]:
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    inp: Any = {"n": 0} if phase == "start" else Command(resume="go on")
    if mode == "sync":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(db) as saver:
            graph = visits_graph().compile(checkpointer=saver)
            return _outcome(graph, config, lambda: graph.invoke(inp, config))

    async def main() -> dict[str, Any]:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(db) as saver:
            graph = visits_graph().compile(checkpointer=saver)
            try:
                out = await graph.ainvoke(inp, config)
            except TransitionViolation as v:
                result: dict[str, Any] = {"violation": v.rule, "message": str(v)}
            else:
                result = {"interrupted": "__interrupt__" in out}
            result["n"] = (await graph.aget_state(config)).values["n"]
            return result

    return asyncio.run(main())


def stderr(action: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.guard_agents import POLICY, QUESTION, react_agent

    logging.basicConfig()  # WARNING and above to stderr, as most apps do
    spec = {**POLICY, "on_violation": {"action": action, "fallback": "escalate"}}
    graph = guard(react_agent([]), TransitionPolicy.from_dict(spec)).compile(
        checkpointer=InMemorySaver()
    )
    with contextlib.suppress(TransitionViolation):
        graph.invoke(QUESTION, {"configurable": {"thread_id": "t"}})


if __name__ == "__main__":
    if sys.argv[1] == "visits":
        print(json.dumps(visits(*sys.argv[2:6])))
    elif sys.argv[1] == "stderr":
        stderr(sys.argv[2])
