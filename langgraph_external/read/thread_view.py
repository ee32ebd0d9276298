"""A thread's record as a reviewer reads it: conversation, run tree, calls, checkpoints.

:func:`build_thread_view` turns a thread's event envelopes (``seq`` order, as the ledger or
``events.jsonl`` holds them, already redacted) into plain data that ``lgx ui`` and
``lgx timeline`` render the same way:

- **rows** of the run tree (:mod:`~langgraph_external.read.run_tree`): each graph run,
  the nodes it ran, and inside each node its model calls, tool calls, retriever and
  memory reads, routes, policy violations and task writes; interrupts, resumes and
  checkpoints under their run. Spans pair start and end events by run id. Every row has
  a label a person reads ("LLM gpt-4o-mini · 43 → 30 tokens", "policy violation:
  tool_tier — ...") and its place on the time and sequence axes. A task's ``writes`` and
  a checkpoint sit with the step that made them, whenever they were recorded;
- the **conversation** (:mod:`~langgraph_external.read.conversation`): every message the
  runs and nodes added to the thread, in order, with the tool calls and their results,
  and the violations, interrupts and resumes between them;
- **LLM calls** (:mod:`~langgraph_external.read.llm_calls`): the exact messages each call
  was given (a long conversation shows what is new since the thread's previous call,
  with the count of earlier messages), the answer, token usage and cost from a
  :class:`~langgraph_external.read.prices.PriceTable`;
- **checkpoints**: step, source, the nodes that wrote each one and, when the workspace's
  readable checkpoint log is given, the state change each one made
  (:mod:`~langgraph_external.read.checkpoint_states`).

Example:
    >>> envs = [
    ...     {"seq": 1, "ts": "2026-01-31T12:00:00+00:00", "kind": "run_start", "run_id": "r",
    ...      "parent_run_id": None, "payload": {"input": {"messages": [
    ...          {"role": "user", "content": "hi"}]}}},
    ...     {"seq": 2, "ts": "2026-01-31T12:00:00.1+00:00", "kind": "node_start",
    ...      "node": "agent", "run_id": "n", "parent_run_id": "r", "step": 1},
    ...     {"seq": 3, "ts": "2026-01-31T12:00:00.4+00:00", "kind": "node_end", "node": "agent",
    ...      "run_id": "n", "parent_run_id": "r", "step": 1, "status": "ok",
    ...      "payload": {"update": {"messages": [{"role": "assistant", "content": "hello"}]}}},
    ...     {"seq": 4, "ts": "2026-01-31T12:00:00.5+00:00", "kind": "run_end", "run_id": "r",
    ...      "parent_run_id": None, "status": "ok", "duration_ms": 500.0},
    ... ]
    >>> view = build_thread_view("t-1", envs)
    >>> [(r["depth"], r["kind"], r["label"]) for r in view["rows"]]
    [(0, 'run', 'run 1'), (1, 'node', 'agent · step 1')]
    >>> [(m["role"], m["content"]) for m in view["conversation"]]
    [('user', 'hi'), ('assistant', 'hello')]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph_external.read.checkpoint_states import checkpoint_states, state_change
from langgraph_external.read.llm_calls import PROMPT_CONTEXT
from langgraph_external.read.prices import PriceTable
from langgraph_external.read.run_tree import RunTree
from langgraph_external.read.view_labels import KIND_NAMES, format_cost

__all__ = [
    "KIND_NAMES",
    "PROMPT_CONTEXT",
    "build_thread_view",
    "checkpoint_states",
    "format_cost",
    "state_change",
    "summarize",
]


def build_thread_view(
    thread_id: str,
    envelopes: Iterable[Mapping[str, Any]],
    *,
    prices: PriceTable | None = None,
    states: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The reviewer's view of one thread (see the module docs).

    Args:
        thread_id: the thread.
        envelopes: its events in ``seq`` order.
        prices: the price table (default: every price unknown).
        states: ``(checkpoint_ns, checkpoint_id) -> {"values", "parent"}`` from
            :func:`checkpoint_states`; each checkpoint then carries the state change it
            made (``change``), else only the channels it changed.
    """
    envs = [e for e in envelopes if e.get("ts")]
    tree = RunTree(envs, prices or PriceTable())
    for i, env in enumerate(envs):
        tree.add(i, env)
    laid = tree.layout()
    tree.conversation.link_tool_results()
    view = {
        "thread_id": thread_id,
        "events": len(envs),
        "t0": min((e["ts"] for e in envs), default=None),
        "end_ms": laid["end_ms"],
        "rows": laid["rows"],
        "kinds": laid["kinds"],
        "conversation": tree.conversation.entries,
        "llm_calls": tree.llm.calls,
        "checkpoints": tree.checkpoints,
        "violations": tree.violations,
        "interrupts": tree.interrupts,
        "memory_hits": tree.memory_hits,
        "users": tree.users,
        "tags": tree.tags,
        "runs": laid["runs"],
        "status": laid["status"],
        "duration_ms": laid["duration_ms"],
        **tree.llm.totals(),
    }
    states = states or {}
    for cp in view["checkpoints"]:
        st = states.get((cp["checkpoint_ns"], cp["checkpoint_id"]))
        if st is not None:
            parent = states.get((cp["checkpoint_ns"], st.get("parent") or ""))
            cp["change"] = state_change(
                parent["values"] if parent else {}, st["values"], st.get("written")
            )
    return view


def summarize(view: Mapping[str, Any]) -> dict[str, Any]:
    """The headline numbers of a thread view (for JSON output and the threads list)."""
    return {
        "thread_id": view["thread_id"],
        "events": view["events"],
        "runs": view["runs"],
        "status": view["status"],
        "duration_ms": round(float(view["duration_ms"]), 3),
        "tokens": view["tokens"],
        "cost": view["cost"],
        "unknown_price_models": view["unknown_price_models"],
        "violations": [v["rule"] for v in view["violations"]],
        "interrupts": len(view["interrupts"]),
        "checkpoints": len(view["checkpoints"]),
        "users": view["users"],
        "tags": view["tags"],
    }
