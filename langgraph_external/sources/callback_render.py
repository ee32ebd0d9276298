"""How the callback handler's events are rendered: deferred, off the app's thread.

The handler builds a small event with the raw objects a callback received and a ``build``
function from here; the pipeline's writer calls it later (redaction and offloading follow).
Each renderer turns one kind of payload into the readable and exact forms the record keeps:
messages as dicts, LangChain's serialized form for exact replay (:func:`exact`), the model
call's ``prompt_context_hash``, token usage, retrieval hits.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> exact(AIMessage("hi"))["type"]
    'ai'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.load import dumpd
from langchain_core.messages import BaseMessage, messages_to_dict

from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event, canonical_json
from langgraph_external.record.keys import prompt_hash
from langgraph_external.record.render import message_to_dict, to_readable

__all__ = [
    "OUTPUT_TAIL",
    "Exact",
    "exact",
    "prompt_context_hash",
    "raw_bytes",
    "render_llm_end",
    "render_llm_start",
    "render_payload",
    "render_retrieval",
    "render_run_end",
    "render_tool_result",
]


def prompt_context_hash(
    messages: Sequence[Any],
    tools: Any = None,
    params: Mapping[str, Any] | None = None,
    *,
    key: WorkspaceCipher | None = None,
) -> str:
    """Keyed hash (HMAC-SHA256 of the deployment ``key``) of everything a chat model saw.

    Message ids and other bookkeeping the model never sees are left out, so the same
    prompt always has the same hash. The hash is of the prompt *before* redaction, so it
    is keyed: an unkeyed sha256 of a short prompt holding a secret could be brute-forced.
    Without ``key`` (a pipeline with no deployment key) it is a plain sha256.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> a = prompt_context_hash([HumanMessage("hi", id="1")])
        >>> a == prompt_context_hash([HumanMessage("hi", id="2")])
        True
    """
    msgs = []
    for m in messages:
        d = message_to_dict(m) if hasattr(m, "content") else to_readable(m)
        d.pop("id", None)
        msgs.append(d)
    body = {"messages": msgs, "tools": to_readable(tools), "params": to_readable(params or {})}
    return prompt_hash(canonical_json(body), key)


def raw_bytes(value: Any) -> bytes | None:
    """A tool result's exact bytes (text as UTF-8), or ``None`` for other values."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return None


