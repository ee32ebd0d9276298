"""Apps recorded for the trace UI's tests, screenshots and benchmark.

:func:`record_support_thread` runs a guarded ReAct support agent the way a team would: a
``recall`` node reads the user's memories from Mem0 (hits with scores), the model (a
scripted stand-in reporting its model name and token usage, so the UI can price it) asks
for an allowed tool and a forbidden one in one message, the guard pauses the run on the
forbidden call (a policy violation and an interrupt), a human rejects it on resume, and an
``escalate`` node answers. Every string a user controls can be made hostile
(:data:`HOSTILE`), for the XSS tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from langgraph_external import External
from langgraph_external.guards import TransitionPolicy, guard

HOSTILE = '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'
"""Markup that runs script if a page ever puts it into HTML unescaped."""

SYSTEM_PROMPT = "You are a support agent for an online shop. Be brief."


def support_policy(bad: str = "") -> dict[str, Any]:
    """The support agent's policy: ``remote_write`` is a tier the agent may not use."""
    recall, agent, tools, escalate = (f"{n}{bad}" for n in ("recall", "agent", "tools", "escalate"))
    return {
        "name": "support",
        "states": [recall, agent, tools, escalate],
        "transitions": {
            "START": [recall],
            recall: [agent],
            agent: [tools, "END"],
            tools: [agent],
            escalate: ["END"],
        },
        "tools": {f"lookup_order{bad}": "read_only", f"remote_write{bad}": "remote_write"},
        "default_tier": "read_only",
        "on_violation": {"action": "interrupt", "fallback": escalate},
    }


class UsageModel(BaseChatModel):
    """A chat model that answers from a script (n-th answer: n = AI messages seen) and
    reports its model name and token usage like a hosted model does."""

    script: list[AIMessage]
    model_name: str = "gpt-4o-mini"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[getattr(t, "name", str(t)) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        n = sum(isinstance(m, AIMessage) for m in messages)
        answer = self.script[min(n, len(self.script) - 1)].model_copy()
        prompt_tokens = sum(len(str(m.content).split()) + 4 for m in messages)
        answer.usage_metadata = {
            "input_tokens": prompt_tokens,
            "output_tokens": 12 + 9 * len(answer.tool_calls),
            "total_tokens": prompt_tokens + 12 + 9 * len(answer.tool_calls),
        }
        answer.response_metadata = {"model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=answer)])


def _tools(bad: str) -> list[BaseTool]:
    def lookup_order(order_id: str) -> str:
        return f"order {order_id}: shipped on 2026-11-28{bad}"

    def remote_write(order_id: str) -> str:
        return f"order {order_id}: refunded{bad}"

    return [
        StructuredTool.from_function(lookup_order, name=f"lookup_order{bad}", description="Find."),
        StructuredTool.from_function(
            remote_write, name=f"remote_write{bad}", description="Refund."
        ),
    ]


def support_agent(memory: Any, *, bad: str = "", model: str = "gpt-4o-mini") -> StateGraph[Any]:
    """recall (Mem0 search) → agent ⇄ tools, ``escalate`` as the guard's fallback.

    ``bad`` is appended to node names, tool names and arguments, tool results, the
    memories' words and the model's words.
    """
    tools = _tools(bad)
    calls = [
        {"name": f"lookup_order{bad}", "args": {"order_id": f"A-1{bad}"}, "id": "call_lookup"},
        {"name": f"remote_write{bad}", "args": {"order_id": f"A-1{bad}"}, "id": "call_write"},
    ]
    llm = UsageModel(
        script=[AIMessage(f"Let me check the order.{bad}", tool_calls=calls), AIMessage("done")],
        model_name=model,
    )

    def recall(state: MessagesState) -> dict[str, Any]:
        question = str(state["messages"][-1].content)
        hits = memory.search(question, filters={"user_id": "alice"}, top_k=3)["results"]
        facts = "; ".join(h["memory"] for h in hits) or "nothing"
        return {"messages": [SystemMessage(f"{SYSTEM_PROMPT} Known about the user: {facts}")]}

    def agent(state: MessagesState) -> dict[str, Any]:
        msgs = state["messages"]
        system = [m for m in msgs if isinstance(m, SystemMessage)][-1:]
        rest = [m for m in msgs if not isinstance(m, SystemMessage)]
        return {"messages": [llm.invoke([*system, *rest])]}

    def escalate(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"A human will look at this refund.{bad}")]}

    b: StateGraph[Any] = StateGraph(MessagesState)
    b.add_node(f"recall{bad}", recall)
    b.add_node(f"agent{bad}", agent)
    b.add_node(f"tools{bad}", ToolNode(tools, handle_tool_errors=True))
    b.add_node(f"escalate{bad}", escalate)
    b.add_edge(START, f"recall{bad}")
    b.add_edge(f"recall{bad}", f"agent{bad}")
    b.add_conditional_edges(f"agent{bad}", tools_condition, {"tools": f"tools{bad}", END: END})
    b.add_edge(f"tools{bad}", f"agent{bad}")
    b.add_edge(f"escalate{bad}", END)
    return b


def record_support_thread(
    ext: External,
    memory: Any,
    thread_id: str = "refund-A-1",
    *,
    bad: str = "",
    user_id: str = "alice",
    tags: Sequence[str] = ("refunds", "beta"),
    model: str = "gpt-4o-mini",
) -> None:
    """Run the support agent in ``thread_id``: it pauses on the forbidden refund, a human
    rejects it (``Command(resume=False)``) and the run ends at ``escalate``."""
    policy = TransitionPolicy.from_dict(support_policy(bad))
    graph = guard(support_agent(memory, bad=bad, model=model), policy, pipeline=ext.pipeline)
    app = graph.compile(checkpointer=ext.checkpointer)
    config = ext.config(thread_id, user_id=user_id, tags=list(tags), policy=policy)
    question = f"Please refund order A-1, it never arrived.{bad}"
    app.invoke({"messages": [HumanMessage(question)]}, config)
    app.invoke(Command(resume=False), config)


def remember_alice(memory: Any, bad: str = "") -> None:
    """What Mem0 knows about alice before the run (written outside any thread)."""
    memory.add(f"Alice prefers refunds to store credit{bad}", user_id="alice", infer=False)
    memory.add("Alice's order A-1 was a birthday present", user_id="alice", infer=False)
    memory.add("Alice lives in Lyon", user_id="alice", infer=False)
