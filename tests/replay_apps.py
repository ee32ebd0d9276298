"""Apps the replay is tested on: tools with a side effect, a model that counts its calls.

Every tool appends a line to the file named by ``TOOL_LOG`` (``$LGX_TEST_TOOL_LOG``), so
a test sees whether a tool ran; ``ScriptedModel`` counts its real generations in
``MODEL_CALLS`` and answers from a script chosen by the system prompt, so a changed
prompt gets another answer. The factories take a checkpointer (``lgx replay --app
replay_apps:react_app`` passes the recording one).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Send, interrupt
from pydantic import Field
from typing_extensions import TypedDict

MODEL_CALLS = [0]
"""How many times a ``ScriptedModel`` really generated (reset by the tests)."""


def tool_log() -> Path:
    return Path(os.environ["LGX_TEST_TOOL_LOG"])


def tool_runs() -> list[str]:
    """Lines the tools appended (one per real execution)."""
    p = tool_log()
    return p.read_text().splitlines() if p.exists() else []


def _append(line: str) -> None:
    with tool_log().open("a") as f:
        f.write(line + "\n")


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    _append(f"get_weather {city}")
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    _append(f"get_time {city}")
    return f"noon in {city}"


@tool
def measure(item: int) -> int:
    """Measure an item."""
    _append(f"measure {item}")
    return item * 10


def _call(id_: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": id_, "name": name, "args": args}


SCRIPTS: dict[str, list[AIMessage]] = {
    "You are a weather assistant.": [
        AIMessage(  # two tool calls at once: ToolNode runs them in parallel
            "",
            tool_calls=[
                _call("call-1", "get_weather", city="Oslo"),
                _call("call-2", "get_time", city="Oslo"),
            ],
        ),
        AIMessage("", tool_calls=[_call("call-3", "get_weather", city="Bergen")]),
        AIMessage("Sunny at noon in Oslo, sunny in Bergen."),
    ],
    "You are a terse weather assistant.": [  # the changed prompt: another plan
        AIMessage("", tool_calls=[_call("call-1", "get_weather", city="Oslo")]),
        AIMessage("Sunny."),
    ],
    "You are a Paris weather assistant.": [  # asks for a tool call the record lacks
        AIMessage("", tool_calls=[_call("call-1", "get_weather", city="Paris")]),
        AIMessage("Sunny in Paris."),
    ],
}


class ScriptedModel(BaseChatModel):
    """Answers from the script of its system prompt, in turn; counts real generations."""

    position: dict[str, int] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        MODEL_CALLS[0] += 1
        prompt = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
        script = SCRIPTS.get(prompt, [AIMessage("I have no script.")])
        i = self.position.get(prompt, 0)
        self.position[prompt] = i + 1
        msg = script[i % len(script)]
        return ChatResult(generations=[ChatGeneration(message=msg.model_copy())])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[getattr(t, "name", str(t)) for t in tools], **kwargs)


class StreamingModel(ScriptedModel):
    """A ``ScriptedModel`` that streams natively (its answer in two chunks)."""

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        text = str(self._generate(messages, stop, run_manager, **kw).generations[0].message.content)
        for part in (text[: len(text) // 2], text[len(text) // 2 :]):
            yield ChatGenerationChunk(message=AIMessageChunk(content=part))


def streaming_app(checkpointer: Any) -> Any:
    """One node that streams the model's answer and keeps the whole of it."""
    model = StreamingModel()

    def write(state: MessagesState) -> dict[str, Any]:
        full: Any = None
        for chunk in model.stream([SystemMessage("Summarize."), *state["messages"]]):
            full = chunk if full is None else full + chunk
        return {"messages": [full]}

    g = StateGraph(MessagesState)
    g.add_node("write", write)
    g.add_edge(START, "write")
    return g.compile(checkpointer=checkpointer)


class Asks(TypedDict, total=False):
    answers: Annotated[list[str], operator.add]


