"""The compare page's data: two threads or two checkpoints side by side.

Paths and states are compared by :mod:`langgraph_external.read.diff`; model calls and tool calls
are paired in the order they were made, and the first prompt that differs is shown as a
unified diff of its messages.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from itertools import zip_longest
from typing import Any

import psycopg

from langgraph_external.read import diff
from langgraph_external.read.llm_calls import prompt_messages
from langgraph_external.read.offloaded import shown_text
from langgraph_external.read.thread_view import build_thread_view
from langgraph_external.record.artifacts import is_ref
from langgraph_external.ui import _queries
from langgraph_external.ui._config import NotFound, UiConfig

__all__ = ["COMPARE_ROWS", "compare_data"]


def _checkpoint_seq(envs: Sequence[Mapping[str, Any]], wanted: str) -> tuple[int, str]:
    found = [
        e
        for e in envs
        if e["kind"] == "checkpoint"
        and not (e.get("checkpoint_ns") or "")
        and str(e.get("checkpoint_id") or "").startswith(wanted)
    ]
    ids = {str(e["checkpoint_id"]) for e in found}
    if not found:
        raise NotFound(f"checkpoint {wanted!r} is not a root checkpoint of the thread")
    if len(ids) > 1:
        raise NotFound(f"checkpoint prefix {wanted!r} matches {len(ids)} checkpoints")
    return int(found[-1]["seq"]), ids.pop()


SHORTENED = "\n… [shortened: {size} bytes in all, artifact {digest}] …\n"
"""What stands between the head and the tail of an offloaded value in the compared lines
(its digest: two values with the same ends still differ)."""


def _text(content: Any) -> str:
    """A message's content as text (an offloaded one as its head … tail)."""
    if isinstance(content, str):
        return content
    if is_ref(content):
        return shown_text(content, SHORTENED)
    return json.dumps(content, ensure_ascii=False)


def _message_text(m: Mapping[str, Any]) -> list[str]:
    """A message as the compare page's lines, each naming its role (``[role name] …``, tool
    calls ``[role] → tool(args)``) so every line of the prompt diff says whose it is."""
    role = str(m.get("role"))
    text = _text(m.get("content"))
    lines = [
        f"[{role}{' ' + str(m['name']) if m.get('name') else ''}] " + line
        for line in (text or "").splitlines() or [""]
    ]
    return lines + [f"[{role}] {line}" for line in _call_lines(m)]


def _call_lines(m: Mapping[str, Any]) -> list[str]:
    """``→ tool(args)`` per tool call of message ``m``."""
    return [
        f"→ {c.get('name')}({json.dumps(c.get('args'), ensure_ascii=False, sort_keys=True)})"
        for c in m.get("tool_calls") or ()
    ]


def _answer_lines(m: Mapping[str, Any]) -> list[str]:
    """An answer as the compare page's lines: its text, then ``→ tool(args)`` per tool call
    (the box is the assistant's: no role per line, no empty text line before a call)."""
    text = _text(m.get("content"))
    lines = (text or "").splitlines() if text or not m.get("tool_calls") else []
    return lines + _call_lines(m)


def _prompt_lines(call: Mapping[str, Any] | None) -> list[str]:
    return [line for m in (call or {}).get("full_messages") or () for line in _message_text(m)]


def _answer(call: Mapping[str, Any] | None) -> list[str]:
    return [line for m in (call or {}).get("answer") or () for line in _answer_lines(m)]


def _side(
    conn: psycopg.Connection[Any], cfg: UiConfig, thread_id: str, cp: str | None
) -> dict[str, Any]:
    envs = _queries.view_events(conn, cfg.schema, thread_id)
    if not envs:
        raise NotFound(f"thread {thread_id!r} has no events in the ledger")
    cut, cid = (None, None)
    if cp:
        cut, cid = _checkpoint_seq(envs, cp)
        envs = [e for e in envs if int(e["seq"]) <= cut]
    readable = _queries.read_back(cfg.workspace, thread_id, envs)
    view = build_thread_view(thread_id, readable, prices=cfg.prices)
    # every call's whole prompt (the view keeps only what is new since the previous call)
    by_seq = {int(e["seq"]): e for e in readable}
    for call in view["llm_calls"]:
        env = by_seq.get(int(call.get("seq") or 0)) or {}
        call["full_messages"] = prompt_messages(env.get("payload") or {})
    path = [e for s, e in diff.load_path(conn, thread_id, cfg.schema) if cut is None or s <= cut]
    return {
        "thread_id": thread_id,
        "checkpoint_id": cid,
        "view": view,
        "tools": [r for r in view["rows"] if r["kind"] == "tool"],
        "path": path,
        "label": thread_id + (f" @ {cid}" if cid else ""),
    }


