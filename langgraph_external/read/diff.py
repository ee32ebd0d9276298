"""Compare two recorded runs: the nodes they took, what their models were asked and
answered, the tools they called, and the state they reached.

The logic behind ``lgx diff`` and the report of :func:`langgraph_external.replay.replay`,
usable from Python (a compare view calls the same functions). A side is a thread (its
latest state), a checkpoint of a thread (the state there, the path and calls up to it) or
one run (one ``invoke``: the path it took, its calls, the state it left). Paths come from
the ledger's checkpoint index (which nodes wrote each checkpoint, per namespace); model
and tool calls from the ledger's ``llm_start``/``llm_end`` and ``tool_*`` events (the
recorded, redacted renderings); states are the readable renderings of the workspace (what
``lgx state`` shows).

Public functions, each usable on its own:

* :func:`parse_side` / :func:`load_side`: what is compared, and its path, calls and state;
* :func:`diff_sides`: everything at once, a :class:`Diff` (``.same``, ``.lines()``,
  ``.to_dict()``);
* :func:`diff_paths`, :func:`diff_calls`, :func:`diff_values`, :func:`diff_messages`: one
  aspect each, on plain data;
* :func:`load_calls`: the model and tool calls of a thread (or a range of its events);
* :func:`message_lines` / :func:`prompt_lines` / :func:`unified_prompt_diff`: a prompt
  as text lines and the unified diff of two prompts (what ``lgx diff`` and ``lgx
  replay`` print for the first prompt that differs).

States are compared channel by channel; a list of messages is compared message by
message — added, removed, changed (role, content, tool calls, name, tool_call_id) — with
message ids left out, since LangGraph draws them at random for messages without one.
Model calls are paired in run order by where they ran (namespace and node); a pair
differs when the prompt (messages without ids, tool names, model parameters) or the answer
(content and tool calls, without ids) differs. Tool calls are paired the same way by
node and tool name; a pair differs in its arguments or its result.

Example:
    >>> d = diff_values(
    ...     {"messages": [{"role": "user", "content": "hi"}], "n": 1},
    ...     {"messages": [{"role": "user", "content": "hi"},
    ...                   {"role": "assistant", "content": "hello"}], "n": 2},
    ... )
    >>> [c.channel for c in d.changed], len(d.changed[0].messages.added)
    (['messages', 'n'], 1)
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
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

from langgraph_external.errors import ConfigurationError
from langgraph_external.ledger import schema as ledger
from langgraph_external.read.inspection import NotFoundError, read_state
from langgraph_external.record.events import canonical_json
from langgraph_external.record.namespaces import scope_of
from langgraph_external.workspace.files import Workspace

__all__ = [
    "CallChange",
    "CallsDiff",
    "Diff",
    "LoadedSide",
    "MessagesDiff",
    "ModelCall",
    "PathDiff",
    "PathEntry",
    "Side",
    "StateDiff",
    "ToolCall",
    "diff_calls",
    "diff_messages",
    "diff_paths",
    "diff_sides",
    "diff_values",
    "load_calls",
    "load_side",
    "message_lines",
    "parse_side",
    "prompt_lines",
    "unified_prompt_diff",
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
        # messages on both sides (or none on one): message by message; a list on one
        # side and a placeholder on the other ({"$large": ...}): as two values
        if (_message_list(va) or _message_list(vb)) and all(
            v in (None, []) or _message_list(v) for v in (va, vb)
        ):
            md = diff_messages(va or [], vb or [])
            if not md.same:
                out.changed.append(ChannelChange(ch, messages=md))
        elif canonical_json(va) != canonical_json(vb):
            out.changed.append(ChannelChange(ch, a=va, b=vb))
    return out


# -- prompts as text ----------------------------------------------------------------------
def _content_lines(content: Any) -> list[str]:
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
            out += [f"[{i}]", *_content_lines(m)]
            continue
        head = f"[{i}] {m.get('role', '?')}"
        if m.get("name"):
            head += f" {m['name']}"
        if m.get("status") not in (None, "", "success"):
            head += f" ({m['status']})"
        out.append(head)
        out += _content_lines(m.get("content"))
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


# -- model and tool calls ----------------------------------------------------------------
@dataclass
class ModelCall:
    """One recorded chat-model call: where it ran, what it was asked, what it answered.

    Attributes:
        seq: the ``llm_start`` event's position in the thread's record.
        scope: node names of its namespace (``""`` for the root graph; task ids left out).
        node, step: where it ran.
        name: the model's name (the event's name); model: the model named in the payload.
        messages: the prompt, readable (redacted as recorded).
        tools: the tool names (or schemas) the model was given.
        params: the invocation parameters.
        prompt_hash: the recorded ``prompt_context_hash``.
        answer: the answer: one ``{"content", "tool_calls"}`` per generation (ids left
            out); ``None`` when no answer was recorded.
        status: ``ok``, ``error`` or ``None`` (no end recorded).
        error: the error of a failed call.
    """

    seq: int
    scope: str
    node: str | None
    step: int | None
    name: str | None
    model: str | None
    messages: list[dict[str, Any]]
    tools: list[Any]
    params: dict[str, Any]
    prompt_hash: str | None = None
    answer: list[dict[str, Any]] | None = None
    status: str | None = None
    error: str | None = None

    @property
    def where(self) -> str:
        """``scope/node@step``."""
        return f"{self.scope + '/' if self.scope else ''}{self.node or '?'}@{self.step}"

    def input_key(self) -> str:
        """What the model was asked, canonical (message ids left out)."""
        return canonical_json(
            {
                "messages": [_message_key(m) if _is_message(m) else m for m in self.messages],
                "tools": self.tools,
                "params": self.params,
                "model": self.model,
            }
        )

    def answer_key(self) -> str:
        """What the model answered, canonical (ids left out)."""
        return canonical_json({"answer": self.answer, "status": self.status, "error": self.error})


@dataclass
class ToolCall:
    """One recorded tool call: where it ran, its arguments and its result.

    Attributes:
        seq: the ``tool_start`` event's position; scope, node, step: where it ran.
        name: the tool; args: its arguments; tool_call_id: the model's id for the call.
        result: the parsed result (``None`` when it failed or did not end).
        status: ``ok``, ``error`` or ``None``; error: the error of a failed call.
    """

    seq: int
    scope: str
    node: str | None
    step: int | None
    name: str | None
    args: Any
    tool_call_id: str | None = None
    result: Any = None
    status: str | None = None
    error: str | None = None

    @property
    def where(self) -> str:
        """``scope/node@step``."""
        return f"{self.scope + '/' if self.scope else ''}{self.node or '?'}@{self.step}"

    def input_key(self) -> str:
        """The tool and its arguments, canonical."""
        return canonical_json({"name": self.name, "args": self.args})

    def answer_key(self) -> str:
        """The result, canonical."""
        return canonical_json({"result": self.result, "status": self.status, "error": self.error})


_CALL_KINDS = ("llm_start", "llm_end", "tool_start", "tool_end", "tool_error")

SELECT_CALLS = """
select seq, kind, name, status, checkpoint_ns, run_id, node, step, payload
from {schema}.events
where thread_id = %s and kind = any(%s) and seq > %s and (%s::bigint is null or seq <= %s)
order by seq
"""


def _answer(generation: Any) -> dict[str, Any]:
    g = generation if isinstance(generation, Mapping) else {"content": generation}
    calls = [{"name": c.get("name"), "args": c.get("args")} for c in g.get("tool_calls") or ()]
    return {"content": g.get("content"), "tool_calls": calls}


def _prompt_messages(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    msgs = payload.get("messages")
    if msgs is None and payload.get("prompts") is not None:  # a completion model
        return [{"role": "prompt", "content": p} for p in payload.get("prompts") or ()]
    if isinstance(msgs, list) and msgs and all(isinstance(m, list) for m in msgs):
        msgs = [m for batch in msgs for m in batch]  # a batch of prompts, flattened
    return [dict(m) if isinstance(m, Mapping) else {"content": m} for m in msgs or ()]


def _group_order(calls: list[Any]) -> list[Any]:
    """Calls in run order; calls of one step that ran side by side (consecutive, same
    namespace and step) ordered by node and input, since their order varies by run."""
    out: list[Any] = []
    group: list[Any] = []
    for c in sorted(calls, key=lambda c: c.seq):
        if group and (group[-1].scope, group[-1].step) != (c.scope, c.step):
            out += sorted(group, key=lambda x: (x.node or "", x.input_key(), x.seq))
            group = []
        group.append(c)
    return out + sorted(group, key=lambda x: (x.node or "", x.input_key(), x.seq))


def load_calls(
    conn: psycopg.Connection[Any],
    ws: Workspace | None,
    thread_id: str,
    schema: str = ledger.DEFAULT_SCHEMA,
    *,
    after_seq: int = 0,
    upto_seq: int | None = None,
) -> tuple[list[ModelCall], list[ToolCall]]:
    """The model and tool calls recorded for ``thread_id`` (events after ``after_seq``,
    up to ``upto_seq``), in run order. Payloads offloaded to artifacts are read from
    ``ws`` (without it they count as unreadable: an empty prompt).

    Example:
        >>> with ledger.connect(dsn) as conn:                              # doctest: +SKIP
        ...     models, tools = load_calls(conn, Workspace("./ws"), "thread-42")
        >>> models[0].where, models[0].messages[0]["role"]                 # doctest: +SKIP
        ('agent@1', 'system')
    """
    rows = conn.execute(
        ledger.q(SELECT_CALLS, schema),
        (thread_id, list(_CALL_KINDS), after_seq, upto_seq, upto_seq),
    ).fetchall()
    models: dict[str, ModelCall] = {}
    tools: dict[str, ToolCall] = {}
    model_list: list[ModelCall] = []
    tool_list: list[ToolCall] = []
    for seq, kind, name, status, ns, run_id, node, step, payload in rows:
        p = _resolve_payload(ws, thread_id, payload or {})
        scope = _scope(ns or "")
        key = str(run_id or seq)
        if kind == "llm_start":
            call = ModelCall(
                seq=int(seq),
                scope=scope,
                node=node,
                step=step,
                name=name,
                model=p.get("model"),
                messages=_prompt_messages(p),
                tools=list(p.get("tools") or ()),
                params=dict(p.get("params") or {}),
                prompt_hash=p.get("prompt_context_hash"),
            )
            models[key] = call
            model_list.append(call)
        elif kind == "llm_end" and key in models:
            call = models.pop(key)
            call.status = status
            call.error = p.get("error")
            call.answer = [_answer(g) for g in p.get("generations") or ()]
        elif kind == "tool_start":
            tool = ToolCall(
                seq=int(seq),
                scope=scope,
                node=node,
                step=step,
                name=name,
                args=p.get("args"),
                tool_call_id=p.get("tool_call_id"),
            )
            tools[key] = tool
            tool_list.append(tool)
        elif kind in ("tool_end", "tool_error") and key in tools:
            tool = tools.pop(key)
            tool.status = status or ("error" if kind == "tool_error" else "ok")
            tool.result = p.get("parsed", p.get("result"))
            tool.error = p.get("error")
    return _group_order(model_list), _group_order(tool_list)


def _resolve_payload(
    ws: Workspace | None, thread_id: str, payload: Mapping[str, Any]
) -> Mapping[str, Any]:
    digest = payload.get("$artifact") if isinstance(payload, Mapping) else None
    if not digest:
        return payload
    if ws is None:
        return {}
    try:
        loaded = json.loads(ws.read_bytes(ws.artifact_path(thread_id, str(digest))))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


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
        return next(
            (
                c
                for c in self.changes
                if c.kind == "model" and c.change == "changed" and c.input_differs
            ),
            None,
        )

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


def _answer_lines(call: ModelCall | ToolCall) -> list[str]:
    if isinstance(call, ToolCall):
        if call.status == "error":
            return [f"error: {call.error}"]
        return _content_lines(call.result) or ["(empty)"]
    if call.status == "error":
        return [f"error: {call.error}"]
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
            out += [
                line
                for line in difflib.unified_diff(
                    _answer_lines(answered.a),
                    _answer_lines(answered.b),
                    f"{a_label} {answered.where_a}",
                    f"{b_label} {answered.where_b}",
                    lineterm="",
                )
            ]
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
            parts = []
            if c.input_differs:
                if c.kind == "model":
                    parts.append("prompt differs")
                else:
                    assert isinstance(c.a, ToolCall) and isinstance(c.b, ToolCall)
                    parts.append(f"args {_brief(c.a.args)} -> {_brief(c.b.args)}")
            if c.output_differs:
                if c.kind == "model":
                    parts.append("answer differs")
                else:
                    assert isinstance(c.a, ToolCall) and isinstance(c.b, ToolCall)
                    parts.append(f"result {_brief(c.a.result)} -> {_brief(c.b.result)}")
            out.append(f"  ~ {label} {c.where_a}: " + "; ".join(parts))
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
    """A side with its path, model and tool calls, and readable state.

    Attributes:
        side: what was asked for.
        thread_id, checkpoint_id: the thread, and the root checkpoint whose state is used.
        path: the checkpoints of the side, in record order.
        values: the readable state at ``checkpoint_id``.
        model_calls, tool_calls: the calls of the side, in run order.
        after_seq, upto_seq: the range of the thread's events the side covers.
    """

    side: Side
    thread_id: str
    checkpoint_id: str | None
    path: list[PathEntry]
    values: dict[str, Any]
    model_calls: list[ModelCall] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    after_seq: int = 0
    upto_seq: int | None = None


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
    return "|".join(scope_of(ns))


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
    """The path and calls (from the ledger) and readable state (from the workspace) of
    ``side``.

    Example:
        >>> with ledger.connect(dsn) as conn:                              # doctest: +SKIP
        ...     side = load_side(conn, Workspace("./ws"), parse_side("thread-42"))
        >>> side.path[-1].label, len(side.model_calls)                     # doctest: +SKIP
        ('agent@5', 3)

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
    models, tools = load_calls(conn, ws, thread, schema, after_seq=lo, upto_seq=hi)
    return LoadedSide(
        side,
        thread,
        state.checkpoint_id,
        picked,
        dict(state.values),
        models,
        tools,
        after_seq=lo,
        upto_seq=hi,
    )


