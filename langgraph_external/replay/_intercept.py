"""Answering model and tool calls from the record, only inside a replay.

While a replay runs, ``BaseChatModel``'s generation step and ``BaseTool.run``/``arun`` are
wrapped (see ``_compat``). The wrappers look at a context variable: outside a replay it is
unset and they call the original at once, so other threads and other graphs in the same
process run untouched. Inside, the :class:`ReplaySession` decides: answer from the record
(the model or the tool is not called), or call it live and compare. The wrappers are
installed when the first replay starts and removed when the last one ends.
"""

from __future__ import annotations

import contextvars
import json
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManager, CallbackManager
from langchain_core.load import load
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage, messages_from_dict
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatResult

from langgraph_external.read.diff import diff_messages
from langgraph_external.read.state_diff import tool_call_keys
from langgraph_external.record.namespaces import where_of
from langgraph_external.record.render import message_to_dict, to_readable
from langgraph_external.replay._record import CallIndex, RecordedCall, live_context
from langgraph_external.sources.callback_render import prompt_context_hash
from langgraph_external.upstream import langgraph as _compat

ACTIVE: contextvars.ContextVar[ReplaySession | None] = contextvars.ContextVar(
    "lgx_replay", default=None
)


class ReplayDivergenceError(BaseException):
    """The replayed code asked for a call the record cannot answer; the replay stops.

    A ``BaseException``, so a node's or ``ToolNode``'s error handling cannot turn it into
    an answer.
    """

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.message)
        self.divergence = divergence


class RecordedCallError(Exception):
    """A call that failed in the recorded run fails the same way in the replay."""


@dataclass
class Divergence:
    """Where a replay first differed from the record, and how.

    Attributes:
        kind: ``llm_input`` (the model got another prompt), ``llm_output`` (the live model
            answered differently), ``tool_call`` (a tool call with another name or
            arguments, or one the record does not have), ``missing_call`` (a recorded call
            the replay never made), ``path`` (other nodes ran), ``state`` (another final
            state), ``error`` (the replay raised where the record did not).
        step, node, task_id, checkpoint_ns: where (of the replay when it happened in a
            call, else of the record).
        message: one line for people.
        expected, actual: what the record holds and what the replay did.
        diff: a structured difference (messages, tool calls, state), when there is one.
    """

    kind: str
    message: str
    step: int | None = None
    node: str | None = None
    task_id: str | None = None
    checkpoint_ns: str = ""
    expected: Any = None
    actual: Any = None
    diff: Any = None


