"""The tool-tier check: a refused tool call is stopped before the tool's body runs.

Tool calls a tool node answers from the latest ``AIMessage`` are decided before the node
runs (:class:`ToolPlan`); a tool a node calls on its own is stopped from LangChain's
``on_tool_start`` callback (:class:`ToolTierCheck`), which raises :class:`ToolStop`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import patch_config
from langgraph.errors import GraphInterrupt

from langgraph_external.guards._enforcer import Enforcer
from langgraph_external.guards._errors import TransitionViolation


class ToolStop(BaseException):
    """Stops a refused tool call from inside LangChain's ``on_tool_start`` callback.

    A ``BaseException`` on purpose: ``ToolNode(handle_tool_errors=...)``, agents and most
    user code catch ``Exception``, and must not turn a policy decision into a tool error
    the model can read and the run can continue from. LangChain's callback manager also
    logs every ``Exception`` a handler raises; this one it lets through silently. It
    never leaves the guarded node: the node's wrapper turns it into the decision.
    """

    def __init__(
        self,
        violation: TransitionViolation,
        *,
        error: BaseException | None = None,
        fallback: str | None = None,
        tool_call_id: str | None = None,
    ) -> None:
        super().__init__(violation.message)
        self.violation = violation
        self.error = error
        self.fallback = fallback
        self.tool_call_id = tool_call_id


class ToolTierCheck(BaseCallbackHandler):
    """Refuses a tool call the node may not make, before the tool's body runs.

    LangChain calls ``on_tool_start`` before executing any tool (``tool.invoke``,
    ``ToolNode``, agents); raising there skips the body.
    """

    raise_error = True
    run_inline = True

    def __init__(
        self, guard: Enforcer, node: str, config: RunnableConfig, approved: set[str]
    ) -> None:
        self.guard = guard
        self.node = node
        self.config = config
        self.approved = approved
        self.stop: ToolStop | None = None

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        name = str((serialized or {}).get("name") or kwargs.get("name") or "")
        call_id = kwargs.get("tool_call_id")
        policy = self.guard.policy
        if policy.may_call(self.node, name) or (call_id is not None and call_id in self.approved):
            return
        v = tool_violation(
            self.guard, self.node, name, kwargs.get("inputs") or input_str, call_id, self.config
        )
        try:
            fallback = self.guard.decide(v, self.config)
        except (TransitionViolation, GraphInterrupt) as exc:
            self.stop = ToolStop(v, error=exc, tool_call_id=call_id)
            raise self.stop from None
        if fallback is None:  # a human approved it
            return
        self.stop = ToolStop(v, fallback=fallback, tool_call_id=call_id)
        raise self.stop


def tool_violation(
    guard: Enforcer,
    node: str,
    tool: str,
    args: Any,
    call_id: str | None,
    config: RunnableConfig,
) -> TransitionViolation:
    tier = guard.policy.tool_tier(tool)
    return guard.violation(
        "tool_tier",
        node,
        tool,
        f"{node} may not call tool {tool!r} (tier {tier})",
        node=node,
        config=config,
        would_be={"tool": tool, "tier": tier, "input": args, "tool_call_id": call_id},
        tool_call_id=call_id,
    )


def with_handler(config: RunnableConfig, handler: BaseCallbackHandler) -> RunnableConfig:
    # first in line: a refused tool must stop before any other handler (the audit
    # handler included) records it as started
    callbacks = config.get("callbacks")
    if callbacks is None:
        new: Any = [handler]
    elif isinstance(callbacks, list):
        new = [handler, *callbacks]
    else:
        new = callbacks.copy()
        new.handlers.insert(0, handler)
        new.inheritable_handlers.insert(0, handler)
    return patch_config(config, callbacks=new)


@dataclasses.dataclass
class ToolPlan:
    """What a tool node runs after the guard decided on its pending tool calls."""

    input: Any
    run_node: bool
    answers: list[Any]
    order: list[str]
    fallback: str
