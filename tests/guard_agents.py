"""Tool-calling agents as users build them, for the guard tests (also run as subprocesses).

A scripted chat model answers like a real one: its n-th answer (n = number of AI messages
already in the conversation) is fixed, so re-running a step after an interrupt asks for
the same tool calls again. ``ran`` records which tool and node bodies executed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

POLICY: dict[str, Any] = {
    "name": "react",
    "states": ["agent", "tools", "escalate"],
    "transitions": {
        "START": ["agent"],
        "agent": ["tools", "END"],
        "tools": ["agent"],
        "escalate": ["END"],
    },
    "tools": {"lookup_order": "read_only", "remote_write": "remote_write"},
    "default_tier": "read_only",
}

CALLS = [
    {"name": "lookup_order", "args": {"order_id": "A-1"}, "id": "call_lookup"},
    {"name": "remote_write", "args": {"order_id": "A-1"}, "id": "call_write"},
]

QUESTION = {"messages": [HumanMessage("refund order A-1")]}


class ScriptedChatModel(BaseChatModel):
    """A chat model whose n-th answer is ``script[n]`` (n = AI messages seen so far)."""

    script: list[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self  # the script already names the tools

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        n = sum(isinstance(m, AIMessage) for m in messages)
        answer = self.script[min(n, len(self.script) - 1)]
        return ChatResult(generations=[ChatGeneration(message=answer.model_copy())])


def scripted_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[AIMessage("", tool_calls=[dict(c) for c in CALLS]), AIMessage("done")]
    )


def make_tools(ran: list[str]) -> list[BaseTool]:
    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        ran.append("lookup_order")
        return f"order {order_id}: shipped"

    @tool
    def remote_write(order_id: str) -> str:
        """Change the order in the remote system."""
        ran.append("remote_write")
        return f"order {order_id}: changed"

    return [lookup_order, remote_write]


def hand_written_tool_node(tools: list[BaseTool], *, swallow: bool = False) -> Any:
    """A tool node as users write it; ``swallow`` catches tool errors like ToolNode does."""
    by_name = {t.name: t for t in tools}

    def answer(call: dict[str, Any], exc: Exception) -> ToolMessage:
        return ToolMessage(f"error: {exc}", tool_call_id=call["id"], status="error")

    def run(state: MessagesState) -> dict[str, Any]:
        out: list[Any] = []
        for call in state["messages"][-1].tool_calls:  # type: ignore[attr-defined]
            try:
                out.append(by_name[call["name"]].invoke({**call, "type": "tool_call"}))
            except Exception as exc:
                if not swallow:
                    raise
                out.append(answer(call, exc))
        return {"messages": out}

    async def arun(state: MessagesState) -> dict[str, Any]:
        out: list[Any] = []
        for call in state["messages"][-1].tool_calls:  # type: ignore[attr-defined]
            try:
                out.append(await by_name[call["name"]].ainvoke({**call, "type": "tool_call"}))
            except Exception as exc:
                if not swallow:
                    raise
                out.append(answer(call, exc))
        return {"messages": out}

    return RunnableLambda(run, afunc=arun, name="tools")


def react_agent(ran: list[str], tool_node: str = "toolnode_handle_errors") -> StateGraph[Any]:
    """A ReAct agent: agent -> tools -> agent, plus an ``escalate`` node for fallbacks."""
    model = scripted_model()
    tools = make_tools(ran)

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        ran.append("agent")
        return {"messages": [model.invoke(state["messages"], config)]}

    async def aagent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        ran.append("agent")
        return {"messages": [await model.ainvoke(state["messages"], config)]}

    def escalate(state: MessagesState) -> dict[str, Any]:
        ran.append("escalate")
        return {"messages": [AIMessage("A human will look at this order.")]}

    nodes: dict[str, Callable[[list[BaseTool]], Any]] = {
        "toolnode_handle_errors": lambda ts: ToolNode(ts, handle_tool_errors=True),
        "toolnode_raise_errors": lambda ts: ToolNode(ts, handle_tool_errors=False),
        "hand_written": hand_written_tool_node,
        "hand_written_swallowing": lambda ts: hand_written_tool_node(ts, swallow=True),
    }
    b: StateGraph[Any] = StateGraph(MessagesState)
    b.add_node("agent", RunnableLambda(agent, afunc=aagent, name="agent"))
    b.add_node("tools", nodes[tool_node](tools))
    b.add_node("escalate", escalate)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    b.add_edge("tools", "agent")
    b.add_edge("escalate", END)
    return b


def unanswered_tool_calls(messages: Sequence[BaseMessage]) -> list[str]:
    """Tool call ids of AI messages that no ToolMessage answers (a chat API refuses them)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [
        c["id"] or ""
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["id"] not in answered
    ]


def tool_answer(messages: Sequence[BaseMessage], call_id: str) -> ToolMessage:
    (found,) = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    return found
