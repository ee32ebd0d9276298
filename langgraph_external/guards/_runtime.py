"""Enforcement at run time: node wrappers, router wrappers, per-invocation state.

Every way LangGraph can enter a node is a decision made by the node (or router) before
it: a static edge, a conditional router, a returned ``Command(goto=...)`` or ``Send``.
The guard checks each decision *where it is made*, inside the deciding task, so an
illegal target is blocked before it is scheduled — its body never runs. Checks that
belong to the node itself (visit limit on entry, tool tiers before and while it runs,
its state update on exit, a ``Command(graph=PARENT)`` one of its subgraphs sends up) run
in the node's own wrapper. What a violation leads to is the :class:`Enforcer`'s call
(``_enforcer``); refused tool calls are stopped by ``_tool_check``.

``route`` must replace a decision, not add to it, so the static edges of a node that
may be rerouted are turned into an equivalent guard branch (same ``branch:to:<node>``
channels, same checkpoints) that stays silent when the node was rerouted.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.graph import START
from langgraph.types import Command, Send

from langgraph_external.guards._enforcer import Enforcer, goto_targets
from langgraph_external.guards._errors import TransitionViolation
from langgraph_external.guards._tool_check import (
    ToolPlan,
    ToolStop,
    ToolTierCheck,
    tool_violation,
    with_handler,
)
from langgraph_external.guards._tools import (
    add_answers,
    pending_tool_calls,
    refusal_message,
    unanswered_calls,
    updates_only,
)
from langgraph_external.guards._visits import aearlier_visits, earlier_visits
from langgraph_external.record.namespaces import parent_of
from langgraph_external.upstream.langgraph import (
    ParentCommand,
    RunnableCallable,
    is_resuming,
    run_key,
    task_id_of,
)

FALLBACK_KEY = "__lgx_fallback__"
"""Router key the guard adds to a router's path map to reach the fallback node."""
EDGES_BRANCH = "__lgx_edges__"
"""Name of the branch that replaces the static edges of a reroutable node."""


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
# task of that call (see ``upstream.langgraph.run_key``), so the state lives exactly as
# long as the run.
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
    return str(conf.get("checkpoint_ns") or task_id_of(config) or "")