@dataclass
class ReplaySession:
    """The state of one replay: the index it answers from and what happened."""

    index: CallIndex
    answer_models: bool
    answer_tools: bool
    key: Any = None  # the deployment key the record's prompt hashes were made with
    redactor: Any = None  # what the record was redacted with: live prompts are too
    model_calls: int = 0
    model_calls_answered: int = 0
    tool_calls_executed: int = 0
    tool_calls_answered: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def diverged(self, d: Divergence, *, stop: bool) -> None:
        """Record a divergence; with ``stop`` the replay ends here."""
        with self._lock:
            self.divergences.append(d)
        if stop:
            raise ReplayDivergenceError(d)

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    # -- models ---------------------------------------------------------------------
    def before_model(
        self, model: Any, messages: list[Any], stop: Any, run_manager: Any, kwargs: dict[str, Any]
    ) -> tuple[RecordedCall | None, ChatResult | None]:
        """Find the recorded call; returns the answer when the record gives it."""
        md = dict(getattr(run_manager, "metadata", None) or {})
        params = _compat.chat_invocation_params(model, stop, kwargs)
        tools = params.pop("tools", None)
        digest = prompt_context_hash(messages, tools, params, key=self.key)
        rec, same = self.index.take_llm(live_context(md), digest)
        if not same:
            self.diverged(
                _model_input_divergence(md, rec, digest, messages, self.redactor),
                stop=self.answer_models,
            )
        if self.answer_models and rec is not None:
            self._count("model_calls_answered")
            return rec, _chat_result(rec)
        return rec, None

    def after_model(self, md: dict[str, Any], rec: RecordedCall | None, result: Any) -> None:
        """A live model answered: compare with the record."""
        self._count("model_calls")
        if rec is None or rec.end is None:
            return
        got = [_answer_of(g.message) for g in getattr(result, "generations", [])]
        want = [_answer_of(g) for g in rec.end.get("generations") or []]
        if got != want:
            self.diverged(
                Divergence(
                    kind="llm_output",
                    message=f"the model answered differently at step {rec.step} in node "
                    f"{rec.node!r}",
                    **_where(md),
                    expected=want,
                    actual=got,
                ),
                stop=False,
            )

    # -- tools ----------------------------------------------------------------------
    def before_tool(self, tool: Any, tool_input: Any, kwargs: dict[str, Any]) -> Any:
        """The recorded answer of a tool call, or :data:`LIVE` to run the tool."""
        md = dict(kwargs.get("metadata") or {})
        call_id = kwargs.get("tool_call_id")
        args = to_readable(_compat.tool_callback_inputs(tool, tool_input))
        rec, same = self.index.take_tool(live_context(md), tool.name, args, call_id)
        if not same:
            self.diverged(
                Divergence(
                    kind="tool_call",
                    message=f"tool call {tool.name}({_short(args)}) at step "
                    f"{md.get('langgraph_step')} in node {md.get('langgraph_node')!r} "
                    + (
                        f"differs from the recorded {rec.name}({_short(rec.args)})"
                        if rec is not None
                        else "is not in the record"
                    ),
                    **_where(md),
                    expected={"name": rec.name, "args": rec.args} if rec else None,
                    actual={"name": tool.name, "args": args},
                ),
                stop=self.answer_tools,
            )
        if not self.answer_tools or rec is None:
            self._count("tool_calls_executed")
            return LIVE
        self._count("tool_calls_answered")
        return _tool_answer(rec, call_id)


LIVE = object()
"""Marker: run the real tool."""


def _short(args: Any, limit: int = 80) -> str:
    text = str(args)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(md: dict[str, Any]) -> dict[str, Any]:
    task_id, checkpoint_ns = where_of(md)
    return {
        "step": md.get("langgraph_step"),
        "node": md.get("langgraph_node"),
        "task_id": task_id,
        "checkpoint_ns": checkpoint_ns,
    }


def _model_input_divergence(
    md: dict[str, Any],
    rec: RecordedCall | None,
    digest: str,
    messages: list[Any],
    redactor: Any = None,
) -> Divergence:
    """The model got a prompt the record does not have: both prompts, readable. The live one
    is redacted as the record was, so a secret in it is neither printed nor a difference."""
    actual: Any = [message_to_dict(m) for m in messages]
    if redactor is not None:
        actual = redactor(to_readable(actual))[0]
    got = {"prompt_context_hash": digest, "messages": actual}
    where = f"step {md.get('langgraph_step')} in node {md.get('langgraph_node')!r}"
    if rec is None:
        message = f"a model call at {where} is not in the record"
        return Divergence(kind="llm_input", message=message, **_where(md), actual=got)
    expected = list(rec.start.get("messages") or [])
    if expected and all(isinstance(m, list) for m in expected):
        expected = [m for batch in expected for m in batch]
    return Divergence(
        kind="llm_input",
        message=f"the model got another prompt at {where} (prompt_context_hash "
        f"{digest[:12]} instead of {str(rec.input_hash)[:12]})",
        **_where(md),
        expected={"prompt_context_hash": rec.input_hash, "messages": expected},
        actual=got,
        diff=diff_messages(expected, actual).to_dict(),
    )


def _answer_of(msg: Any) -> dict[str, Any]:
    """What a model answer says (content and tool calls; ids and metadata left out)."""
    d = msg if isinstance(msg, dict) else message_to_dict(msg)
    return {"content": d.get("content"), "tool_calls": tool_call_keys(d.get("tool_calls"))}


