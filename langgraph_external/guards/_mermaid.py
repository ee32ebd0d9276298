"""Mermaid rendering of a policy, overlaid on a graph's structure."""

from __future__ import annotations

import re
from typing import Any

from langgraph_external.guards._check import Topology
from langgraph_external.guards._states import END, START, DeclaredTransitions, state_label

_STYLE_ALLOWED = "stroke:#2b8a3e,stroke-width:2px"
_STYLE_FORBIDDEN = "stroke:#c92a2a,stroke-width:2px"
_STYLE_POLICY_ONLY = "stroke:#868e96,stroke-dasharray:4"


def mermaid(policy: DeclaredTransitions, graph: Any = None) -> str:
    """A Mermaid ``flowchart`` of ``policy``; with ``graph``, policy vs graph.

    Edge legend: green solid — in the graph and allowed; red with ``forbidden`` — in
    the graph but not allowed; grey dashed — allowed by the policy, not in the graph
    (dotted arrows are router/``Command`` edges). Nodes the policy does not declare are
    red; policy states the graph lacks are dashed.

    Example:
        >>> from langgraph_external.guards import TransitionPolicy
        >>> p = TransitionPolicy(states=["a"], transitions={"START": ["a"], "a": ["END"]})
        >>> print(mermaid(p))
        flowchart TD
          n0([START])
          n1["a"]
          n2([END])
          n0 --> n1
          n1 --> n2
    """
    topo = Topology.of(graph) if graph is not None else None
    states = list(policy.states)
    if topo is not None:
        states += [n for n in topo.nodes if n not in states]
    ids = {s: f"n{i}" for i, s in enumerate(states)}
    lines = ["flowchart TD"]
    graph_nodes = set(topo.nodes) if topo is not None else set()
    declared = set(policy.states)
    for s in states:
        shape = f"([{state_label(s)}])" if s in (START, END) else f'["{_escape(s)}"]'
        cls = ""
        if topo is not None and s not in (START, END):
            if s not in declared:
                cls = ":::undeclared"
            elif s not in graph_nodes:
                cls = ":::missing"
        lines.append(f"  {ids[s]}{shape}{cls}")
    styles: list[str] = []
    graph_edges = {(src, dst): kind for src, dst, kind in (topo.edges if topo else ())}
    index = 0
    for src in states:
        for dst in sorted(policy.targets(src), key=states.index):
            kind = graph_edges.pop((src, dst), None)
            if topo is None:
                lines.append(f"  {ids[src]} --> {ids[dst]}")
            elif kind is None:
                lines.append(f"  {ids[src]} -.-> {ids[dst]}")
                styles.append(f"  linkStyle {index} {_STYLE_POLICY_ONLY}")
            else:
                arrow = "-->" if kind in ("edge", "join") else "-.->"
                lines.append(f"  {ids[src]} {arrow} {ids[dst]}")
                styles.append(f"  linkStyle {index} {_STYLE_ALLOWED}")
            index += 1
    for (src, dst), kind in graph_edges.items():
        arrow = "-- forbidden -->" if kind in ("edge", "join") else "-. forbidden .->"
        lines.append(f"  {ids[src]} {arrow} {ids[dst]}")
        styles.append(f"  linkStyle {index} {_STYLE_FORBIDDEN}")
        index += 1
    if topo is not None:
        lines.append("  classDef undeclared fill:#ffe3e3,stroke:#c92a2a")
        lines.append("  classDef missing stroke-dasharray:4,color:#868e96")
    return "\n".join(lines + styles)


def _escape(name: str) -> str:
    return re.sub(r'["<>]', lambda m: f"#{ord(m.group())};", name)
