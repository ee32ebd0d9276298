"""Errors of the transition guard: a malformed policy, and a blocked decision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph_external.errors import ExternalError


class PolicyError(ExternalError, ValueError):
    """A policy cannot be used: malformed file, bad values, or a graph it cannot guard.

    ``problems`` lists ``(path, message)`` pairs, where ``path`` points inside the policy
    (``transitions.validate_order[1]``); ``source`` names the file when there is one;
    ``unreadable`` is true when the file itself could not be read (missing, no permission),
    as opposed to read and found invalid.

    Example:
        >>> err = PolicyError([("states[2]", "duplicate state 'a'")], source="p.yaml")
        >>> str(err)
        "invalid policy p.yaml: states[2]: duplicate state 'a'"
    """

    def __init__(
        self,
        problems: Sequence[tuple[str, str]] | str,
        *,
        source: str | None = None,
        unreadable: bool = False,
    ) -> None:
        self.unreadable = unreadable
        self.problems: list[tuple[str, str]] = (
            [("", problems)] if isinstance(problems, str) else list(problems)
        )
        self.source = source
        where = f" {source}" if source else ""
        lines = [f"{path}: {msg}" if path else msg for path, msg in self.problems]
        if len(lines) == 1:
            text = f"invalid policy{where}: {lines[0]}"
        else:
            text = f"invalid policy{where}:\n" + "\n".join(f"  - {line}" for line in lines)
        super().__init__(text)


class TransitionViolation(ExternalError):
    """A decision of the graph broke the transition policy and was blocked.

    Attributes:
        rule: which rule was broken — ``illegal_transition``, ``unknown_target``,
            ``unmapped_route``, ``visit_limit``, ``tool_tier`` or ``state_write``.
        source: the node that made the decision (``__start__`` for the input).
        target: where it wanted to go (a node, a tool name or a state key), if any.
        node: the node in which the violation was detected.
        would_be: a readable rendering of what was blocked (update, route, tool input).
        policy_hash: content hash of the policy that blocked it.
        policy_rule: the clause of the policy that forbids it, as ``{"path": ..., "value":
            ...}`` (``{"path": "nodes.work.max_visits", "value": 3}``).
        where: where it happened: ``node``, ``step``, ``task`` (checkpoint namespace),
            ``tool_call_id`` for a refused tool call.

    Example:
        >>> v = TransitionViolation("illegal_transition", "a", "c", "a -> c is not allowed")
        >>> v.rule, v.source, v.target, str(v)
        ('illegal_transition', 'a', 'c', 'a -> c is not allowed')
    """

    def __init__(
        self,
        rule: str,
        source: str | None,
        target: str | None,
        message: str,
        *,
        node: str | None = None,
        would_be: Any = None,
        policy_hash: str | None = None,
        policy_rule: dict[str, Any] | None = None,
        where: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.rule = rule
        self.source = source
        self.target = target
        self.node = node if node is not None else source
        self.would_be = would_be
        self.policy_hash = policy_hash
        self.policy_rule = policy_rule
        self.where = where if where is not None else {"node": self.node}
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # keep the keyword-only attributes when the error crosses a process boundary
        return (_rebuild_violation, (self.__dict__.copy(),))


def _rebuild_violation(state: dict[str, Any]) -> TransitionViolation:
    v = TransitionViolation(
        state["rule"], state["source"], state["target"], state["message"], node=state["node"]
    )
    v.__dict__.update(state)
    return v