def compare_data(
    conn: psycopg.Connection[Any],
    cfg: UiConfig,
    a: str,
    b: str,
    *,
    acp: str | None = None,
    bcp: str | None = None,
) -> dict[str, Any]:
    """Two threads (or checkpoints) side by side: path, prompts, answers, tools, state.

    Paths and states are compared by :mod:`langgraph_external.read.diff`; model calls and tool
    calls are paired in the order they were made.

    Raises:
        NotFound: a thread or checkpoint is not recorded.
    """
    sa, sb = _side(conn, cfg, a, acp), _side(conn, cfg, b, bcp)
    path = diff.diff_paths(sa["path"], sb["path"])
    state, state_note = _state_diff(
        conn, cfg, diff.Side(a, sa["checkpoint_id"]), diff.Side(b, sb["checkpoint_id"])
    )
    llm, first_prompt_diff = _llm_pairs(sa, sb)
    tools = _tool_pairs(sa, sb)
    return {
        "a": sa,
        "b": sb,
        "path": path,
        "path_pairs": _shown(_path_rows(path), lambda r: r["op"] == "equal"),
        "llm_shown": _shown(llm, lambda x: x["same_prompt"] and x["same_answer"]),
        "tools_shown": _shown(tools, lambda x: x["same"]),
        "state": state,
        "state_note": state_note,
        "llm": llm,
        "first_prompt_diff": first_prompt_diff,
        "tools": tools,
        "same": path.same
        and (state is None or state.same)
        and all(x["same_prompt"] and x["same_answer"] for x in llm)
        and all(x["same"] for x in tools),
    }


def _state_diff(
    conn: psycopg.Connection[Any], cfg: UiConfig, a: diff.Side, b: diff.Side
) -> tuple[Any, str]:
    """The two sides' readable states compared, or ``None`` and why they cannot be."""
    if cfg.workspace is None:
        return None, "The readable states are in the workspace: start `lgx ui --workspace DIR`."
    try:
        la = diff.load_side(conn, cfg.workspace, a, cfg.schema)
        lb = diff.load_side(conn, cfg.workspace, b, cfg.schema)
        return diff.diff_values(la.values, lb.values), ""
    except diff.NotFoundError as exc:
        return None, str(exc)


def _llm_pairs(
    sa: Mapping[str, Any], sb: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[str] | None]:
    """The two sides' model calls paired in the order they were made, and the unified diff
    of the first pair whose prompts differ (``None``: every prompt is the same)."""
    llm = []
    first_prompt_diff: list[str] | None = None
    for ca, cb in zip_longest(sa["view"]["llm_calls"], sb["view"]["llm_calls"]):
        pa, pb = _prompt_lines(ca), _prompt_lines(cb)
        ans_a, ans_b = _answer(ca), _answer(cb)
        same_prompt = pa == pb and ca is not None and cb is not None
        if not same_prompt and first_prompt_diff is None:
            first_prompt_diff = list(
                difflib.unified_diff(pa, pb, sa["label"], sb["label"], lineterm="", n=2)
            )
        llm.append(
            {
                "a": ca,
                "b": cb,
                "same_prompt": same_prompt,
                "same_answer": ans_a == ans_b and ca is not None and cb is not None,
                "answer_a": ans_a,
                "answer_b": ans_b,
            }
        )
    return llm, first_prompt_diff


def _tool_pairs(sa: Mapping[str, Any], sb: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The two sides' tool calls paired in the order they were made, each pair ``same``
    when both called the same tool with the same arguments and result."""

    def key(row: Mapping[str, Any]) -> tuple[Any, ...]:
        detail = row.get("detail") or {}
        return tuple(detail.get(k) for k in ("tool", "args", "result"))

    return [
        {"a": ta, "b": tb, "same": ta is not None and tb is not None and key(ta) == key(tb)}
        for ta, tb in zip_longest(sa["tools"], sb["tools"])
    ]


COMPARE_ROWS = 100
"""Pairs shown per section of the compare page (every difference is counted)."""


def _shown(pairs: list[dict[str, Any]], same: Any) -> dict[str, Any]:
    """The first :data:`COMPARE_ROWS` pairs (and the first that differs, if later), with
    the count of those left out and of how many of them differ."""
    first = next((i for i, p in enumerate(pairs) if not same(p)), None)
    late = [{**pairs[first], "index": first}] if first is not None and first >= COMPARE_ROWS else []
    for i, p in enumerate(pairs[:COMPARE_ROWS]):
        p["index"] = i
    rest = pairs[COMPARE_ROWS:]
    return {
        "pairs": pairs[:COMPARE_ROWS] + late,
        "more": len(rest) - len(late),
        "more_differ": sum(1 for p in rest if not same(p)) - len(late),
    }


def _path_rows(p: Any) -> list[dict[str, Any]]:
    return [
        {"op": op["op"], "a": x, "b": y} for op in p.ops for x, y in zip_longest(op["a"], op["b"])
    ]
