"""The words of the thread view: what each row and each kind is called, costs, the
arguments of a tool call, the messages a node update carries.

Pure functions over recorded payloads; the run tree (:mod:`~langgraph_external.read.run_tree`),
``lgx ui`` and ``lgx timeline`` label things through them, so a row reads the same in
every view.

Example:
    >>> call_args({"order_id": 42, "reason": "late"})
    'order_id=42, reason="late"'
    >>> format_cost(0.000451)
    '$0.000451'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "KIND_NAMES",
    "brief",
    "call_args",
    "describe_mark",
    "format_cost",
    "memory_text",
    "messages_of",
    "row_short",
    "token_usage",
]

KIND_NAMES = {
    "run": "graph run",
    "node": "node",
    "llm": "LLM call",
    "tool": "tool call",
    "retriever": "retriever",
    "memory": "memory",
    "violation": "policy violation",
    "interrupt": "interrupt",
    "resume": "resume",
    "checkpoint": "checkpoint",
    "writes": "task writes",
    "route": "route",
    "error": "error",
    "unrecorded": "not recorded",
    "other": "other",
}
"""What each row kind is called in legends and headings."""


def brief(value: Any, limit: int = 80) -> str:
    """``value`` on one line, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_args(args: Any, limit: int = 60) -> str:
    """``key=value, ...`` of a tool call's arguments, cut to ``limit`` characters."""
    if isinstance(args, Mapping):
        text = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()
        )
    else:
        text = "" if args is None else brief(args, limit)
    return brief(text, limit) if text else ""


def messages_of(update: Any) -> list[dict[str, Any]]:
    """Messages a node update or run input adds (a ``Command``'s update too).

    Example:
        >>> messages_of({"goto": "b", "update": {"messages": {"role": "ai", "content": "x"}}})
        [{'role': 'ai', 'content': 'x'}]
    """
    if not isinstance(update, Mapping):
        return []
    inner = update.get("update") if "goto" in update or "resume" in update else None
    if isinstance(inner, Mapping):
        return messages_of(inner)
    msgs = update.get("messages")
    if isinstance(msgs, Mapping) and "$tail" in msgs:  # a long run output, cut
        msgs = msgs["$tail"]
    if isinstance(msgs, Mapping) and "role" in msgs:
        msgs = [msgs]
    if not isinstance(msgs, list):
        return []
    return [dict(m) for m in msgs if isinstance(m, Mapping) and "role" in m]


def memory_text(value: Any) -> str:
    """The text of a memory: a stored item's ``text`` (``content``, ``memory``) field, else
    its value on one line; ``""`` when nothing was recorded.

    Example:
        >>> memory_text({"text": "Refunds take five days."}), memory_text({"lang": "fr"})
        ('Refunds take five days.', '{"lang": "fr"}')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("text", "content", "memory", "data"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return "" if value is None else brief(value, 300)


def token_usage(payload: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    """Input, output and total tokens an ``llm_end`` payload reports (``None``: unknown).

    Example:
        >>> token_usage({"usage": {"prompt_tokens": 43, "completion_tokens": 30}})
        (43, 30, 73)
    """
    usage = payload.get("usage") or {}
    if not isinstance(usage, Mapping):
        return None, None, None

    def num(*keys: str) -> int | None:
        for k in keys:
            v = usage.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v)
        return None

    i = num("input_tokens", "prompt_tokens")
    o = num("output_tokens", "completion_tokens")
    t = num("total_tokens")
    if t is None and (i is not None or o is not None):
        t = (i or 0) + (o or 0)
    return i, o, t


def format_cost(value: float | None, currency: str = "USD") -> str:
    """A cost as people read it (``$0.00045``, ``1.20 EUR``); ``unknown price`` for None.

    Example:
        >>> format_cost(0.000451), format_cost(12.5), format_cost(None), format_cost(2, "EUR")
        ('$0.000451', '$12.50', 'unknown price', '2.00 EUR')
    """
    if value is None:
        return "unknown price"
    text = f"{value:.2f}" if value >= 0.01 or value == 0 else f"{value:.3g}"
    if "e" in text:
        text = f"{value:.8f}".rstrip("0")
    return f"${text}" if currency == "USD" else f"{text} {currency}"


def row_short(r: Mapping[str, Any]) -> str:
    """The few words drawn next to a row's bar."""
    kind, d = r["kind"], r["detail"]
    if kind == "llm":
        call = d.get("llm") or {}
        return str(call.get("model") or r["name"])
    if kind in ("node", "tool"):
        return str(r["name"]) + (" · error" if r["status"] == "error" else "")
    if kind == "violation":
        return f"⚠ {d.get('rule') or r['name']}"
    if kind == "resume":
        return "resume" if "value" in d else ""
    if kind == "memory":
        hits = (d.get("payload") or {}).get("hits")
        return f"{len(hits)} memory hits" if isinstance(hits, list) else str(d.get("operation"))
    return {"interrupt": "interrupt", "error": "error", "unrecorded": "not recorded"}.get(kind, "")


