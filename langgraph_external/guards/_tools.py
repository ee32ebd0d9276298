"""The tool calls a tool-executing node is about to run, and answers for refused ones.

A chat model's ``AIMessage.tool_calls`` must each be answered by a ``ToolMessage`` before
the model is called again (every chat API refuses the history otherwise). So when the
guard refuses a tool call it does not make it fail: it leaves it out of the node's input,
runs the node on the calls that are allowed, and answers the refused call itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command

DEFAULT_REFUSAL = (
    "Tool call refused by the transition policy {policy}: {message}. The tool was not run."
)
"""Default text of the ``ToolMessage`` that answers a refused tool call. Fields:
``{tool}``, ``{node}``, ``{tier}``, ``{rule}``, ``{message}``, ``{policy}``."""


@dataclasses.dataclass
class PendingCalls:
    """Tool calls found in a node's input, and how to rebuild the input without some."""

    calls: list[dict[str, Any]]
    rebuild: Callable[[list[dict[str, Any]]], Any]


def pending_tool_calls(value: Any, messages_key: str) -> PendingCalls | None:
    """The tool calls a ``ToolNode``-like node would execute for ``value``, or ``None``.

    Example:
        >>> msg = AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "1"}])
        >>> p = pending_tool_calls({"messages": [msg]}, "messages")
        >>> [c["id"] for c in p.calls]
        ['1']
        >>> p.rebuild([])["messages"][-1].tool_calls
        []
    """
    if isinstance(value, Mapping) and value.get("__type") == "tool_call_with_context":
        call = dict(value["tool_call"])
        return PendingCalls([call], lambda calls: value if calls else None)
    if isinstance(value, list) and value and _is_tool_call(value[-1]):
        return PendingCalls([dict(c) for c in value], list)
    replace: Callable[[list[Any]], Any]
    if isinstance(value, list):
        replace = list
    elif isinstance(value, Mapping):
        replace = lambda msgs: {**value, messages_key: msgs}  # noqa: E731
    elif hasattr(value, "model_copy") or dataclasses.is_dataclass(value):
        replace = lambda msgs: _replace_attr(value, messages_key, msgs)  # noqa: E731
    else:
        return None
    messages = _messages_of(value, messages_key)
    found = _latest_ai(messages)
    if found is None:
        return None
    i, ai = found
    return PendingCalls(
        [dict(c) for c in ai.tool_calls],
        lambda calls: replace(
            [*messages[:i], ai.model_copy(update={"tool_calls": calls}), *messages[i + 1 :]]
        ),
    )


def unanswered_calls(value: Any, messages_key: str) -> list[dict[str, Any]]:
    """Tool calls of the latest ``AIMessage`` that no later ``ToolMessage`` answers."""
    messages = _messages_of(value, messages_key)
    found = _latest_ai(messages)
    if found is None:
        return []
    i, ai = found
    answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
    return [dict(c) for c in ai.tool_calls if c.get("id") not in answered]


def refusal_message(call: Mapping[str, Any], text: str) -> ToolMessage:
    """The ``ToolMessage`` answering a refused call (``status="error"``)."""
    return ToolMessage(
        content=text,
        name=str(call.get("name") or ""),
        tool_call_id=str(call.get("id") or ""),
        status="error",
    )


def add_answers(
    output: Any, answers: Sequence[ToolMessage], messages_key: str, order: Sequence[str]
) -> Any:
    """``output`` of the node plus ``answers``; ``ToolMessage``s sorted like ``order``."""
    if not answers:
        return output
    rank = {call_id: i for i, call_id in enumerate(order)}

    def merged(msgs: Sequence[Any]) -> list[Any]:
        out = [*msgs, *answers]
        if all(isinstance(m, ToolMessage) for m in out):
            out.sort(key=lambda m: rank.get(m.tool_call_id, len(rank)))
        return out

    if output is None:
        return {messages_key: list(answers)}
    if isinstance(output, Mapping) and isinstance(output.get(messages_key, []), list):
        return {**output, messages_key: merged(output.get(messages_key, []))}
    if isinstance(output, list) and all(isinstance(m, BaseMessage) for m in output):
        return merged(output)
    if isinstance(output, list):
        return [*output, {messages_key: list(answers)}]
    return [output, {messages_key: list(answers)}]


def updates_only(output: Any) -> Any:
    """``output`` without the ``goto`` of its ``Command``s (a reroute replaces them)."""
    if isinstance(output, Command):
        return output.update if output.graph is None else None
    if isinstance(output, list):
        kept = [updates_only(o) if isinstance(o, Command) else o for o in output]
        return [o for o in kept if o is not None]
    return output


def _is_tool_call(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == "tool_call"


def _messages_of(value: Any, messages_key: str) -> list[Any]:
    """The message list of a node's input or state (empty when it has none)."""
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        messages = value.get(messages_key)
    else:
        messages = getattr(value, messages_key, None)
    return messages if isinstance(messages, list) else []


def _latest_ai(messages: Sequence[Any]) -> tuple[int, AIMessage] | None:
    for i, m in reversed(list(enumerate(messages))):
        if isinstance(m, AIMessage):
            return (i, m) if m.tool_calls else None
    return None


def _replace_attr(value: Any, key: str, messages: list[Any]) -> Any:
    if hasattr(value, "model_copy"):
        return value.model_copy(update={key: messages})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{key: messages})
    raise TypeError(f"cannot copy a {type(value).__name__} state")  # pragma: no cover
