#!/usr/bin/env python
"""Replay: what keeping exact answers costs the recording, and what a replay costs.

* **record**: the audit handler's rendering of an ``llm_end`` event (an answer with two
  tool calls and usage) with and without its ``exact`` (serialized) answer, per event;
* **replay**: a ReAct agent (scripted model, two tools, three model calls) recorded by
  ``External`` on embedded PostgreSQL, then replayed with ``mode="recorded"``: median
  wall time of the original ``invoke`` vs the whole ``replay()`` (reads the record,
  re-runs the graph into a new thread, flushes, compares path and state).

    .venv/bin/python benchmarks/bench_replay.py [--n 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_external import External
from langgraph_external.record.events import Event
from langgraph_external.replay import replay
from langgraph_external.sources.callback_render import exact, render_llm_end


@tool
def weather(city: str) -> str:
    """Weather."""
    return f"sunny in {city}"


def answers() -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Oslo"}}]),
        AIMessage("", tool_calls=[{"id": "c2", "name": "weather", "args": {"city": "Rome"}}]),
        AIMessage("Sunny in both."),
    ]


def agent(checkpointer: Any) -> Any:
    model = FakeMessagesListChatModel(responses=answers())
    g = StateGraph(MessagesState)
    g.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    g.add_node("tools", ToolNode([weather]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def per_event_us(fn: Any, n: int = 2000) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="threads recorded and replayed")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    msg = AIMessage(
        "",
        tool_calls=[
            {"id": "c1", "name": "weather", "args": {"city": "Oslo"}},
            {"id": "c2", "name": "weather", "args": {"city": "Rome"}},
        ],
        usage_metadata={"input_tokens": 120, "output_tokens": 30, "total_tokens": 150},
    )
    event = Event.new(
        "llm_end", "t", payload={"response": LLMResult(generations=[[ChatGeneration(message=msg)]])}
    )
    render = per_event_us(lambda: render_llm_end(event))
    dump = per_event_us(lambda: exact(msg))
    print(
        f"record: llm_end rendering {render:.1f} us/event, of which the exact answer "
        f"{dump:.1f} us ({dump / render:.0%})"
    )

    with tempfile.TemporaryDirectory() as ws, External(workspace=ws) as ext:
        original, replayed = [], []
        for i in range(args.n):
            start = time.perf_counter()
            agent(ext.checkpointer).invoke(
                {"messages": [HumanMessage("weather?")]}, ext.config(f"t-{i}")
            )
            original.append(time.perf_counter() - start)
        ext.flush()
        for i in range(args.n):
            start = time.perf_counter()
            report = replay(agent(ext.checkpointer), f"t-{i}", ext=ext, into=f"r-{i}")
            replayed.append(time.perf_counter() - start)
            assert not report.diverged and report.model_calls == 0, report.divergences
        o, r = statistics.median(original), statistics.median(replayed)
        print(
            f"replay: original invoke {o * 1000:.1f} ms, recorded replay {r * 1000:.1f} ms "
            f"(median of {args.n}; ratio {r / o:.2f})"
        )


if __name__ == "__main__":
    main()
