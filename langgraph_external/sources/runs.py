"""The callback handler's book of runs, and the events a run's callbacks map to.

LangChain reports a run's start and its end in separate callbacks; :class:`RunBook`
keeps what the start said (thread, namespace, node, step, task, root run, policy) until
the end, and what a graph run learned about where its nodes stopped (for interrupts).
The functions below build the event of one callback from a :class:`Run`.

Example:
    >>> from uuid import uuid4
    >>> book, rid = RunBook(), uuid4()
    >>> run = book.start("graph", rid, None, {"thread_id": "t-1"}, "agent")
    >>> run_event(EventKind.RUN_START, run, rid, None).thread_id
    't-1'
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langgraph.callbacks import GraphInterruptEvent, GraphResumeEvent

from langgraph_external.record.events import Event, EventKind
from langgraph_external.record.namespaces import where_of
from langgraph_external.sources.callback_render import render_payload
from langgraph_external.sources.run_context import NO_THREAD, POLICY_HASH_KEY

__all__ = [
    "TRACEBACK_CHARS",
    "Run",
    "RunBook",
    "end_event",
    "interrupt_event",
    "resume_event",
    "run_event",
    "traceback_text",
]


@dataclass(slots=True)
class Run:
    """What the handler remembers between a run's start and end callbacks."""

    kind: str
    thread_id: str
    root: str
    started: float
    node: str | None = None
    step: int | None = None
    task_id: str | None = None
    checkpoint_ns: str = ""
    name: str | None = None
    policy_hash: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class RunBook:
    """The runs seen starting and not yet ended, and the graph runs among them."""

    def __init__(self) -> None:
        self.runs: dict[UUID, Run] = {}
        self.graphs: dict[str, Run] = {}  # graph run id -> run (interrupt events)

    def get(self, run_id: UUID | None) -> Run | None:
        """The run in progress, if its start was seen."""
        return self.runs.get(run_id) if run_id is not None else None

    def pop(self, run_id: UUID) -> Run | None:
        """Forget a run that ended (a graph run too)."""
        run = self.runs.pop(run_id, None)
        if run is not None and run.kind == "graph":
            self.graphs.pop(str(run_id), None)
        return run

    def start(
        self,
        kind: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: Mapping[str, Any] | None,
        name: str | None,
    ) -> Run:
        """Remember a run that starts; it inherits what its parent knows."""
        md = metadata or {}
        parent = self.get(parent_run_id)
        thread = md.get("thread_id")
        if thread is None:
            thread = parent.thread_id if parent else NO_THREAD
        task_id, ns = where_of(md)
        run = Run(
            kind=kind,
            thread_id=str(thread),
            root=parent.root if parent else str(run_id),
            started=time.perf_counter(),
            node=md.get("langgraph_node") or (parent.node if parent else None),
            step=md.get("langgraph_step"),
            task_id=task_id,
            checkpoint_ns=ns,
            name=name,
            policy_hash=md.get(POLICY_HASH_KEY) or (parent.policy_hash if parent else None),
        )
        self.runs[run_id] = run
        if kind == "graph":
            self.graphs[str(run_id)] = run
        return run

    def start_inside(
        self,
        parent: Run,
        kind: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: Mapping[str, Any] | None,
        name: str | None,
    ) -> Run:
        """Remember a chain or router running inside ``parent``'s task: it is recorded
        at ``parent``'s node, step, task and namespace."""
        run = self.start(kind, run_id, parent_run_id, metadata, name)
        run.node = parent.node
        run.step = parent.step if run.step is None else run.step
        run.task_id = parent.task_id or run.task_id
        run.checkpoint_ns = parent.checkpoint_ns
        return run

    def note_step(self, run: Run, *, interrupted: Sequence[str]) -> None:
        """Remember, on the graph run, where its nodes ended: the last root step and its
        nodes, and for each interrupt id the node (innermost and root) that raised it."""
        graph = self.graphs.get(run.root)
        if graph is None:
            return
        where = {"node": run.node, "step": run.step, "task_id": run.task_id}
        for iid in interrupted:
            seen = graph.extra.setdefault("interrupts", {}).setdefault(str(iid), {})
            seen.setdefault("inner", {**where, "checkpoint_ns": run.checkpoint_ns})
            if run.checkpoint_ns == "":
                seen["root"] = where
        if run.checkpoint_ns == "" and run.step is not None:
            if graph.extra.get("last_step") != run.step:
                graph.extra["last_step"], graph.extra["last_nodes"] = run.step, []
            if run.node not in graph.extra["last_nodes"]:
                graph.extra["last_nodes"].append(run.node)


