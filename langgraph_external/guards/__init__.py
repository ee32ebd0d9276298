"""Transition guard: a declared policy of legal transitions, enforced at the node boundary.

LangGraph lets a node go anywhere its code says. A :class:`TransitionPolicy` declares
where it may go — states, allowed transitions, visit limits, tool permission tiers,
state-write allow-lists and the action on violation — and :func:`guard` enforces it:
every decision (static edge, router choice, ``Command(goto=...)``, ``Send``) is checked
before its target is scheduled, so a forbidden node's body never runs; a refused tool
call never starts, and inside a tool-calling agent ``route`` answers it with a
``ToolMessage``. Each blocked, rerouted or questioned decision becomes a
``policy_violation`` event when the run's config carries the audit handler
(``External.config``) or a pipeline is given, and one WARNING log record.

Example:
    >>> from typing import TypedDict
    >>> from langgraph.graph import StateGraph, START, END
    >>> class S(TypedDict):
    ...     n: int
    >>> policy = TransitionPolicy.from_yaml('''
    ... states: [START, work, END]
    ... transitions: {START: [work], work: [work, END]}
    ... nodes: {work: {max_visits: 3}}
    ... ''')
    >>> b = StateGraph(S)
    >>> _ = b.add_node("work", lambda s: {"n": s["n"] + 1})
    >>> _ = b.add_edge(START, "work")
    >>> _ = b.add_conditional_edges("work", lambda s: "work" if s["n"] < 10 else END,
    ...                             ["work", END])
    >>> graph = guard(b, policy).compile()
    >>> try:
    ...     graph.invoke({"n": 0})
    ... except TransitionViolation as v:
    ...     print(v.rule, "-", v)
    visit_limit - work entered 4 times in this run (limit 3)
"""

from langgraph_external.guards._check import CheckReport, Issue, Topology, check
from langgraph_external.guards._errors import PolicyError, PolicyLimitError, TransitionViolation
from langgraph_external.guards._guard import guard, guarded
from langgraph_external.guards._loading import DEFAULT_LIMITS, PolicyLimits
from langgraph_external.guards._mermaid import mermaid
from langgraph_external.guards._policy import TIERS, NodeRule, OnViolation, Tier, TransitionPolicy

__all__ = [
    "DEFAULT_LIMITS",
    "TIERS",
    "CheckReport",
    "Issue",
    "NodeRule",
    "OnViolation",
    "PolicyError",
    "PolicyLimitError",
    "PolicyLimits",
    "Tier",
    "Topology",
    "TransitionPolicy",
    "TransitionViolation",
    "check",
    "guard",
    "guarded",
    "mermaid",
]
