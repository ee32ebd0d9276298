"""``guard(builder, policy)``: wrap a StateGraph's nodes and routers with the policy."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, Literal, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import START, StateGraph

from langgraph_external.guards._check import CheckReport, Topology, check
from langgraph_external.guards._enforcer import Enforcer, ViolationHook
from langgraph_external.guards._errors import PolicyError
from langgraph_external.guards._policy import TransitionPolicy
from langgraph_external.guards._runtime import (
    EDGES_BRANCH,
    FALLBACK_KEY,
    guard_node,
    guard_router,
    static_edges,
)
from langgraph_external.guards._tools import DEFAULT_REFUSAL
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.upstream.langgraph import (
    BranchSpec,
    coerce_to_runnable,
    is_tool_node,
    messages_key_of,
)

B = TypeVar("B", bound=StateGraph)
PolicyLike = TransitionPolicy | str | os.PathLike[str]


def _load(policy: PolicyLike) -> TransitionPolicy:
    if isinstance(policy, TransitionPolicy):
        return policy
    return TransitionPolicy.from_file(policy)


def guard(
    builder: B,
    policy: PolicyLike,
    *,
    pipeline: Pipeline | None = None,
    on_violation: ViolationHook | None = None,
    check_graph: Literal["raise", "warn", "ignore"] = "raise",
    tool_nodes: Iterable[str] = (),
    refusal: str = DEFAULT_REFUSAL,
) -> B:
    """Enforce ``policy`` on every node and router of ``builder`` (before ``compile``).

    The builder is changed in place and returned, so it chains into ``compile``. The
    static check (:func:`check`) runs first: with ``check_graph="raise"`` a graph whose
    structure contradicts the policy (a static edge it forbids, a node it does not
    declare, a state the graph lacks) is refused with :class:`PolicyError`; ``"warn"``
    turns that into a warning and enforces at run time only.

    The graph compiled from the builder also checks a ``Command(goto=...)`` given as the
    input of a run, as a decision of ``START``.

    Args:
        builder: the ``StateGraph`` to guard (not yet compiled).
        policy: a :class:`TransitionPolicy` or the path of a YAML/JSON policy file.
        pipeline: where ``policy_violation`` events go. Not needed when the run's config
            carries the audit handler (``External.config(...)``): the guard records
            through that handler's pipeline.
        on_violation: called with each violation and its outcome (``raised``,
            ``routed``, ``interrupted``, ``approved``, ``rejected``).
        check_graph: what to do when the static check finds errors.
        tool_nodes: nodes that execute the pending tool calls of the latest
            ``AIMessage`` like LangGraph's ``ToolNode`` (which is recognized by itself).
            Their refused calls are decided before they run and answered with a
            ``ToolMessage``, so ``route`` keeps the allowed calls' results.
        refusal: text of that ``ToolMessage``; fields ``{tool}``, ``{node}``, ``{tier}``,
            ``{rule}``, ``{message}``, ``{policy}``.

    Returns:
        The same builder.

    Example:
        >>> from typing import TypedDict
        >>> from langgraph.graph import StateGraph, START, END
        >>> from langgraph.types import Command
        >>> class S(TypedDict):
        ...     n: int
        >>> b = StateGraph(S)
        >>> _ = b.add_node("a", lambda s: Command(goto="c", update={"n": 1}))
        >>> _ = b.add_node("c", lambda s: {"n": 99})
        >>> _ = b.add_edge(START, "a")
        >>> from langgraph_external.guards import TransitionViolation
        >>> policy = TransitionPolicy(states=["a", "c"], transitions={"START": ["a"], "a": ["END"]})
        >>> graph = guard(b, policy, check_graph="ignore").compile()
        >>> try:
        ...     graph.invoke({"n": 0})
        ... except TransitionViolation as v:
        ...     print(v.rule, v.source, "->", v.target)
        illegal_transition a -> c
    """
    policy = _load(policy)
    if getattr(builder, "_lgx_topology", None) is not None:
        raise PolicyError("this StateGraph is already guarded")
    topology = Topology.of(builder)
    _static_check(check(policy, builder), check_graph)
    g = Enforcer(policy, frozenset(builder.nodes), pipeline, on_violation, refusal)
    declared_tool_nodes = set(tool_nodes)
    unknown = sorted(declared_tool_nodes - set(builder.nodes))
    if unknown:
        raise PolicyError(f"tool_nodes: {', '.join(map(repr, unknown))} not in the graph")

    static = _edges_to_check(builder, policy)
    _guard_routers(builder, policy, g)
    _route_static_edges(builder, policy, g, static)
    has_successors = set(static) | {s for s in builder.branches if s != START}
    _guard_nodes(builder, g, has_successors, declared_tool_nodes)
    builder._lgx_topology = topology  # type: ignore[attr-defined]
    builder._lgx_guard = g  # type: ignore[attr-defined]
    _check_inputs_after_compile(builder)
    return builder


def _edges_to_check(builder: StateGraph[Any], policy: TransitionPolicy) -> dict[str, list[str]]:
    """The static edges the guard must decide at run time, by source: those the policy
    forbids, and every edge of a node whose violations reroute to a fallback."""
    reroutable = {n for n in builder.nodes if policy.action_for(n).fallback is not None}
    static: dict[str, list[str]] = {}
    for src, dst in builder.edges:
        if src != START and (src in reroutable or not policy.allows(src, dst)):
            static.setdefault(src, []).append(dst)
    return static


def _guard_routers(builder: StateGraph[Any], policy: TransitionPolicy, g: Enforcer) -> None:
    """Wrap every router (conditional edge) of ``builder`` so its decisions are checked;
    a router with a path map also maps to its source's fallback."""
    for src, branches in list(builder.branches.items()):
        fallback = policy.action_for(None if src == START else src).fallback
        for name, branch in list(branches.items()):
            mapped, key = _with_fallback(branch.ends, fallback) if branch.ends else (None, None)
            path = guard_router(g, src, branch.path, branch.ends, key)
            branches[name] = branch._replace(path=path, ends=mapped)