# -- nodes --------------------------------------------------------------------------------
@dataclasses.dataclass(slots=True)
class _NodeCall:
    """One execution of a guarded node: entry check, tool check, exit check."""

    guard: Enforcer
    name: str
    config: RunnableConfig
    reroutable: bool
    tool_node: bool
    messages_key: str
    handler: ToolTierCheck | None = None
    approved: set[str] = dataclasses.field(default_factory=set)
    plan: ToolPlan | None = None
    run: _RunState | None = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.run = _run_state(self.config) if self.guard.counts_visits else None

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
        with _LOCK:
            if self.run.seeded:
                return
            self.run.seeded = True
            for node, n in counts.items():
                seen = self.run.visits.setdefault(("", node), set())
                seen.update(f"earlier:{i}" for i in range(n))

    def begin(self, input: Any) -> Command[Any] | None:
        """The checks before the body: a ``Command`` to return instead of running it, or
        ``None`` to run it (on ``plan.input`` when there is a plan)."""
        blocked = self.enter()
        if blocked is not None:
            return blocked
        self.plan = self.plan_tools(input)
        if self.plan is not None and not self.plan.run_node:
            return self.finish(None)
        return None

    @contextmanager
    def body_config(self) -> Iterator[RunnableConfig]:
        """The body's config, also set in the context while it runs: tools called without
        an explicit config read it from there."""
        config = self.config
        if self.guard.policy.guards_tools:
            self.handler = ToolTierCheck(self.guard, self.name, self.config, self.approved)
            config = with_handler(self.config, self.handler)
        token = var_child_runnable_config.set(config) if self.handler else None
        try:
            yield config
        finally:
            if token is not None:
                var_child_runnable_config.reset(token)

    def caught(self, exc: ToolStop | ParentCommand, input: Any) -> Any:
        if isinstance(exc, ToolStop):
            return self.stopped(exc, input)
        rerouted = self.parent_command(exc.args[0])
        if rerouted is None:
            raise exc
        return rerouted

    def end(self, output: Any, input: Any) -> Any:
        if self.handler is not None and self.handler.stop is not None:
            return self.stopped(self.handler.stop, input)  # the node swallowed the signal
        return self.finish(output)

    def decide(self, v: TransitionViolation) -> Command[Any] | None:
        """Apply the policy to ``v``: the reroute, or ``None`` when a human approved it."""
        fallback = self.guard.decide(v, self.config)
        return None if fallback is None else self.divert(fallback)

    def enter(self) -> Command[Any] | None:
        """Count the visit; a ``Command`` to return instead of running the body, or None."""
        limit = self.guard.policy.max_visits(self.name)
        if limit is None or self.run is None:
            return None
        task = _task_key(self.config)
        with _LOCK:
            seen = self.run.visits.setdefault((parent_of(task), self.name), set())
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
        return self.decide(v)

    def plan_tools(self, value: Any) -> ToolPlan | None:
        """Decide on a tool node's pending tool calls before it runs: refused ones are left
        out of its input and answered by the guard."""
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
            v = tool_violation(self.guard, self.name, name, call.get("args"), call_id, self.config)
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
        return ToolPlan(pending.rebuild(allowed), bool(allowed), answers, order, fallback)

    def divert(self, fallback: str, update: Any = None) -> Command[Any]:
        if self.reroutable:
            _run_state(self.config).diverted.add(_task_key(self.config))
        return Command(goto=fallback, update=update)

    def stopped(self, stop: ToolStop, value: Any) -> Command[Any]:
        """The node's result after the tool callback stopped a refused tool call.

        The node did not finish, so its update is lost. The latest ``AIMessage``'s
        unanswered tool calls are answered here (the refused one with the refusal, the
        others with a notice), so the state stays valid for a chat model.
        """
        if stop.error is not None:
            raise stop.error from None
        assert stop.fallback is not None
        notice = (
            f"Not answered: the step was stopped by the transition policy "
            f"({stop.violation.message}); this call's result was discarded."
        )
        answers = [
            refusal_message(call, self.guard.refusal_text(stop.violation))
            if call.get("id") == stop.tool_call_id
            else refusal_message(call, notice)
            for call in unanswered_calls(value, self.messages_key)
        ]
        update = {self.messages_key: answers} if answers else None
        return self.divert(stop.fallback, update)

    def finish(self, output: Any) -> Any:
        """The node's output after the exit check and the answers to refused calls."""
        checked = self.exit(output)
        plan = self.plan
        if plan is None or checked is not output:
            return checked
        kept = add_answers(updates_only(output), plan.answers, self.messages_key, plan.order)
        return self.divert(plan.fallback, kept)

    def parent_command(self, command: Command[Any]) -> Command[Any] | None:
        """Check a ``Command(graph=PARENT)`` a subgraph of this node sent to this graph: the
        reroute, or ``None`` to let LangGraph apply the command."""
        conf = self.config.get("configurable") or {}
        if command.graph not in (conf.get("checkpoint_ns"), self.name):
            return None  # addressed to a graph further up
        probe = Command(update=command.update, goto=command.goto)
        checked = self.exit(probe, "Command.PARENT")  # raises for raise
        return None if checked is probe else checked

    def exit(self, output: Any, via: str = "Command.goto") -> Any:
        """Check the update and every target the output names; the output to return."""
        allowed = self.guard.policy.node_rule(self.name).writes
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
                rerouted = self.decide(v)
                if rerouted is not None:
                    return rerouted
        for cmd in output if isinstance(output, (list, tuple)) else [output]:
            if not isinstance(cmd, Command) or cmd.graph is not None:
                continue  # addressed to the parent graph: its own guard decides
            for target, via_ in goto_targets(cmd.goto, via):
                bad = self.guard.check_target(
                    self.name, target, via_, node=self.name, would_be=output, config=self.config
                )
                rerouted = None if bad is None else self.decide(bad)
                if rerouted is not None:
                    return rerouted
        return output


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
    guard: Enforcer,
    name: str,
    inner: Runnable[Any, Any],
    reroutable: bool,
    *,
    tool_node: bool = False,
    messages_key: str = "messages",
) -> Runnable:
    """Wrap one node's runnable (sync and async) with the guard's checks. ``tool_node``: it
    runs the latest ``AIMessage``'s tool calls; refused ones are decided before it runs."""

    def run(input: Any, config: RunnableConfig) -> Any:
        call = _NodeCall(guard, name, config, reroutable, tool_node, messages_key)
        if call.needs_history():
            call.seed(earlier_visits(config))
        early = call.begin(input)
        if early is not None:
            return early
        with call.body_config() as inner_config:
            try:
                output = inner.invoke(call.plan.input if call.plan else input, inner_config)
            except (ToolStop, ParentCommand) as exc:
                return call.caught(exc, input)
        return call.end(output, input)

    async def arun(input: Any, config: RunnableConfig) -> Any:
        call = _NodeCall(guard, name, config, reroutable, tool_node, messages_key)
        if call.needs_history():
            call.seed(await aearlier_visits(config))
        early = call.begin(input)
        if early is not None:
            return early
        with call.body_config() as inner_config:
            try:
                output = await inner.ainvoke(call.plan.input if call.plan else input, inner_config)
            except (ToolStop, ParentCommand) as exc:
                return call.caught(exc, input)
        return call.end(output, input)

    return RunnableCallable(run, arun, name=name, trace=False, recurse=False)


