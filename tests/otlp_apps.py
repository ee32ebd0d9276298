"""The apps the OTLP export is tested on (against a real Phoenix and the stand-in receiver).

* ``trip``: :func:`tests.langfuse_app.build_app` — a ReAct agent with two tools, a ``Send``
  fan-out and a subgraph whose node pauses for a human (``interrupt``), resumable from
  another process;
* ``guarded``: a ReAct agent whose model asks for a tool the transition policy forbids
  (``route``: the refused call is answered, the run goes to ``escalate``) — a policy
  violation;
* ``memory``: a node that searches LangGraph's long-term memory (an ``InMemoryStore`` with
  a deterministic embedding, so hits have real scores) and a LangChain retriever, then
  calls the model, which calls a tool that fails.

Run as a script it plays one part against the export configured in the environment
(``PHOENIX_COLLECTOR_ENDPOINT``, ``PHOENIX_PROJECT_NAME``):
``python -m tests.otlp_apps DSN WORKSPACE THREAD trip-first|trip-resume``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
"""A made-up OpenAI key the memory app's user pastes: the record (and so every export)
holds ``[REDACTED:openai_key]`` instead."""

MEMORY_USAGE = (42, 7)


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic bag-of-words embedding (64 dims): shared words, real similarity."""
    out = []
    for text in texts:
        v = [0.0] * 64
        for word in text.lower().replace("?", " ").split():
            v[hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / norm for x in v])
    return out


def memory_store() -> InMemoryStore:
    """Long-term memory with two facts about user-7."""
    store = InMemoryStore(index={"dims": 64, "embed": embed, "fields": ["text"]})
    store.put(("prefs", "user-7"), "seat", {"text": "user prefers a window seat"})
    store.put(("prefs", "user-7"), "meal", {"text": "user eats vegetarian meals"})
    return store


class Shelf(BaseRetriever):
    """A retriever with fixed documents and scores."""

    def _get_relevant_documents(self, query: str, **kwargs: Any) -> list[Document]:
        return [
            Document("refunds take 5 days", id="doc-1", metadata={"score": 0.91}),
            Document("shipping is free", id="doc-2", metadata={"score": 0.42}),
        ]


@tool
def book_seat(seat: str) -> str:
    """Book a seat (the booking system is down)."""
    raise RuntimeError(f"booking system down, seat {seat} not booked")


def memory_app(checkpointer: Any, store: BaseStore) -> Any:
    """recall (memory search + retriever) → agent ⇄ tools (a failing tool) → END."""
    inp, out = MEMORY_USAGE
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[{"id": "call-seat", "name": "book_seat", "args": {"seat": "12A"}}],
                usage_metadata={  # type: ignore[arg-type]
                    "input_tokens": inp,
                    "output_tokens": out,
                    "total_tokens": inp + out,
                },
            ),
            AIMessage("Sorry, booking is down; refunds take 5 days."),
        ]
    )

    def recall(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        hits = store.search(("prefs", "user-7"), query="which seat does the user prefer", limit=2)
        docs = Shelf().invoke("refund time")
        note = f"memory: {hits[0].value['text']}; docs: {docs[0].page_content}"
        return {"messages": [("system", note)]}

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    b = StateGraph(MessagesState)
    b.add_node("recall", recall)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([book_seat], handle_tool_errors=True))
    b.add_edge(START, "recall")
    b.add_edge("recall", "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=checkpointer, store=store)


def guarded_app(checkpointer: Any) -> Any:
    """A ReAct agent whose second tool call is forbidden by the policy (``route``)."""
    from langgraph_external.guards import TransitionPolicy, guard
    from tests.guard_agents import POLICY, react_agent

    spec = {**POLICY, "on_violation": {"action": "route", "fallback": "escalate"}}
    return guard(react_agent([]), TransitionPolicy.from_dict(spec)).compile(
        checkpointer=checkpointer
    )


def main(argv: list[str]) -> int:
    from langgraph_external import External
    from langgraph_external.exporters import OtlpExport
    from tests.langfuse_app import build_app

    dsn, workspace, thread, part = argv
    with External(dsn=dsn, workspace=workspace, export=OtlpExport(preset="phoenix")) as ext:
        app = build_app(ext.checkpointer)
        config = ext.config(thread, user_id="user-7", tags=["phoenix-test"])
        if part == "trip-first":
            out = app.invoke({"messages": [("user", "weather in Oslo?")]}, config)
        else:
            out = app.invoke(Command(resume="approved"), config)
        flushed = ext.flush(60)
    print(json.dumps({"interrupted": "__interrupt__" in out, "flushed": flushed}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