@dataclass
class Diff:
    """The comparison of two sides: node path, model and tool calls, state."""

    a: str
    b: str
    a_checkpoint_id: str | None
    b_checkpoint_id: str | None
    path: PathDiff
    state: StateDiff
    calls: CallsDiff = field(default_factory=CallsDiff)

    @property
    def same(self) -> bool:
        """Same path, same calls (asked and answered the same), same state."""
        return self.path.same and self.calls.same and self.state.same

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return {
            "a": self.a,
            "b": self.b,
            "a_checkpoint_id": self.a_checkpoint_id,
            "b_checkpoint_id": self.b_checkpoint_id,
            "same": self.same,
            "path": self.path.to_dict(),
            "calls": self.calls.to_dict(),
            "state": self.state.to_dict(),
        }

    def lines(self) -> list[str]:
        """A readable rendering: the path difference, the calls (with the unified diff of
        the first differing prompt), then the state difference."""
        out = [f"--- {self.a}", f"+++ {self.b}"]
        out += render_path(self.path)
        out += render_calls(self.calls, self.a, self.b)
        out += render_state(self.state)
        if self.same:
            out.append("same path, same model and tool calls, same state")
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
    """Compare two threads, checkpoints or runs (see :class:`Side`): node path, model
    and tool calls, state.

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
        calls=diff_calls(la.model_calls, lb.model_calls, la.tool_calls, lb.tool_calls),
    )