def parallel_interrupts_app(checkpointer: Any) -> Any:
    """Two ``Send`` tasks that each interrupt: resumed with a map of interrupt ids."""

    def ask(s: dict[str, Any]) -> Asks:
        return {"answers": [str(interrupt({"item": s["item"]}))]}

    g = StateGraph(Asks)
    g.add_node("ask", ask)
    g.add_conditional_edges(START, lambda s: [Send("ask", {"item": i}) for i in (1, 2)], ["ask"])
    return g.compile(checkpointer=checkpointer)


def react_app(checkpointer: Any, prompt: str = "You are a weather assistant.") -> Any:
    """agent ⇄ tools (parallel tool calls), ending with an answer."""
    model = ScriptedModel().bind_tools([get_weather, get_time])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(prompt), *state["messages"]])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([get_weather, get_time]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def async_react_app(checkpointer: Any) -> Any:
    """``react_app`` with an async agent node (run with ``ainvoke``)."""
    model = ScriptedModel().bind_tools([get_weather, get_time])

    async def agent(state: MessagesState) -> dict[str, Any]:
        prompt = SystemMessage("You are a weather assistant.")
        return {"messages": [await model.ainvoke([prompt, *state["messages"]])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([get_weather, get_time]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def terse_react_app(checkpointer: Any) -> Any:
    """The same agent with a changed system prompt."""
    return react_app(checkpointer, prompt="You are a terse weather assistant.")


def helpful_react_app(checkpointer: Any) -> Any:
    """The same agent with another system prompt that leads to the same answers: the path
    and the state are those of ``react_app``; only what the model was asked differs."""
    return react_app(checkpointer, prompt="You are a helpful weather assistant.")


def paris_react_app(checkpointer: Any) -> Any:
    """The same agent, prompted so that it calls a tool with other arguments."""
    return react_app(checkpointer, prompt="You are a Paris weather assistant.")


class Work(TypedDict, total=False):
    items: Annotated[list[int], operator.add]
    total: int
    summary: str
    approved: str


def complex_app(checkpointer: Any) -> Any:
    """split → three ``Send`` tasks (each calls a tool) → a subgraph whose node asks the
    model → a review node that interrupts for approval."""
    model = ScriptedModel()

    def work(s: Work) -> Work:
        return {"items": [measure.invoke({"item": s["items"][0]})]}

    def summarize(s: Work) -> Work:
        answer = model.invoke([SystemMessage("Summarize."), ("user", str(s["items"]))])
        return {"total": sum(s["items"]), "summary": str(answer.content)}

    sub = StateGraph(Work)
    sub.add_node("summarize", summarize)
    sub.add_edge(START, "summarize")
    sub.add_edge("summarize", END)

    def review(s: Work) -> Work:
        return {"approved": str(interrupt({"question": "approve?", "total": s["total"]}))}

    g = StateGraph(Work)
    g.add_node("split", lambda s: {"total": 0})
    g.add_node("work", work)
    g.add_node("report", sub.compile())
    g.add_node("review", review)
    g.add_edge(START, "split")
    g.add_conditional_edges(
        "split", lambda s: [Send("work", {"items": [i]}) for i in (1, 2, 3)], ["work"]
    )
    g.add_edge("work", "report")
    g.add_edge("report", "review")
    g.add_edge("review", END)
    return g.compile(checkpointer=checkpointer)


def functional_app(checkpointer: Any) -> Any:
    """The functional API: an entrypoint calling a tool task and the model."""
    model = ScriptedModel()

    @task
    def look_up(city: str) -> str:
        return str(get_weather.invoke({"city": city}))

    @entrypoint(checkpointer=checkpointer)
    def forecast(city: str) -> str:
        weather = look_up(city).result()
        answer = model.invoke([SystemMessage("Summarize."), ("user", weather)])
        return f"{weather}; {answer.content}"

    return forecast


SCRIPTS["Summarize."] = [AIMessage("All measured.")]
SCRIPTS["You are a helpful weather assistant."] = SCRIPTS["You are a weather assistant."]
