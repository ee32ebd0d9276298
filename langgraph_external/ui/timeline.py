"""A thread's record as one self-contained HTML page: lanes per node over time.

:func:`build_timeline` turns a thread's event envelopes (from the ledger or the
workspace's ``events.jsonl``, already redacted when they were recorded) into *items*:
node runs, tool calls and LLM calls as spans (start and end events paired), and memory
hits, retrievals, interrupts, resumes, policy violations, errors, routes, task writes and
checkpoints as marks. Each item sits in the lane of its node; a subgraph's nodes get
lanes nested under the node that called it (``summarize › double``); events of no node
(runs, checkpoints of the root graph) sit in a ``(graph)`` lane.

:func:`render_timeline` writes the page: the thread's view as ``lgx ui`` shows it
(:mod:`langgraph_external.read.thread_view` rendered by the same templates), as one file with
its stylesheet and script inlined and no network access when viewed — for attaching to a
ticket. A run tree with a labelled timing bar per node run, model call, tool call, memory
read, policy violation (labelled with its rule), interrupt, resume and checkpoint; the
time or sequence axis; a Details pane that shows the conversation, and for a clicked row
its readable content (the prompt and answer of a model call, a tool's arguments and
result, the state a checkpoint changed), with the recorded events (as stored, redacted)
a click away. An item is selected from the URL too (``run.html#seq=12``). The events are
embedded as JSON inside ``<script type="application/json">`` with ``<``, ``>``, ``&``
and the JavaScript line separators escaped, so no recorded text can end the script
element; the page's Content-Security-Policy runs only its own script (by hash).

Example:
    >>> envs = [
    ...     {"seq": 1, "ts": "2026-01-31T12:00:00+00:00", "kind": "node_start",
    ...      "node": "agent", "task_id": "t1", "name": "agent", "checkpoint_ns": ""},
    ...     {"seq": 2, "ts": "2026-01-31T12:00:00.5+00:00", "kind": "node_end",
    ...      "node": "agent", "task_id": "t1", "name": "agent", "checkpoint_ns": "",
    ...      "status": "ok"},
    ... ]
    >>> tl = build_timeline("thread-1", envs)
    >>> [lane["label"] for lane in tl["lanes"]], tl["items"][0]["kind"], tl["items"][0]["t1"]
    (['agent'], 'node', 500.0)
    >>> page = render_timeline(tl)
    >>> page.startswith("<!DOCTYPE html>"), page.count("<script")
    (True, 2)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph_external.read.envelopes import MAX_EVENT_BYTES, embedded_envelope, ts_ms
from langgraph_external.read.prices import PriceTable
from langgraph_external.read.thread_view import build_thread_view
from langgraph_external.record.events import EventKind
from langgraph_external.record.namespaces import scope_of
from langgraph_external.ui._pages import render_thread
from langgraph_external.ui._queries import read_back

__all__ = ["GRAPH_LANE", "MAX_EVENT_BYTES", "build_timeline", "render_timeline", "timeline_html"]

GRAPH_LANE = "(graph)"
"""Lane of events that belong to no node (runs, the root graph's checkpoints)."""

_SPANS = {
    **{
        f"{family}_{side}": (family, side)
        for family in ("node", "tool", "llm", "run")
        for side in ("start", "end")
    },
    "tool_error": ("tool", "end"),
}
_MARKS = {
    **{k.value: "memory" for k in EventKind if k.value.startswith("memory_")},
    "retrieval": "memory",
    "interrupt": "interrupt",
    "resume": "interrupt",
    "policy_violation": "policy",
    "error": "error",
    "checkpoint": "checkpoint",
    "writes": "writes",
    "route": "route",
}


def _lane_path(env: Mapping[str, Any]) -> tuple[str, ...]:
    """The node names from the root graph down to the event's node.

    A subgraph's namespace (``summarize:<task>|double:<task>``) names the nodes that
    called it. Checkpoints and runs belong to the graph of their namespace, and so does
    ``__start__`` (the graph's input).
    """
    node = env.get("node")
    own = node != "__start__" and env.get("kind") not in ("checkpoint", "run_start", "run_end")
    return scope_of(env.get("checkpoint_ns"), str(node) if node and own else None)


def build_timeline(
    thread_id: str,
    envelopes: Iterable[Mapping[str, Any]],
    *,
    max_event_bytes: int = MAX_EVENT_BYTES,
) -> dict[str, Any]:
    """Lanes and items of a thread's events (envelopes in ``seq`` order).

    Spans pair a start event with its end: node runs by task id, tool calls by task id
    and tool call id (else name), LLM calls and runs by task or run id and name, first
    in first out. A start without an end is an item still ``running`` at the last event.

    Returns:
        ``{"thread_id", "t0", "events", "lanes": [{"id", "label", "depth", "path"}],
        "items": [{"id", "lane", "kind", "event_kind", "name", "status", "t0", "t1",
        "s0", "s1", "step", "events": [index, ...]}], "envelopes": [...]}``; times
        in milliseconds since the first event, ``s0``/``s1`` are sequence numbers.
    """
    envs = list(envelopes)
    base = ts_ms(envs[0]["ts"]) if envs else 0.0
    lanes = _Lanes()
    items: list[dict[str, Any]] = []
    open_spans: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    embedded = [embedded_envelope(env, max_event_bytes) for env in envs]
    for index, env in enumerate(envs):
        kind = str(env.get("kind"))
        t = ts_ms(env["ts"]) - base
        seq = int(env.get("seq") or 0)
        lane = lanes.of(_lane_path(env), t)
        if kind in _SPANS:
            _add_span(items, open_spans, env, lane, t, seq, index)
            continue
        item = _item(len(items), lane, _MARKS.get(kind, "other"), env, t, seq, index)
        item["status"] = env.get("status") or ""
        items.append(item)
    end_t = (ts_ms(envs[-1]["ts"]) - base) if envs else 0.0
    end_s = int(envs[-1].get("seq") or 0) if envs else 0
    for waiting in open_spans.values():
        for item in waiting:
            item["t1"], item["s1"], item["status"] = end_t, end_s, "running"
    return {
        "thread_id": thread_id,
        "t0": envs[0]["ts"] if envs else None,
        "events": len(envs),
        "lanes": lanes.ordered(),
        "items": items,
        "envelopes": embedded,
    }


class _Lanes:
    """The lanes of a timeline, one per node path (a lane's parents first), and each
    lane's earliest event, its own or nested."""

    def __init__(self) -> None:
        self.lanes: dict[tuple[str, ...], dict[str, Any]] = {}
        self.first: dict[tuple[str, ...], float] = {}

    def of(self, path: tuple[str, ...], t: float) -> int:
        """The id of ``path``'s lane, created (with its parents') at its first event."""
        lanes, first = self.lanes, self.first
        # parents first, so nesting reads top-down; the graph lane's path is ()
        for sub in [path[:depth] for depth in range(1, len(path) + 1)] or [()]:
            first[sub] = min(first.get(sub, t), t)
            if sub not in lanes:
                lanes[sub] = {
                    "id": len(lanes),
                    "label": " › ".join(sub) if sub else GRAPH_LANE,
                    "name": sub[-1] if sub else GRAPH_LANE,
                    "depth": max(len(sub) - 1, 0),
                    "path": list(sub),
                }
        return int(lanes[path]["id"])

    def ordered(self) -> list[dict[str, Any]]:
        """The lanes in the order the page shows them (:func:`_lane_order`)."""
        return sorted(self.lanes.values(), key=_lane_order(self.lanes, self.first))


def _add_span(
    items: list[dict[str, Any]],
    open_spans: dict[tuple[Any, ...], list[dict[str, Any]]],
    env: Mapping[str, Any],
    lane: int,
    t: float,
    seq: int,
    index: int,
) -> None:
    """Open a span at a start event, or close the oldest open span of the same key at an
    end event (an end with no open span: a span that ends here)."""
    kind = str(env.get("kind"))
    family, side = _SPANS[kind]
    payload = env.get("payload") or {}
    ident = payload.get("tool_call_id") if family == "tool" else None
    key = (
        family,
        env.get("checkpoint_ns") or "",
        env.get("task_id") or (env.get("run_id") if family == "run" else None),
        ident or env.get("name"),
    )
    if side == "start":
        item = _item(len(items), lane, family, env, t, seq, index)
        items.append(item)
        open_spans.setdefault(key, []).append(item)
        return
    waiting = open_spans.get(key)
    if waiting:
        item = waiting.pop(0)
        item["t1"] = max(item["t0"], t)
        item["s1"] = seq
        item["status"] = env.get("status") or ("error" if kind == "tool_error" else "ok")
        item["events"].append(index)
        return
    # an end without its start (recorded from the middle): a span ending here
    item = _item(len(items), lane, family, env, t, seq, index)
    duration = env.get("duration_ms")
    item["t0"] = t - float(duration) if duration else t
    item["status"] = env.get("status") or "ok"
    items.append(item)


def _lane_order(
    lanes: Mapping[tuple[str, ...], Mapping[str, Any]], first: Mapping[tuple[str, ...], float]
) -> Any:
    """Sort key: the graph lane first, then lanes by the time of their earliest event
    (ties: order of appearance), each nested under its parent.

    Time, not ``seq``: the record's order is commit order, and LangGraph may commit a
    later step's task writes before the checkpoint (and the node events riding on it)
    of an earlier step — a lane would then jump ahead of the node that ran first.
    """

    def key(lane: Mapping[str, Any]) -> tuple[tuple[float, int], ...]:
        path = tuple(lane["path"])
        if not path:
            return ((-math.inf, -1),)
        prefixes = (path[: d + 1] for d in range(len(path)))
        return tuple((first[p], int(lanes[p]["id"])) for p in prefixes)

    return key


def _item(
    n: int, lane: int, kind: str, env: Mapping[str, Any], t: float, seq: int, index: int
) -> dict[str, Any]:
    return {
        "id": n,
        "lane": lane,
        "kind": kind,
        "event_kind": env.get("kind"),
        "name": env.get("name") or env.get("node") or env.get("kind"),
        "status": "running",
        "t0": t,
        "t1": t,
        "s0": seq,
        "s1": seq,
        "step": env.get("step"),
        "events": [index],
    }


def render_timeline(
    timeline: Mapping[str, Any],
    *,
    title: str | None = None,
    prices: PriceTable | None = None,
    states: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    verification: Mapping[str, Any] | None = None,
    workspace: Any = None,
) -> str:
    """The self-contained HTML page of a :func:`build_timeline` result.

    Args:
        timeline: what :func:`build_timeline` returned (its embedded envelopes are drawn).
        title: the page title (default ``lgx — THREAD``).
        prices: the price table for costs (default: every price unknown).
        states: readable checkpoint states (:func:`~langgraph_external.read.thread_view.
            checkpoint_states`), so each checkpoint shows the change it made.
        verification: the thread's verification, as ``lgx ui`` shows it.
        workspace: where the thread's artifacts are: the view then reads each whole
            payload an older version offloaded back, as ``lgx ui`` does
            (:func:`~langgraph_external.read.offloaded.with_whole_payloads`); the page
            embeds the envelopes as recorded either way.
    """
    thread_id = str(timeline.get("thread_id"))
    envelopes = timeline.get("envelopes") or []
    readable = read_back(workspace, thread_id, envelopes)
    view = build_thread_view(thread_id, readable, prices=prices, states=states)
    data = {"view": view, "envelopes": envelopes, "verification": verification}
    return render_thread(data, standalone=True, title=title)


def timeline_html(
    thread_id: str,
    envelopes: Iterable[Mapping[str, Any]],
    *,
    title: str | None = None,
    prices: PriceTable | None = None,
) -> str:
    """:func:`render_timeline` of :func:`build_timeline`: the page of one thread."""
    return render_timeline(build_timeline(thread_id, envelopes), title=title, prices=prices)
