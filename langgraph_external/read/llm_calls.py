"""The model calls of the thread view: the exact prompt each call was given, its answer,
token usage and cost.

A long conversation repeats its messages in every prompt; each call shows what is new
since the thread's previous call, with :data:`PROMPT_CONTEXT` earlier messages before it
and the count of the rest (``hidden_messages``). Costs come from a
:class:`~langgraph_external.read.prices.PriceTable`; a model without a price says so.

Example:
    >>> calls = LlmCalls(PriceTable())
    >>> row = {"id": 0, "label": "LLM m", "status": "ok", "detail": {}}
    >>> call = calls.start(row, {"seq": 1}, {"model": "m", "messages": [
    ...     {"role": "user", "content": "hi"}]})
    >>> calls.end(row, {"seq": 2}, {"usage": {"input_tokens": 3, "output_tokens": 1}})
    >>> row["label"], calls.totals()["tokens"]
    ('LLM m · 3 → 1 tokens · unknown price', {'input': 3, 'output': 1, 'total': 4})
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import takewhile
from typing import Any

from langgraph_external.read.prices import PriceTable
from langgraph_external.read.view_labels import format_cost, token_usage

__all__ = ["PROMPT_CONTEXT", "LlmCalls", "answer_model", "prompt_messages", "request_model"]

PROMPT_CONTEXT = 3
"""Messages of an earlier prompt shown before what a call added (the rest are counted)."""


def prompt_messages(payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The messages an ``llm_start`` payload gave the model (a completion model's prompts
    as user messages).

    Example:
        >>> prompt_messages({"prompts": ["Say hi"]})
        [{'role': 'user', 'content': 'Say hi'}]
    """
    msgs = payload.get("messages")
    if msgs is None and payload.get("prompts") is not None:
        msgs = [{"role": "user", "content": t} for t in payload.get("prompts") or ()]
    return [m for m in msgs or () if isinstance(m, Mapping)]


def request_model(payload: Mapping[str, Any]) -> str | None:
    """The model an ``llm_start`` payload's parameters name (``model``, ``model_name``,
    ``model_id``), or ``None`` (its ``model`` is then the model class's type or name).

    Example:
        >>> request_model({"model": "fake", "params": {"_type": "fake"}}) is None
        True
    """
    params = payload.get("params")
    if isinstance(params, Mapping):
        for key in ("model", "model_name", "model_id"):
            if isinstance(params.get(key), str) and params[key]:
                return str(params[key])
    return None


def answer_model(payload: Mapping[str, Any]) -> str | None:
    """The model an ``llm_end`` payload's answer names (``model_name``, recorded from its
    ``response_metadata``; in a record made before that, from its exact copy).

    Example:
        >>> answer_model({"model_name": "gpt-4o-mini-2024-07-18"})
        'gpt-4o-mini-2024-07-18'
    """
    name = payload.get("model_name")
    if isinstance(name, str) and name:
        return name
    for message in payload.get("exact") or ():
        data = message.get("data") if isinstance(message, Mapping) else None
        meta = data.get("response_metadata") if isinstance(data, Mapping) else None
        name = meta.get("model_name") if isinstance(meta, Mapping) else None
        if isinstance(name, str) and name:
            return name
    return None


def _same_message(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a.get("id") and b.get("id"):
        return bool(a.get("id") == b.get("id") and a.get("content") == b.get("content"))
    return a == b


class LlmCalls:
    """The model calls of one thread, in the order they started."""

    def __init__(self, prices: PriceTable) -> None:
        self.prices = prices
        self.calls: list[dict[str, Any]] = []
        self.last_prompt: list[Mapping[str, Any]] | None = None
        self.last_prompt_seq: int | None = None

    def start(
        self, r: dict[str, Any], env: Mapping[str, Any], p: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A call started (``llm_start``) in row ``r``: its prompt, what is new in it."""
        msgs = prompt_messages(p)
        pairs = zip(self.last_prompt or (), msgs, strict=False)
        shared = sum(1 for _ in takewhile(lambda ab: _same_message(*ab), pairs))
        hidden = max(0, shared - PROMPT_CONTEXT)
        call = {
            "row": r["id"],
            "seq": env.get("seq"),
            "node": env.get("node"),
            "step": env.get("step"),
            "model": p.get("model") or env.get("name"),
            "request_model": request_model(p),
            "params": p.get("params"),
            "tools": p.get("tools"),
            "messages": msgs[hidden:],
            "hidden_messages": hidden,
            "hidden_from_seq": self.last_prompt_seq if hidden else None,
            "prompt_messages": len(msgs),
            "prompt_hash": p.get("prompt_context_hash"),
            "answer": [],
            "tool_calls": [],
            **dict.fromkeys(("input_tokens", "output_tokens", "total_tokens", "cost")),
            "status": "running",
        }
        self.last_prompt, self.last_prompt_seq = msgs, env.get("seq")
        r["detail"]["llm"] = call
        self.calls.append(call)
        return call

    def end(self, r: dict[str, Any], env: Mapping[str, Any], p: Mapping[str, Any]) -> None:
        """A call ended (``llm_end``) in row ``r``: its answer, tokens and cost, and the
        row's label says them."""
        call = r["detail"].get("llm")
        if call is None:
            call = {
                "row": r["id"],
                "seq": env.get("seq"),
                "model": env.get("name"),
                "messages": [],
                "hidden_messages": 0,
                "prompt_messages": 0,
                "node": env.get("node"),
                "step": env.get("step"),
            }
            r["detail"]["llm"] = call
            self.calls.append(call)
        named = answer_model(p)
        if named and not call.get("request_model") and named != call.get("model"):
            call["model"] = named  # the request named none: the answer's name is priced
            r["label"] = f"LLM {named}"
        call["answer"] = [g for g in p.get("generations") or () if isinstance(g, Mapping)]
        call["tool_calls"] = p.get("tool_calls") or []
        i, o, t = token_usage(p)
        call.update(input_tokens=i, output_tokens=o, total_tokens=t, status=r["status"])
        call["cost"] = self.prices.cost(call.get("model"), input_tokens=i, output_tokens=o)
        call["priced"] = self.prices.price_of(call.get("model")) is not None
        call["duration_ms"] = env.get("duration_ms")
        if p.get("error"):
            call["error"] = p.get("error")
        if t is not None:
            r["label"] += f" · {i if i is not None else '?'} → {o if o is not None else '?'} tokens"
        if call["cost"] is not None:
            r["label"] += f" · {format_cost(call['cost'], self.prices.currency)}"
        elif t is not None:
            r["label"] += " · unknown price"

    def totals(self) -> dict[str, Any]:
        """Tokens and cost of every call: ``tokens``, ``cost`` (of the priced calls, or
        ``None``), ``cost_complete``, ``unknown_price_models``, ``currency``,
        ``prices_source``."""
        total_in = sum(c.get("input_tokens") or 0 for c in self.calls)
        total_out = sum(c.get("output_tokens") or 0 for c in self.calls)
        used = [c for c in self.calls if c.get("total_tokens") is not None]
        known = [c["cost"] for c in used if c.get("cost") is not None]
        unknown = sorted({str(c.get("model")) for c in used if c.get("cost") is None})
        return {
            "tokens": {"input": total_in, "output": total_out, "total": total_in + total_out},
            "cost": sum(known) if known else None,
            "cost_complete": not unknown,
            "unknown_price_models": unknown,
            "currency": self.prices.currency,
            "prices_source": self.prices.source,
        }
