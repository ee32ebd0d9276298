"""How two states differ: channel by channel, and message lists message by message.

States are the readable renderings the workspace holds (what ``lgx state`` shows). A
list of messages is compared message by message — added, removed, changed (role,
content, tool calls, name, tool_call_id) — with message ids left out, since LangGraph
draws them at random for messages without one.

Example:
    >>> d = diff_values(
    ...     {"messages": [{"role": "user", "content": "hi"}], "n": 1},
    ...     {"messages": [{"role": "user", "content": "hi"},
    ...                   {"role": "assistant", "content": "hello"}], "n": 2},
    ... )
    >>> [c.channel for c in d.changed], len(d.changed[0].messages.added)
    (['messages', 'n'], 1)
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph_external.record.events import canonical_json

__all__ = [
    "ChannelChange",
    "MessagesDiff",
    "StateDiff",
    "diff_messages",
    "diff_values",
    "is_message",
    "is_message_list",
    "message_key",
    "tool_call_keys",
]

_MESSAGE_FIELDS = ("role", "content", "tool_calls", "name", "tool_call_id", "status")


def is_message(v: Any) -> bool:
    """Whether ``v`` reads as a message (a mapping with ``role`` and ``content``).

    Example:
        >>> is_message({"role": "user", "content": "hi"}), is_message({"content": "hi"})
        (True, False)
    """
    return isinstance(v, Mapping) and "role" in v and "content" in v


def tool_call_keys(calls: Any) -> list[dict[str, Any]]:
    """Requested tool calls as compared: name and arguments (call ids are the model's
    bookkeeping, drawn anew each run).

    Example:
        >>> tool_call_keys([{"id": "c1", "name": "f", "args": {"x": 1}}])
        [{'name': 'f', 'args': {'x': 1}}]
    """
    return [{"name": c.get("name"), "args": c.get("args")} for c in calls or ()]


def message_key(m: Mapping[str, Any]) -> str:
    """A message as canonical JSON, ids left out: two messages that read the same have
    the same key.

    Example:
        >>> message_key({"id": "a1", "role": "user", "content": "hi"})
        '{"content":"hi","role":"user"}'
    """
    body = {k: m.get(k) for k in _MESSAGE_FIELDS if m.get(k) not in (None, "", [])}
    if "tool_calls" in body:
        body["tool_calls"] = tool_call_keys(body["tool_calls"])
    return canonical_json(body)


@dataclass
class MessagesDiff:
    """How two message lists differ (ids left out).

    Attributes:
        added: messages only in ``b``, with their index there.
        removed: messages only in ``a``, with their index there.
        changed: pairs at the same place that differ, field by field (``tool_calls``
            listed per call: name and arguments).
    """

    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """No message was added, removed or changed."""
        return not (self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def _fields_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in _MESSAGE_FIELDS:
        va, vb = a.get(f), b.get(f)
        if f == "tool_calls":
            va, vb = tool_call_keys(va), tool_call_keys(vb)
        if canonical_json(va) != canonical_json(vb):
            out[f] = {"a": va, "b": vb}
    return out


def diff_messages(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> MessagesDiff:
    """Compare two lists of readable messages (``{"role", "content", ...}`` dicts).

    Example:
        >>> d = diff_messages([{"role": "user", "content": "a"}],
        ...                   [{"role": "user", "content": "b"}])
        >>> d.changed[0]["fields"]["content"]
        {'a': 'a', 'b': 'b'}
    """
    ka, kb = [message_key(m) for m in a], [message_key(m) for m in b]
    out = MessagesDiff()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ka, b=kb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for k in range(pairs):
            out.changed.append(
                {
                    "index_a": i1 + k,
                    "index_b": j1 + k,
                    "role": b[j1 + k].get("role"),
                    "fields": _fields_diff(a[i1 + k], b[j1 + k]),
                }
            )
        out.removed.extend({"index": i, "message": dict(a[i])} for i in range(i1 + pairs, i2))
        out.added.extend({"index": j, "message": dict(b[j])} for j in range(j1 + pairs, j2))
    return out


@dataclass
class ChannelChange:
    """One channel whose value differs; ``messages`` is set for message lists."""

    channel: str
    a: Any = None
    b: Any = None
    messages: MessagesDiff | None = None


@dataclass
class StateDiff:
    """How two states differ, channel by channel."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[ChannelChange] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """Every channel is equal (messages compared without their ids)."""
        return not (self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        out = asdict(self)
        for c in out["changed"]:
            if c["messages"] is None:
                del c["messages"]
            else:
                del c["a"], c["b"]
        return out


def is_message_list(v: Any) -> bool:
    """A non-empty list whose every item :func:`is_message`."""
    return isinstance(v, list) and bool(v) and all(is_message(m) for m in v)


def diff_values(a: Any, b: Any) -> StateDiff:
    """Compare two readable states (channel -> value; another value counts as one
    channel named ``value``, such as the return value of a functional-API entrypoint)."""
    a = a if isinstance(a, Mapping) else {"value": a}
    b = b if isinstance(b, Mapping) else {"value": b}
    out = StateDiff(
        added=sorted(k for k in b if k not in a), removed=sorted(k for k in a if k not in b)
    )
    for ch in sorted(k for k in a if k in b):
        va, vb = a[ch], b[ch]
        # messages on both sides (or none on one): message by message; a list on one
        # side and a placeholder on the other ({"$large": ...}): as two values
        if (is_message_list(va) or is_message_list(vb)) and all(
            v in (None, []) or is_message_list(v) for v in (va, vb)
        ):
            md = diff_messages(va or [], vb or [])
            if not md.same:
                out.changed.append(ChannelChange(ch, messages=md))
        elif canonical_json(va) != canonical_json(vb):
            out.changed.append(ChannelChange(ch, a=va, b=vb))
    return out
