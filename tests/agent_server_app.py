"""The graphs ``tests/test_agent_server.py`` serves with LangGraph's Agent Server.

The server loads this file by path (``langgraph.json``'s ``graphs``); each graph is what a
user's module would hold, plus the one line :func:`recorded` (except ``bare_agent``, which
relies on the checkpointer entry alone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

from langgraph_external.agent_server import recorded


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


class WeatherModel(BaseChatModel):
    """Asks for the weather of the city the user named, then answers with the tool's
    result: stateless, so any number of server runs and threads can share it."""

    @property
    def _llm_type(self) -> str:
        return "scripted-weather"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            answer = AIMessage(f"It is {last.content}.")
        else:
            city = str(last.content).rsplit(" ", 1)[-1].strip("?") or "Oslo"
            turn = sum(isinstance(m, HumanMessage) for m in messages)
            call = {"id": f"call-{turn}", "name": "get_weather", "args": {"city": city}}
            answer = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=answer)])


def _react() -> StateGraph[Any]:
    model = WeatherModel()

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g


def _approval() -> StateGraph[Any]:
    async def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "send the report?"})
        return {"messages": [AIMessage(f"approved: {answer}")]}

    async def act(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("report sent")]}

    g = StateGraph(MessagesState)
    g.add_node("ask", ask)
    g.add_node("act", act)
    g.add_edge(START, "ask")
    g.add_edge("ask", "act")
    g.add_edge("act", END)
    return g


def _slow() -> StateGraph[Any]:
    async def first(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("started")]}

    async def wait(state: MessagesState) -> dict[str, Any]:
        text = str(state["messages"][0].content)
        await asyncio.sleep(3.0 if "slow" in text else 0.0)
        return {"messages": [AIMessage("finished")]}

    g = StateGraph(MessagesState)
    g.add_node("first", first)
    g.add_node("wait", wait)
    g.add_edge(START, "first")
    g.add_edge("first", "wait")
    g.add_edge("wait", END)
    return g


agent = recorded(_react().compile())
bare_agent = _react().compile()
approval = recorded(_approval().compile())
slow = recorded(_slow().compile())
