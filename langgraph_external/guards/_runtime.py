"""Enforcement at run time: node wrappers, router wrappers and the tool-tier check.

Every way LangGraph can enter a node is a decision made by the node (or router) before
it: a static edge, a conditional router, a returned ``Command(goto=...)`` or ``Send``.
The guard checks each decision *where it is made*, inside the deciding task, so an
illegal target is blocked before it is scheduled — its body never runs. Checks that
belong to the node itself (visit limit on entry, tool tiers while it runs, its state
update on exit) run in the node's own wrapper.

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
from langgraph._internal._runnable import RunnableCallable
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START
from langgraph.types import Command, Send, interrupt

from langgraph_external.events import Event, EventKind
from langgraph_external.guards._errors import TransitionViolation
from langgraph_external.guards._policy import TransitionPolicy
from langgraph_external.pipeline import Pipeline
from langgraph_external.render import to_readable

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


# Keyed by the invocation's stream writer: LangGraph creates one per ``stream()`` call and
# shares it with every task of that call, so the state lives exactly as long as the run.
_RUNS: weakref.WeakKeyDictionary[Any, _RunState] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _run_state(config: RunnableConfig) -> _RunState:
    conf = config.get("configurable") or {}
    key = getattr(conf.get("__pregel_runtime"), "stream_writer", None)
    if key is None:  # not inside a LangGraph run: nothing to share
        return _RunState()
    with _LOCK:
        state = _RUNS.get(key)
        if state is None:
            state = _RUNS[key] = _RunState()
        return state


# Visit counts of runs paused by a visit-limit interrupt, so that the resumed run (a new
# invocation) continues counting instead of starting again: {(thread_id, task): state}.
_SUSPENDED: dict[tuple[str, str], _RunState] = {}
_SUSPENDED_MAX = 10_000


def _suspend(config: RunnableConfig, state: _RunState) -> None:
    conf = config.get("configurable") or {}
    with _LOCK:
        _SUSPENDED[(str(conf.get("thread_id")), _task_key(config))] = state
        while len(_SUSPENDED) > _SUSPENDED_MAX:
            del _SUSPENDED[next(iter(_SUSPENDED))]


def _resume_counts(config: RunnableConfig, state: _RunState) -> None:
    conf = config.get("configurable") or {}
    with _LOCK:
        old = _SUSPENDED.pop((str(conf.get("thread_id")), _task_key(config)), None)
    if old is not None and old is not state:
        for key, tasks in old.visits.items():
            state.visits.setdefault(key, set()).update(tasks)


def _task_key(config: RunnableConfig) -> str:
    conf = config.get("configurable") or {}
    return str(conf.get("checkpoint_ns") or conf.get("__pregel_task_id") or "")


# -- decisions ----------------------------------------------------------------------------
class _Guard:
    """Shared by all wrappers of one guarded graph: the policy and where to record."""

    def __init__(
        self,
        policy: TransitionPolicy,
        nodes: frozenset[str],
        pipeline: Pipeline | None,
        hook: ViolationHook | None,
    ) -> None:
        self.policy = policy
        self.nodes = nodes
        self.pipeline = pipeline
        self.hook = hook

    def violation(
        self,
        rule: str,
        source: str | None,
        target: str | None,
        message: str,
        *,
        node: str | None,
        would_be: Any = None,
    ) -> TransitionViolation:
        return TransitionViolation(
            rule,
            source,
            target,
            message,
            node=node,
            would_be=to_readable(would_be),
            policy_hash=self.policy.hash,
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
            if fallback is None:
                self._record(v, config, "rejected", action.action, fallback)
                raise v
            self._record(v, config, "rejected", action.action, fallback)
            return fallback
        if action.action == "route" and fallback is not None:
            self._record(v, config, "routed", action.action, fallback)
            return fallback
        self._record(v, config, "raised", action.action, fallback)
        raise v

    def _request(self, v: TransitionViolation, fallback: str | None) -> dict[str, Any]:
        return {
            "type": "policy_violation",
            "rule": v.rule,
            "from": v.source,
            "to": v.target,
            "node": v.node,
            "message": v.message,
            "would_be": v.would_be,
            "fallback": fallback,
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
        log = logger.info if outcome == "approved" else logger.warning
        log("policy violation (%s, %s): %s", v.rule, outcome, v.message)
        if self.hook is not None:
            self.hook(v, outcome)
        if self.pipeline is None:
            return
        conf = config.get("configurable") or {}
        thread_id = conf.get("thread_id")
        if thread_id is None:
            logger.debug("policy violation not recorded: the run has no thread_id")
            return
        meta = config.get("metadata") or {}
        task_ns = str(conf.get("checkpoint_ns") or "")
        parent_ns, _, last = task_ns.rpartition("|")
        self.pipeline.emit(
            Event.new(
                EventKind.POLICY_VIOLATION,
                str(thread_id),
                node=v.node,
                step=meta.get("langgraph_step"),
                task_id=last.rpartition(":")[2] or None,
                checkpoint_ns=parent_ns,
                name=v.rule,
                status=outcome,
                payload={
                    "from": v.source,
                    "to": v.target,
                    "rule": v.rule,
                    "action": action,
                    "outcome": outcome,
                    "fallback": fallback if outcome in ("routed", "rejected") else None,
                    "message": v.message,
                    "would_be": v.would_be,
                    "policy_hash": self.policy.hash,
                    "policy_name": self.policy.name,
                },
            )
        )

    # -- checks -------------------------------------------------------------------------
    def check_target(
        self, source: str, target: Any, via: str, *, node: str | None, would_be: Any
    ) -> TransitionViolation | None:
        """A violation if ``source -> target`` is unknown or not allowed, else ``None``."""
        if not isinstance(target, str) or (target not in self.nodes and target != END):
            return self.violation(
                "unknown_target",
                source,
                str(target),
                f"{source} -> {target!r} ({via}): no such node in the graph",
                node=node,
                would_be=would_be,
            )
        if not self.policy.allows(source, target):
            return self.violation(
                "illegal_transition",
                source,
                target,
                f"{source} -> {target} ({via}) is not an allowed transition",
                node=node,
                would_be=would_be,
            )
        return None


def _approved(answer: Any) -> bool:
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, str):
        return answer.strip().lower() in ("approve", "approved", "allow", "yes", "y", "true")
    if isinstance(answer, Mapping):
        return any(answer.get(k) is True for k in ("approve", "approved", "allow"))
    return False


# -- nodes --------------------------------------------------------------------------------
class _ToolTierCheck(BaseCallbackHandler):
    """Refuses a tool call the node may not make, before the tool's body runs.

    LangChain calls ``on_tool_start`` before executing any tool (``tool.invoke``,
    ``ToolNode``, agents); a handler with ``raise_error`` stops the call there.
    """

    raise_error = True
    run_inline = True

    def __init__(self, guard: _Guard, node: str, config: RunnableConfig) -> None:
        self.guard = guard
        self.node = node
        self.config = config
        self.routed_to: str | None = None

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        name = str((serialized or {}).get("name") or kwargs.get("name") or "")
        policy = self.guard.policy
        if policy.may_call(self.node, name):
            return
        tier = policy.tool_tier(name)
        v = self.guard.violation(
            "tool_tier",
            self.node,
            name,
            f"{self.node} may not call tool {name!r} (tier {tier})",
            node=self.node,
            would_be={"tool": name, "tier": tier, "input": kwargs.get("inputs") or input_str},
        )
        fallback = self.guard.decide(v, self.config)
        if fallback is not None:
            self.routed_to = fallback
            raise v  # stop the tool; the node wrapper reroutes


def _with_handler(config: RunnableConfig, handler: BaseCallbackHandler) -> RunnableConfig:
    callbacks = config.get("callbacks")
    if callbacks is None:
        new: Any = [handler]
    elif isinstance(callbacks, list):
        new = [*callbacks, handler]
    else:
        new = callbacks.copy()
        new.add_handler(handler, inherit=True)
    return patch_config(config, callbacks=new)


class _NodeCall:
    """One execution of a guarded node: entry check, tool check, exit check."""

    __slots__ = ("config", "guard", "handler", "name", "reroutable")

    def __init__(self, guard: _Guard, name: str, config: RunnableConfig, reroutable: bool):
        self.guard = guard
        self.name = name
        self.config = config
        self.reroutable = reroutable
        self.handler: _ToolTierCheck | None = None

    def enter(self) -> Command[Any] | None:
        """Count the visit; a ``Command`` to return instead of running the body, or None."""
        limit = self.guard.policy.max_visits(self.name)
        if limit is None:
            return None
        run = _run_state(self.config)
        _resume_counts(self.config, run)
        task = _task_key(self.config)
        scope = task.rpartition("|")[0]
        seen = run.visits.setdefault((scope, self.name), set())
        seen.add(task)  # a set: re-running a task after an interrupt is not a new visit
        if len(seen) <= limit:
            return None
        v = self.guard.violation(
            "visit_limit",
            self.name,
            self.name,
            f"{self.name} entered {len(seen)} times in this run (limit {limit})",
            node=self.name,
            would_be={"visits": len(seen), "limit": limit},
        )
        try:
            fallback = self.guard.decide(v, self.config)
        except GraphInterrupt:
            _suspend(self.config, run)
            raise
        return None if fallback is None else self.divert(fallback)

    def inner_config(self) -> RunnableConfig:
        if not self.guard.policy.guards_tools:
            return self.config
        self.handler = _ToolTierCheck(self.guard, self.name, self.config)
        return _with_handler(self.config, self.handler)

    def routed(self) -> str | None:
        return self.handler.routed_to if self.handler is not None else None

    def divert(self, fallback: str) -> Command[Any]:
        if self.reroutable:
            _run_state(self.config).diverted.add(_task_key(self.config))
        return Command(goto=fallback)

    def exit(self, output: Any) -> Any:
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
                    would_be=output,
                )
                fallback = self.guard.decide(v, self.config)
                if fallback is not None:
                    return self.divert(fallback)
        for cmd in _commands(output):
            if cmd.graph is not None:
                continue  # addressed to the parent graph: its own guard decides
            for target, via in _goto_targets(cmd.goto):
                bad = self.guard.check_target(
                    self.name, target, via, node=self.name, would_be=output
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


def _goto_targets(goto: Any) -> list[tuple[Any, str]]:
    items = goto if isinstance(goto, (list, tuple)) else [goto]
    out: list[tuple[Any, str]] = []
    for item in items:
        if isinstance(item, Send):
            out.append((item.node, "Send"))
        elif item is not None and item != ():
            out.append((item, "Command.goto"))
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


def guard_node(guard: _Guard, name: str, inner: Runnable[Any, Any], reroutable: bool) -> Runnable:
    """Wrap one node's runnable (sync and async) with the guard's checks."""

    def run(input: Any, config: RunnableConfig) -> Any:
        call = _NodeCall(guard, name, config, reroutable)
        blocked = call.enter()
        if blocked is not None:
            return blocked
        inner_config = call.inner_config()
        token = var_child_runnable_config.set(inner_config) if call.handler else None
        try:
            output = inner.invoke(input, inner_config)
        except TransitionViolation:
            if call.routed() is None:
                raise
        finally:
            # tools called without an explicit config read it from this context variable
            if token is not None:
                var_child_runnable_config.reset(token)
        routed = call.routed()  # also when the node swallowed the refusal
        if routed is not None:
            return call.divert(routed)
        return call.exit(output)

    async def arun(input: Any, config: RunnableConfig) -> Any:
        call = _NodeCall(guard, name, config, reroutable)
        blocked = call.enter()
        if blocked is not None:
            return blocked
        inner_config = call.inner_config()
        token = var_child_runnable_config.set(inner_config) if call.handler else None
        try:
            output = await inner.ainvoke(input, inner_config)
        except TransitionViolation:
            if call.routed() is None:
                raise
        finally:
            # tools called without an explicit config read it from this context variable
            if token is not None:
                var_child_runnable_config.reset(token)
        routed = call.routed()
        if routed is not None:
            return call.divert(routed)
        return call.exit(output)

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
            v = guard.check_target(source, item.node, "Send", node=node, would_be=item.arg)
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
                    would_be={"route": item},
                )
            else:
                v = guard.check_target(source, target, "router", node=node, would_be=None)
        else:
            v = guard.check_target(source, item, "router", node=node, would_be=None)
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
            v = guard.check_target(source, target, "edge", node=source, would_be=None)
            if v is not None:
                fallback = guard.decide(v, config)
                if fallback is not None:
                    return [fallback_key]
        return out

    return RunnableCallable(run, name=EDGES_BRANCH, trace=False, recurse=False)
