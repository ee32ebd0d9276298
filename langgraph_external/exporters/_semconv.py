"""OpenInference and OpenTelemetry GenAI attributes of one span (pure functions).

Trace backends read different dialects: Arize Phoenix renders spans by their
OpenInference attributes (``openinference.span.kind``, ``llm.input_messages.N.message.*``,
``llm.token_count.*``, ``retrieval.documents.N.document.*``), Jaeger, Grafana Tempo,
Honeycomb and Datadog read the OpenTelemetry GenAI semantic conventions (``gen_ai.*``).
:class:`~langgraph_external.exporters._langfuse_map.ThreadMapper` calls these functions
with values taken from the ledger (already redacted) and adds the result next to
Langfuse's attributes. The attribute names come from the ``openinference-semantic-
conventions`` and ``opentelemetry-semantic-conventions`` packages.

Example:
    >>> attrs = tool_attrs(name="get_weather", call_id="call-1",
    ...                    args='{"city":"Oslo"}', result="sunny")
    >>> attrs["openinference.span.kind"], attrs["gen_ai.operation.name"]
    ('TOOL', 'execute_tool')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from openinference.semconv.trace import (
    DocumentAttributes,
    MessageAttributes,
    MessageContentAttributes,
    OpenInferenceMimeTypeValues,
    OpenInferenceSpanKindValues,
    SpanAttributes,
    ToolAttributes,
    ToolCallAttributes,
)

from langgraph_external.exporters._span_values import json_text as dumps
from langgraph_external.upstream import langgraph as _compat

GA = _compat.genai_attributes()
"""OpenTelemetry's GenAI attribute names (``gen_ai_attributes``)."""

AGENT = OpenInferenceSpanKindValues.AGENT.value
CHAIN = OpenInferenceSpanKindValues.CHAIN.value
LLM = OpenInferenceSpanKindValues.LLM.value
TOOL = OpenInferenceSpanKindValues.TOOL.value
RETRIEVER = OpenInferenceSpanKindValues.RETRIEVER.value
GUARDRAIL = OpenInferenceSpanKindValues.GUARDRAIL.value

JSON_MIME = OpenInferenceMimeTypeValues.JSON.value
TEXT_MIME = OpenInferenceMimeTypeValues.TEXT.value

OURS = "lgx."
"""Prefix of langgraph-external's own attributes (thread, node, step, checkpoint, seq)."""

Clip = Callable[[str], str]
"""Shortens a text that is too large for a span (keeps a preview and the record's address)."""

# chat-model ``_llm_type`` values whose provider is certain, as GenAI names it
_PROVIDERS = {
    "openai-chat": "openai",
    "azure-openai-chat": "azure.ai.openai",
    "anthropic-chat": "anthropic",
    "chat-ollama": "ollama",
    "mistralai-chat": "mistral_ai",
    "groq-chat": "groq",
    "chat-google-generative-ai": "gcp.gemini",
    "amazon_bedrock_converse_chat": "aws.bedrock",
}
_REQUEST_PARAMS = {
    "temperature": GA.GEN_AI_REQUEST_TEMPERATURE,
    "max_tokens": GA.GEN_AI_REQUEST_MAX_TOKENS,
    "max_completion_tokens": GA.GEN_AI_REQUEST_MAX_TOKENS,
    "max_output_tokens": GA.GEN_AI_REQUEST_MAX_TOKENS,
    "top_p": GA.GEN_AI_REQUEST_TOP_P,
    "top_k": GA.GEN_AI_REQUEST_TOP_K,
    "frequency_penalty": GA.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": GA.GEN_AI_REQUEST_PRESENCE_PENALTY,
    "seed": GA.GEN_AI_REQUEST_SEED,
}


def io_attrs(part: str, text: str | None, *, is_text: bool) -> dict[str, Any]:
    """``input.value``/``output.value`` and the mime type (``part``: input or output).

    Example:
        >>> io_attrs("input", '{"a":1}', is_text=False)
        {'input.value': '{"a":1}', 'input.mime_type': 'application/json'}
    """
    if text is None:
        return {}
    return {f"{part}.value": text, f"{part}.mime_type": TEXT_MIME if is_text else JSON_MIME}


