"""The guard's decisions: what a violation is, what the policy says to do, and its record.

One :class:`Enforcer` is shared by every wrapper of a guarded graph (nodes, routers,
static edges, the input check). It builds a :class:`TransitionViolation` with the clause
of the policy it breaks, applies the node's action (``raise``, ``route`` to the
fallback, ``interrupt`` for a human) and records each outcome: one log record, the
caller's hook, and a ``policy_violation`` event in the run's pipeline.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START
from langgraph.types import Command, Send, interrupt

from langgraph_external.guards._errors import TransitionViolation
from langgraph_external.guards._policy import TransitionPolicy
from langgraph_external.guards._tools import DEFAULT_REFUSAL
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.events import Event, EventKind
from langgraph_external.record.namespaces import split_task
from langgraph_external.record.render import to_readable
from langgraph_external.record.thread_ids import check_thread_id
from langgraph_external.sources.callbacks import AuditCallbackHandler

logger = logging.getLogger("langgraph_external.guards")

ViolationHook = Callable[[TransitionViolation, str], None]
"""Called with each violation and its outcome (``raised``, ``routed``, ...)."""


@dataclasses.dataclass(eq=False)
class Enforcer:
    """Shared by all wrappers of one guarded graph: the policy and where to record."""

    policy: TransitionPolicy
    nodes: frozenset[str]
    pipeline: Pipeline | None
    hook: ViolationHook | None
    refusal: str = DEFAULT_REFUSAL

    def __post_init__(self) -> None:
        self.counts_visits = self.policy.default_max_visits is not None or any(
            r.max_visits is not None for r in self.policy.nodes.values()
        )

    def violation(
        self,
        rule: str,
        source: str | None,
        target: str | None,
        message: str,
        *,
        node: str | None,
        config: RunnableConfig | None = None,
        would_be: Any = None,
        tool_call_id: str | None = None,
    ) -> TransitionViolation:
        where: dict[str, Any] = {"node": node}
        if config is not None:
            where["step"] = (config.get("metadata") or {}).get("langgraph_step")
            where["task"] = (config.get("configurable") or {}).get("checkpoint_ns") or None
        if tool_call_id is not None:
            where["tool_call_id"] = tool_call_id
        return TransitionViolation(
            rule,
            source,
            target,
            message,
            node=node,
            would_be=to_readable(would_be),
            policy_hash=self.policy.hash,
            policy_rule=_clause(self.policy, rule, node, source, target),
            where=where,
        )

    def decide(self, v: TransitionViolation, config: RunnableConfig) -> str | None:
        """Apply the node's action to ``v``.

        Returns ``None`` when a human approved the decision, else the node to route to.
        Raises ``v`` for ``raise`` (and for a rejection without fallback); raises
        ``GraphInterrupt`` while waiting for a human.
        """
        action = self.policy.action_for(v.node)
        fallback = action.fallback
        if fallback is not None and fallback == v.node:
            fallback = None  # routing a node to itself would loop; stop instead
        if action.action != "interrupt":
            return self._route_or_raise(v, config, action.action, fallback)
        # interrupt() reads the task's config from the context; routers run without it
        token = var_child_runnable_config.set(config)
        try:
            answer = interrupt(self._request(v, fallback))
        except GraphInterrupt:
            self._record(v, config, "interrupted", action.action, fallback)
            raise
        finally:
            var_child_runnable_config.reset(token)
        approved = _approved(answer)
        self._record(v, config, "approved" if approved else "rejected", action.action, fallback)
        if approved:
            return None
        if fallback is None:
            raise v
        return fallback

    def _route_or_raise(
        self, v: TransitionViolation, config: RunnableConfig, action: str, fallback: str | None
    ) -> str:
        """``route`` with a fallback: record and return it; any other action: record, raise."""
        if action == "route" and fallback is not None:
            self._record(v, config, "routed", action, fallback)
            return fallback
        self._record(v, config, "raised", action, fallback)
        raise v

    def refusal_text(self, v: TransitionViolation) -> str:
        """The text of the ``ToolMessage`` answering a tool call refused by ``v``."""
        fields = {
            "tool": v.target,
            "node": v.node,
            "tier": (v.would_be or {}).get("tier") if isinstance(v.would_be, dict) else None,
            "rule": v.rule,
            "message": v.message,
            "policy": self.policy.name or self.policy.hash[:12],
        }
        return self.refusal.format_map(fields)

    def _request(self, v: TransitionViolation, fallback: str | None) -> dict[str, Any]:
        return {
            "type": "policy_violation",
            "rule": v.rule,
            "from": v.source,
            "to": v.target,
            "node": v.node,
            "message": v.message,
            "would_be": v.would_be,
            "where": v.where,
            "policy_rule": v.policy_rule,
            "fallback": fallback,
            "policy_name": self.policy.name,
            "policy_hash": v.policy_hash,
            "resume": "Command(resume=True) approves; Command(resume=False) rejects",
        }

    def _record(
        self,
        v: TransitionViolation,
        config: RunnableConfig,
        outcome: str,
        action: str,
        fallback: str | None,
    ) -> None:
        payload = {
            "from": v.source,
            "to": v.target,
            "rule": v.rule,
            "action": action,
            "outcome": outcome,
            "fallback": fallback if outcome in ("routed", "rejected") else None,
            "message": v.message,
            "would_be": v.would_be,
            "where": v.where,
            "policy_rule": v.policy_rule,
            "policy_hash": self.policy.hash,
            "policy_name": self.policy.name,
        }
        # one WARNING per violation (when it is found); a human's answer is INFO
        level = logging.INFO if outcome in ("approved", "rejected") else logging.WARNING
        logger.log(
            level,
            "policy violation %s at %s: %s (%s)",
            v.rule,
            v.node or "input",
            v.message,
            outcome,
            extra={"lgx_policy_violation": payload},
        )
        if self.hook is not None:
            self.hook(v, outcome)
        pipeline = self.pipeline or audit_pipeline(config)
        if pipeline is None:
            return
        conf = config.get("configurable") or {}
        thread_id = conf.get("thread_id")
        if thread_id is None:
            logger.debug("policy violation not recorded: the run has no thread_id")
            return
        thread_id = check_thread_id(thread_id)  # refused as the checkpointer refuses it
        task_id, parent_ns = split_task(str(conf.get("checkpoint_ns") or ""))
        pipeline.emit(
            Event.new(
                EventKind.POLICY_VIOLATION,
                thread_id,
                node=v.node,
                step=(config.get("metadata") or {}).get("langgraph_step"),
                task_id=task_id,
                checkpoint_ns=parent_ns,
                name=v.rule,
                status=outcome,
                payload=payload,
            )
        )

    # -- checks -------------------------------------------------------------------------
    def check_target(
        self,
        source: str,
        target: Any,
        via: str,
        *,
        node: str | None,
        would_be: Any,
        config: RunnableConfig | None = None,
    ) -> TransitionViolation | None:
        """A violation if ``source -> target`` is unknown or not allowed, else ``None``."""
        if not isinstance(target, str) or (target not in self.nodes and target != END):
            rule, what = "unknown_target", f"{target!r} ({via}): no such node in the graph"
        elif not self.policy.allows(source, target):
            rule, what = "illegal_transition", f"{target} ({via}) is not an allowed transition"
        else:
            return None
        return self.violation(
            rule,
            source,
            str(target),
            f"{source} -> {what}",
            node=node,
            config=config,
            would_be=would_be,
        )

    def check_input(self, value: Any, config: RunnableConfig | None) -> Any:
        """Check a ``Command(goto=...)`` given as a run's input, as a decision of START.

        Nothing has run yet, so there is no task to interrupt: ``interrupt`` behaves as
        ``raise`` here, ``route`` replaces the targets with the fallback.
        """
        if not isinstance(value, Command) or value.graph is not None or not value.goto:
            return value
        config = config or {}
        for target, via in goto_targets(value.goto):
            v = self.check_target(
                START, target, f"input {via}", node=None, would_be=value.goto, config=config
            )
            if v is None:
                continue
            action = self.policy.action_for(None)
            fallback = self._route_or_raise(v, config, action.action, action.fallback)
            return dataclasses.replace(value, goto=fallback)
        return value


def audit_pipeline(config: RunnableConfig) -> Pipeline | None:
    """The pipeline of the ``AuditCallbackHandler`` in the run's callbacks, if there is one.

    ``External.config(...)`` puts that handler in the config; finding it there lets the
    guard record violations without being given the pipeline.
    """
    callbacks = config.get("callbacks")
    if isinstance(callbacks, (list, tuple)):
        handlers: list[Any] = list(callbacks)
    else:
        handlers = [
            *(getattr(callbacks, "handlers", None) or ()),
            *(getattr(callbacks, "inheritable_handlers", None) or ()),
        ]
    return next((h.pipeline for h in handlers if isinstance(h, AuditCallbackHandler)), None)


def _clause(
    policy: TransitionPolicy, rule: str, node: str | None, source: str | None, target: str | None
) -> dict[str, Any] | None:
    """The part of the policy that a violation of ``rule`` breaks."""
    if rule in ("illegal_transition", "unknown_target", "unmapped_route") and source:
        return {"path": f"transitions.{source}", "value": sorted(policy.targets(source))}
    if node is None:
        return None
    declared = policy.node_rule(node)
    if rule == "visit_limit":
        if declared.max_visits is not None:
            return {"path": f"nodes.{node}.max_visits", "value": declared.max_visits}
        return {"path": "default_max_visits", "value": policy.default_max_visits}
    if rule == "tool_tier" and target is not None:
        tool_path = f"tools.{target}" if target in policy.tools else "unlisted_tool_tier"
        return {
            "path": f"nodes.{node}.tier" if declared.tier is not None else "default_tier",
            "value": declared.tier if declared.tier is not None else policy.default_tier,
            "tools_allowed_by_name": list(declared.tools),
            "tool_tier": {"path": tool_path, "value": policy.tool_tier(target)},
        }
    if rule == "state_write":
        return {"path": f"nodes.{node}.writes", "value": declared.writes}
    return None


def _approved(answer: Any) -> bool:
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, str):
        return answer.strip().lower() in ("approve", "approved", "allow", "yes", "y", "true")
    if isinstance(answer, Mapping):
        return any(answer.get(k) is True for k in ("approve", "approved", "allow"))
    return False


def goto_targets(goto: Any, via: str = "Command.goto") -> list[tuple[Any, str]]:
    """``(target, how it was named)`` of each destination of a ``Command.goto``.

    Example:
        >>> goto_targets(["a", Send("b", 1)])
        [('a', 'Command.goto'), ('b', 'Send')]
    """
    items = goto if isinstance(goto, (list, tuple)) else [goto]
    return [
        (item.node, "Send") if isinstance(item, Send) else (item, via)
        for item in items
        if item is not None and item != ()
    ]
