"""The span tree of one thread: which trace an event belongs to and which span is its parent.

Pure and deterministic: every id is a hash of a recorded id, so mapping the same events
twice gives the same tree.

* trace id: ``sha256(root run id)[:16]`` of the run that opened the trace — the same value
  as ``Langfuse.create_trace_id(seed=root_run_id)``. A resume (``Command(resume=...)``
  after an interrupt, in any process) continues the trace of the run it resumes.
* span id: ``sha256("run|" + run_id)[:8]`` for runs (graph, node, tool, model,
  retriever), ``sha256("event|" + event_id)[:8]`` for point events (interrupt, resume,
  policy violation, error, memory writes).

Example:
    >>> trace_id_for_run("run-1") == hashlib.sha256(b"run-1").digest()[:16].hex()
    True
    >>> chain_start([(1, "run_start", {"input": 1}), (5, "interrupt", {}),
    ...              (9, "run_start", {"command": "resume"})], 12)
    1
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph_external.record.events import Event
from langgraph_external.record.namespaces import split_task

__all__ = [
    "OpenRun",
    "SpanRecord",
    "SpanTree",
    "Trace",
    "chain_start",
    "is_continuation",
    "span_id_for_event",
    "span_id_for_run",
    "timestamp_ns",
    "trace_id_for_run",
]

_FORGET_AFTER = 10_000  # runs remembered while a run of the thread is still open


def trace_id_for_run(root_run_id: str) -> str:
    """The Langfuse trace id (32 hex) of the run ``root_run_id`` and its resumes.

    Equal to ``Langfuse.create_trace_id(seed=root_run_id)``.
    """
    return hashlib.sha256(root_run_id.encode()).digest()[:16].hex()


def span_id_for_run(run_id: str) -> str:
    """The observation id (16 hex) of a graph, node, tool, model or retriever run."""
    return hashlib.sha256(f"run|{run_id}".encode()).digest()[:8].hex()


def span_id_for_event(event_id: str) -> str:
    """The observation id (16 hex) of a point event (interrupt, resume, error, ...)."""
    return hashlib.sha256(f"event|{event_id}".encode()).digest()[:8].hex()


def timestamp_ns(ts: datetime) -> int:
    """An event's time in nanoseconds since the epoch (exact to the microsecond)."""
    return int(ts.timestamp()) * 1_000_000_000 + ts.microsecond * 1000


def is_continuation(payload: Mapping[str, Any]) -> bool:
    """Whether a ``run_start`` payload continues an interrupted run (a resume)."""
    return payload.get("command") == "resume" or (
        "input" in payload and payload.get("input") is None
    )


