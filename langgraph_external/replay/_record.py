"""What a replay answers from: the recorded calls of a thread, indexed by where they ran.

A call is found again by its **context** — the node names of its namespace (task ids
left out: they change with every new checkpoint id), the step, and the task's path
(``("__pregel_push", "1", ...)`` tells the ``Send`` tasks of one step apart) — then by the
**input**: the ``prompt_context_hash`` of a model call, the tool name and arguments of a tool
call (its ``tool_call_id`` preferred). Calls of one context are taken in recorded order,
so repeated identical calls (a node re-run after an interrupt) are answered in turn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph_external.record.events import canonical_json
from langgraph_external.record.namespaces import namespace_of, scope_of

Context = tuple[tuple[str, ...], int | None, tuple[str, ...]]
"""(node names of the namespace down to the node, step, task path)."""


def live_context(metadata: Mapping[str, Any]) -> Context:
    """The context of a call made now, from its callback metadata (``langgraph_*`` keys)."""
    step = metadata.get("langgraph_step")
    return (
        scope_of(namespace_of(metadata)),
        int(step) if step is not None else None,
        tuple(str(p) for p in metadata.get("langgraph_path") or ()),
    )


@dataclass
class RecordedCall:
    """One recorded model or tool call: where it ran, what it got, what it answered."""

    kind: str  # "llm" | "tool"
    seq: int
    context: Context
    node: str | None
    step: int | None
    task_id: str | None
    checkpoint_ns: str
    name: str | None
    start: Mapping[str, Any]
    end: Mapping[str, Any] | None = None
    end_kind: str | None = None
    end_status: str | None = None
    consumed: bool = False

    @property
    def input_hash(self) -> str | None:
        """The ``prompt_context_hash`` of a model call."""
        return self.start.get("prompt_context_hash")

    @property
    def tool_call_id(self) -> str | None:
        """The ``tool_call_id`` of a tool call."""
        return self.start.get("tool_call_id")

    @property
    def args(self) -> Any:
        """The arguments of a tool call, as recorded."""
        return self.start.get("args")

    def where(self) -> dict[str, Any]:
        """Step, node, task and namespace, for reports."""
        return {k: getattr(self, k) for k in ("step", "node", "task_id", "checkpoint_ns")}


@dataclass
class Invocation:
    """One recorded ``invoke`` of the graph on the thread: its input or resume value."""

    run_id: str
    seq: int
    input: Any
    resume: bool = False
    exact: Any = None
    status: str | None = None


@dataclass
class CallIndex:
    """Recorded calls by context; each is answered once (thread-safe)."""

    calls: list[RecordedCall] = field(default_factory=list)
    _by_context: dict[tuple[str, Context], list[RecordedCall]] = field(default_factory=dict)
    _by_scope: dict[tuple[str, tuple[str, ...], int | None], list[RecordedCall]] = field(
        default_factory=dict
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: RecordedCall) -> None:
        """Index one call (in recorded order)."""
        self.calls.append(call)
        self._by_context.setdefault((call.kind, call.context), []).append(call)
        scope, step, _ = call.context
        self._by_scope.setdefault((call.kind, scope, step), []).append(call)

    def _candidates(self, kind: str, ctx: Context) -> list[RecordedCall]:
        exact = [c for c in self._by_context.get((kind, ctx), ()) if not c.consumed]
        if exact:
            return exact
        scope, step, _ = ctx  # a task path the replay names differently: same scope and step
        return [c for c in self._by_scope.get((kind, scope, step), ()) if not c.consumed]

    def take_llm(self, ctx: Context, input_hash: str) -> tuple[RecordedCall | None, bool]:
        """The recorded model call for this context and input: ``(call, same_input)``; with
        none of the same input, the context's next unanswered call (or ``None``)."""
        with self._lock:
            cands = self._candidates("llm", ctx)
            if not cands:
                return None, False
            same = [c for c in cands if c.input_hash == input_hash]
            call = (same or cands)[0]
            call.consumed = True
            return call, bool(same)

    def take_tool(
        self, ctx: Context, name: str, args: Any, tool_call_id: str | None
    ) -> tuple[RecordedCall | None, bool]:
        """The recorded tool call for this context, tool and arguments (``tool_call_id``
        preferred): ``(call, same_call)``; otherwise the next unanswered one, not taken."""
        key = canonical_json(args)  # the order of keys does not matter
        with self._lock:
            cands = [c for c in self._candidates("tool", ctx) if c.name == name]
            same = [c for c in cands if canonical_json(c.args) == key]
            for c in sorted(same, key=lambda c: c.tool_call_id != tool_call_id):
                c.consumed = True
                return c, True
            rest = cands or self._candidates("tool", ctx)
            return (rest[0] if rest else None), False

    def unanswered(self) -> list[RecordedCall]:
        """Recorded calls the replay never made."""
        return [c for c in self.calls if not c.consumed]