def ours(values: Mapping[str, Any]) -> dict[str, Any]:
    """Our own attributes (``lgx.thread_id``, ``lgx.node``, …) and OpenInference ``metadata``.

    Example:
        >>> ours({"thread_id": "t-1", "step": 2, "node": None})
        {'lgx.thread_id': 't-1', 'lgx.step': 2, 'metadata': '{"step":2,"thread_id":"t-1"}'}
    """
    kept = {k: v for k, v in values.items() if v is not None}
    out: dict[str, Any] = {}
    for k, v in kept.items():
        out[OURS + k] = v if isinstance(v, (str, bool, int, float)) else dumps(v)
    if kept:
        out[SpanAttributes.METADATA] = dumps(kept)
    return out


def agent_attrs(name: str, thread_id: str) -> dict[str, Any]:
    """A graph run: an agent invocation."""
    return {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: AGENT,
        SpanAttributes.AGENT_NAME: name,
        GA.GEN_AI_OPERATION_NAME: "invoke_agent",
        GA.GEN_AI_AGENT_NAME: name,
        GA.GEN_AI_CONVERSATION_ID: thread_id,
    }


def chain_attrs(thread_id: str, kind: str = CHAIN) -> dict[str, Any]:
    """A graph node, or a point event (interrupt, resume, memory write, error)."""
    return {SpanAttributes.OPENINFERENCE_SPAN_KIND: kind, GA.GEN_AI_CONVERSATION_ID: thread_id}


