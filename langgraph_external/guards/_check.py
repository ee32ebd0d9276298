"""Static check: compare a policy with a graph's declared structure, without running it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from langgraph_external.guards._states import END, START, DeclaredTransitions, state_label

if TYPE_CHECKING:
    from langgraph.graph import StateGraph

EdgeKind = Literal["edge", "join", "router", "command"]
"""``edge``/``join``: taken whenever the source finishes; ``router``/``command``: possible."""


@dataclasses.dataclass(frozen=True)
class Topology:
    """What a graph declares: its nodes and every edge it may take.

    ``open_routers`` are conditional edges without a path map (their destinations are
    only known at run time).
    """

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str, EdgeKind], ...]
    open_routers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, graph: Any) -> Topology:
        """Topology of a ``StateGraph`` builder or a compiled graph.

        A guarded builder reports its structure as declared before the guard rewrote it.
        """
        saved = getattr(graph, "_lgx_topology", None)
        if isinstance(saved, Topology):
            return saved
        builder = getattr(graph, "builder", None)
        if builder is not None and hasattr(builder, "nodes") and hasattr(builder, "branches"):
            return cls.of(builder)
        if hasattr(graph, "nodes") and hasattr(graph, "branches") and hasattr(graph, "edges"):
            return cls._of_builder(graph)
        if hasattr(graph, "get_graph"):
            return cls._of_drawable(graph.get_graph())
        raise TypeError(f"cannot read the structure of {type(graph).__name__}")

    @classmethod
    def _of_builder(cls, builder: StateGraph[Any]) -> Topology:
        edges: list[tuple[str, str, EdgeKind]] = [(s, d, "edge") for s, d in sorted(builder.edges)]
        for srcs, dst in sorted(builder.waiting_edges, key=lambda e: (tuple(e[0]), e[1])):
            edges.extend((src, dst, "join") for src in srcs)
        open_routers: list[tuple[str, str]] = []
        for src, branches in builder.branches.items():
            for name, spec in branches.items():
                if spec.ends:
                    edges.extend((src, dst, "router") for dst in dict.fromkeys(spec.ends.values()))
                else:
                    open_routers.append((src, name))
        for name, node in builder.nodes.items():
            ends = node.ends or ()
            dsts = ends.values() if isinstance(ends, dict) else ends
            edges.extend((name, dst, "command") for dst in dict.fromkeys(dsts))
        return cls(tuple(builder.nodes), tuple(_dedupe(edges)), tuple(open_routers))

    @classmethod
    def _of_drawable(cls, drawn: Any) -> Topology:
        nodes = tuple(n for n in drawn.nodes if n not in (START, END))
        edges: list[tuple[str, str, EdgeKind]] = [
            (e.source, e.target, "router" if e.conditional else "edge") for e in drawn.edges
        ]
        return cls(nodes, tuple(_dedupe(edges)))


def _dedupe(
    edges: Iterable[tuple[str, str, EdgeKind]],
) -> list[tuple[str, str, EdgeKind]]:
    first: dict[tuple[str, str], tuple[str, str, EdgeKind]] = {}
    for edge in edges:
        first.setdefault(edge[:2], edge)
    return list(first.values())


@dataclasses.dataclass(frozen=True)
class Issue:
    """One finding of :func:`check`.

    ``code`` is stable: ``forbidden_edge`` (a static edge the policy forbids: error),
    ``forbidden_route`` (a router/``Command`` destination the policy forbids: warning —
    the guard blocks it at run time), ``undeclared_node``, ``missing_state``,
    ``undeclared_router`` (no path map: its destinations are not declared),
    ``unreachable_state``.
    """

    severity: Literal["error", "warning"]
    code: str
    message: str
    source: str | None = None
    target: str | None = None


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """Result of comparing a policy with a graph.

    Example:
        >>> r = CheckReport("p", "abc", (Issue("warning", "unreachable_state", "x"),))
        >>> r.ok, r.passed(strict=True), len(r.warnings)
        (True, False, 1)
    """

    policy_name: str | None
    policy_hash: str
    issues: tuple[Issue, ...]

    @property
    def errors(self) -> list[Issue]:
        """Issues of severity ``error``."""
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[Issue]:
        """Issues of severity ``warning``."""
        return [i for i in self.issues if i.severity == "warning"]

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return not self.errors

    def passed(self, *, strict: bool = False) -> bool:
        """``ok``, and with ``strict`` no warnings either."""
        return not self.issues if strict else self.ok

    def text(self) -> str:
        """The readable report."""
        name = self.policy_name or "policy"
        head = f"{name} (sha256 {self.policy_hash[:12]}): "
        if not self.issues:
            return head + "the graph matches the policy"
        head += f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)"
        lines = [head]
        for issue in sorted(self.issues, key=lambda i: (i.severity != "error", i.code)):
            lines.append(f"  {issue.severity.upper():7} {issue.code:18} {issue.message}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for ``lgx policy check --json``)."""
        return {
            "policy": self.policy_name,
            "policy_hash": self.policy_hash,
            "ok": self.ok,
            "issues": [dataclasses.asdict(i) for i in self.issues],
        }