def _route_static_edges(
    builder: StateGraph[Any],
    policy: TransitionPolicy,
    g: Enforcer,
    static: dict[str, list[str]],
) -> None:
    """Replace the ``static`` edges of each source by one checked router over the same
    targets (and the source's fallback)."""
    for src, targets in sorted(static.items()):
        ends, key = _with_fallback({t: t for t in sorted(targets)}, policy.action_for(src).fallback)
        for dst in targets:
            builder.edges.discard((src, dst))
        builder.branches[src][EDGES_BRANCH] = BranchSpec(
            path=static_edges(g, src, sorted(targets), key), ends=ends
        )


def _with_fallback(
    ends: Mapping[Hashable, str], fallback: str | None
) -> tuple[dict[Hashable, str], Hashable | None]:
    """A router's path map ``ends`` that also reaches ``fallback``, and the key to it."""
    mapped = dict(ends)
    if fallback is None:
        return mapped, None
    key = next((k for k, v in mapped.items() if v == fallback), FALLBACK_KEY)
    mapped.setdefault(key, fallback)
    return mapped, key


def _guard_nodes(
    builder: StateGraph[Any],
    g: Enforcer,
    has_successors: set[str],
    tool_nodes: set[str],
) -> None:
    """Wrap every node's runnable with the guard's checks (``has_successors``: the nodes
    whose next node the guard decides; ``tool_nodes``: declared to run tool calls like
    ``ToolNode``)."""
    for name, spec in list(builder.nodes.items()):
        inner = spec.runnable
        if not isinstance(inner, Runnable):  # add_node stores a runnable; be safe
            inner = coerce_to_runnable(inner, name=name, trace=False)  # type: ignore[arg-type]
        wrapped = guard_node(
            g,
            name,
            inner,
            name in has_successors,
            tool_node=name in tool_nodes or is_tool_node(inner),
            messages_key=messages_key_of(inner),
        )
        builder.nodes[name] = dataclasses.replace(spec, runnable=wrapped)


