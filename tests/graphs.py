"""Graphs the record is tested on: a ReAct agent, a Send fan-out into a subgraph.

Shared by the attribution tests and the crash harness (which runs them in a child
process), so both exercise the same shapes.
"""

from __future__ import annotations

import operator
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Send, interrupt
from typing_extensions import TypedDict

REACT_PATH = ["__start__", "agent", "tools", "agent", "tools", "agent"]
"""The node of each root checkpoint of one ReAct run, steps 0..5."""


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    return f"noon in {city}"


def react_agent(checkpointer: Any) -> Any:
    """An agent that calls two tools in two rounds, then answers."""
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[{"id": "call-1", "name": "get_weather", "args": {"city": "Oslo"}}],
            ),
            AIMessage(
                "", tool_calls=[{"id": "call-2", "name": "get_time", "args": {"city": "Oslo"}}]
            ),
            AIMessage("Sunny at noon in Oslo."),
        ]
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([get_weather, get_time]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


class Fan(TypedDict):
    items: Annotated[list[int], operator.add]
    total: int


def _fanout(last: str, node: Any, checkpointer: Any) -> Any:
    """split → three Send tasks to ``work`` → ``last`` (``node``) → END."""
    g = StateGraph(Fan)
    g.add_node("split", lambda s: {"total": 0})
    g.add_node("work", lambda s: {"items": [s["items"][0] * 10]})
    g.add_node(last, node)
    g.add_edge(START, "split")
    g.add_conditional_edges(
        "split", lambda s: [Send("work", {"items": [i], "total": 0}) for i in (1, 2, 3)], ["work"]
    )
    g.add_edge("work", last)
    g.add_edge(last, END)
    return g.compile(checkpointer=checkpointer)


def fanout_with_subgraph(checkpointer: Any) -> Any:
    """split → three Send tasks to ``work`` → a ``summarize`` subgraph."""
    sub = StateGraph(Fan)
    sub.add_node("double", lambda s: {"total": sum(s["items"]) * 2})
    sub.add_edge(START, "double")
    sub.add_edge("double", END)
    return _fanout("summarize", sub.compile(), checkpointer)


def fanout_gather(checkpointer: Any) -> Any:
    """split → three Send tasks to ``work`` → ``gather``: a run adds three items and its
    total is 60 however long the thread (the subgraph of :func:`fanout_with_subgraph`
    returns the items it was given, which doubles them in a thread run many times)."""
    return _fanout("gather", lambda s: {"total": sum(s["items"][-3:])}, checkpointer)


def fanout_with_interrupt(checkpointer: Any) -> Any:
    """split → three Send tasks to ``work`` → a ``review`` subgraph that interrupts.

    The thread has subgraph checkpoints (namespace ``review:<task id>``), ``Send``
    writes and an interrupt write; ``Command(resume=...)`` finishes it.
    """

    def ask(s: Fan) -> dict[str, Any]:
        answer = interrupt({"question": "approve?", "items": sorted(s["items"])})
        return {"total": sum(s["items"]) * (2 if answer == "yes" else 1)}

    sub = StateGraph(Fan)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")
    sub.add_edge("ask", END)
    return _fanout("review", sub.compile(), checkpointer)


@contextmanager
def cpu_burner() -> Iterator[None]:
    """Keep both cores busy: another process spinning, and a thread fighting for the GIL."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        proc.kill()
        proc.wait()


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def blob_chat(checkpointer: Any) -> Any:
    """``a → b`` on a message list; ``b``'s 20 kB reply becomes a blob file in the mirror."""
    g = StateGraph(Chat)
    g.add_node("a", lambda s: {"messages": [AIMessage(f"a saw {len(s['messages'])}")]})
    g.add_node("b", lambda s: {"messages": [AIMessage("b " + "y" * 20_000)]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=checkpointer)


def state_history(graph: Any, thread: str) -> list[Any]:
    """Every checkpoint of ``thread``: id, values, next and metadata (newest first)."""
    conf = {"configurable": {"thread_id": thread}}
    return [
        (s.config["configurable"]["checkpoint_id"], s.values, s.next, s.metadata)
        for s in graph.get_state_history(conf)
    ]


class FailingRedactor:
    """A redactor of the app's with a bug: it raises on any value holding "boom". A class
    of a plain module, so it is pickled by reference and runs in the sealing helper."""

    def __call__(self, value: Any) -> tuple[Any, int]:
        if "boom" in repr(value):
            raise RuntimeError("redactor bug")
        return value, 0


def mark_recorded(event: Any) -> Any:
    """An app's own event processor (picklable: a helper process can run it): marks
    every payload it sees with ``"marked": True``."""
    if isinstance(event.payload, dict):
        return event.replace(payload={**event.payload, "marked": True})
    return event
