"""The model and tool calls of a recorded thread, read from the ledger.

Each call is built from the ledger's ``llm_start``/``llm_end`` and ``tool_*`` events (the
recorded, redacted renderings), paired by run id: where it ran (namespace, node, step),
what it was asked and what it answered. Payloads offloaded to artifacts are read from
the workspace. :mod:`langgraph_external.read.call_diff` compares the calls of two sides.

Example:
    >>> call = ModelCall(1, "", "agent", 1, "chat", "m", [{"role": "user", "content": "hi"}],
    ...                  [], {})
    >>> call.where
    'agent@1'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import psycopg

from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.queries import SELECT_CALLS
from langgraph_external.read.offloaded import workspace_fetch
from langgraph_external.read.state_diff import is_message, message_key, tool_call_keys
from langgraph_external.record.artifacts import artifact_digests, expand
from langgraph_external.record.escapes import has_marks, unmark
from langgraph_external.record.events import canonical_json
from langgraph_external.record.namespaces import SEPARATOR, scope_of
from langgraph_external.workspace.files import Workspace

__all__ = ["ModelCall", "ToolCall", "load_calls"]


@dataclass
class _Call:
    """Where a recorded call ran, and what it called."""

    seq: int
    scope: str
    node: str | None
    step: int | None
    name: str | None

    @property
    def where(self) -> str:
        """``scope/node@step``."""
        return f"{self.scope + '/' if self.scope else ''}{self.node or '?'}@{self.step}"


@dataclass
class ModelCall(_Call):
    """One recorded chat-model call: where it ran, what it was asked, what it answered.

    Attributes:
        seq: the ``llm_start`` event's position in the thread's record.
        scope: node names of its namespace (``""`` for the root graph; task ids left out).
        node, step: where it ran.
        name: the model's name (the event's name); model: the model named in the payload.
        messages: the prompt, readable (redacted as recorded).
        tools: the tool names (or schemas) the model was given.
        params: the invocation parameters.
        prompt_hash: the recorded ``prompt_context_hash``.
        answer: the answer: one ``{"content", "tool_calls"}`` per generation (ids left
            out); ``None`` when no answer was recorded.
        status: ``ok``, ``error`` or ``None`` (no end recorded).
        error: the error of a failed call.
    """

    model: str | None
    messages: list[dict[str, Any]]
    tools: list[Any]
    params: dict[str, Any]
    prompt_hash: str | None = None
    answer: list[dict[str, Any]] | None = None
    status: str | None = None
    error: str | None = None

    def input_key(self) -> str:
        """What the model was asked, canonical (message ids left out)."""
        return canonical_json(
            {
                "messages": [message_key(m) if is_message(m) else m for m in self.messages],
                "tools": self.tools,
                "params": self.params,
                "model": self.model,
            }
        )

    def answer_key(self) -> str:
        """What the model answered, canonical (ids left out)."""
        return canonical_json({"answer": self.answer, "status": self.status, "error": self.error})


@dataclass
class ToolCall(_Call):
    """One recorded tool call: where it ran, its arguments and its result.

    Attributes:
        seq: the ``tool_start`` event's position; scope, node, step: where it ran.
        name: the tool; args: its arguments; tool_call_id: the model's id for the call.
        result: the parsed result (``None`` when it failed or did not end).
        status: ``ok``, ``error`` or ``None``; error: the error of a failed call.
    """

    args: Any
    tool_call_id: str | None = None
    result: Any = None
    status: str | None = None
    error: str | None = None

    def input_key(self) -> str:
        """The tool and its arguments, canonical."""
        return canonical_json({"name": self.name, "args": self.args})

    def answer_key(self) -> str:
        """The result, canonical."""
        return canonical_json({"result": self.result, "status": self.status, "error": self.error})


_CALL_KINDS = ("llm_start", "llm_end", "tool_start", "tool_end", "tool_error")


def _answer(generation: Any) -> dict[str, Any]:
    g = generation if isinstance(generation, Mapping) else {"content": generation}
    return {"content": g.get("content"), "tool_calls": tool_call_keys(g.get("tool_calls"))}


def _prompt_messages(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The prompt as ``lgx diff`` compares it: a completion model's prompts as ``prompt``
    messages, a batch flattened, other values as ``{"content": value}`` (unlike the view's
    :func:`~langgraph_external.read.llm_calls.prompt_messages`)."""
    msgs = payload.get("messages")
    if msgs is None and payload.get("prompts") is not None:  # a completion model
        return [{"role": "prompt", "content": p} for p in payload.get("prompts") or ()]
    if isinstance(msgs, list) and msgs and all(isinstance(m, list) for m in msgs):
        msgs = [m for batch in msgs for m in batch]  # a batch of prompts, flattened
    return [dict(m) if isinstance(m, Mapping) else {"content": m} for m in msgs or ()]


