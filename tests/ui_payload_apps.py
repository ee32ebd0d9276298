"""An agent with big payloads, recorded for tests/test_ui_payloads.py.

:func:`fetch_app`: the user asks with a 40 KB message, the model (scripted, no network)
calls ``fetch_page``, whose result is a 100 KB page — with HTML and a script in it, as a
fetched page has — and then answers. Over the 64 KiB offload threshold, the tool
result and the user message are each moved to an artifact of the workspace; the
record keeps their first and last part.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

PAGE_HEAD = "<html><head><title>Order A-1</title></head><body><script>alert('pwned')</script>"
PAGE_END = "<p>END-OF-PAGE marker</p></body></html>"
PAGE_MIDDLE = "MIDDLE-OF-PAGE marker"


def page(size: int = 100_000, city: str = "Oslo") -> str:
    """A fetched web page of ``size`` characters: a script at its start, a marker in its
    middle (never in the record's head or tail) and one at its end."""
    filler = f"<p>shipping status for {city}: in transit.</p>\n"
    body = (filler * (size // len(filler) + 1))[: size - len(PAGE_HEAD) - len(PAGE_END)]
    half = len(body) // 2
    body = body[:half] + PAGE_MIDDLE + body[half + len(PAGE_MIDDLE) :]
    return PAGE_HEAD + body + PAGE_END


def question(size: int = 40_000) -> str:
    """A 40 KB user message: a pasted log, with its question at the start and the end."""
    start = "Where is order A-1? Here is the whole log:\n"
    end = "\nEND-OF-QUESTION: please answer briefly."
    line = "2026-12-06 carrier scan: parcel A-1 seen at the hub\n"
    body = (line * (size // len(line) + 1))[: size - len(start) - len(end)]
    half = len(body) // 2
    body = body[:half] + "MIDDLE-OF-QUESTION" + body[half + len("MIDDLE-OF-QUESTION") :]
    return start + body + end


class PageModel(BaseChatModel):
    """Calls ``fetch_page`` once, then answers (a script per system prompt)."""

    calls: dict[str, int] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
        n = self.calls.get(prompt, 0)
        self.calls[prompt] = n + 1
        city = "Bergen" if "Bergen" in prompt else "Oslo"
        if n % 2 == 0:
            msg = AIMessage(
                "",
                tool_calls=[{"id": "call-page", "name": "fetch_page", "args": {"city": city}}],
            )
        else:
            msg = AIMessage(f"Order A-1 is in transit from {city}.")
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[getattr(t, "name", str(t)) for t in tools], **kwargs)


@tool
def fetch_page(city: str) -> str:
    """The order's tracking page (100 KB of HTML)."""
    return page(city=city)


def fetch_app(checkpointer: Any, city: str = "Oslo") -> Any:
    """agent ⇄ tools: one 100 KB tool result, then the answer."""
    model = PageModel().bind_tools([fetch_page])
    prompt = f"You track orders shipped from {city}."

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(prompt), *state["messages"]])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([fetch_page]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)
