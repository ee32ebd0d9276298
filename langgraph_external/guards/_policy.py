"""The declared policy: states, legal transitions, limits, tool tiers, write allow-lists.

A policy is a pydantic model, so it can be written in YAML or JSON (kept in git next to
the graph) or built in code. Loading validates everything up front: unknown keys, wrong
types, duplicate states and references to undeclared states fail with a message that
names the file, the path inside it and the problem.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from langgraph_external.events import canonical_json
from langgraph_external.guards._errors import PolicyError

if TYPE_CHECKING:
    from langgraph_external.guards._check import CheckReport

START = "__start__"
END = "__end__"
_ALIASES = {"START": START, "END": END}

Tier = Literal["read_only", "local_write", "remote_write"]
"""Tool permission tiers, from least to most powerful."""

TIERS: tuple[Tier, ...] = ("read_only", "local_write", "remote_write")
_RANK = {t: i for i, t in enumerate(TIERS)}

Action = Literal["raise", "route", "interrupt"]
"""What the guard does when a decision breaks the policy."""


def normalize_state(name: str) -> str:
    """Spell ``START``/``END`` the way LangGraph does (``__start__``/``__end__``).

    Example:
        >>> normalize_state("START"), normalize_state("END"), normalize_state("agent")
        ('__start__', '__end__', 'agent')
    """
    return _ALIASES.get(name, name)


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

    max_visits: PositiveInt | None = None
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
    default_max_visits: PositiveInt | None = None
    on_violation: OnViolation = Field(default_factory=OnViolation)

    _allowed: dict[str, frozenset[str]] = PrivateAttr(default_factory=dict)
    _hash: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _normalize_and_cross_check(self) -> TransitionPolicy:
        problems = _normalize(self)
        if problems:
            raise ValueError("\n".join(f"{path}: {msg}" for path, msg in problems))
        # lookups the runtime uses on every step, computed once
        self._allowed = {src: frozenset(dsts) for src, dsts in self.transitions.items()}
        body = canonical_json(self.model_dump(mode="json"))
        self._hash = hashlib.sha256(body.encode()).hexdigest()
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
            problems = _problems(exc)
            if isinstance(data, Mapping):
                # schema errors stop pydantic before the cross-reference check: run it on
                # the raw data too, so that every problem is reported at once
                refs = _references(
                    data.get("states"),
                    data.get("transitions"),
                    data.get("nodes"),
                    data.get("tools"),
                    data.get("on_violation"),
                )[0]
                problems += [p for p in refs if p not in problems]
                problems = _in_file_order(problems, list(data))
            raise PolicyError(problems, source=source) from None

    @classmethod
    def from_yaml(cls, text: str, *, source: str | None = None) -> TransitionPolicy:
        """Parse YAML (or JSON, a subset of it) text; duplicate keys are an error.

        Example:
            >>> text = "states: [a]\\ntransitions: {START: [a], a: [END]}"
            >>> TransitionPolicy.from_yaml(text).states
            ['__start__', 'a', '__end__']
        """
        try:
            data = yaml.load(text, Loader=_StrictLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise PolicyError([(where, str(exc.problem or exc))], source=source) from None
        except yaml.YAMLError as exc:
            raise PolicyError(str(exc), source=source) from None
        if not isinstance(data, Mapping):
            kind = type(data).__name__ if data is not None else "an empty document"
            raise PolicyError(f"expected a mapping at the top level, found {kind}", source=source)
        return cls.from_dict(data, source=source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TransitionPolicy:
        """Load a ``.yaml``/``.yml``/``.json`` policy file.

        Raises:
            PolicyError: the file is missing, unreadable (``unreadable`` is true) or
                invalid (message names it, with every problem found).
        """
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(
                f"cannot read the file: {exc}", source=str(p), unreadable=True
            ) from None
        if p.suffix.lower() == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                loc = f"line {exc.lineno}, column {exc.colno}"
                raise PolicyError([(loc, exc.msg)], source=str(p)) from None
            return cls.from_dict(data, source=str(p))
        return cls.from_yaml(text, source=str(p))

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
        rule = self.nodes.get(node) if node is not None else None
        if rule is not None and rule.on_violation is not None:
            return rule.on_violation
        return self.on_violation

    def max_visits(self, node: str) -> int | None:
        """Visit limit of ``node`` per invocation, if any."""
        rule = self.nodes.get(node)
        if rule is not None and rule.max_visits is not None:
            return rule.max_visits
        return self.default_max_visits

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
        if tier == "none":
            return False
        return _RANK[self.tool_tier(tool)] <= _RANK[tier]

    @property
    def guards_tools(self) -> bool:
        """Whether tool calls are checked at all (the policy declares tools)."""
        return bool(self.tools)

    def check(self, graph: Any) -> CheckReport:
        """Compare the policy with a graph (builder or compiled) without running it.

        See :func:`langgraph_external.guards.check`.
        """
        from langgraph_external.guards._check import check

        return check(self, graph)

    def mermaid(self, graph: Any = None) -> str:
        """A Mermaid flowchart of the policy, overlaid on ``graph`` when given.

        See :func:`langgraph_external.guards.mermaid`.
        """
        from langgraph_external.guards._mermaid import mermaid

        return mermaid(self, graph)


_EMPTY_RULE = NodeRule()


def _normalize(policy: TransitionPolicy) -> list[tuple[str, str]]:
    """Spell START/END canonically and check every cross-reference; returns problems."""
    problems, states, transitions = _references(
        policy.states,
        policy.transitions,
        {name: rule.model_dump() for name, rule in policy.nodes.items()},
        policy.tools,
        policy.on_violation.model_dump(),
    )
    object.__setattr__(policy, "states", states)
    object.__setattr__(policy, "transitions", transitions)
    return problems


def _references(
    raw_states: Any, raw_transitions: Any, raw_nodes: Any, raw_tools: Any, raw_action: Any
) -> tuple[list[tuple[str, str]], list[str], dict[str, list[str]]]:
    """Check the cross-references of a policy given as plain data.

    Works on data that failed schema validation too (ill-typed parts are skipped: the
    schema errors already name them), so that one load reports every problem at once.
    Returns the problems, the normalized states and the normalized transitions.
    """
    problems: list[tuple[str, str]] = []
    states: list[str] = []
    first: dict[str, int] = {}
    for i, raw in enumerate(raw_states if isinstance(raw_states, list) else []):
        if not isinstance(raw, str):
            continue
        name = normalize_state(raw)
        if not name:
            problems.append((f"states[{i}]", "empty state name"))
        elif name in first:
            problems.append(
                (f"states[{i}]", f"duplicate state {raw!r} (first at states[{first[name]}])")
            )
        else:
            first[name] = i
            states.append(name)
    declared = set(states)
    if START not in declared:
        states.insert(0, START)
    if END not in declared:
        states.append(END)
    declared = set(states)

    transitions: dict[str, list[str]] = {}
    for raw_src, raw_dsts in _items(raw_transitions):
        src = normalize_state(raw_src)
        here = f"transitions.{raw_src}"
        if src not in declared:
            problems.append((here, f"{raw_src!r} is not a declared state"))
        elif src == END:
            problems.append((here, "END has no outgoing transitions"))
        if src in transitions:
            problems.append((here, f"duplicate source {raw_src!r} (START/END written twice?)"))
        dsts: list[str] = []
        for j, raw_dst in enumerate(raw_dsts if isinstance(raw_dsts, list) else []):
            if not isinstance(raw_dst, str):
                continue
            dst = normalize_state(raw_dst)
            if dst not in declared:
                problems.append((f"{here}[{j}]", f"{raw_dst!r} is not a declared state"))
            elif dst == START:
                problems.append((f"{here}[{j}]", "START cannot be a target"))
            elif dst in dsts:
                problems.append((f"{here}[{j}]", f"duplicate target {raw_dst!r}"))
            else:
                dsts.append(dst)
        transitions[src] = dsts

    tools = {t for t, _ in _items(raw_tools)}
    for node, rule in _items(raw_nodes):
        here = f"nodes.{node}"
        if normalize_state(node) in (START, END) or node not in declared:
            problems.append((here, f"{node!r} is not a declared node"))
        if not isinstance(rule, Mapping):
            continue
        names = rule.get("tools")
        for j, tool in enumerate(names if isinstance(names, list) else []):
            if isinstance(tool, str) and tool not in tools:
                problems.append((f"{here}.tools[{j}]", f"tool {tool!r} is not listed under tools"))
        problems += _fallback_problems(rule.get("on_violation"), f"{here}.on_violation", declared)
    problems += _fallback_problems(raw_action, "on_violation", declared)
    return problems, states, transitions


def _items(value: Any) -> list[tuple[str, Any]]:
    """The string-keyed items of a mapping (nothing for anything else)."""
    if not isinstance(value, Mapping):
        return []
    return [(k, v) for k, v in value.items() if isinstance(k, str)]


def _fallback_problems(action: Any, here: str, declared: Iterable[str]) -> list[tuple[str, str]]:
    fallback = action.get("fallback") if isinstance(action, Mapping) else None
    if not isinstance(fallback, str):
        return []
    fallback = normalize_state(fallback)
    if fallback == START or fallback not in set(declared):
        return [(f"{here}.fallback", f"{fallback!r} is not a declared node")]
    return []


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ")
        path = _format_loc(err["loc"])
        if (not path and "\n" in msg) or (not path and ": " in msg):
            for line in msg.splitlines():
                where, _, what = line.partition(": ")
                out.append((where, what))
            continue
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif "input" in err and err["type"] not in ("value_error",):
            msg = f"{msg} (got {err['input']!r})"
        if path and ": " in msg and msg.split(": ", 1)[0].split(".")[0] in ("fallback",):
            sub, _, msg = msg.partition(": ")
            path = f"{path}.{sub}"
        out.append((path, msg))
    return out


def _in_file_order(problems: list[tuple[str, str]], keys: list[Any]) -> list[tuple[str, str]]:
    """Problems sorted by where their top-level key appears in the file."""
    order = {str(k): i for i, k in enumerate(keys)}

    def position(problem: tuple[str, str]) -> int:
        head = problem[0].split(".", 1)[0].split("[", 1)[0]
        return order.get(head, len(order))

    return sorted(problems, key=position)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after[_fallback_for_route(), OnViolation]",):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML keeps the last silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen[key] = loader.construct_object(value_node, deep=True)
    return seen


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)
