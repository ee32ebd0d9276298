"""Compare two recorded runs: the path of nodes they took and the state they reached.

The logic behind ``lgx diff`` and the report of :func:`langgraph_external.replay.replay`.
A side is a thread (its latest state), a checkpoint of a thread (the state there, the path
up to it) or one run (one ``invoke``: the path it took, the state it left). Paths come
from the ledger's checkpoint index (which nodes wrote each checkpoint, per namespace);
states are the readable renderings of the workspace (what ``lgx state`` shows).

States are compared channel by channel; a list of messages is compared message by
message — added, removed, changed (role, content, tool calls, name, tool_call_id) — with
message ids left out, since LangGraph draws them at random for messages without one.

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

import psycopg

from langgraph_external import ledger
from langgraph_external.errors import ConfigurationError
from langgraph_external.events import canonical_json
from langgraph_external.inspection import NotFoundError, read_state
from langgraph_external.workspace import Workspace

__all__ = [
    "Diff",
    "MessagesDiff",
    "PathDiff",
    "PathEntry",
    "Side",
    "StateDiff",
    "diff_messages",
    "diff_paths",
    "diff_sides",
    "diff_values",
    "load_side",
    "parse_side",
]

_MESSAGE_FIELDS = ("role", "content", "tool_calls", "name", "tool_call_id", "status")


# -- paths --------------------------------------------------------------------------------
@dataclass(frozen=True)
class PathEntry:
    """One checkpoint on a path: its namespace (node names, task ids left out), the step
    and the nodes whose writes produced it (``[]`` for an input checkpoint)."""

    ns: str
    step: int | None
    nodes: tuple[str, ...]
    checkpoint_id: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        """``ns/node,node@step`` (``(input)`` for an input checkpoint)."""
        what = ",".join(self.nodes) or "(input)"
        return f"{self.ns + '/' if self.ns else ''}{what}@{self.step}"


def _canonical(path: Sequence[PathEntry]) -> list[PathEntry]:
    """Root entries in order, then each namespace's in order: concurrent subgraph tasks
    interleave their checkpoints differently from run to run."""
    order: dict[str, int] = {}
    for e in path:
        order.setdefault(e.ns, len(order))
    return sorted(path, key=lambda e: (e.ns != "", order[e.ns]))


@dataclass
class PathDiff:
    """How two node paths differ.

    Attributes:
        same: the paths are equal.
        first_difference: index (in the canonical order) of the first differing entry.
        ops: difflib-style operations (``equal``, ``replace``, ``delete``, ``insert``)
            with the labels of each side.
    """

    same: bool
    first_difference: int | None
    a: list[str]
    b: list[str]
    ops: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def diff_paths(a: Sequence[PathEntry], b: Sequence[PathEntry]) -> PathDiff:
    """Compare two node paths.

    Example:
        >>> p = [PathEntry("", 1, ("agent",)), PathEntry("", 2, ("tools",))]
        >>> diff_paths(p, p[:1]).first_difference
        1
    """
    ca, cb = _canonical(a), _canonical(b)
    la, lb = [e.label for e in ca], [e.label for e in cb]
    ops = []
    first = None
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=la, b=lb, autojunk=False).get_opcodes():
        if tag != "equal" and first is None:
            first = i1
        ops.append({"op": tag, "a": la[i1:i2], "b": lb[j1:j2]})
    return PathDiff(same=la == lb, first_difference=first, a=la, b=lb, ops=ops)


# -- messages -----------------------------------------------------------------------------
def _is_message(v: Any) -> bool:
    return isinstance(v, Mapping) and "role" in v and "content" in v


def _message_key(m: Mapping[str, Any]) -> str:
    body = {k: m.get(k) for k in _MESSAGE_FIELDS if m.get(k) not in (None, "", [])}
    if "tool_calls" in body:  # call ids are the model's bookkeeping: name and arguments count
        body["tool_calls"] = [
            {"name": c.get("name"), "args": c.get("args")} for c in body["tool_calls"] or ()
        ]
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
            va = [{"name": c.get("name"), "args": c.get("args")} for c in va or []]
            vb = [{"name": c.get("name"), "args": c.get("args")} for c in vb or []]
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
    ka, kb = [_message_key(m) for m in a], [_message_key(m) for m in b]
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


# -- states -------------------------------------------------------------------------------
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


def _message_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(_is_message(m) for m in v)


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
        if _message_list(va) or _message_list(vb):
            md = diff_messages(va or [], vb or [])
            if not md.same:
                out.changed.append(ChannelChange(ch, messages=md))
        elif canonical_json(va) != canonical_json(vb):
            out.changed.append(ChannelChange(ch, a=va, b=vb))
    return out


# -- sides: what is compared --------------------------------------------------------------
@dataclass(frozen=True)
class Side:
    """One side of a comparison: a thread, a checkpoint of it, or a run.

    Parse one with :func:`parse_side`: ``THREAD``, ``THREAD@CHECKPOINT`` (an id or a
    unique prefix) or ``run:RUN_ID`` (the ``run_id`` of a ``run_start`` event).
    """

    thread_id: str | None = None
    checkpoint_id: str | None = None
    run_id: str | None = None

    def __str__(self) -> str:
        if self.run_id:
            return f"run:{self.run_id}"
        return f"{self.thread_id}" + (f"@{self.checkpoint_id}" if self.checkpoint_id else "")


def parse_side(text: str, checkpoint_id: str | None = None) -> Side:
    """``THREAD``, ``THREAD@CHECKPOINT`` or ``run:RUN_ID`` (``checkpoint_id`` overrides).

    Example:
        >>> parse_side("thread-42@1f1e")
        Side(thread_id='thread-42', checkpoint_id='1f1e', run_id=None)
        >>> parse_side("run:0199").run_id
        '0199'
    """
    if not text:
        raise ConfigurationError("an empty thread id cannot be compared")
    if text.startswith("run:"):
        if checkpoint_id:
            raise ConfigurationError("a run is compared as a whole; drop --checkpoint")
        return Side(run_id=text[4:])
    thread, _, cp = text.rpartition("@") if "@" in text else (text, "", "")
    return Side(thread_id=thread, checkpoint_id=checkpoint_id or cp or None)


@dataclass
class LoadedSide:
    """A side with its path and readable state."""

    side: Side
    thread_id: str
    checkpoint_id: str | None
    path: list[PathEntry]
    values: dict[str, Any]


SELECT_PATH = """
select checkpoint_ns, checkpoint_id, step, nodes, source, event_seq
from {schema}.checkpoints where thread_id = %s order by event_seq
"""

SELECT_RUN = """
select thread_id, kind, seq from {schema}.events
where run_id = %s and kind in ('run_start', 'run_end') and parent_run_id is null
order by seq
"""


def _scope(ns: str) -> str:
    return "|".join(p.split(":", 1)[0] for p in ns.split("|") if p)


_NOT_NODES = {"__interrupt__"}
"""LangGraph marks the channels an interrupted or resumed run saw under this name."""


def load_path(
    conn: psycopg.Connection[Any], thread_id: str, schema: str = ledger.DEFAULT_SCHEMA
) -> list[tuple[int, PathEntry]]:
    """Every checkpoint of a thread as ``(event seq, PathEntry)``, in record order."""
    rows = conn.execute(ledger.q(SELECT_PATH, schema), (thread_id,)).fetchall()
    return [
        (
            int(seq or 0),
            PathEntry(_scope(ns), step, tuple(sorted(set(nodes or ()) - _NOT_NODES)), cid),
        )
        for ns, cid, step, nodes, _source, seq in rows
    ]


def load_side(
    conn: psycopg.Connection[Any],
    ws: Workspace,
    side: Side,
    schema: str = ledger.DEFAULT_SCHEMA,
) -> LoadedSide:
    """The path (from the ledger) and readable state (from the workspace) of ``side``.

    Raises:
        NotFoundError: the thread, checkpoint or run is not recorded.
        AmbiguousCheckpointError: a checkpoint prefix matches several checkpoints.
    """
    thread = side.thread_id
    lo, hi = 0, None
    if side.run_id is not None:
        rows = conn.execute(ledger.q(SELECT_RUN, schema), (side.run_id,)).fetchall()
        if not rows:
            raise NotFoundError(f"run {side.run_id!r} is not in the ledger")
        thread = rows[0][0]
        seqs = {kind: seq for _, kind, seq in rows}
        lo, hi = seqs.get("run_start", 0), seqs.get("run_end")
    assert thread is not None
    entries = load_path(conn, thread, schema)
    if not entries:
        raise NotFoundError(f"thread {thread!r} has no checkpoints in the ledger")
    checkpoint_id = side.checkpoint_id
    if checkpoint_id is not None:
        checkpoint_id = read_state(ws, thread, checkpoint_id).checkpoint_id
        hi = next((s for s, e in entries if e.checkpoint_id == checkpoint_id and not e.ns), None)
        if hi is None:
            raise NotFoundError(f"checkpoint {checkpoint_id} of {thread!r} is not in the ledger")
    picked = [e for s, e in entries if s > lo and (hi is None or s <= hi)]
    if side.run_id is not None:
        roots = [e for e in picked if e.ns == ""]
        if not roots:
            raise NotFoundError(f"run {side.run_id!r} wrote no checkpoint")
        checkpoint_id = roots[-1].checkpoint_id
    state = read_state(ws, thread, checkpoint_id)
    return LoadedSide(side, thread, state.checkpoint_id, picked, dict(state.values))


@dataclass
class Diff:
    """The comparison of two sides: node path and state."""

    a: str
    b: str
    a_checkpoint_id: str | None
    b_checkpoint_id: str | None
    path: PathDiff
    state: StateDiff

    @property
    def same(self) -> bool:
        """Same path and same state."""
        return self.path.same and self.state.same

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return {
            "a": self.a,
            "b": self.b,
            "a_checkpoint_id": self.a_checkpoint_id,
            "b_checkpoint_id": self.b_checkpoint_id,
            "same": self.same,
            "path": self.path.to_dict(),
            "state": self.state.to_dict(),
        }

    def lines(self) -> list[str]:
        """A readable rendering, one line per difference."""
        out = [f"--- {self.a}", f"+++ {self.b}"]
        out += render_path(self.path) + render_state(self.state)
        if self.same:
            out.append("same path, same state")
        return out


def render_path(p: PathDiff) -> list[str]:
    """Text lines of a path difference (nothing when equal)."""
    if p.same:
        return []
    out = [f"path differs from entry {p.first_difference}:"]
    for op in p.ops:
        if op["op"] == "equal":
            continue
        out += [f"  - {x}" for x in op["a"]] + [f"  + {x}" for x in op["b"]]
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
        for r in m.removed:
            out.append(f"  - [{r['index']}] {_brief(r['message'])}")
        for a in m.added:
            out.append(f"  + [{a['index']}] {_brief(a['message'])}")
        for ch in m.changed:
            for f, v in ch["fields"].items():
                out.append(f"  ~ [{ch['index_a']}] {f}: {_brief(v['a'])} -> {_brief(v['b'])}")
    return out


def diff_sides(
    conn: psycopg.Connection[Any],
    ws: Workspace,
    a: Side,
    b: Side,
    schema: str = ledger.DEFAULT_SCHEMA,
) -> Diff:
    """Compare two threads, checkpoints or runs (see :class:`Side`).

    Example:
        >>> with ledger.connect(dsn) as conn:                              # doctest: +SKIP
        ...     d = diff_sides(conn, Workspace("./ws"), parse_side("t-1"), parse_side("t-2"))
        >>> d.same                                                         # doctest: +SKIP
        True
    """
    la, lb = load_side(conn, ws, a, schema), load_side(conn, ws, b, schema)
    return Diff(
        a=str(a),
        b=str(b),
        a_checkpoint_id=la.checkpoint_id,
        b_checkpoint_id=lb.checkpoint_id,
        path=diff_paths(la.path, lb.path),
        state=diff_values(la.values, lb.values),
    )