def _paths(events: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """task id -> task path, from ``node_start`` events."""
    return {
        e["task_id"]: tuple(str(p) for p in (e.get("payload") or {}).get("path") or ())
        for e in events
        if e["kind"] == "node_start" and e.get("task_id")
    }


_STARTS = {"llm_start": "llm", "tool_start": "tool"}
_ENDS = {"llm_end", "tool_end", "tool_error"}


def index_calls(
    events: Sequence[Mapping[str, Any]],
    *,
    after_seq: int,
    resolve: Callable[[Mapping[str, Any]], Mapping[str, Any]],
) -> CallIndex:
    """Every model and tool call recorded after ``after_seq``, paired with its answer
    (``resolve`` turns an offloaded payload back into its value)."""
    paths = _paths(events)
    index = CallIndex()
    open_calls: dict[str, RecordedCall] = {}
    for e in events:
        kind = e["kind"]
        if kind in _STARTS and e["seq"] > after_seq:
            task = e.get("task_id")
            call = RecordedCall(
                kind=_STARTS[kind],
                seq=e["seq"],
                context=(
                    scope_of(e.get("checkpoint_ns"), e.get("node")),
                    e.get("step"),
                    paths.get(task or "", ()),
                ),
                node=e.get("node"),
                step=e.get("step"),
                task_id=task,
                checkpoint_ns=e.get("checkpoint_ns") or "",
                name=e.get("name"),
                start=resolve(e.get("payload") or {}),
            )
            index.add(call)
            if e.get("run_id"):
                open_calls[e["run_id"]] = call
        elif kind in _ENDS and e.get("run_id") in open_calls:
            call = open_calls.pop(e["run_id"])
            call.end = resolve(e.get("payload") or {})
            call.end_kind = kind
            call.end_status = e.get("status")
    return index


def invocations(
    events: Sequence[Mapping[str, Any]],
    *,
    resolve: Callable[[Mapping[str, Any]], Mapping[str, Any]],
) -> list[Invocation]:
    """The thread's top-level graph invocations, in order, with what each was given."""
    resumes = {
        e.get("run_id"): resolve(e.get("payload") or {}).get("value")
        for e in events
        if e["kind"] == "resume" and e.get("name") != "checkpoint"
    }
    out: list[Invocation] = []
    by_run: dict[str, Invocation] = {}
    for e in events:
        if e.get("parent_run_id") is not None or not e.get("run_id"):
            continue
        if e["kind"] == "run_start" and e.get("run_id") == e.get("root_run_id"):
            p = resolve(e.get("payload") or {})
            resume = p.get("command") == "resume"
            inv = Invocation(
                run_id=e["run_id"],
                seq=e["seq"],
                input=resumes.get(e["run_id"]) if resume else p.get("input"),
                resume=resume,
                exact=p.get("exact"),
            )
            out.append(inv)
            by_run[inv.run_id] = inv
        elif e["kind"] == "run_end" and e.get("run_id") in by_run:
            by_run[e["run_id"]].status = e.get("status")
    return out
