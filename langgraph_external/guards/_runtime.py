"""Enforcement at run time: node wrappers, router wrappers and the tool-tier check.

Every way LangGraph can enter a node is a decision made by the node (or router) before
it: a static edge, a conditional router, a returned ``Command(goto=...)`` or ``Send``.
The guard checks each decision *where it is made*, inside the deciding task, so an
illegal target is blocked before it is scheduled — its body never runs. Checks that
belong to the node itself (visit limit on entry, tool tiers before and while it runs,
its state update on exit, a ``Command(graph=PARENT)`` one of its subgraphs sends up) run
in the node's own wrapper.

``route`` must replace a decision, not add to it, so the static edges of a node that
may be rerouted are turned into an equivalent guard branch (same ``branch:to:<node>``
channels, same checkpoints) that stays silent when the node was rerouted.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import patch_config, var_child_runnable_config
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START
from langgraph.types import Command, Send, interrupt

from langgraph_external._compat import (
    ParentCommand,
    RunnableCallable,
    is_resuming,
    run_key,
)
from langgraph_external.callbacks import AuditCallbackHandler
from langgraph_external.events import Event, EventKind
from langgraph_external.guards._errors import TransitionViolation
from langgraph_external.guards._policy import TransitionPolicy
from langgraph_external.guards._tools import (
    DEFAULT_REFUSAL,
    add_answers,
    pending_tool_calls,
    refusal_message,
    unanswered_calls,
    updates_only,
)
from langgraph_external.guards._visits import aearlier_visits, earlier_visits
from langgraph_external.pipeline import Pipeline
from langgraph_external.render import to_readable
from langgraph_external.thread_ids import check_thread_id

logger = logging.getLogger("langgraph_external.guards")

FALLBACK_KEY = "__lgx_fallback__"
"""Router key the guard adds to a router's path map to reach the fallback node."""
EDGES_BRANCH = "__lgx_edges__"
"""Name of the branch that replaces the static edges of a reroutable node."""

ViolationHook = Callable[[TransitionViolation, str], None]
"""Called with each violation and its outcome (``raised``, ``routed``, ...)."""


# -- per-invocation state -----------------------------------------------------------------
@dataclasses.dataclass
class _RunState:
    visits: dict[tuple[str, str], set[str]] = dataclasses.field(default_factory=dict)
    diverted: set[str] = dataclasses.field(default_factory=set)
    resuming: bool = False
    """The invocation continues a run paused earlier (maybe by another process)."""
    seeded: bool = False
    """Visits of the run's earlier invocations have been read from the checkpoints."""


# Keyed by an object LangGraph creates once per ``stream()`` call and shares with every
# task of that call (see ``_compat.run_key``), so the state lives exactly as long as the run.
_RUNS: weakref.WeakKeyDictionary[Any, _RunState] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _run_state(config: RunnableConfig) -> _RunState:
    key = run_key(config)
    if key is None:  # not inside a LangGraph run: nothing to share
        return _RunState()
    with _LOCK:
        state = _RUNS.get(key)
        if state is None:
            # the first task of an invocation runs in its first step, the only one in
            # which LangGraph says whether the invocation resumes a paused run
            state = _RUNS[key] = _RunState(resuming=is_resuming(config))
        return state


def _task_key(config: RunnableConfig) -> str:
    conf = config.get("configurable") or {}
    return str(conf.get("checkpoint_ns") or conf.get("__pregel_task_id") or "")


def _seed(run: _RunState, counts: Mapping[str, int]) -> None:
    with _LOCK:
        if run.seeded:
            return
        run.seeded = True
        for node, n in counts.items():
            run.visits.setdefault(("", node), set()).update(f"earlier:{i}" for i in range(n))


