"""How the model and tool calls of two sides differ.

Model calls are paired in run order by where they ran (namespace and node); a pair
differs when the prompt (messages without ids, tool names, model parameters) or the
answer (content and tool calls, without ids) differs. Tool calls are paired the same way
by node and tool name; a pair differs in its arguments or its result. The calls come
from :func:`langgraph_external.read.calls.load_calls`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph_external.read.calls import ModelCall, ToolCall
from langgraph_external.read.state_diff import MessagesDiff, diff_messages

__all__ = ["CallChange", "CallsDiff", "diff_calls"]


@dataclass
class CallChange:
    """A model or tool call that differs between the two sides.

    Attributes:
        kind: ``model`` or ``tool``.
        change: ``changed`` (a pair that differs), ``added`` (only in b) or ``removed``
            (only in a).
        index_a, index_b: the call's place among the side's calls of that kind.
        where_a, where_b: ``scope/node@step`` on each side.
        name: the model or tool.
        input_differs: the prompt (model) or the arguments (tool) differ.
        output_differs: the answer (model) or the result (tool) differ.
        messages: for a model call whose prompt differs, the message-by-message diff.
        a, b: the call on each side (:class:`ModelCall` / :class:`ToolCall`).
    """

    kind: str
    change: str
    index_a: int | None
    index_b: int | None
    where_a: str | None
    where_b: str | None
    name: str | None
    input_differs: bool = False
    output_differs: bool = False
    messages: MessagesDiff | None = None
    a: ModelCall | ToolCall | None = None
    b: ModelCall | ToolCall | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        out = asdict(self)
        if self.messages is None:
            del out["messages"]
        return out


@dataclass
class CallsDiff:
    """How the model and tool calls of two sides differ.

    Attributes:
        model_calls: how many model calls each side made (``[a, b]``).
        tool_calls: how many tool calls each side made.
        changes: every differing, added or removed call, model calls first, in run order.
    """

    model_calls: list[int] = field(default_factory=lambda: [0, 0])
    tool_calls: list[int] = field(default_factory=lambda: [0, 0])
    changes: list[CallChange] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """Every call was asked and answered the same on both sides."""
        return not self.changes

    @property
    def first_prompt_change(self) -> CallChange | None:
        """The first pair of model calls whose prompts differ."""
        for c in self.changes:
            if c.kind == "model" and c.change == "changed" and c.input_differs:
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return {
            "same": self.same,
            "model_calls": list(self.model_calls),
            "tool_calls": list(self.tool_calls),
            "changes": [c.to_dict() for c in self.changes],
        }


def _pair(a: Sequence[Any], b: Sequence[Any], place: Any) -> list[tuple[int | None, int | None]]:
    """Pairs of indexes (``None``: no partner): equal calls matched, differing ones
    paired in order where they ran at the same place."""
    ka = [(place(c), c.input_key(), c.answer_key()) for c in a]
    kb = [(place(c), c.input_key(), c.answer_key()) for c in b]
    out: list[tuple[int | None, int | None]] = []
    matcher = difflib.SequenceMatcher(a=ka, b=kb, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += list(zip(range(i1, i2), range(j1, j2), strict=True))
            continue
        # within a differing block, pair calls made at the same place, in order
        pa, pb = [place(a[i]) for i in range(i1, i2)], [place(b[j]) for j in range(j1, j2)]
        inner = difflib.SequenceMatcher(a=pa, b=pb, autojunk=False)
        for t2, x1, x2, y1, y2 in inner.get_opcodes():
            n = min(x2 - x1, y2 - y1) if t2 in ("equal", "replace") else 0
            out += [(i1 + x1 + k, j1 + y1 + k) for k in range(n)]
            out += [(i1 + x, None) for x in range(x1 + n, x2)]
            out += [(None, j1 + y) for y in range(y1 + n, y2)]
    return out


def diff_calls(
    a_models: Sequence[ModelCall],
    b_models: Sequence[ModelCall],
    a_tools: Sequence[ToolCall] = (),
    b_tools: Sequence[ToolCall] = (),
) -> CallsDiff:
    """Compare the model calls and tool calls of two sides (see :func:`load_calls`).

    Model calls made at the same place (namespace and node) are paired in order; a pair
    differs in its prompt (``input_differs``, with a message diff) or its answer
    (``output_differs``). Tool calls are paired by place and tool name; a pair differs in
    its arguments or its result. Unpaired calls are ``added`` (only in b) or ``removed``.

    Example:
        >>> ask = lambda text: ModelCall(1, "", "agent", 1, "m", None,
        ...                              [{"role": "system", "content": text}], [], {})
        >>> d = diff_calls([ask("Be brief.")], [ask("Be kind.")])
        >>> d.first_prompt_change.where_a, d.first_prompt_change.input_differs
        ('agent@1', True)
    """
    out = CallsDiff(
        model_calls=[len(a_models), len(b_models)], tool_calls=[len(a_tools), len(b_tools)]
    )
    for kind, a, b, place in (
        ("model", a_models, b_models, lambda c: (c.scope, c.node)),
        ("tool", a_tools, b_tools, lambda c: (c.scope, c.node, c.name)),
    ):
        for i, j in _pair(a, b, place):
            ca = a[i] if i is not None else None
            cb = b[j] if j is not None else None
            ref = ca or cb
            assert ref is not None
            change = CallChange(
                kind=kind,
                change="changed" if ca and cb else ("removed" if ca else "added"),
                index_a=i,
                index_b=j,
                where_a=ca.where if ca else None,
                where_b=cb.where if cb else None,
                name=ref.name,
                a=ca,
                b=cb,
            )
            if ca is not None and cb is not None:
                change.input_differs = ca.input_key() != cb.input_key()
                change.output_differs = ca.answer_key() != cb.answer_key()
                if not (change.input_differs or change.output_differs):
                    continue
                if change.input_differs and isinstance(ca, ModelCall):
                    assert isinstance(cb, ModelCall)
                    change.messages = diff_messages(ca.messages, cb.messages)
            out.changes.append(change)
    return out