def describe_mark(
    family: str, env: Mapping[str, Any], p: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The label and details of a point event (a *mark*) of family ``family``.

    Example:
        >>> describe_mark("violation", {"seq": 7, "status": "blocked"},
        ...               {"rule": "tool_tier", "message": "no refunds"})[0]
        'policy violation: tool_tier — no refunds (blocked)'
    """
    if family == "violation":
        return _violation_mark(env, p)
    if family == "memory":
        return _memory_mark(env, p)
    if family == "retriever":
        hits = p.get("hits") or []
        label = f"retriever · {len(hits)} document{'s' if len(hits) != 1 else ''}"
        return label, {"query": p.get("query"), "hits": hits}
    if family == "interrupt":
        return _interrupt_mark(env, p)
    if family == "resume":
        if "value" in p:
            return f"resume with {brief(p.get('value'), 60)}", {"value": p.get("value")}
        return "resumed from checkpoint", {"from_checkpoint": p.get("from_checkpoint")}
    if family == "checkpoint":
        source = p.get("source") or env.get("name")
        nodes = ", ".join(n for n in p.get("nodes") or () if n)
        label = f"checkpoint · step {env.get('step')} · {source}"
        if nodes:
            label += f" · by {nodes}"
        return label, {}
    if family == "writes":
        chans = [w.get("channel") for w in p.get("writes") or () if isinstance(w, Mapping)]
        shown = [c for c in chans if c and not str(c).startswith("branch:")]
        label = "writes " + (", ".join(str(c) for c in shown) or ", ".join(map(str, chans)))
        return label, {"channels": chans, "task_path": p.get("task_path")}
    if family == "route":
        return f"route → {brief(p.get('destination'), 60)}", {"destination": p.get("destination")}
    if family == "error":
        return f"error: {brief(p.get('error') or env.get('name'), 80)}", {"payload": p}
    if family == "unrecorded":  # record_failed: an event the processors could not record
        why = f"{p.get('processor') or '?'}: {p.get('error_type') or 'error'}"
        return f"not recorded: {p.get('kind') or env.get('name')} — {why}", {"payload": p}
    return f"{env.get('kind')} {env.get('name') or ''}".strip(), {"payload": p}


_VIOLATION_FIELDS = (
    *("rule", "message", "from", "to", "action", "outcome", "fallback", "would_be"),
    *(f"policy_{k}" for k in ("name", "rule", "hash")),
)


def _violation_mark(env: Mapping[str, Any], p: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A policy violation: its rule, message and outcome."""
    rule = p.get("rule") or env.get("name")
    label = f"policy violation: {rule} — {p.get('message') or ''}".rstrip(" —")
    outcome = p.get("outcome") or env.get("status")
    if outcome:
        label += f" ({outcome})"
    return label, {k: p.get(k) for k in _VIOLATION_FIELDS}


def _memory_mark(env: Mapping[str, Any], p: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A memory operation: a search with its hits' scores, or the memory it changed."""
    op = str(env.get("kind")).removeprefix("memory_")
    hits = p.get("hits") if isinstance(p.get("hits"), list) else None
    if hits is not None:
        scores = ", ".join(
            f"{h.get('score'):.2f}"
            for h in hits[:5]
            if isinstance(h, Mapping) and isinstance(h.get("score"), (int, float))
        )
        label = f"memory {op} · {len(hits)} hit{'s' if len(hits) != 1 else ''}"
        label += f" ({scores})" if scores else ""
    else:
        what = p.get("memory") or p.get("text") or p.get("event") or ""
        label = f"memory {op}" + (f": {brief(what, 60)}" if what else "")
    return label, {"operation": op, "payload": p}


def _interrupt_mark(env: Mapping[str, Any], p: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """An interrupt: what it waits for (a policy violation's approval, or its value)."""
    values = [i.get("value") if isinstance(i, Mapping) else i for i in p.get("interrupts") or ()]
    what = ""
    if values and isinstance(values[0], Mapping) and values[0].get("type") == "policy_violation":
        what = f": awaiting approval of {values[0].get('rule')} ({values[0].get('to')})"
    elif values:
        what = f": {brief(values[0], 60)}"
    return f"interrupt{what}", {"values": values, "status": env.get("status")}