def _parsed(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return to_readable(value)


class Exact:
    """A value to record in LangChain's serialized form (``dumpd``), for exact replay."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def exact(value: Any) -> Any:
    """``value`` in a form LangChain rebuilds exactly, or ``None`` if it has none.

    A message becomes ``messages_to_dict``'s ``{"type", "data"}`` (cheap: a model dump);
    anything else LangChain's serialized form (``dumpd``). Replay rebuilds recorded
    answers and inputs from it.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> exact(AIMessage("hi"))["type"]
        'ai'
    """
    if isinstance(value, Exact):
        value = value.value
    if value is None or getattr(value, "resume", None) is not None:
        return None
    try:
        if isinstance(value, BaseMessage):
            return messages_to_dict([value])[0]
        return dumpd(value)
    except Exception:  # an object LangChain cannot serialize: the readable form stays
        return None


def _render_exact(payload: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: (exact(v) if isinstance(v, Exact) else to_readable(v)) for k, v in payload.items()}
    if out.get("exact") is None:
        out.pop("exact", None)
    return out


def render_payload(event: Event) -> Event:
    """Every payload value readable; an :class:`Exact` one in its exact form."""
    return event.replace(payload=_render_exact(event.payload), build=None)


OUTPUT_TAIL = 20
"""Items kept of a long list in the output of a checkpointed thread's run (``run_end``)."""


def _tail(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and len(value) > OUTPUT_TAIL:
        return {"$items": len(value), "$tail": to_readable(list(value[-OUTPUT_TAIL:]))}
    return to_readable(value)


def render_run_end(event: Event) -> Event:
    """A checkpointed run's output: its long lists cut to count and tail (O(change))."""
    output = event.payload.get("output")
    if isinstance(output, Mapping):
        rendered: Any = {str(k): _tail(v) for k, v in output.items()}
    else:
        rendered = _tail(output)
    payload = {**event.payload, "output": rendered, "state": "checkpoint"}
    return event.replace(payload=payload, build=None)


def render_tool_result(event: Event) -> Event:
    """A tool's result: readable, parsed (JSON text decoded), exact, and its artifact."""
    p = dict(event.payload)
    p["exact"] = exact(p.get("exact"))
    if p["exact"] is None:
        del p["exact"]
    result = p.get("result")
    p["parsed"] = _parsed(result)
    p["result"] = to_readable(result)
    if p.get("artifact") is None:
        p.pop("artifact", None)
    else:
        p["artifact"] = to_readable(p["artifact"])
    return event.replace(payload=p, build=None)


def render_llm_start(event: Event, key: WorkspaceCipher | None = None) -> Event:
    """A model call: model, parameters, tool schemas, messages (or prompts) and the
    keyed :func:`prompt_context_hash` of all of them."""
    p = event.payload
    params = dict(p.get("params") or {})
    tools = params.pop("tools", None)
    model = params.get("model") or params.get("model_name") or params.get("_type") or event.name
    out: dict[str, Any] = {
        "model": model,
        "params": to_readable(params),
        "tools": to_readable(tools),
    }
    if "messages" in p:
        batch = p["messages"]
        flat = batch[0] if len(batch) == 1 else [m for b in batch for m in b]
        out["messages"] = [message_to_dict(m) for m in flat]
    else:
        out["prompts"] = p.get("prompts")
        flat = [{"role": "user", "content": t} for t in p.get("prompts") or []]
    out["prompt_context_hash"] = prompt_context_hash(flat, tools, params, key=key)
    return event.replace(payload=out, build=None)


def render_llm_end(event: Event) -> Event:
    """A model's answer: generations (readable and exact), tool calls, token usage."""
    response = event.payload.get("response")
    generations = getattr(response, "generations", None) or []
    out: dict[str, Any] = {"generations": []}
    usage: dict[str, Any] = {}
    tool_calls: list[Any] = []
    for gens in generations:
        for g in gens:
            msg = getattr(g, "message", None)
            if msg is not None:
                out["generations"].append(message_to_dict(msg))
                out.setdefault("exact", []).append(exact(msg))
                tool_calls.extend(to_readable(getattr(msg, "tool_calls", None) or []))
                um = getattr(msg, "usage_metadata", None)
                if um:
                    for k, v in dict(um).items():
                        if isinstance(v, (int, float)):
                            usage[k] = usage.get(k, 0) + v
            else:
                out["generations"].append({"text": getattr(g, "text", None)})
    llm_output = getattr(response, "llm_output", None) or {}
    if not usage and isinstance(llm_output, dict):
        usage = to_readable(llm_output.get("token_usage") or llm_output.get("usage") or {})
    model = _answer_model(generations, llm_output)
    if model:
        out["model_name"] = model
    out["tool_calls"] = tool_calls
    out["usage"] = usage
    return event.replace(payload=out, build=None)


def _answer_model(generations: Any, llm_output: Any) -> str | None:
    """The model the answer names (``response_metadata["model_name"]`` of its message, or
    the ``llm_output``'s): hosted models report the exact version that answered."""
    metas = [
        getattr(getattr(g, "message", None), "response_metadata", None) or {}
        for gens in generations
        for g in gens
    ]
    for meta in [*metas, llm_output if isinstance(llm_output, dict) else {}]:
        name = meta.get("model_name") or meta.get("model")
        if isinstance(name, str) and name:
            return name
    return None


def render_retrieval(event: Event) -> Event:
    """A retriever's hits: rank, id, score, content, metadata."""
    docs = []
    for rank, d in enumerate(event.payload.get("documents") or [], 1):
        meta = dict(getattr(d, "metadata", {}) or {})
        docs.append(
            {
                "rank": rank,
                "id": getattr(d, "id", None) or meta.get("id"),
                "score": meta.get("score") or meta.get("relevance_score"),
                "content": getattr(d, "page_content", None),
                "metadata": to_readable(meta),
            }
        )
    return event.replace(payload={"query": event.payload.get("query"), "hits": docs}, build=None)