# -- decisions ----------------------------------------------------------------------------
class _Guard:
    """Shared by all wrappers of one guarded graph: the policy and where to record."""

    def __init__(
        self,
        policy: TransitionPolicy,
        nodes: frozenset[str],
        pipeline: Pipeline | None,
        hook: ViolationHook | None,
        refusal: str = DEFAULT_REFUSAL,
    ) -> None:
        self.policy = policy
        self.nodes = nodes
        self.pipeline = pipeline
        self.hook = hook
        self.refusal = refusal
        self.counts_visits = policy.default_max_visits is not None or any(
            r.max_visits is not None for r in policy.nodes.values()
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
            meta = config.get("metadata") or {}
            conf = config.get("configurable") or {}
            where["step"] = meta.get("langgraph_step")
            where["task"] = conf.get("checkpoint_ns") or None
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
        if action.action == "interrupt":
            # interrupt() reads the task's config from the context; routers run without it
            token = var_child_runnable_config.set(config)
            try:
                answer = interrupt(self._request(v, fallback))
            except GraphInterrupt:
                self._record(v, config, "interrupted", action.action, fallback)
                raise
            finally:
                var_child_runnable_config.reset(token)
            if _approved(answer):
                self._record(v, config, "approved", action.action, fallback)
                return None
            self._record(v, config, "rejected", action.action, fallback)
            if fallback is None:
                raise v
            return fallback
        if action.action == "route" and fallback is not None:
            self._record(v, config, "routed", action.action, fallback)
            return fallback
        self._record(v, config, "raised", action.action, fallback)
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
        meta = config.get("metadata") or {}
        task_ns = str(conf.get("checkpoint_ns") or "")
        parent_ns, _, last = task_ns.rpartition("|")
        pipeline.emit(
            Event.new(
                EventKind.POLICY_VIOLATION,
                thread_id,
                node=v.node,
                step=meta.get("langgraph_step"),
                task_id=last.rpartition(":")[2] or None,
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
            return self.violation(
                "unknown_target",
                source,
                str(target),
                f"{source} -> {target!r} ({via}): no such node in the graph",
                node=node,
                config=config,
                would_be=would_be,
            )
        if not self.policy.allows(source, target):
            return self.violation(
                "illegal_transition",
                source,
                target,
                f"{source} -> {target} ({via}) is not an allowed transition",
                node=node,
                config=config,
                would_be=would_be,
            )
        return None

    def check_input(self, value: Any, config: RunnableConfig | None) -> Any:
        """Check a ``Command(goto=...)`` given as a run's input, as a decision of START.

        Nothing has run yet, so there is no task to interrupt: ``interrupt`` behaves as
        ``raise`` here, ``route`` replaces the targets with the fallback.
        """
        if not isinstance(value, Command) or value.graph is not None or not value.goto:
            return value
        config = config or {}
        for target, via in _goto_targets(value.goto):
            v = self.check_target(
                START, target, f"input {via}", node=None, would_be=value.goto, config=config
            )
            if v is None:
                continue
            action = self.policy.action_for(None)
            if action.action == "route" and action.fallback is not None:
                self._record(v, config, "routed", action.action, action.fallback)
                return dataclasses.replace(value, goto=action.fallback)
            self._record(v, config, "raised", action.action, action.fallback)
            raise v
        return value


def audit_pipeline(config: RunnableConfig) -> Pipeline | None:
    """The pipeline of the ``AuditCallbackHandler`` in the run's callbacks, if there is one.

    ``External.config(...)`` puts that handler in the config; finding it there lets the
    guard record violations without being given the pipeline.
    """
    callbacks = config.get("callbacks")
    if callbacks is None:
        return None
    if isinstance(callbacks, (list, tuple)):
        handlers: list[Any] = list(callbacks)
    else:
        handlers = [
            *(getattr(callbacks, "handlers", None) or ()),
            *(getattr(callbacks, "inheritable_handlers", None) or ()),
        ]
    for handler in handlers:
        if isinstance(handler, AuditCallbackHandler):
            return handler.pipeline
    return None


def _clause(
    policy: TransitionPolicy, rule: str, node: str | None, source: str | None, target: str | None
) -> dict[str, Any] | None:
    """The part of the policy that a violation of ``rule`` breaks."""
    if rule in ("illegal_transition", "unknown_target", "unmapped_route") and source:
        return {"path": f"transitions.{source}", "value": sorted(policy.targets(source))}
    if node is None:
        return None
    declared = policy.nodes.get(node)
    if rule == "visit_limit":
        if declared is not None and declared.max_visits is not None:
            return {"path": f"nodes.{node}.max_visits", "value": declared.max_visits}
        return {"path": "default_max_visits", "value": policy.default_max_visits}
    if rule == "tool_tier" and target is not None:
        has_tier = declared is not None and declared.tier is not None
        tool_path = f"tools.{target}" if target in policy.tools else "unlisted_tool_tier"
        return {
            "path": f"nodes.{node}.tier" if has_tier else "default_tier",
            "value": declared.tier if has_tier and declared else policy.default_tier,
            "tools_allowed_by_name": list(policy.node_rule(node).tools),
            "tool_tier": {"path": tool_path, "value": policy.tool_tier(target)},
        }
    if rule == "state_write":
        return {"path": f"nodes.{node}.writes", "value": policy.node_rule(node).writes}
    return None


def _approved(answer: Any) -> bool:
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, str):
        return answer.strip().lower() in ("approve", "approved", "allow", "yes", "y", "true")
    if isinstance(answer, Mapping):
        return any(answer.get(k) is True for k in ("approve", "approved", "allow"))
    return False


# -- tools --------------------------------------------------------------------------------
class _Stop(BaseException):
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


class _ToolTierCheck(BaseCallbackHandler):
    """Refuses a tool call the node may not make, before the tool's body runs.

    LangChain calls ``on_tool_start`` before executing any tool (``tool.invoke``,
    ``ToolNode``, agents); raising there skips the body. This is the backstop for tools
    the node calls on its own; tool calls a tool node answers from the latest
    ``AIMessage`` are decided before the node runs (see ``_NodeCall.plan_tools``).
    """

    raise_error = True
    run_inline = True

    def __init__(
        self, guard: _Guard, node: str, config: RunnableConfig, approved: set[str]
    ) -> None:
        self.guard = guard
        self.node = node
        self.config = config
        self.approved = approved
        self.stop: _Stop | None = None

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        name = str((serialized or {}).get("name") or kwargs.get("name") or "")
        call_id = kwargs.get("tool_call_id")
        policy = self.guard.policy
        if policy.may_call(self.node, name) or (call_id is not None and call_id in self.approved):
            return
        v = _tool_violation(
            self.guard, self.node, name, kwargs.get("inputs") or input_str, call_id, self.config
        )
        try:
            fallback = self.guard.decide(v, self.config)
        except (TransitionViolation, GraphInterrupt) as exc:
            self.stop = _Stop(v, error=exc, tool_call_id=call_id)
            raise self.stop from None
        if fallback is None:  # a human approved it
            return
        self.stop = _Stop(v, fallback=fallback, tool_call_id=call_id)
        raise self.stop


def _tool_violation(
    guard: _Guard,
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


def _with_handler(config: RunnableConfig, handler: BaseCallbackHandler) -> RunnableConfig:
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
class _ToolPlan:
    """What a tool node runs after the guard decided on its pending tool calls."""

    input: Any
    run_node: bool
    answers: list[Any]
    order: list[str]
    fallback: str | None


# -- nodes --------------------------------------------------------------------------------
class _NodeCall:
    """One execution of a guarded node: entry check, tool check, exit check."""

    __slots__ = (
        "approved",
        "config",
        "guard",
        "handler",
        "messages_key",
        "name",
        "reroutable",
        "run",
        "tool_node",
    )

    def __init__(
        self,
        guard: _Guard,
        name: str,
        config: RunnableConfig,
        reroutable: bool,
        tool_node: bool,
        messages_key: str,
    ):
        self.guard = guard
        self.name = name
        self.config = config
        self.reroutable = reroutable
        self.tool_node = tool_node
        self.messages_key = messages_key
        self.handler: _ToolTierCheck | None = None
        self.approved: set[str] = set()
        # the invocation's first tasks create it in its first step, the one step in which
        # LangGraph tells whether the invocation resumes a paused run
        self.run = _run_state(config) if guard.counts_visits else None

    def needs_history(self) -> bool:
        """Whether visits of the run's earlier invocations must be read first."""
        run = self.run
        return (
            run is not None
            and run.resuming
            and not run.seeded
            and self.guard.policy.max_visits(self.name) is not None
            and "|" not in _task_key(self.config)  # counts are restored for the root graph
        )

    def seed(self, counts: Mapping[str, int]) -> None:
        assert self.run is not None
        _seed(self.run, counts)

    def enter(self) -> Command[Any] | None:
        """Count the visit; a ``Command`` to return instead of running the body, or None."""
        limit = self.guard.policy.max_visits(self.name)
        if limit is None or self.run is None:
            return None
        task = _task_key(self.config)
        scope = task.rpartition("|")[0]
        with _LOCK:
            seen = self.run.visits.setdefault((scope, self.name), set())
            seen.add(task)  # a set: re-running a task after an interrupt is not a new visit
            visits = len(seen)
        if visits <= limit:
            return None
        v = self.guard.violation(
            "visit_limit",
            self.name,
            self.name,
            f"{self.name} entered {visits} times in this run (limit {limit})",
            node=self.name,
            config=self.config,
            would_be={"visits": visits, "limit": limit},
        )
        fallback = self.guard.decide(v, self.config)
        return None if fallback is None else self.divert(fallback)

    def plan_tools(self, value: Any) -> _ToolPlan | None:
        """Decide on the tool calls a tool node is about to run, before it runs them.

        Refused calls are left out of the node's input and answered by the guard, so the
        node runs (and answers) only the allowed ones.
        """
        if not (self.tool_node and self.guard.policy.guards_tools):
            return None
        pending = pending_tool_calls(value, self.messages_key)
        if pending is None:
            return None
        allowed: list[dict[str, Any]] = []
        answers: list[Any] = []
        fallback: str | None = None
        for call in pending.calls:
            name = str(call.get("name") or "")
            if self.guard.policy.may_call(self.name, name):
                allowed.append(call)
                continue
            call_id = call.get("id")
            v = _tool_violation(self.guard, self.name, name, call.get("args"), call_id, self.config)
            routed = self.guard.decide(v, self.config)  # raises for raise / a rejection
            if routed is None:  # approved by a human
                allowed.append(call)
                if call_id is not None:
                    self.approved.add(call_id)
                continue
            fallback = routed
            answers.append(refusal_message(call, self.guard.refusal_text(v)))
        if fallback is None:
            return None
        order = [str(c.get("id")) for c in pending.calls]
        return _ToolPlan(pending.rebuild(allowed), bool(allowed), answers, order, fallback)

    def inner_config(self) -> RunnableConfig:
        if not self.guard.policy.guards_tools:
            return self.config
        self.handler = _ToolTierCheck(self.guard, self.name, self.config, self.approved)
        return _with_handler(self.config, self.handler)

    def divert(self, fallback: str, update: Any = None) -> Command[Any]:
        if self.reroutable:
            _run_state(self.config).diverted.add(_task_key(self.config))
        return Command(goto=fallback, update=update)

    def stopped(self, stop: _Stop, value: Any) -> Command[Any]:
        """The node's result after the tool callback stopped a refused tool call.

        The node did not finish, so its update is lost. Tool calls of the latest
        ``AIMessage`` still unanswered are answered here, so the state stays valid for
        a chat model: the refused one with the refusal, the others with a notice that
        the step was stopped.
        """
        if stop.error is not None:
            raise stop.error from None
        assert stop.fallback is not None
        answers = []
        for call in unanswered_calls(value, self.messages_key):
            if call.get("id") == stop.tool_call_id:
                text = self.guard.refusal_text(stop.violation)
            else:
                text = (
                    f"Not answered: the step was stopped by the transition policy "
                    f"({stop.violation.message}); this call's result was discarded."
                )
            answers.append(refusal_message(call, text))
        update = {self.messages_key: answers} if answers else None
        return self.divert(stop.fallback, update)

    def finish(self, output: Any, plan: _ToolPlan | None) -> Any:
        """The node's output after the exit check and the answers to refused calls."""
        checked = self.exit(output)
        if plan is None or checked is not output:
            return checked
        assert plan.fallback is not None
        kept = add_answers(updates_only(output), plan.answers, self.messages_key, plan.order)
        return self.divert(plan.fallback, kept)

    def parent_command(self, command: Command[Any]) -> Command[Any] | None:
        """Check a ``Command(graph=PARENT)`` a subgraph of this node sent to this graph.

        Returns the reroute, or ``None`` to let LangGraph apply the command.
        """
        conf = self.config.get("configurable") or {}
        if command.graph not in (conf.get("checkpoint_ns"), self.name):
            return None  # addressed to a graph further up
        probe = Command(update=command.update, goto=command.goto)
        checked = self.exit(probe, "Command.PARENT")  # raises for raise
        return None if checked is probe else checked

    def exit(self, output: Any, via: str = "Command.goto") -> Any:
        """Check the update and every target the output names; the output to return."""
        policy = self.guard.policy
        allowed = policy.node_rule(self.name).writes
        if allowed is not None:
            extra = sorted(_update_keys(output) - set(allowed))
            if extra:
                v = self.guard.violation(
                    "state_write",
                    self.name,
                    ", ".join(extra),
                    f"{self.name} may not update {', '.join(map(repr, extra))} "
                    f"(allowed: {', '.join(allowed) or 'nothing'})",
                    node=self.name,
                    config=self.config,
                    would_be=output,
                )
                fallback = self.guard.decide(v, self.config)
                if fallback is not None:
                    return self.divert(fallback)
        for cmd in _commands(output):
            if cmd.graph is not None:
                continue  # addressed to the parent graph: its own guard decides
            for target, via_ in _goto_targets(cmd.goto, via):
                bad = self.guard.check_target(
                    self.name, target, via_, node=self.name, would_be=output, config=self.config
                )
                if bad is None:
                    continue
                fallback = self.guard.decide(bad, self.config)
                if fallback is not None:
                    return self.divert(fallback)
        return output


def _commands(output: Any) -> list[Command[Any]]:
    if isinstance(output, Command):
        return [output]
    if isinstance(output, (list, tuple)):
        return [c for c in output if isinstance(c, Command)]
    return []


def _goto_targets(goto: Any, via: str = "Command.goto") -> list[tuple[Any, str]]:
    items = goto if isinstance(goto, (list, tuple)) else [goto]
    out: list[tuple[Any, str]] = []
    for item in items:
        if isinstance(item, Send):
            out.append((item.node, "Send"))
        elif item is not None and item != ():
            out.append((item, via))
    return out


def _update_keys(output: Any) -> set[str]:
    if output is None:
        return set()
    if isinstance(output, Command):
        return _update_keys(output.update)
    if isinstance(output, Mapping):
        return {str(k) for k in output}
    if isinstance(output, (list, tuple)):
        keys: set[str] = set()
        for item in output:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                keys.add(item[0])
            else:
                keys |= _update_keys(item)
        return keys
    fields_set = getattr(output, "model_fields_set", None)
    if fields_set is not None:
        return {str(k) for k in fields_set}
    if dataclasses.is_dataclass(output):
        return {f.name for f in dataclasses.fields(output)}
    return set()


def guard_node(
    guard: _Guard,
    name: str,
    inner: Runnable[Any, Any],
    reroutable: bool,
    *,
    tool_node: bool = False,
    messages_key: str = "messages",
) -> Runnable:
    """Wrap one node's runnable (sync and async) with the guard's checks.

    ``tool_node``: the node executes the pending tool calls of the latest ``AIMessage``
    (a ``ToolNode``, or a hand-written equivalent); its refused calls are decided before
    it runs and answered by the guard.
    """

    def run(input: Any, config: RunnableConfig) -> Any:
        call = _NodeCall(guard, name, config, reroutable, tool_node, messages_key)
        if call.needs_history():
            call.seed(earlier_visits(config))
        blocked = call.enter()
        if blocked is not None:
            return blocked
        plan = call.plan_tools(input)
        if plan is not None and not plan.run_node:
            return call.finish(None, plan)
        inner_config = call.inner_config()
        # tools called without an explicit config read it from this context variable
        token = var_child_runnable_config.set(inner_config) if call.handler else None
        try:
            output = inner.invoke(plan.input if plan else input, inner_config)
        except _Stop as stop:
            return call.stopped(stop, input)
        except ParentCommand as exc:
            rerouted = call.parent_command(exc.args[0])
            if rerouted is None:
                raise
            return rerouted
        finally:
            if token is not None:
                var_child_runnable_config.reset(token)
        if call.handler is not None and call.handler.stop is not None:
            return call.stopped(call.handler.stop, input)  # the node swallowed the signal
        return call.finish(output, plan)

    async def arun(input: Any, config: RunnableConfig) -> Any:
        call = _NodeCall(guard, name, config, reroutable, tool_node, messages_key)
        if call.needs_history():
            call.seed(await aearlier_visits(config))
        blocked = call.enter()
        if blocked is not None:
            return blocked
        plan = call.plan_tools(input)
        if plan is not None and not plan.run_node:
            return call.finish(None, plan)
        inner_config = call.inner_config()
        token = var_child_runnable_config.set(inner_config) if call.handler else None
        try:
            output = await inner.ainvoke(plan.input if plan else input, inner_config)
        except _Stop as stop:
            return call.stopped(stop, input)
        except ParentCommand as exc:
            rerouted = call.parent_command(exc.args[0])
            if rerouted is None:
                raise
            return rerouted
        finally:
            if token is not None:
                var_child_runnable_config.reset(token)
        if call.handler is not None and call.handler.stop is not None:
            return call.stopped(call.handler.stop, input)
        return call.finish(output, plan)

    return RunnableCallable(run, arun, name=name, trace=False, recurse=False)


# -- routers and static edges -----------------------------------------------------------
def _route_result(
    guard: _Guard,
    source: str,
    result: Any,
    ends: Mapping[Hashable, str] | None,
    fallback_key: Hashable | None,
    config: RunnableConfig,
) -> Any:
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    node = None if source == START else source
    for item in items:
        v: TransitionViolation | None
        if isinstance(item, Send):
            v = guard.check_target(
                source, item.node, "Send", node=node, would_be=item.arg, config=config
            )
        elif ends is not None:
            try:
                target = ends.get(item)
            except TypeError:  # unhashable router output
                target = None
            if target is None:
                v = guard.violation(
                    "unmapped_route",
                    source,
                    str(item),
                    f"router of {source} returned {item!r}, which its path map "
                    f"({', '.join(map(repr, ends))}) does not contain",
                    node=node,
                    config=config,
                    would_be={"route": item},
                )
            else:
                v = guard.check_target(
                    source, target, "router", node=node, would_be=None, config=config
                )
        else:
            v = guard.check_target(source, item, "router", node=node, would_be=None, config=config)
        if v is None:
            continue
        fallback = guard.decide(v, config)
        if fallback is not None:
            _run_state(config).diverted.add(_task_key(config))
            return [fallback_key] if ends is not None else [fallback]
    return result


def guard_router(
    guard: _Guard,
    source: str,
    path: Runnable[Any, Any],
    ends: Mapping[Hashable, str] | None,
    fallback_key: Hashable | None,
) -> Runnable:
    """Wrap a conditional edge's router: check its choice before LangGraph maps it."""

    def run(state: Any, config: RunnableConfig) -> Any:
        if _task_key(config) in _run_state(config).diverted:
            return []
        result = path.invoke(state, config)
        return _route_result(guard, source, result, ends, fallback_key, config)

    async def arun(state: Any, config: RunnableConfig) -> Any:
        if _task_key(config) in _run_state(config).diverted:
            return []
        result = await path.ainvoke(state, config)
        return _route_result(guard, source, result, ends, fallback_key, config)

    return RunnableCallable(run, arun, name=path.get_name(), trace=False, recurse=False)


def static_edges(
    guard: _Guard, source: str, targets: Sequence[str], fallback_key: Hashable | None
) -> Runnable:
    """The static edges of ``source`` as a router: same targets, silent when rerouted."""
    fixed = list(targets)

    def run(state: Any, config: RunnableConfig) -> Any:
        run_state = _run_state(config)
        task = _task_key(config)
        if task in run_state.diverted:
            run_state.diverted.discard(task)
            return []
        out: list[Any] = list(fixed)
        for target in fixed:
            if guard.policy.allows(source, target):
                continue
            v = guard.check_target(
                source, target, "edge", node=source, would_be=None, config=config
            )
            if v is not None:
                fallback = guard.decide(v, config)
                if fallback is not None:
                    return [fallback_key]
        return out

    return RunnableCallable(run, name=EDGES_BRANCH, trace=False, recurse=False)
