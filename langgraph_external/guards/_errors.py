"""Errors of the transition guard: a malformed policy, and a blocked decision."""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Sequence
from typing import Any

from langgraph_external.errors import ExternalError

MAX_PROBLEMS_SHOWN = 20
"""Problems listed in a :class:`PolicyError` message; the rest are counted."""

MAX_PROBLEM_CHARS = 200
"""Longest path or message kept for one problem (a policy may hold huge names)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _clean(text: str, limit: int | None = MAX_PROBLEM_CHARS) -> str:
    """``text`` made safe to print: control characters escaped, at most ``limit`` chars.

    The input of a policy is untrusted: a name may hold a terminal escape sequence or a
    megabyte of text, and neither belongs in an error message.
    """
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (its type's name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


class _Preview(reprlib.Repr):
    """A short ``repr`` of untrusted input: bounded in depth, items and characters."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 2
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = 4
        self.maxstring = self.maxother = 60
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        # repr() of an int beyond 4300 digits raises ValueError; its size is the point
        if x.bit_length() > 128:
            return f"<int of {math.floor(x.bit_length() * math.log10(2)) + 1} digits>"
        return super().repr_int(x, level)


preview = _Preview().repr
"""A short ``repr`` of untrusted input (see :class:`_Preview`)."""


class PolicyError(ExternalError, ValueError):
    """A policy cannot be used: malformed file, bad values, or a graph it cannot guard.

    ``problems`` lists ``(path, message)`` pairs, where ``path`` points inside the policy
    (``transitions.validate_order[1]``); ``source`` names the file when there is one;
    ``unreadable`` is true when the file itself could not be read (missing, no permission),
    as opposed to read and found invalid. Paths and messages are cut to
    :data:`MAX_PROBLEM_CHARS` characters with control characters escaped, and the message
    lists the first :data:`MAX_PROBLEMS_SHOWN` problems, so it stays short whatever the
    policy holds.

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
        raw = [("", problems)] if isinstance(problems, str) else list(problems)
        self.problems: list[tuple[str, str]] = [(_clean(p), _clean(m)) for p, m in raw]
        self.source = source
        where = f" {_clean(source, None)}" if source else ""
        lines = [f"{path}: {msg}" if path else msg for path, msg in self.problems]
        if len(lines) == 1:
            text = f"invalid policy{where}: {lines[0]}"
        else:
            shown = lines[:MAX_PROBLEMS_SHOWN]
            if len(lines) > len(shown):
                shown.append(f"… and {len(lines) - len(shown)} more problems")
            text = f"invalid policy{where}:\n" + "\n".join(f"  - {line}" for line in shown)
        super().__init__(text)


class PolicyLimitError(PolicyError):
    """A policy input is refused before it is parsed or expanded: it exceeds a limit.

    Raised for a file larger than ``max_bytes``, nesting deeper than ``max_depth``,
    more YAML aliases than ``max_aliases`` (or aliases expanding to more than
    ``max_alias_values`` values, or an alias inside its own anchor) and numbers longer
    than 100 characters (see :class:`~langgraph_external.guards.PolicyLimits`). A policy
    never needs any of these; a file that does is a mistake or an attack.

    Example:
        >>> str(PolicyLimitError("the file is 3000000 bytes", source="p.yaml"))
        'invalid policy p.yaml: the file is 3000000 bytes'
    """


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