def _group_order(calls: list[Any]) -> list[Any]:
    """Calls in run order; calls of one step that ran side by side (consecutive, same
    namespace and step) ordered by node and input, since their order varies by run."""
    ordered = sorted(calls, key=lambda c: c.seq)
    return [
        c
        for _, group in groupby(ordered, key=lambda c: (c.scope, c.step))
        for c in sorted(group, key=lambda x: (x.node or "", x.input_key(), x.seq))
    ]


def load_calls(
    conn: psycopg.Connection[Any],
    ws: Workspace | None,
    thread_id: str,
    schema: str = ledger.DEFAULT_SCHEMA,
    *,
    after_seq: int = 0,
    upto_seq: int | None = None,
) -> tuple[list[ModelCall], list[ToolCall]]:
    """The model and tool calls recorded for ``thread_id`` (events after ``after_seq``,
    up to ``upto_seq``), in run order. Payloads offloaded to artifacts are read from
    ``ws`` (without it they count as unreadable: an empty prompt).

    Example:
        >>> with ledger.connect(dsn) as conn:                              # doctest: +SKIP
        ...     models, tools = load_calls(conn, Workspace("./ws"), "thread-42")
        >>> models[0].where, models[0].messages[0]["role"]                 # doctest: +SKIP
        ('agent@1', 'system')
    """
    rows = conn.execute(
        ledger.q(SELECT_CALLS, schema),
        (thread_id, list(_CALL_KINDS), after_seq, upto_seq, upto_seq),
    ).fetchall()
    models: dict[str, ModelCall] = {}
    tools: dict[str, ToolCall] = {}
    model_list: list[ModelCall] = []
    tool_list: list[ToolCall] = []
    for seq, kind, name, status, ns, run_id, node, step, payload in rows:
        p = _resolve_payload(ws, thread_id, payload or {})
        where = (int(seq), SEPARATOR.join(scope_of(ns)), node, step, name)
        key = str(run_id or seq)
        if kind == "llm_start":
            call = ModelCall(
                *where,
                model=p.get("model"),
                messages=_prompt_messages(p),
                tools=list(p.get("tools") or ()),
                params=dict(p.get("params") or {}),
                prompt_hash=p.get("prompt_context_hash"),
            )
            models[key] = call
            model_list.append(call)
        elif kind == "llm_end" and key in models:
            call = models.pop(key)
            call.status = status
            call.error = p.get("error")
            call.answer = [_answer(g) for g in p.get("generations") or ()]
        elif kind == "tool_start":
            tool = ToolCall(*where, args=p.get("args"), tool_call_id=p.get("tool_call_id"))
            tools[key] = tool
            tool_list.append(tool)
        elif kind in ("tool_end", "tool_error") and key in tools:
            tool = tools.pop(key)
            tool.status = status or ("error" if kind == "tool_error" else "ok")
            tool.result = p.get("parsed", p.get("result"))
            tool.error = p.get("error")
    return _group_order(model_list), _group_order(tool_list)


def _resolve_payload(
    ws: Workspace | None, thread_id: str, payload: Mapping[str, Any]
) -> Mapping[str, Any]:
    if ws is None or not artifact_digests(payload):
        return unmark(payload) if has_marks(payload) else payload
    loaded = expand(payload, workspace_fetch(ws, thread_id))
    return loaded if isinstance(loaded, dict) else {}