def run_event(
    kind: EventKind, run: Run, run_id: UUID, parent_run_id: UUID | None, **fields: Any
) -> Event:
    """The event of one callback of ``run`` (a guarded run's names its policy)."""
    if run.policy_hash is not None:
        fields["payload"] = {**fields.get("payload", {}), "policy_hash": run.policy_hash}
    return Event(
        kind=kind.value,
        thread_id=run.thread_id,
        checkpoint_ns=run.checkpoint_ns,
        run_id=str(run_id),
        parent_run_id=str(parent_run_id) if parent_run_id else None,
        root_run_id=run.root,
        node=run.node,
        step=run.step,
        task_id=run.task_id,
        name=fields.pop("name", run.name),
        **fields,
    )


def end_event(
    kind: EventKind,
    run: Run,
    run_id: UUID,
    parent_run_id: UUID | None,
    *,
    status: str,
    payload: dict[str, Any],
    error: BaseException | None = None,
    **fields: Any,
) -> Event:
    """The event of a run's end: its status, duration and (on failure) the error, with
    its traceback when it failed (not when it paused: an interrupt is no failure). The
    traceback is text in the payload, redacted on its way like the rest."""
    if error is not None:
        payload = {**payload, "error": str(error), "error_type": type(error).__name__}
        if status == "error":
            payload["traceback"] = traceback_text(error)
    duration = round((time.perf_counter() - run.started) * 1000.0, 3)
    return run_event(
        kind,
        run,
        run_id,
        parent_run_id,
        status=status,
        duration_ms=duration,
        payload=payload,
        **fields,
    )


TRACEBACK_CHARS = 20_000
"""Characters of a traceback recorded (the last ones: where it was raised, and why)."""


def traceback_text(error: BaseException) -> str:
    """The traceback of ``error`` as Python prints it, its last :data:`TRACEBACK_CHARS`.

    Example:
        >>> try:
        ...     raise ValueError("no")
        ... except ValueError as exc:
        ...     traceback_text(exc).splitlines()[-1]
        'ValueError: no'
    """
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return text if len(text) <= TRACEBACK_CHARS else "…" + text[-TRACEBACK_CHARS:]


def interrupt_event(run: Run | None, event: GraphInterruptEvent) -> Event:
    """The graph paused: the interrupt values and where (see
    :meth:`~langgraph_external.sources.callbacks.AuditCallbackHandler.on_interrupt`)."""
    known: Mapping[str, Any] = run.extra.get("interrupts", {}) if run else {}
    items = []
    roots: list[Mapping[str, Any]] = []
    for i in event.interrupts:
        iid = getattr(i, "id", None)
        seen = known.get(str(iid)) or {}
        items.append({"id": iid, "value": getattr(i, "value", i), **(seen.get("inner") or {})})
        if seen.get("root"):
            roots.append(seen["root"])
    nodes = sorted({str(r["node"]) for r in roots if r.get("node")})
    steps = {r["step"] for r in roots if r.get("step") is not None}
    node = nodes[0] if len(nodes) == 1 else None
    step = next(iter(steps)) if len(steps) == 1 else None
    task_id = roots[0].get("task_id") if len(roots) == 1 else None
    payload: dict[str, Any] = {"interrupts": items}
    if not items and run is not None and run.extra.get("last_step") is not None:
        last = int(run.extra["last_step"])
        if event.status == "interrupt_after":
            step = last
            payload["nodes"] = list(run.extra.get("last_nodes") or [])
            node = payload["nodes"][0] if len(payload["nodes"]) == 1 else None
        elif event.status == "interrupt_before":
            step = last + 1
    if len(nodes) > 1:
        payload["nodes"] = nodes
    return Event(
        kind=EventKind.INTERRUPT.value,
        thread_id=run.thread_id if run else NO_THREAD,
        checkpoint_ns="|".join(event.checkpoint_ns),
        checkpoint_id=event.checkpoint_id,
        run_id=str(event.run_id) if event.run_id else None,
        root_run_id=run.root if run else None,
        node=node,
        step=step,
        task_id=task_id,
        status=event.status,
        payload=payload,
        build=render_payload,
    )


def resume_event(run: Run, event: GraphResumeEvent) -> Event:
    """The graph resumed from a checkpoint (the value is on the ``resume`` event)."""
    return Event(
        kind=EventKind.RESUME.value,
        thread_id=run.thread_id,
        checkpoint_ns="|".join(event.checkpoint_ns),
        checkpoint_id=event.checkpoint_id,
        run_id=str(event.run_id),
        root_run_id=run.root,
        status=event.status,
        name="checkpoint",
        payload={"from_checkpoint": event.checkpoint_id},
    )