def llm_attrs(
    *,
    thread_id: str,
    model: str | None,
    params: Mapping[str, Any],
    tools: Sequence[Any] | None,
    messages: Sequence[Any] | None,
    prompts: Sequence[Any] | None,
    generations: Sequence[Any],
    usage: Mapping[str, Any],
    clip: Clip,
) -> dict[str, Any]:
    """A chat or completion model call: messages in and out, tool calls, usage, model."""
    out: dict[str, Any] = {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: LLM,
        GA.GEN_AI_OPERATION_NAME: "chat" if messages is not None else "text_completion",
        GA.GEN_AI_CONVERSATION_ID: thread_id,
    }
    if model:
        out[SpanAttributes.LLM_MODEL_NAME] = model
        out[GA.GEN_AI_REQUEST_MODEL] = model
    provider = _PROVIDERS.get(str(params.get("_type") or ""))
    if provider:
        out[SpanAttributes.LLM_PROVIDER] = provider
        out[GA.GEN_AI_PROVIDER_NAME] = provider
    given = {k: v for k, v in params.items() if v is not None}
    if given:
        out[SpanAttributes.LLM_INVOCATION_PARAMETERS] = dumps(given)
    for key, attr in _REQUEST_PARAMS.items():
        value = given.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[attr] = value
    stop = given.get("stop")
    if isinstance(stop, list) and stop:
        out[GA.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    for i, tool in enumerate(tools or []):
        out[f"{SpanAttributes.LLM_TOOLS}.{i}.{ToolAttributes.TOOL_JSON_SCHEMA}"] = dumps(tool)
    if tools:
        out[GA.GEN_AI_TOOL_DEFINITIONS] = dumps(list(tools))
    if messages is not None:
        dicts = [_as_message(m) for m in messages]
        out.update(_messages(SpanAttributes.LLM_INPUT_MESSAGES, dicts, clip))
        out[GA.GEN_AI_INPUT_MESSAGES] = dumps([_genai_message(m, clip) for m in dicts])
    elif prompts is not None:
        out[SpanAttributes.LLM_PROMPTS] = [clip(str(p)) for p in prompts]
        out[GA.GEN_AI_INPUT_MESSAGES] = dumps(
            [_genai_message({"role": "user", "content": str(p)}, clip) for p in prompts]
        )
    answers = [
        g if "role" in g else {"role": "assistant", "content": g.get("text")}
        for g in generations
        if isinstance(g, Mapping)
    ]
    out.update(_messages(SpanAttributes.LLM_OUTPUT_MESSAGES, answers, clip))
    out[GA.GEN_AI_OUTPUT_MESSAGES] = dumps(
        [
            {
                **_genai_message(a, clip),
                "finish_reason": "tool_call" if a.get("tool_calls") else "stop",
            }
            for a in answers
        ]
    )
    out.update(_usage(usage))
    return out


def tool_attrs(
    *, name: str, call_id: str | None, args: str | None, result: str | None
) -> dict[str, Any]:
    """A tool run: its name, call id, arguments and result (``args``/``result`` as text)."""
    out: dict[str, Any] = {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: TOOL,
        SpanAttributes.TOOL_NAME: name,
        GA.GEN_AI_OPERATION_NAME: "execute_tool",
        GA.GEN_AI_TOOL_NAME: name,
        GA.GEN_AI_TOOL_TYPE: "function",
    }
    if call_id:
        out[SpanAttributes.TOOL_ID] = call_id
        out[GA.GEN_AI_TOOL_CALL_ID] = call_id
    if args is not None:
        out[GA.GEN_AI_TOOL_CALL_ARGUMENTS] = args
    if result is not None:
        out[GA.GEN_AI_TOOL_CALL_RESULT] = result
    return out


def retriever_attrs(
    *, thread_id: str, query: Any, hits: Any, source: str | None, clip: Clip
) -> dict[str, Any]:
    """A retriever or memory search: the query and each hit's id, content and score."""
    out: dict[str, Any] = {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: RETRIEVER,
        GA.GEN_AI_OPERATION_NAME: "retrieval",
        GA.GEN_AI_CONVERSATION_ID: thread_id,
    }
    if isinstance(query, str):
        out[GA.GEN_AI_RETRIEVAL_QUERY_TEXT] = clip(query)
    if source:
        out[GA.GEN_AI_DATA_SOURCE_ID] = source
    docs = []
    for i, hit in enumerate(hits if isinstance(hits, list) else []):
        if not isinstance(hit, Mapping):
            continue
        doc_id = _hit_id(hit)
        prefix = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.{i}."
        if doc_id is not None:
            out[prefix + DocumentAttributes.DOCUMENT_ID] = doc_id
        score = hit.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            out[prefix + DocumentAttributes.DOCUMENT_SCORE] = float(score)
        content = hit.get("content")
        if content is not None:
            text = content if isinstance(content, str) else dumps(content)
            out[prefix + DocumentAttributes.DOCUMENT_CONTENT] = clip(text)
        meta = {k: v for k, v in hit.items() if k not in ("id", "score", "content")}
        if meta:
            out[prefix + DocumentAttributes.DOCUMENT_METADATA] = dumps(meta)
        docs.append({"id": doc_id, "score": score})
    out[GA.GEN_AI_RETRIEVAL_DOCUMENTS] = dumps(docs)
    return out


def policy_attrs(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A policy violation: a guardrail span with the rule, the action and what it did."""
    out: dict[str, Any] = {SpanAttributes.OPENINFERENCE_SPAN_KIND: GUARDRAIL}
    for key in ("rule", "message", "action", "outcome", "from", "to", "fallback", "policy_name"):
        value = payload.get(key)
        if value is not None:
            out[f"{OURS}policy_violation.{key}"] = str(value)
    return out


# -- helpers --------------------------------------------------------------------------------
def _as_message(m: Any) -> dict[str, Any]:
    if isinstance(m, Mapping):
        return dict(m)
    if isinstance(m, (list, tuple)) and len(m) == 2:  # ("user", "hi") as a graph input
        return {"role": str(m[0]), "content": m[1]}
    return {"role": "user", "content": m}


def _messages(prefix: str, messages: Sequence[Mapping[str, Any]], clip: Clip) -> dict[str, Any]:
    """``<prefix>.N.message.{role,content,name,tool_call_id,tool_calls.M.tool_call.*}``."""
    out: dict[str, Any] = {}
    for i, m in enumerate(messages):
        p = f"{prefix}.{i}."
        if m.get("role") is not None:
            out[p + MessageAttributes.MESSAGE_ROLE] = str(m["role"])
        content = m.get("content")
        if isinstance(content, list):
            for k, (kind, text) in enumerate(_parts(content)):
                bp = f"{p}{MessageAttributes.MESSAGE_CONTENTS}.{k}."
                out[bp + MessageContentAttributes.MESSAGE_CONTENT_TYPE] = kind
                if text is not None:
                    out[bp + MessageContentAttributes.MESSAGE_CONTENT_TEXT] = clip(text)
        else:  # one text
            for _, text in _parts(content):
                out[p + MessageAttributes.MESSAGE_CONTENT] = clip(str(text))
        if m.get("name"):
            out[p + MessageAttributes.MESSAGE_NAME] = str(m["name"])
        if m.get("tool_call_id"):
            out[p + MessageAttributes.MESSAGE_TOOL_CALL_ID] = str(m["tool_call_id"])
        for j, call in enumerate(m.get("tool_calls") or []):
            if not isinstance(call, Mapping):
                continue
            cp = f"{p}{MessageAttributes.MESSAGE_TOOL_CALLS}.{j}."
            if call.get("id"):
                out[cp + ToolCallAttributes.TOOL_CALL_ID] = str(call["id"])
            if call.get("name"):
                out[cp + ToolCallAttributes.TOOL_CALL_FUNCTION_NAME] = str(call["name"])
            out[cp + ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON] = clip(
                dumps(call.get("args") or {})
            )
    return out


def _parts(content: Any) -> list[tuple[str, str | None]]:
    """A message's content as ``(type, text)`` parts: a text, the blocks of a list, or
    any other value as its JSON (none for no or empty content)."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    if isinstance(content, list):
        return [_block(block) for block in content]
    return [] if content is None else [("text", dumps(content))]


def _block(block: Any) -> tuple[str, str | None]:
    if isinstance(block, str):
        return "text", block
    if isinstance(block, Mapping):
        kind = str(block.get("type") or "text")
        text = block.get("text")
        return kind, text if isinstance(text, str) else None
    return "text", dumps(block)


def _genai_message(m: Mapping[str, Any], clip: Clip) -> dict[str, Any]:
    """One message in the GenAI ``{"role", "parts": [...]}`` shape."""
    parts: list[dict[str, Any]] = []
    content = m.get("content")
    role = str(m.get("role") or "user")
    if role == "tool":
        parts.append(
            {
                "type": "tool_call_response",
                "id": m.get("tool_call_id"),
                "response": clip(content) if isinstance(content, str) else content,
            }
        )
    else:
        for kind, text in _parts(content):
            parts.append({"type": kind} if text is None else {"type": kind, "content": clip(text)})
    parts.extend(
        {"type": "tool_call", "id": c.get("id"), "name": c.get("name"), "arguments": c.get("args")}
        for c in m.get("tool_calls") or []
        if isinstance(c, Mapping)
    )
    out: dict[str, Any] = {"role": role, "parts": parts}
    if m.get("name") and role != "tool":
        out["name"] = m["name"]
    return out


def _usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """Token counts in both dialects (LangChain's ``usage_metadata`` or OpenAI's names)."""

    def num(*keys: str) -> int | None:
        for k in keys:
            v = usage.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v)
        return None

    out: dict[str, Any] = {}
    prompt = num("input_tokens", "prompt_tokens")
    completion = num("output_tokens", "completion_tokens")
    total = num("total_tokens")
    if total is None and prompt is not None and completion is not None:
        total = prompt + completion
    for attr, value in (
        (SpanAttributes.LLM_TOKEN_COUNT_PROMPT, prompt),
        (SpanAttributes.LLM_TOKEN_COUNT_COMPLETION, completion),
        (SpanAttributes.LLM_TOKEN_COUNT_TOTAL, total),
        (GA.GEN_AI_USAGE_INPUT_TOKENS, prompt),
        (GA.GEN_AI_USAGE_OUTPUT_TOKENS, completion),
    ):
        if value is not None:
            out[attr] = value
    return out


def _hit_id(hit: Mapping[str, Any]) -> str | None:
    """A hit's id: a document id, a Mem0 memory id, or a store item's namespace/key."""
    for key in ("id", "memory_id"):
        if hit.get(key) is not None:
            return str(hit[key])
    if hit.get("key") is not None:
        ns = hit.get("namespace") or []
        return "/".join([*(str(n) for n in ns), str(hit["key"])])
    return None