def check(policy: DeclaredTransitions, graph: Any) -> CheckReport:
    """Compare ``policy`` with ``graph`` (a ``StateGraph`` or a compiled graph).

    Reports graph edges the policy forbids, graph nodes the policy does not declare,
    policy states the graph lacks, routers whose destinations are not declared, and
    policy states unreachable from START.

    Example:
        >>> from typing import TypedDict
        >>> from langgraph.graph import StateGraph, START, END
        >>> from langgraph_external.guards import TransitionPolicy
        >>> class S(TypedDict):
        ...     x: int
        >>> b = StateGraph(S)
        >>> _ = b.add_node("a", lambda s: s).add_node("b", lambda s: s)
        >>> _ = b.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
        >>> p = TransitionPolicy(states=["a", "b"], transitions={"START": ["a"], "a": ["END"]})
        >>> print(check(p, b))  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
        policy (sha256 ...): 2 error(s), 1 warning(s)
          ERROR   forbidden_edge     a -> b is an edge of the graph the policy forbids
          ERROR   forbidden_edge     b -> END is an edge of the graph the policy forbids
          WARNING unreachable_state  b cannot be reached from START under the policy
    """
    topo = Topology.of(graph)
    declared, nodes = set(policy.states), set(topo.nodes)
    issues = [
        Issue("error", "undeclared_node", f"graph node {node} is not a policy state", node)
        for node in topo.nodes
        if node not in declared
    ]
    issues += [
        Issue("error", "missing_state", f"policy state {state} is not in the graph", state)
        for state in policy.states
        if state not in (START, END) and state not in nodes
    ]
    for src, dst, kind in topo.edges:
        if policy.allows(src, dst):
            continue
        edge = f"{state_label(src)} -> {state_label(dst)}"
        if kind in ("edge", "join"):
            msg = f"{edge} is an edge of the graph the policy forbids"
            issues.append(Issue("error", "forbidden_edge", msg, src, dst))
        else:
            msg = (
                f"{edge} is a possible {kind} destination the policy forbids (blocked at run time)"
            )
            issues.append(Issue("warning", "forbidden_route", msg, src, dst))
    for src, name in topo.open_routers:
        msg = (
            f"router {name!r} of {state_label(src)} has no path map: its destinations are not "
            "declared (pass path_map= to add_conditional_edges); checked only at run time"
        )
        issues.append(Issue("warning", "undeclared_router", msg, src))
    for state in _unreachable(policy):
        msg = f"{state_label(state)} cannot be reached from START under the policy"
        issues.append(Issue("warning", "unreachable_state", msg, state))
    return CheckReport(policy.name, policy.hash, tuple(issues))


def _unreachable(policy: DeclaredTransitions) -> list[str]:
    seen = {START}
    todo = [START]
    while todo:
        for dst in policy.targets(todo.pop()):
            if dst not in seen:
                seen.add(dst)
                todo.append(dst)
    return [s for s in policy.states if s not in seen and s != END]
