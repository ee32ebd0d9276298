"""The declared policy: states, legal transitions, limits, tool tiers, write allow-lists.

A policy is a pydantic model, so it can be written in YAML or JSON (kept in git next to
the graph) or built in code. Loading validates everything up front: unknown keys, wrong
types, duplicate states and references to undeclared states fail with a message that
names the file, the path inside it and the problem (cross-references: ``_validation``).
Policy text is read within :class:`PolicyLimits` (``_loading``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from langgraph_external.guards._check import CheckReport, check
from langgraph_external.guards._errors import PolicyError, one_line, preview
from langgraph_external.guards._loading import (
    DEFAULT_LIMITS,
    PolicyLimits,
    check_size,
    check_text_size,
    parse_json,
    parse_yaml,
)
from langgraph_external.guards._mermaid import mermaid
from langgraph_external.guards._states import normalize_state
from langgraph_external.guards._validation import (
    cross_references,
    in_file_order,
    schema_problems,
)
from langgraph_external.record.events import canonical_json

Tier = Literal["read_only", "local_write", "remote_write"]
"""Tool permission tiers, from least to most powerful."""

TIERS: tuple[Tier, ...] = ("read_only", "local_write", "remote_write")

VisitLimit = Annotated[int, Field(gt=0, le=1_000_000_000)]
"""A visit limit: a positive count, at most a billion (a bigger one means no limit)."""
_RANK = {t: i for i, t in enumerate(TIERS)}

Action = Literal["raise", "route", "interrupt"]
"""What the guard does when a decision breaks the policy."""


class OnViolation(BaseModel):
    """The action taken when a decision breaks the policy.

    ``raise`` stops the run with :class:`TransitionViolation`; ``route`` discards the
    offending decision (its update, target or tool call) and goes to ``fallback``
    instead; ``interrupt`` pauses the run for a human (LangGraph ``interrupt``): resume
    with ``Command(resume=True)`` to let the decision through, or ``False`` to reject it
    (then the run goes to ``fallback`` if one is set, else raises).

    Example:
        >>> OnViolation(action="route", fallback="escalate").fallback
        'escalate'
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action = "raise"
    fallback: str | None = None

    @model_validator(mode="after")
    def _fallback_for_route(self) -> OnViolation:
        if self.action == "route" and not self.fallback:
            raise ValueError("fallback: action 'route' needs a fallback node")
        if self.fallback is not None:
            object.__setattr__(self, "fallback", normalize_state(self.fallback))
        return self


