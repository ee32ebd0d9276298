"""A thread's events in the order to read them: run by run, step by step.

The record's order (``seq``) is the order events were committed; :func:`place_events`
puts each event with the run and the step it belongs to (``lgx events``, ``lgx show``,
the thread view and the demo read a thread this way).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.queries import SELECT_STEP_CONTEXT
from langgraph_external.record.namespaces import SEPARATOR, split_task

__all__ = ["Placed", "place_events", "step_context"]


@dataclass(frozen=True)
class Placed:
    """Where a view places one event of a thread (see :func:`place_events`).

    Attributes:
        event: the event (an envelope, or a row with the envelope's column names).
        run: the run (top-level invocation) it belongs to: 1 for the thread's first,
            0 for events before any run.
        step: the root graph's step it belongs to (``None``: none, e.g. a run's start).
        own_step: its step in its own namespace; for a ``writes`` event, which records
            none, the step of the task that wrote it (its checkpoint's step + 1).
    """

    event: Mapping[str, Any]
    run: int
    step: int | None
    own_step: int | None


_PHASE = {"writes": 1, "checkpoint": 2, "interrupt": 3}
"""Within a step: the tasks' events, then their writes, the checkpoint, an interrupt."""


def step_context(
    conn: psycopg.Connection[Any], thread_id: str, schema: str = ledger.DEFAULT_SCHEMA
) -> list[dict[str, Any]]:
    """The events :func:`place_events` needs to place any subset of ``thread_id``'s events:
    run starts, node starts and checkpoints, without payloads."""
    cols = "seq kind checkpoint_ns checkpoint_id run_id parent_run_id root_run_id step task_id"
    rows = conn.execute(ledger.q(SELECT_STEP_CONTEXT, schema), (thread_id,)).fetchall()
    return [dict(zip(cols.split(), r, strict=True)) for r in rows]


def place_events(
    events: Sequence[Mapping[str, Any]], context: Sequence[Mapping[str, Any]] | None = None
) -> list[Placed]:
    """A thread's events in step order, each with the run and step it belongs to.

    The record's order (``seq``) is the order events were committed; it is the hash
    chain's order and never changes. A step's ``writes`` are committed after the step's
    tasks ran, sometimes after later steps, and they carry no step themselves. This
    order is the one to read a run in: run by run; within a run, step by step; within a
    step, the tasks' events in commit order, then their writes, then the checkpoint the
    step produced, then an interrupt. A subgraph's events come right after the start of
    the root task that ran the subgraph, ordered the same way by the subgraph's own
    steps. A run's start comes first and its end last.

    Args:
        events: the events to place (any subset of one thread's, e.g. filtered).
        context: the thread's run starts, node starts and checkpoints
            (:func:`step_context`); default: found in ``events`` themselves.

    Example:
        >>> evs = [
        ...     {"seq": 1, "kind": "run_start", "run_id": "r", "root_run_id": "r"},
        ...     {"seq": 2, "kind": "checkpoint", "checkpoint_id": "c0", "step": 0},
        ...     {"seq": 3, "kind": "node_start", "node": "a", "step": 1, "task_id": "t1",
        ...      "root_run_id": "r"},
        ...     {"seq": 4, "kind": "checkpoint", "checkpoint_id": "c1", "step": 1},
        ...     {"seq": 5, "kind": "node_start", "node": "b", "step": 2, "task_id": "t2",
        ...      "root_run_id": "r"},
        ...     {"seq": 6, "kind": "writes", "checkpoint_id": "c0", "task_id": "t1"},
        ...     {"seq": 7, "kind": "checkpoint", "checkpoint_id": "c2", "step": 2},
        ...     {"seq": 8, "kind": "run_end", "run_id": "r", "root_run_id": "r"},
        ... ]
        >>> [(p.event["seq"], p.step) for p in place_events(evs)]
        [(1, None), (2, 0), (3, 1), (6, 1), (4, 1), (5, 2), (7, 2), (8, None)]
    """
    ctx = _StepContext(
        sorted(context if context is not None else events, key=lambda e: int(e["seq"]))
    )
    keyed = []
    carry: dict[int, float] = {}  # each run's latest step, for the events of no step
    for e in sorted(events, key=lambda e: int(e["seq"])):
        seq, kind = int(e["seq"]), e.get("kind")
        run = ctx.run_of(e, seq)
        own = ctx.own_step(e, seq)
        phase = _PHASE.get(str(kind), 0)
        nested = bool(e.get("checkpoint_ns"))
        step = own
        if nested:  # with its root task, right after that task's start, in its own steps
            t = ctx.root_task(e, seq)
            step = int(t["step"]) if t is not None and t.get("step") is not None else None
            anchor = int(t["seq"]) if t is not None else seq
            inner = (anchor, -math.inf if own is None else float(own), phase, seq)
            phase = 0
        else:
            inner = (seq, -math.inf, 0, seq)
        if step is not None:
            key = float(step)
            carry[run] = key
        elif kind in ("run_start", "resume") and not nested:
            key, phase = -math.inf, -1
        elif kind == "run_end" and not e.get("parent_run_id"):
            key, phase = math.inf, 9
        else:
            key = carry.get(run, -math.inf)
        keyed.append(((run, key, phase, *inner), Placed(e, run, step, own)))
    keyed.sort(key=lambda k: k[0])
    return [p for _, p in keyed]


class _StepContext:
    """What places an event: the thread's runs, the tasks that started (by task id) and
    the step of each checkpoint, from its run starts, node starts and checkpoints (in
    ``seq`` order)."""

    def __init__(self, ctx: Sequence[Mapping[str, Any]]) -> None:
        starts = [e for e in ctx if e.get("kind") == "run_start" and not e.get("parent_run_id")]
        self.rank = {str(e.get("run_id")): i + 1 for i, e in enumerate(starts)}
        self.start_seqs = [int(e["seq"]) for e in starts]
        self.tasks: dict[str, list[Mapping[str, Any]]] = {}
        self.checkpoint_steps: dict[tuple[str, str], int] = {}
        for e in ctx:
            if e.get("kind") == "node_start" and e.get("task_id"):
                self.tasks.setdefault(str(e["task_id"]), []).append(e)
            elif e.get("kind") == "checkpoint" and e.get("step") is not None:
                at = (str(e.get("checkpoint_ns") or ""), str(e.get("checkpoint_id")))
                self.checkpoint_steps[at] = int(e["step"])

    def task(self, task_id: Any, seq: int) -> Mapping[str, Any] | None:
        """The start of task ``task_id`` that an event at ``seq`` belongs to."""
        found = self.tasks.get(str(task_id)) if task_id else None
        if not found:
            return None
        before = [t for t in found if int(t["seq"]) < seq]
        return before[-1] if before else found[0]

    def run_of(self, e: Mapping[str, Any], seq: int) -> int:
        """The run of ``e`` (1 for the thread's first, 0: before any run)."""
        rid = e.get("root_run_id")
        if rid and str(rid) in self.rank:
            return self.rank[str(rid)]
        if e.get("kind") == "writes":
            t = self.task(e.get("task_id"), seq)
            if t is not None and str(t.get("root_run_id")) in self.rank:
                return self.rank[str(t.get("root_run_id"))]
        return bisect.bisect_right(self.start_seqs, seq)

    def own_step(self, e: Mapping[str, Any], seq: int) -> int | None:
        """The step of ``e`` in its own namespace (a ``writes`` event: its task's)."""
        if e.get("step") is not None:
            return int(e["step"])
        if e.get("kind") != "writes":
            return None
        ns = str(e.get("checkpoint_ns") or "")
        parent = self.checkpoint_steps.get((ns, str(e.get("checkpoint_id"))))
        if parent is not None:
            return parent + 1
        t = self.task(e.get("task_id"), seq)
        return int(t["step"]) if t is not None and t.get("step") is not None else None

    def root_task(self, e: Mapping[str, Any], seq: int) -> Mapping[str, Any] | None:
        """The root graph's task a subgraph's event ran under (``None`` for the root's)."""
        ns = str(e.get("checkpoint_ns") or "")
        if not ns:
            return None
        return self.task(split_task(ns.partition(SEPARATOR)[0]).task_id, seq)
