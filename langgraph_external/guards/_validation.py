"""Cross-references of a policy, and pydantic's errors as paths inside the policy.

A policy given as plain data may fail pydantic's schema and still hold more mistakes
(a transition to an undeclared state, a tool not listed); :func:`cross_references` checks
them on whatever part of the data is well-typed, so one load reports every problem at
once, each as a ``(path, message)`` pair (``transitions.draft[1]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from langgraph_external.guards._errors import preview
from langgraph_external.guards._states import END, START, normalize_state

Problem = tuple[str, str]
"""``(path inside the policy, message)``."""


def cross_references(
    raw_states: Any, raw_transitions: Any, raw_nodes: Any, raw_tools: Any, raw_action: Any
) -> tuple[list[Problem], list[str], dict[str, list[str]]]:
    """The problems, normalized states and normalized transitions of plain policy data.

    Ill-typed parts are skipped: the schema errors already name them.
    """
    problems: list[Problem] = []
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
    if START not in first:
        states.insert(0, START)
    if END not in first:
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


def _fallback_problems(action: Any, here: str, declared: set[str]) -> list[Problem]:
    fallback = action.get("fallback") if isinstance(action, Mapping) else None
    if not isinstance(fallback, str):
        return []
    fallback = normalize_state(fallback)
    if fallback == START or fallback not in declared:
        return [(f"{here}.fallback", f"{fallback!r} is not a declared node")]
    return []


def schema_problems(exc: ValidationError) -> list[Problem]:
    out: list[Problem] = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ")
        path = _format_loc(err["loc"])
        if not path and ("\n" in msg or ": " in msg):
            for line in msg.splitlines():
                where, _, what = line.partition(": ")
                out.append((where, what))
            continue
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif "input" in err and err["type"] != "value_error":
            msg = f"{msg} (got {preview(err['input'])})"
        if path and ": " in msg and msg.split(": ", 1)[0].split(".")[0] == "fallback":
            sub, _, msg = msg.partition(": ")
            path = f"{path}.{sub}"
        out.append((path, msg))
    return out


def in_file_order(problems: list[Problem], keys: list[Any]) -> list[Problem]:
    """Problems sorted by where their top-level key appears in the file."""
    order = {str(k): i for i, k in enumerate(keys)}

    def position(problem: Problem) -> int:
        head = problem[0].split(".", 1)[0].split("[", 1)[0]
        return order.get(head, len(order))

    return sorted(problems, key=position)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "function-after[_fallback_for_route(), OnViolation]":
            out += f".{part}" if out else str(part)
    return out