class NodeRule(BaseModel):
    """Per-node rules.

    Args:
        max_visits: most times the node may run in one invocation (Send tasks count);
            one more is a ``visit_limit`` violation. ``get_logistics`` with a retry of
            at most 2 has ``max_visits: 3``.
        tier: highest tool tier the node may call (``none``: no tier at all). Defaults
            to the policy's ``default_tier``.
        tools: tools the node may call whatever their tier.
        writes: state keys the node may update (``None``: any key).
        on_violation: overrides the policy's ``on_violation`` for this node.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_visits: VisitLimit | None = None
    tier: Tier | Literal["none"] | None = None
    tools: list[str] = Field(default_factory=list)
    writes: list[str] | None = None
    on_violation: OnViolation | None = None


class TransitionPolicy(BaseModel):
    """A declared, versionable policy of the graph's legal control flow.

    States are node names plus ``START``/``END`` (both always declared; write them as
    ``START``/``END`` or ``__start__``/``__end__``). ``transitions`` maps each state to
    the states it may go to; anything else is a violation.

    Example:
        >>> policy = TransitionPolicy.from_dict({
        ...     "states": ["START", "draft", "review", "END"],
        ...     "transitions": {
        ...         "START": ["draft"], "draft": ["review"], "review": ["draft", "END"],
        ...     },
        ...     "nodes": {"draft": {"max_visits": 3}},
        ... })
        >>> policy.allows("draft", "review"), policy.allows("draft", "END")
        (True, False)
        >>> len(policy.hash)
        64
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    name: str | None = None
    description: str | None = None
    states: list[str]
    transitions: dict[str, list[str]]
    nodes: dict[str, NodeRule] = Field(default_factory=dict)
    tools: dict[str, Tier] = Field(default_factory=dict)
    default_tier: Tier | Literal["none"] = "read_only"
    unlisted_tool_tier: Tier = "remote_write"
    default_max_visits: VisitLimit | None = None
    on_violation: OnViolation = Field(default_factory=OnViolation)

    _allowed: dict[str, frozenset[str]] = PrivateAttr(default_factory=dict)
    _hash: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _normalize_and_cross_check(self) -> TransitionPolicy:
        # spell START/END canonically and check every cross-reference
        problems, states, transitions = cross_references(
            self.states,
            self.transitions,
            {name: rule.model_dump() for name, rule in self.nodes.items()},
            self.tools,
            self.on_violation.model_dump(),
        )
        if problems:
            raise ValueError("\n".join(f"{path}: {msg}" for path, msg in problems))
        object.__setattr__(self, "states", states)
        object.__setattr__(self, "transitions", transitions)
        # lookups the runtime uses on every step, computed once
        self._allowed = {src: frozenset(dsts) for src, dsts in self.transitions.items()}
        body = canonical_json(self.model_dump(mode="json"))
        try:
            encoded = body.encode()
        except UnicodeEncodeError as exc:  # "\ud800" is a valid str, but not text
            bad = preview(exc.object[exc.start : exc.end])
            raise ValueError(f"a name holds {bad}, which is not valid Unicode text") from None
        self._hash = hashlib.sha256(encoded).hexdigest()
        return self

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, *, source: str | None = None) -> TransitionPolicy:
        """Validate ``data`` (parsed YAML/JSON) into a policy.

        Raises:
            PolicyError: naming ``source``, the path of each problem and the problem.
        """
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = schema_problems(exc)
            if isinstance(data, Mapping):
                # schema errors stop pydantic before the cross-reference check: run it on
                # the raw data too, so that every problem is reported at once
                refs = cross_references(
                    data.get("states"),
                    data.get("transitions"),
                    data.get("nodes"),
                    data.get("tools"),
                    data.get("on_violation"),
                )[0]
                problems += [p for p in refs if p not in problems]
                problems = in_file_order(problems, list(data))
            raise PolicyError(problems, source=source) from None

    @classmethod
    def from_yaml(
        cls,
        text: str,
        *,
        source: str | None = None,
        limits: PolicyLimits = DEFAULT_LIMITS,
    ) -> TransitionPolicy:
        """Parse YAML (or JSON, a subset of it) text; duplicate keys are an error.

        Raises:
            PolicyLimitError: ``text`` exceeds one of ``limits``.
            PolicyError: the YAML or the policy is invalid.

        Example:
            >>> text = "states: [a]\\ntransitions: {START: [a], a: [END]}"
            >>> TransitionPolicy.from_yaml(text).states
            ['__start__', 'a', '__end__']
        """
        check_text_size(text, limits, source)
        return cls.from_dict(parse_yaml(text, source, limits), source=source)

    @classmethod
    def from_json(
        cls,
        text: str,
        *,
        source: str | None = None,
        limits: PolicyLimits = DEFAULT_LIMITS,
    ) -> TransitionPolicy:
        """Parse JSON text; duplicate keys, ``NaN`` and ``Infinity`` are errors.

        Raises:
            PolicyLimitError: ``text`` exceeds ``limits.max_bytes`` or ``max_depth``.
            PolicyError: the JSON or the policy is invalid.

        Example:
            >>> text = '{"states": ["a"], "transitions": {"START": ["a"]}}'
            >>> TransitionPolicy.from_json(text).states
            ['__start__', 'a', '__end__']
        """
        check_text_size(text, limits, source)
        return cls.from_dict(parse_json(text, source, limits), source=source)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, limits: PolicyLimits = DEFAULT_LIMITS
    ) -> TransitionPolicy:
        """Load a ``.yaml``/``.yml``/``.json`` policy file.

        The file's size is checked before it is read (a larger file is refused unread),
        then the text is parsed within ``limits`` (see :class:`PolicyLimits`).

        Raises:
            PolicyLimitError: the file exceeds one of ``limits``.
            PolicyError: the file is missing, unreadable (``unreadable`` is true) or
                invalid (message names it, with every problem found).
        """
        p = Path(path)
        source = str(p)
        try:
            with p.open("rb") as f:
                check_size(os.fstat(f.fileno()).st_size, limits, source, "file")
                # bounded even when the size lied (a pipe, /dev/zero, a growing file)
                raw = f.read(limits.max_bytes + 1)
        except OSError as exc:
            raise PolicyError(
                f"cannot read the file: {one_line(exc)}", source=source, unreadable=True
            ) from None
        check_size(len(raw), limits, source, "file")
        try:
            text = raw.decode("utf-8-sig")  # editors on Windows may start with a BOM
        except UnicodeDecodeError as exc:
            raise PolicyError(
                f"cannot read the file: not UTF-8 text ({exc.reason} at byte {exc.start})",
                source=source,
            ) from None
        parse = parse_json if p.suffix.lower() == ".json" else parse_yaml
        return cls.from_dict(parse(text, source, limits), source=source)

    # -- queries ------------------------------------------------------------------------
    @property
    def hash(self) -> str:
        """sha256 (hex) of the policy's canonical content; recorded with guarded events."""
        return self._hash

    def allows(self, source: str, target: str) -> bool:
        """Whether ``source -> target`` is a declared transition."""
        dsts = self._allowed.get(normalize_state(source))
        return dsts is not None and normalize_state(target) in dsts

    def targets(self, source: str) -> frozenset[str]:
        """Declared targets of ``source``."""
        return self._allowed.get(normalize_state(source), frozenset())

    def node_rule(self, node: str) -> NodeRule:
        """The node's rules (an empty rule when none are declared)."""
        return self.nodes.get(node) or _EMPTY_RULE

    def action_for(self, node: str | None) -> OnViolation:
        """The on-violation action of ``node`` (its own, else the policy's)."""
        own = self.node_rule(node).on_violation if node is not None else None
        return own if own is not None else self.on_violation

    def max_visits(self, node: str) -> int | None:
        """Visit limit of ``node`` per invocation, if any."""
        limit = self.node_rule(node).max_visits
        return limit if limit is not None else self.default_max_visits

    def tool_tier(self, tool: str) -> Tier:
        """Tier of ``tool`` (``unlisted_tool_tier`` when the policy does not list it)."""
        return self.tools.get(tool, self.unlisted_tool_tier)

    def may_call(self, node: str, tool: str) -> bool:
        """Whether ``node`` may call ``tool``: named in its ``tools`` or within its tier.

        Example:
            >>> p = TransitionPolicy(states=["a"], transitions={"START": ["a"]},
            ...                      tools={"refund": "remote_write", "lookup": "read_only"})
            >>> p.may_call("a", "lookup"), p.may_call("a", "refund")
            (True, False)
        """
        rule = self.node_rule(node)
        if tool in rule.tools:
            return True
        tier = rule.tier if rule.tier is not None else self.default_tier
        return tier != "none" and _RANK[self.tool_tier(tool)] <= _RANK[tier]

    @property
    def guards_tools(self) -> bool:
        """Whether tool calls are checked at all (the policy declares tools)."""
        return bool(self.tools)

    def check(self, graph: Any) -> CheckReport:
        """Compare the policy with a graph (builder or compiled) without running it.

        See :func:`langgraph_external.guards.check`.
        """
        return check(self, graph)

    def mermaid(self, graph: Any = None) -> str:
        """A Mermaid flowchart of the policy, overlaid on ``graph`` when given.

        See :func:`langgraph_external.guards.mermaid`.
        """
        return mermaid(self, graph)


_EMPTY_RULE = NodeRule()