# -- routers and static edges -----------------------------------------------------------
def _route_result(
    guard: Enforcer,
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
        else:
            try:
                target = item if ends is None else ends.get(item)
            except TypeError:  # unhashable router output
                target = None
            if ends is not None and target is None:
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
        if v is None:
            continue
        fallback = guard.decide(v, config)
        if fallback is not None:
            _run_state(config).diverted.add(_task_key(config))
            return [fallback_key] if ends is not None else [fallback]
    return result


def guard_router(
    guard: Enforcer,
    source: str,
    path: Runnable[Any, Any],
    ends: Mapping[Hashable, str] | None,
    fallback_key: Hashable | None,
) -> Runnable:
    """Wrap a conditional edge's router: check its choice before LangGraph maps it."""

    def run(state: Any, config: RunnableConfig) -> Any:
        if _task_key(config) in _run_state(config).diverted:
            return []
        return _route_result(guard, source, path.invoke(state, config), ends, fallback_key, config)

    async def arun(state: Any, config: RunnableConfig) -> Any:
        if _task_key(config) in _run_state(config).diverted:
            return []
        result = await path.ainvoke(state, config)
        return _route_result(guard, source, result, ends, fallback_key, config)

    return RunnableCallable(run, arun, name=path.get_name(), trace=False, recurse=False)


def static_edges(
    guard: Enforcer, source: str, targets: Sequence[str], fallback_key: Hashable | None
) -> Runnable:
    """The static edges of ``source`` as a router: same targets, silent when rerouted."""
    fixed = list(targets)

    def run(state: Any, config: RunnableConfig) -> Any:
        run_state = _run_state(config)
        task = _task_key(config)
        if task in run_state.diverted:
            run_state.diverted.discard(task)
            return []
        for target in fixed:
            if guard.policy.allows(source, target):
                continue  # also when the target was added to the builder after guard()
            v = guard.check_target(
                source, target, "edge", node=source, would_be=None, config=config
            )
            if v is not None and guard.decide(v, config) is not None:
                return [fallback_key]
        return list(fixed)

    return RunnableCallable(run, name=EDGES_BRANCH, trace=False, recurse=False)
