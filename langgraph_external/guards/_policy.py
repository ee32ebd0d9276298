"""The declared policy: states, legal transitions, limits, tool tiers, write allow-lists.

A policy is a pydantic model, so it can be written in YAML or JSON (kept in git next to
the graph) or built in code. Loading validates everything up front: unknown keys, wrong
types, duplicate states and references to undeclared states fail with a message that
names the file, the path inside it and the problem.

A policy file is input from outside the program, so loading is bounded before anything
is parsed or expanded (:class:`PolicyLimits`): the file's size, how deeply it nests, and
how many YAML aliases it holds and what they expand to. A file beyond a limit raises
:class:`PolicyLimitError`; every other bad shape raises :class:`PolicyError`, whose
message never renders more than a short preview of the input.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from langgraph_external.guards._errors import PolicyError, PolicyLimitError
from langgraph_external.record.events import canonical_json

if TYPE_CHECKING:
    from langgraph_external.guards._check import CheckReport

START = "__start__"
END = "__end__"
_ALIASES = {"START": START, "END": END}

Tier = Literal["read_only", "local_write", "remote_write"]
"""Tool permission tiers, from least to most powerful."""

TIERS: tuple[Tier, ...] = ("read_only", "local_write", "remote_write")

VisitLimit = Annotated[int, Field(gt=0, le=1_000_000_000)]
"""A visit limit: a positive count, at most a billion (a bigger one means no limit)."""
_RANK = {t: i for i, t in enumerate(TIERS)}

Action = Literal["raise", "route", "interrupt"]
"""What the guard does when a decision breaks the policy."""

MAX_NUMBER_CHARS = 100
"""Longest number literal a policy file may hold (policies need small counts only)."""


@dataclass(frozen=True)
class PolicyLimits:
    """Bounds on what loading a policy file may cost, checked before the cost is paid.

    A real policy is a few kilobytes, nests four levels deep and needs no YAML aliases;
    the defaults leave ample room for that and refuse hostile files (a "billion laughs"
    alias bomb, a 100 MB file) in milliseconds with :class:`PolicyLimitError`.

    Args:
        max_bytes: largest file (or text, in UTF-8) accepted: 256 KiB. Checked before
            the file is read, so a huge file is refused without being read.
        max_depth: deepest nesting of mappings and lists, aliases expanded: 20 (a
            policy uses 4).
        max_aliases: most YAML aliases (``*name``) in one document: 50. Anchors and
            aliases stay usable for small repetitions such as shared node rules.
        max_alias_values: most values (scalars, lists, mappings) all aliases together
            may expand to: 10 000. This is what stops an alias bomb, which needs few
            aliases but expands each many times.

    Example:
        >>> try:
        ...     TransitionPolicy.from_yaml("states: [a]", limits=PolicyLimits(max_bytes=10))
        ... except PolicyLimitError as exc:
        ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
        invalid policy: the policy is 11 characters, more than the limit of 10 bytes
        (PolicyLimits.max_bytes)
    """

    max_bytes: int = 256 * 1024
    max_depth: int = 20
    max_aliases: int = 50
    max_alias_values: int = 10_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_depth", "max_aliases", "max_alias_values"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"PolicyLimits.{name} must be an int >= 0, got {value!r}")


DEFAULT_LIMITS = PolicyLimits()


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
        problems = _normalize(self)
        if problems:
            raise ValueError("\n".join(f"{path}: {msg}" for path, msg in problems))
        # lookups the runtime uses on every step, computed once
        self._allowed = {src: frozenset(dsts) for src, dsts in self.transitions.items()}
        body = canonical_json(self.model_dump(mode="json"))
        try:
            encoded = body.encode()
        except UnicodeEncodeError as exc:  # "\ud800" is a valid str, but not text
            bad = _preview(exc.object[exc.start : exc.end])
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
        _check_text_size(text, limits, source)
        return cls.from_dict(_parse_yaml(text, source, limits), source=source)

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
        _check_text_size(text, limits, source)
        return cls.from_dict(_parse_json(text, source, limits), source=source)

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
                _check_size(os.fstat(f.fileno()).st_size, limits, source, "file")
                # bounded even when the size lied (a pipe, /dev/zero, a growing file)
                raw = f.read(limits.max_bytes + 1)
        except OSError as exc:
            raise PolicyError(
                f"cannot read the file: {_one_line(exc)}", source=source, unreadable=True
            ) from None
        _check_size(len(raw), limits, source, "file")
        try:
            text = raw.decode("utf-8-sig")  # editors on Windows may start with a BOM
        except UnicodeDecodeError as exc:
            raise PolicyError(
                f"cannot read the file: not UTF-8 text ({exc.reason} at byte {exc.start})",
                source=source,
            ) from None
        if p.suffix.lower() == ".json":
            return cls.from_dict(_parse_json(text, source, limits), source=source)
        return cls.from_dict(_parse_yaml(text, source, limits), source=source)

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
            msg = f"{msg} (got {_preview(err['input'])})"
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


# -- loading within limits ------------------------------------------------------------
class _LimitExceeded(Exception):
    """Raised inside the parsers; becomes a :class:`PolicyLimitError` with a location."""

    def __init__(self, message: str, mark: yaml.Mark | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _where(mark: yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _check_text_size(text: str, limits: PolicyLimits, source: str | None) -> None:
    """Refuse text over ``max_bytes`` in UTF-8, without encoding a text far too long."""
    if len(text) > limits.max_bytes:  # every character takes at least one byte
        _check_size(len(text), limits, source, "policy", "characters")
    _check_size(len(text.encode("utf-8", "surrogatepass")), limits, source, "policy")


def _check_size(
    size: int, limits: PolicyLimits, source: str | None, what: str, unit: str = "bytes"
) -> None:
    if size > limits.max_bytes:
        raise PolicyLimitError(
            f"the {what} is {size} {unit}, more than the limit of {limits.max_bytes} bytes "
            "(PolicyLimits.max_bytes)",
            source=source,
        )


def _parse_yaml(text: str, source: str | None, limits: PolicyLimits) -> Any:
    loader: _PolicyLoader | None = None
    try:
        loader = _PolicyLoader(text, limits)  # the reader refuses control characters here
        data = loader.get_single_data()
    except _LimitExceeded as exc:
        raise PolicyLimitError([(_where(exc.mark), exc.message)], source=source) from None
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or _one_line(exc)
        raise PolicyError([(_where(exc.problem_mark), problem)], source=source) from None
    except yaml.YAMLError as exc:
        raise PolicyError(_one_line(exc), source=source) from None
    except (ValueError, TypeError, OverflowError) as exc:
        # a scalar that matched a YAML type but cannot be built (``2024-13-45``)
        raise PolicyError(f"invalid value: {_one_line(exc)}", source=source) from None
    finally:
        if loader is not None:
            loader.dispose()
    _check_top_level(data, source)
    return data


def _parse_json(text: str, source: str | None, limits: PolicyLimits) -> Any:
    try:
        data = json.loads(
            text,
            object_pairs_hook=_json_object,
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
    except _LimitExceeded as exc:
        raise PolicyLimitError(exc.message, source=source) from None
    except json.JSONDecodeError as exc:
        loc = f"line {exc.lineno}, column {exc.colno}"
        raise PolicyError([(loc, exc.msg)], source=source) from None
    except ValueError as exc:  # raised by the hooks below
        raise PolicyError(_one_line(exc), source=source) from None
    except RecursionError:  # the C scanner recurses per level; far beyond max_depth
        raise PolicyLimitError(_too_deep(limits), source=source) from None
    if _depth(data) > limits.max_depth:
        raise PolicyLimitError(_too_deep(limits), source=source)
    _check_top_level(data, source)
    return data


def _too_deep(limits: PolicyLimits) -> str:
    return f"nested more than {limits.max_depth} levels deep (PolicyLimits.max_depth)"


def _check_top_level(data: Any, source: str | None) -> None:
    if not isinstance(data, Mapping):
        kind = type(data).__name__ if data is not None else "an empty document"
        raise PolicyError(f"expected a mapping at the top level, found {kind}", source=source)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {_preview(key)}")
        out[key] = value
    return out


def _json_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _LimitExceeded(f"a number of {len(text)} digits (at most {MAX_NUMBER_CHARS})")
    return int(text)


def _json_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _LimitExceeded(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    return float(text)


def _json_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON value")


def _depth(data: Any) -> int:
    """Nesting depth of lists and dicts (iterative: ``data`` may be deep)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            children: Iterable[Any] = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


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


