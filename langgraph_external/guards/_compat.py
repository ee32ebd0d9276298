"""Every LangGraph/LangChain detail the guard relies on that is not documented public API.

Checked against langgraph 1.2.24, langgraph-prebuilt 1.1.3 and langchain-core 1.8.3. When
upgrading, this is the one file to read: each item says what the guard assumes.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable, coerce_to_runnable
from langgraph.errors import ParentCommand
from langgraph.graph._branch import BranchSpec

__all__ = [
    "BranchSpec",
    "ParentCommand",
    "RunnableCallable",
    "checkpointer_of",
    "coerce_to_runnable",
    "is_resuming",
    "is_tool_node",
    "messages_key_of",
    "run_key",
]

# -- configurable keys LangGraph puts into every task's config ----------------------------
_RUNTIME = "__pregel_runtime"
"""Its ``stream_writer`` is created once per ``stream()`` call and shared by all the tasks of
that call: the guard keys per-invocation state (visit counts, diverted tasks) on it."""
_CHECKPOINTER = "__pregel_checkpointer"
"""The saver of the running graph (also for subgraphs that inherit it)."""
_RESUMING = "__pregel_resuming"
"""True in the first step of an invocation that continues a thread (``None`` or ``Command``
input on a thread with checkpoints); the loop removes it after that step."""

# Other facts relied on (no import needed):
# * ``ParentCommand(Command)`` raised inside a subgraph reaches the parent's task with
#   ``command.graph`` set to that task's ``checkpoint_ns`` (or its node name), and the
#   parent applies it as that task's writes.
# * ``Pregel.copy`` rebuilds a compiled graph as ``self.__class__(**self.__dict__)``, and
#   ``invoke``/``ainvoke`` go through ``stream``/``astream``: a subclass overriding those
#   two sees every input, and survives ``with_config``.
# * A checkpoint's ``versions_seen[node]`` changes exactly in the checkpoints of the steps
#   in which ``node`` ran as a pull task (``Send`` tasks do not touch it); new input is
#   saved as a checkpoint with ``metadata["source"] == "input"``.
# * LangChain's callback manager logs ``Error in <Handler>.<event> callback`` for an
#   ``Exception`` raised by a handler, not for a ``BaseException``; ``BaseTool.run`` calls
#   ``on_tool_start`` (with ``tool_call_id``) before its ``try`` block, so an exception there
#   skips the tool body and the tool's error callbacks; ``ToolNode`` catches ``Exception``
#   only (``handle_tool_errors``), so a ``BaseException`` passes through it.
# * ``ToolNode`` executes the tool calls of the latest ``AIMessage`` in its input's
#   ``messages_key`` (a dict, an object attribute or a bare list of messages), or the
#   ``ToolCall`` dicts it is given as a list or as ``{"__type": "tool_call_with_context",
#   "tool_call": ...}`` (``create_agent`` sends one per tool call).


def run_key(config: RunnableConfig) -> Any:
    """An object that lives exactly as long as the current invocation, or ``None``."""
    conf = config.get("configurable") or {}
    return getattr(conf.get(_RUNTIME), "stream_writer", None)


def checkpointer_of(config: RunnableConfig) -> Any:
    """The checkpointer of the running graph, if any."""
    return (config.get("configurable") or {}).get(_CHECKPOINTER)


def is_resuming(config: RunnableConfig) -> bool:
    """Whether this task belongs to the first step of an invocation resuming a thread."""
    return bool((config.get("configurable") or {}).get(_RESUMING))


def is_tool_node(runnable: Any) -> bool:
    """Whether ``runnable`` is LangGraph's prebuilt ``ToolNode``."""
    try:
        from langgraph.prebuilt import ToolNode
    except ImportError:  # pragma: no cover - langgraph ships it
        return False
    return isinstance(runnable, ToolNode)


def messages_key_of(runnable: Any, default: str = "messages") -> str:
    """The state key a ``ToolNode`` reads its messages from."""
    return str(getattr(runnable, "_messages_key", None) or default)
