"""The app the Langfuse export is tested on: a ReAct agent with two tools, a Send fan-out,
and a subgraph that pauses for a human (``interrupt``), resumable from another process.

Run as a script it plays one part of the story against ``LANGFUSE_*`` from the
environment: ``python -m tests.langfuse_app DSN WORKSPACE THREAD first|resume``.
"""

from __future__ import annotations

import json
import operator
import sys
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Send, interrupt

from langgraph_external.exporters import LangfuseExport
from tests.graphs import get_time, get_weather

USAGE = [(10, 5), (20, 6), (30, 7)]
"""(input, output) tokens the scripted model reports on each of its three answers."""


class AppState(MessagesState):
    items: Annotated[list[int], operator.add]
    verdict: str


def _usage(i: int) -> dict[str, int]:
    inp, out = USAGE[i]
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def build_app(checkpointer: Any) -> Any:
    """agent ⇄ tools (get_weather, then get_time) → fan → 3 × work (Send) → approval
    (a subgraph whose ``review`` node interrupts) → END."""
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[{"id": "call-1", "name": "get_weather", "args": {"city": "Oslo"}}],
                usage_metadata=_usage(0),  # type: ignore[arg-type]
            ),
            AIMessage(
                "",
                tool_calls=[{"id": "call-2", "name": "get_time", "args": {"city": "Oslo"}}],
                usage_metadata=_usage(1),  # type: ignore[arg-type]
            ),
            AIMessage("Sunny at noon in Oslo.", usage_metadata=_usage(2)),  # type: ignore[arg-type]
        ]
    )

    def agent(state: AppState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def review(state: AppState) -> dict[str, Any]:
        return {"verdict": interrupt({"approve": len(state["items"])})}

    sub = StateGraph(AppState)
    sub.add_node("review", review)
    sub.add_edge(START, "review")
    sub.add_edge("review", END)

    g = StateGraph(AppState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([get_weather, get_time]))
    g.add_node("fan", lambda s: {})
    g.add_node("work", lambda s: {"items": [s["items"][0] * 10]})
    g.add_node("approval", sub.compile())
    g.add_edge(START, "agent")
    g.add_conditional_edges(
        "agent",
        lambda s: "tools" if s["messages"][-1].tool_calls else "fan",
        {"tools": "tools", "fan": "fan"},
    )
    g.add_edge("tools", "agent")
    g.add_conditional_edges(
        "fan", lambda s: [Send("work", {"items": [i], "messages": []}) for i in (1, 2, 3)], ["work"]
    )
    g.add_edge("work", "approval")
    g.add_edge("approval", END)
    return g.compile(checkpointer=checkpointer)


def main(argv: list[str]) -> int:
    from langgraph_external import External

    dsn, workspace, thread, part = argv
    with External(dsn=dsn, workspace=workspace, export=LangfuseExport()) as ext:
        app = build_app(ext.checkpointer)
        config = ext.config(thread, user_id="user-7", tags=["langfuse-test"])
        if part == "handler":
            out = _with_langfuse_handler(ext, app, thread)
        elif part == "first":
            out = app.invoke({"messages": [("user", "weather in Oslo?")]}, config)
        else:
            out = app.invoke(Command(resume="approved"), config)
        flushed = ext.flush(60)
    print(json.dumps({"interrupted": "__interrupt__" in out, "flushed": flushed}))
    return 0


def _with_langfuse_handler(ext: Any, app: Any, thread: str) -> Any:
    """Run and resume with Langfuse's own ``CallbackHandler`` joining our trace."""
    import os
    import uuid

    from langfuse import Langfuse
    from langfuse.langchain import CallbackHandler

    from langgraph_external.exporters import trace_context_for_run

    pk = os.environ["LANGFUSE_PUBLIC_KEY"]
    client = Langfuse(
        public_key=pk,
        secret_key=os.environ["LANGFUSE_SECRET_KEY"],
        base_url=os.environ["LANGFUSE_BASE_URL"],
    )
    run_id = uuid.uuid4()
    handler = CallbackHandler(public_key=pk, trace_context=trace_context_for_run(run_id))  # type: ignore[arg-type]
    app.invoke(
        {"messages": [("user", "weather in Oslo?")]},
        ext.config(thread, callbacks=[handler], run_id=run_id),
    )
    ext.flush(60)
    resume_ctx = ext.langfuse.trace_context(thread)  # the trace the resume continues
    handler = CallbackHandler(public_key=pk, trace_context=resume_ctx)
    out = app.invoke(Command(resume="approved"), ext.config(thread, callbacks=[handler]))
    client.flush()
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
