"""Differences as text: prompts as lines, the unified diff of two prompts, and the
lines ``lgx diff`` and ``lgx replay`` print for a path, calls or state difference.

Example:
    >>> for line in unified_prompt_diff(
    ...     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    ...     [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}],
    ...     "a", "b"):
    ...     print(line)
    --- a
    +++ b
    @@ -1,4 +1,4 @@
     [0] system
    -Be brief.
    +Be kind.
     [1] user
     hi
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_external.read.call_diff import CallChange, CallsDiff
from langgraph_external.read.calls import ModelCall, ToolCall
from langgraph_external.read.path_diff import PathDiff
from langgraph_external.read.state_diff import StateDiff
from langgraph_external.record.events import canonical_json

__all__ = [
    "content_lines",
    "message_lines",
    "prompt_lines",
    "render_calls",
    "render_path",
    "render_state",
    "unified_prompt_diff",
]


def content_lines(content: Any) -> list[str]:
    """A message's content as text lines (text parts as text, other parts as JSON).

    Example:
        >>> content_lines([{"type": "text", "text": "a\\nb"}, {"type": "image_url"}])
        ['a', 'b', '{"type":"image_url"}']
    """
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return content.splitlines() or [""]
    if isinstance(content, list):  # content parts: text parts as text, the rest as JSON
        out: list[str] = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                out += str(part.get("text", "")).splitlines()
            elif isinstance(part, str):
                out += part.splitlines()
            else:
                out.append(canonical_json(part))
        return out
    return [canonical_json(content)]


def message_lines(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Readable messages as text lines: a ``[i] role name`` line, the content, and one
    ``-> tool(args)`` line per requested tool call (ids left out, like the diffs).

    Example:
        >>> message_lines([{"role": "assistant", "content": "",
        ...                 "tool_calls": [{"id": "c1", "name": "f", "args": {"x": 1}}]}])
        ['[0] assistant', '  -> f({"x":1})']
    """
    out: list[str] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            out += [f"[{i}]", *content_lines(m)]
            continue
        head = f"[{i}] {m.get('role', '?')}"
        if m.get("name"):
            head += f" {m['name']}"
        if m.get("status") not in (None, "", "success"):
            head += f" ({m['status']})"
        out.append(head)
        out += content_lines(m.get("content"))
        for c in m.get("tool_calls") or ():
            out.append(f"  -> {c.get('name')}({canonical_json(c.get('args'))})")
    return out


def prompt_lines(call: ModelCall) -> list[str]:
    """What a model call was asked, as text: model, tool names, parameters, messages."""
    out = []
    if call.model:
        out.append(f"model: {call.model}")
    if call.tools:
        out.append("tools: " + ", ".join(str(t) for t in call.tools))
    if call.params:
        out.append(f"params: {canonical_json(call.params)}")
    return out + message_lines(call.messages)


def unified_prompt_diff(
    a: Sequence[Mapping[str, Any]] | ModelCall,
    b: Sequence[Mapping[str, Any]] | ModelCall,
    a_label: str = "a",
    b_label: str = "b",
    *,
    context: int = 3,
) -> list[str]:
    """The unified diff of two prompts (message lists or :class:`ModelCall`), as lines;
    ``[]`` when they read the same.

    Example:
        >>> unified_prompt_diff([{"role": "user", "content": "a"}],
        ...                     [{"role": "user", "content": "b"}])[2:]
        ['@@ -1,2 +1,2 @@', ' [0] user', '-a', '+b']
    """
    la = prompt_lines(a) if isinstance(a, ModelCall) else message_lines(a)
    lb = prompt_lines(b) if isinstance(b, ModelCall) else message_lines(b)
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(la, lb, a_label, b_label, n=context, lineterm="")
    ]


def render_path(p: PathDiff) -> list[str]:
    """Text lines of a path difference (nothing when equal)."""
    if p.same:
        return []
    out = [f"path differs from entry {p.first_difference}:"]
    for op in p.ops:
        if op["op"] != "equal":
            out += [f"  - {x}" for x in op["a"]] + [f"  + {x}" for x in op["b"]]
    return out


def _answer_lines(call: ModelCall | ToolCall) -> list[str]:
    if call.status == "error":
        return [f"error: {call.error}"]
    if isinstance(call, ToolCall):
        return content_lines(call.result) or ["(empty)"]
    if call.answer is None:
        return ["(no answer recorded)"]
    return message_lines([{"role": "assistant", **g} for g in call.answer])


def render_calls(d: CallsDiff, a_label: str = "a", b_label: str = "b") -> list[str]:
    """Text lines of a calls difference (nothing when equal): a summary, the unified diff
    of the first differing prompt (else of the first differing answer), then one line
    per other difference."""
    if d.same:
        return []
    out = [
        f"calls differ: model calls {d.model_calls[0]} -> {d.model_calls[1]}, "
        f"tool calls {d.tool_calls[0]} -> {d.tool_calls[1]}"
    ]
    first = d.first_prompt_change
    shown: CallChange | None = None
    if first is not None and isinstance(first.a, ModelCall) and isinstance(first.b, ModelCall):
        out.append(f"first differing prompt: model call {first.where_a} / {first.where_b}")
        out += unified_prompt_diff(
            first.a, first.b, f"{a_label} {first.where_a}", f"{b_label} {first.where_b}"
        )
        shown = first
    else:
        answered = next((c for c in d.changes if c.change == "changed" and c.output_differs), None)
        if answered is not None and answered.a is not None and answered.b is not None:
            what = "answer" if answered.kind == "model" else f"result of {answered.name}"
            out.append(f"first differing {what}: {answered.where_a} / {answered.where_b}")
            out += difflib.unified_diff(
                _answer_lines(answered.a),
                _answer_lines(answered.b),
                f"{a_label} {answered.where_a}",
                f"{b_label} {answered.where_b}",
                lineterm="",
            )
            shown = answered
    for c in d.changes:
        if c is shown:
            continue
        label = "model call" if c.kind == "model" else f"tool call {c.name}"
        if c.change == "added":
            out.append(f"  + {label} {c.where_b} only in b")
        elif c.change == "removed":
            out.append(f"  - {label} {c.where_a} only in a")
        else:
            parts = [
                f"{what} differs"
                if c.kind == "model"
                else f"{field} {_brief(getattr(c.a, field))} -> {_brief(getattr(c.b, field))}"
                for differs, what, field in (
                    (c.input_differs, "prompt", "args"),
                    (c.output_differs, "answer", "result"),
                )
                if differs
            ]
            out.append(f"  ~ {label} {c.where_a}: " + "; ".join(parts))
    return out


def _brief(v: Any, limit: int = 100) -> str:
    text = canonical_json(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_state(s: StateDiff) -> list[str]:
    """Text lines of a state difference (nothing when equal)."""
    out = [f"channel {c} only in b" for c in s.added]
    out += [f"channel {c} only in a" for c in s.removed]
    for c in s.changed:
        if c.messages is None:
            out.append(f"channel {c.channel}: {_brief(c.a)} -> {_brief(c.b)}")
            continue
        m = c.messages
        out.append(
            f"channel {c.channel}: {len(m.added)} added, {len(m.removed)} removed, "
            f"{len(m.changed)} changed"
        )
        out += [f"  - [{r['index']}] {_brief(r['message'])}" for r in m.removed]
        out += [f"  + [{a['index']}] {_brief(a['message'])}" for a in m.added]
        out += [
            f"  ~ [{ch['index_a']}] {f}: {_brief(v['a'])} -> {_brief(v['b'])}"
            for ch in m.changed
            for f, v in ch["fields"].items()
        ]
    return out