_preview = _Preview().repr


class _PolicyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and stays within :class:`PolicyLimits`.

    Depth and aliases are checked while the document is composed into nodes, before
    anything is constructed, so an alias bomb never grows: PyYAML shares an aliased
    node, and the values an alias stands for are counted from the node, once per node.
    """

    def __init__(self, text: str, limits: PolicyLimits) -> None:
        super().__init__(text)
        self.limits = limits
        self._depth = 0
        self._aliases = 0
        self._alias_values = 0
        self._open_anchors: set[str] = set()
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            return self._compose_alias(event, parent, index)
        if not isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > self.limits.max_depth:
            raise _LimitExceeded(_too_deep(self.limits), event.start_mark)
        anchor = event.anchor
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.discard(anchor)

    def _compose_alias(self, event: yaml.AliasEvent, parent: yaml.Node | None, index: Any) -> Any:
        limits, mark = self.limits, event.start_mark
        self._aliases += 1
        if self._aliases > limits.max_aliases:
            raise _LimitExceeded(
                f"more than {limits.max_aliases} YAML aliases (PolicyLimits.max_aliases)", mark
            )
        if event.anchor in self._open_anchors:
            raise _LimitExceeded(f"alias *{_clip(event.anchor)} refers to a node it is in", mark)
        node = super().compose_node(parent, index)  # the anchored node (or undefined alias)
        values, height = self._size(node)
        if self._depth + height > limits.max_depth:
            raise _LimitExceeded(_too_deep(limits), mark)
        self._alias_values += values
        if self._alias_values > limits.max_alias_values:
            raise _LimitExceeded(
                f"YAML aliases expand to more than {limits.max_alias_values} values "
                "(PolicyLimits.max_alias_values)",
                mark,
            )
        return node

    def _size(self, node: yaml.Node) -> tuple[int, int]:
        """Values ``node`` stands for, aliases expanded, and its nesting height.

        Recursion is bounded: every composed node is at most ``max_depth`` high.
        """
        known = self._sizes.get(id(node))
        if known is not None:
            return known
        values, height = 1, 0
        if isinstance(node, yaml.SequenceNode):
            children: list[yaml.Node] = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        for child in children:
            v, h = self._size(child)
            values += v
            height = max(height, h + 1)
        self._sizes[id(node)] = (values, height)
        return values, height


def _clip(text: str | None, limit: int = 40) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "…"


def _construct_mapping(loader: _PolicyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a key must be a scalar, not a {type(key).__name__}",
                key_node.start_mark,
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {_preview(key)}", key_node.start_mark
            )
        seen[key] = loader.construct_object(value_node, deep=True)
    return seen


def _bounded_number(
    construct: Any,
) -> Any:
    """Wrap a scalar constructor so a number literal cannot be longer than it needs."""

    def bounded(loader: _PolicyLoader, node: yaml.ScalarNode) -> Any:
        if len(node.value) > MAX_NUMBER_CHARS:
            raise _LimitExceeded(
                f"a number of {len(node.value)} characters (at most {MAX_NUMBER_CHARS})",
                node.start_mark,
            )
        return construct(loader, node)

    return bounded


_PolicyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _not_a_policy_type(loader: _PolicyLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(
        None,
        None,
        f"{node.tag.rsplit(':', 1)[-1]!r} values have no place in a policy",
        node.start_mark,
    )


# YAML types beyond JSON's: a set would even make the policy hash vary between runs
for _tag in ("set", "omap", "pairs", "binary"):
    _PolicyLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _not_a_policy_type)
_PolicyLoader.add_constructor(
    "tag:yaml.org,2002:int", _bounded_number(yaml.SafeLoader.construct_yaml_int)
)
_PolicyLoader.add_constructor(
    "tag:yaml.org,2002:float", _bounded_number(yaml.SafeLoader.construct_yaml_float)
)