def load_exact(data: Any) -> Any:
    """Rebuild a value recorded by ``callbacks.exact``: a message (``messages_to_dict``
    form) or LangChain's serialized form (only message classes are rebuilt)."""
    if isinstance(data, dict) and "lc" not in data and set(data) == {"type", "data"}:
        return messages_from_dict([data])[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ``load`` is marked beta
        return load(data, allowed_objects="messages")


def _failed(end: Any) -> RecordedCallError:
    return RecordedCallError(
        f"{end.get('error_type', 'Error')}: {end.get('error', 'the recorded call failed')}"
    )


def _chat_result(rec: RecordedCall) -> ChatResult:
    end = rec.end or {}
    if rec.end_status == "error" or not end:
        raise _failed(end)
    exact = end.get("exact")
    if exact:
        messages = [load_exact(m) for m in exact]
    else:  # recorded before exact answers were kept: rebuild from the readable form
        messages = [
            AIMessage(
                content=g.get("content") or "",
                tool_calls=[
                    {"id": c.get("id"), "name": c["name"], "args": c.get("args") or {}}
                    for c in g.get("tool_calls") or []
                ],
                id=g.get("id"),
            )
            for g in end.get("generations") or []
        ]
    return ChatResult(generations=[ChatGeneration(message=m) for m in messages])


def _tool_answer(rec: RecordedCall, call_id: str | None) -> Any:
    end = rec.end or {}
    if rec.end is None or (rec.end_kind == "tool_error" and "result" not in end):
        raise _failed(end)
    if end.get("exact"):
        out = load_exact(end["exact"])
        if isinstance(out, ToolMessage) and call_id and out.tool_call_id != call_id:
            out = out.model_copy(update={"tool_call_id": call_id})
        return out
    result = end.get("result")
    if call_id is None:
        return result
    return ToolMessage(
        content=result if isinstance(result, (str, list)) else str(result),
        tool_call_id=call_id,
        name=rec.name,
        status="error" if rec.end_kind == "tool_error" else "success",
    )


# -- the wrappers -----------------------------------------------------------------------
def _wrap_generate(original: Callable[..., Any]) -> Callable[..., Any]:
    def _generate_with_cache(
        self: Any, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        session = ACTIVE.get()
        if session is None:
            return original(self, messages, stop=stop, run_manager=run_manager, **kwargs)
        rec, answer = session.before_model(self, messages, stop, run_manager, kwargs)
        if answer is not None:
            return answer
        result = original(self, messages, stop=stop, run_manager=run_manager, **kwargs)
        session.after_model(dict(getattr(run_manager, "metadata", None) or {}), rec, result)
        return result

    return _generate_with_cache


def _wrap_agenerate(original: Callable[..., Any]) -> Callable[..., Any]:
    async def _agenerate_with_cache(
        self: Any, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        session = ACTIVE.get()
        if session is None:
            return await original(self, messages, stop=stop, run_manager=run_manager, **kwargs)
        rec, answer = session.before_model(self, messages, stop, run_manager, kwargs)
        if answer is not None:
            return answer
        result = await original(self, messages, stop=stop, run_manager=run_manager, **kwargs)
        session.after_model(dict(getattr(run_manager, "metadata", None) or {}), rec, result)
        return result

    return _agenerate_with_cache


def _as_chunk(message: Any) -> Any:
    """An answer as the chunk ``stream()`` yields (it may be one already)."""
    if isinstance(message, AIMessageChunk) or not isinstance(message, AIMessage):
        return message
    fields = message.model_dump(exclude={"type", "tool_calls", "invalid_tool_calls"})
    chunks = [
        tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c.get("id"), index=i)
        for i, c in enumerate(message.tool_calls)
    ]
    return AIMessageChunk(**fields, tool_call_chunks=chunks)


def _wrap_stream(original: Callable[..., Any]) -> Callable[..., Any]:
    # a model that streams natively bypasses the generation step; in a replay it is asked
    # through ``invoke``, which is answered (or compared) there, and yields one chunk
    def stream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Iterator[Any]:
        if ACTIVE.get() is None:
            yield from original(self, input, config, **kwargs)
            return
        yield _as_chunk(self.invoke(input, config, **kwargs))

    return stream


def _wrap_astream(original: Callable[..., Any]) -> Callable[..., Any]:
    async def astream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if ACTIVE.get() is None:
            async for chunk in original(self, input, config, **kwargs):
                yield chunk
            return
        yield _as_chunk(await self.ainvoke(input, config, **kwargs))

    return astream


def _on_tool_start(manager_cls: Any, tool: Any, tool_input: Any, kwargs: dict[str, Any]) -> Any:
    """The callbacks see an answered call as if the tool ran: the replay has its own record.
    Returns the run manager (an awaitable one with ``AsyncCallbackManager``)."""
    manager = manager_cls.configure(
        kwargs.get("callbacks"),
        tool.callbacks,
        tool.verbose,
        kwargs.get("tags"),
        tool.tags,
        kwargs.get("metadata"),
        tool.metadata,
    )
    inputs = _compat.tool_callback_inputs(tool, tool_input)
    return manager.on_tool_start(
        {"name": tool.name, "description": tool.description},
        tool_input if isinstance(tool_input, str) else str(inputs),
        name=kwargs.get("run_name"),
        run_id=kwargs.get("run_id"),
        inputs=inputs if isinstance(inputs, dict) else None,
        tool_call_id=kwargs.get("tool_call_id"),
    )


_RUN_POSITIONAL = ("verbose", "start_color", "color", "callbacks")
"""``BaseTool.run``/``arun``'s positional parameters after ``tool_input``."""


def _wrap_run(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        session = ACTIVE.get()
        if session is None:
            return original(self, tool_input, *args, **kwargs)
        kwargs.update(zip(_RUN_POSITIONAL, args, strict=False))
        answer = session.before_tool(self, tool_input, kwargs)
        if answer is LIVE:
            return original(self, tool_input, **kwargs)
        rm = _on_tool_start(CallbackManager, self, tool_input, kwargs)
        rm.on_tool_end(answer, name=self.name)
        return answer

    return run


def _wrap_arun(original: Callable[..., Any]) -> Callable[..., Any]:
    async def arun(self: Any, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        session = ACTIVE.get()
        if session is None:
            return await original(self, tool_input, *args, **kwargs)
        kwargs.update(zip(_RUN_POSITIONAL, args, strict=False))
        answer = session.before_tool(self, tool_input, kwargs)
        if answer is LIVE:
            return await original(self, tool_input, **kwargs)
        rm = await _on_tool_start(AsyncCallbackManager, self, tool_input, kwargs)
        await rm.on_tool_end(answer, name=self.name)
        return answer

    return arun


_install_lock = threading.Lock()
_installed: list[Callable[[], None]] = []
_users = 0


def _install() -> None:
    from langchain_core.tools import BaseTool

    chat = _compat.chat_model_class()
    sync_name, async_name = _compat.CHAT_MODEL_CALLS
    _installed.extend(
        [
            _compat.patch_method(chat, sync_name, _wrap_generate),
            _compat.patch_method(chat, async_name, _wrap_agenerate),
            _compat.patch_method(chat, "stream", _wrap_stream),
            _compat.patch_method(chat, "astream", _wrap_astream),
            _compat.patch_method(BaseTool, "run", _wrap_run),
            _compat.patch_method(BaseTool, "arun", _wrap_arun),
        ]
    )


@contextmanager
def intercepting(session: ReplaySession) -> Iterator[ReplaySession]:
    """Answer calls of the current context (and the tasks it starts) from ``session``."""
    global _users
    with _install_lock:
        if _users == 0:
            _install()
        _users += 1
    token = ACTIVE.set(session)
    try:
        yield session
    finally:
        ACTIVE.reset(token)
        with _install_lock:
            _users -= 1
            if _users == 0:
                while _installed:
                    _installed.pop()()


def installed() -> bool:
    """Whether the wrappers are in place (a replay is running somewhere)."""
    return bool(_installed)