@dataclass(frozen=True)
class SpanRecord:
    """One finished observation, ready to encode as an OTLP span."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    error: str | None = None
    seq: int = 0  # the ledger event that completed it
    ok: bool = False  # OTel status OK (only with semantic conventions; Langfuse: unset)


@dataclass
class Trace:
    """A trace: a run and every resume of it."""

    trace_id: str
    root_span: str
    interrupted: bool = False


@dataclass
class OpenRun:
    """A run whose start was read and whose end was not yet."""

    event: Event
    route: Any = None


@dataclass
class SpanTree:
    """Traces, open runs and parents of one thread, from its events in ``seq`` order."""

    open: dict[str, OpenRun] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)  # run id -> span id (recorded runs)
    graphs: dict[str, Trace] = field(default_factory=dict)  # graph run id -> trace
    task_node: dict[tuple[str, str], str] = field(default_factory=dict)  # -> node run id
    last: Trace | None = None
    trace_attrs: dict[str, dict[str, Any]] = field(default_factory=dict)  # per trace id
    checkpoints: dict[tuple[str, int], str] = field(default_factory=dict)  # (ns, step) -> id
    last_checkpoint: dict[str, str] = field(default_factory=dict)  # ns -> latest checkpoint

    # -- graph runs and traces -----------------------------------------------------------
    def continued(self, e: Event) -> Trace | None:
        """The interrupted trace a ``run_start`` resumes, else ``None`` (a new trace)."""
        last = self.last
        if last is not None and last.interrupted and is_continuation(e.payload):
            last.interrupted = False
            return last
        return None

    def forget_earlier_traces(self) -> bool:
        """Drop what earlier traces needed (a late event of one finds its trace by its root
        run id), unless a run of the thread is still going; whether anything was dropped."""
        if self.open and len(self.runs) < _FORGET_AFTER:
            return False  # a run of the thread is still going: keep what its events need
        for known in (
            self.runs,
            self.task_node,
            self.graphs,
            self.trace_attrs,
            self.open,  # left open by a process that died: bounded memory anyway
        ):
            known.clear()
        return True

    def new_trace(self, run_id: str, attrs: dict[str, Any]) -> Trace:
        """A trace opened by the graph run ``run_id``; ``attrs`` go on every span of it."""
        self.checkpoints.clear()  # a trace's checkpoints are read from its first event on
        self.last_checkpoint.clear()
        trace = Trace(trace_id_for_run(run_id), span_id_for_run(run_id))
        self.trace_attrs[trace.trace_id] = attrs
        return trace

    def start_graph(self, e: Event, trace: Trace) -> None:
        """A graph run (``run_start`` with a run id) starts, in ``trace``."""
        assert e.run_id is not None
        self.last = trace
        self.graphs[e.run_id] = trace
        self.runs[e.run_id] = span_id_for_run(e.run_id)
        self.open[e.run_id] = OpenRun(e)

    # -- runs inside a graph -------------------------------------------------------------
    def start_run(self, e: Event) -> None:
        """A node, tool or model run starts (remembered when it has a run id)."""
        if not e.run_id:
            return
        self.open[e.run_id] = OpenRun(e)
        self.runs[e.run_id] = span_id_for_run(e.run_id)
        if e.kind == "node_start" and e.task_id and e.root_run_id:
            self.task_node[(e.root_run_id, e.task_id)] = e.run_id

    def route(self, e: Event) -> None:
        """A ``route`` event: where the open run it belongs to goes next."""
        parent = self.open.get(e.parent_run_id or "")
        if parent is not None:
            parent.route = e.payload.get("destination")

    def take_start(self, e: Event) -> Event | None:
        """The start event of the run ``e`` ends, if it was read (no longer open)."""
        opened = self.open.pop(e.run_id or "", None)
        return opened.event if opened else None

    def closing(self, e: Event) -> tuple[OpenRun | None, Trace, str] | None:
        """For an end event: the run it closes (if its start was read), its trace, its id."""
        trace = self.trace_of(e) if e.run_id else None
        if trace is None or not e.run_id:
            return None
        return self.open.pop(e.run_id, None), trace, span_id_for_run(e.run_id)

    def point(self, e: Event) -> None:
        """An interrupt marks its trace; a resume recorded before its run joins the trace."""
        last = self.last
        if (
            e.kind == "resume"
            and e.run_id
            and e.run_id not in self.graphs
            and last is not None
            and last.interrupted
        ):
            # the resume value is recorded just before the resumed run starts: same trace
            self.graphs[e.run_id] = last
        if e.kind == "interrupt":
            trace = self.graphs.get(e.run_id or "")
            if trace is not None:
                trace.interrupted = True

    # -- checkpoints ---------------------------------------------------------------------
    def checkpoint(self, e: Event) -> None:
        """A checkpoint event: the checkpoint later steps of its namespace ran from."""
        if not e.checkpoint_id:
            return
        ns = e.checkpoint_ns or ""
        if e.step is not None:
            self.checkpoints[(ns, e.step)] = e.checkpoint_id
        self.last_checkpoint[ns] = e.checkpoint_id

    def step_checkpoint(self, e: Event) -> str | None:
        """The checkpoint the event's step ran from (the latest of step - 1 in its namespace)."""
        if e.step is None:
            return None
        return self.checkpoints.get((e.checkpoint_ns or "", e.step - 1))

    # -- where an event hangs ------------------------------------------------------------
    def trace_of(self, e: Event) -> Trace | None:
        """The trace of any event (one is made for a run whose start is not recorded)."""
        root = e.root_run_id or e.run_id
        trace = self.graphs.get(root or "")
        if trace is None and self.last is not None and root is None:
            trace = self.last  # e.g. a guard or memory event outside a callback run
        if trace is None and root:
            # a run whose start is not in the record (e.g. recorded without the handler)
            trace = Trace(trace_id_for_run(root), span_id_for_run(root))
            self.graphs[root] = trace
        return trace

    def graph_parent(self, e: Event) -> str | None:
        """The span of the graph run an event belongs to."""
        root = e.root_run_id or e.run_id
        if root and root in self.runs:
            return self.runs[root]
        trace = self.trace_of(e)
        return trace.root_span if trace else None

    def parent(self, e: Event) -> str | None:
        """The nearest recorded ancestor: the parent run, the task's node, the graph run."""
        if e.parent_run_id and e.parent_run_id in self.runs:
            return self.runs[e.parent_run_id]
        if e.root_run_id:  # the node of the subgraph call's task, then of its own task
            tasks = [split_task(e.checkpoint_ns).task_id or ""] if e.checkpoint_ns else []
            if e.kind != "node_end" and e.task_id:
                tasks.append(e.task_id)
            for task in tasks:
                node = self.task_node.get((e.root_run_id, task))
                if node is not None and node != e.run_id:
                    return self.runs[node]
        return self.graph_parent(e)


def chain_start(runs: list[tuple[int, str, Mapping[str, Any]]], upto: int) -> int:
    """Where to start re-reading a thread to rebuild a mapper positioned at ``upto``.

    ``runs`` are the thread's ``(seq, kind, payload)`` of ``run_start`` and ``interrupt``
    events, in order (those after ``upto`` are not read). The answer is the ``seq`` of the
    run_start that opened the trace still possibly open at ``upto`` (1 if none).

    Example:
        >>> chain_start([(1, "run_start", {"input": 1}), (9, "run_start", {"input": 2})], 12)
        9
        >>> chain_start([(1, "run_start", {"input": 1}), (9, "run_start", {"input": 2})], 8)
        1
    """
    start = 1
    interrupted = False
    for seq, kind, payload in runs:
        if seq > upto:
            break
        if kind == "interrupt":
            interrupted = True
        elif kind == "run_start":
            if not (interrupted and is_continuation(payload)):
                start = seq
            interrupted = False
    return start