def _check_inputs_after_compile(builder: StateGraph[Any]) -> None:
    """Make ``builder.compile()`` return a graph that checks ``Command`` inputs."""
    compile_graph = builder.compile

    def compile(*args: Any, **kwargs: Any) -> Any:
        graph = compile_graph(*args, **kwargs)
        # rebuilt the way Pregel.copy() rebuilds a graph, as the input-checking subclass
        attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
        return _input_checking(type(graph))(**attrs)

    compile.__doc__ = compile_graph.__doc__
    builder.compile = compile  # type: ignore[method-assign]


_CHECKING: dict[type, type] = {}


def _input_checking(cls: type) -> type:
    """A subclass of the compiled graph's class whose runs check their input first.

    A subclass (not patched methods) so that ``with_config``/``copy`` keep it.
    """
    if getattr(cls, "_lgx_checks_input", False):
        return cls
    sub = _CHECKING.get(cls)
    if sub is None:
        attrs = {"__module__": cls.__module__}
        sub = _CHECKING[cls] = type(cls.__name__, (_InputCheck, cls), attrs)
    return sub


class _InputCheck:
    """Mixin: ``stream``/``astream`` (hence ``invoke``/``ainvoke``) check a ``Command`` input."""

    __slots__ = ()
    _lgx_checks_input = True
    builder: Any

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        checked = self.builder._lgx_guard.check_input(input, config)
        return super().stream(checked, config, **kwargs)  # type: ignore[misc]

    def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        checked = self.builder._lgx_guard.check_input(input, config)
        return super().astream(checked, config, **kwargs)  # type: ignore[misc]


def _static_check(report: CheckReport, mode: str) -> None:
    if mode == "ignore" or report.ok:
        return
    if mode == "raise":
        raise PolicyError([("graph", i.message) for i in report.errors], source=report.policy_name)
    warnings.warn(report.text(), stacklevel=3)


F = TypeVar("F", bound=Callable[..., Any])


def guarded(
    policy: PolicyLike,
    name: str | None = None,
    *,
    pipeline: Pipeline | None = None,
    on_violation: ViolationHook | None = None,
    tool_node: bool = False,
    refusal: str = DEFAULT_REFUSAL,
) -> Callable[[Callable[..., Any] | Runnable[Any, Any]], Runnable[Any, Any]]:
    """Decorator: guard one node without guarding the whole graph.

    Checks the node's visit limit, its tool calls, its state update and the targets of
    the ``Command``/``Send`` it returns. Its static edges and routers are not checked
    (use :func:`guard` for those). Targets are checked against the policy's states.
    The node becomes a runnable, so declare ``Command`` destinations with
    ``add_node(..., destinations=(...))`` (return annotations are not read through it).

    Example:
        >>> p = TransitionPolicy(states=["pay"], transitions={"START": ["pay"], "pay": ["END"]},
        ...                      nodes={"pay": {"writes": ["receipt"]}})
        >>> @guarded(p)
        ... def pay(state: dict) -> dict:
        ...     return {"receipt": "r-1"}
        >>> pay.name
        'pay'
    """
    pol = _load(policy)

    def decorate(fn: Callable[..., Any] | Runnable[Any, Any]) -> Runnable[Any, Any]:
        node = name or getattr(fn, "__name__", None) or getattr(fn, "name", None)
        if not node:
            raise PolicyError("guarded(): pass the node name")
        states = frozenset(s for s in pol.states if s != START)
        g = Enforcer(pol, states, pipeline, on_violation, refusal)
        inner = coerce_to_runnable(fn, name=node, trace=False)
        return guard_node(
            g,
            node,
            inner,
            reroutable=False,
            tool_node=tool_node or is_tool_node(fn),
            messages_key=messages_key_of(fn),
        )

    return decorate
