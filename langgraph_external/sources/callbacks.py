"""``AuditCallbackHandler``: records what a graph *does*, next to what it *stores*.

The checkpointer records state; this handler records behaviour: graph runs, every node
start/end with the update it returned (step, task id, triggers), router decisions, tool
calls (arguments, ``tool_call_id``, raw and parsed result, errors), chat-model calls (model,
parameters, the exact messages and tool schemas, a ``prompt_context_hash``, the answer,
requested tool calls, token usage), retriever hits, interrupts and resumes. Every event
carries the thread id, checkpoint namespace, LangChain run ids and the task id, which is
the join key with the checkpointer's ``writes`` events (``put_writes`` gets the same id).

Each callback maps to at most one event (the book of runs is :mod:`.runs`); the handler
only builds a small event and enqueues it; the pipeline renders its payload
(:mod:`.callback_render`) and snapshots it, and the sealer redacts it. It never raises
into the graph unless the pipeline is strict.

Example:
    >>> from langgraph_external.pipeline.pipeline import Pipeline
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> handler = AuditCallbackHandler(Pipeline(InMemoryLedger()))
    >>> handler.run_inline
    True
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from langgraph.callbacks import GraphCallbackHandler, GraphInterruptEvent, GraphResumeEvent

from langgraph_external._moved import deprecated_names
from langgraph_external.errors import InvalidThreadIdError
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event, EventKind
from langgraph_external.record.thread_ids import check_thread_id
from langgraph_external.sources.callback_render import (
    OUTPUT_TAIL,
    Exact,
    exact,
    prompt_context_hash,
    raw_bytes,
    render_llm_end,
    render_llm_start,
    render_payload,
    render_retrieval,
    render_run_end,
    render_tool_result,
)
from langgraph_external.sources.run_context import (
    NO_THREAD,
    POLICY_HASH_KEY,
    TAGS_KEY,
    USER_ID_KEY,
)
from langgraph_external.sources.runs import (
    Run,
    RunBook,
    end_event,
    interrupt_event,
    resume_event,
    run_event,
)

__all__ = [
    "NO_THREAD",
    "OUTPUT_TAIL",
    "POLICY_HASH_KEY",
    "TAGS_KEY",
    "USER_ID_KEY",
    "AuditCallbackHandler",
    "exact",
    "prompt_context_hash",
]

logger = logging.getLogger("langgraph_external")


class AuditCallbackHandler(GraphCallbackHandler):
    """Records graph behaviour as events into a :class:`Pipeline`.

    Attach it with ``External.config(thread_id)`` (automatic) or put it in
    ``config["callbacks"]`` yourself. One instance serves any number of threads and
    concurrent runs; it is cheap (a dictionary lookup and an enqueue per callback).

    Args:
        pipeline: where events go.
        record_chains: also record chains nested inside nodes (default: only nodes,
            routers, tools, models and retrievers).
        checkpointed: tells whether a thread's state is recorded by a checkpointer of
            the same pipeline (``External`` passes its checkpointer's). A ``run_end``
            of such a thread records its output with lists longer than
            :data:`OUTPUT_TAIL` items cut to their count and last items (``$items`` /
            ``$tail``): the whole value is the thread's state at its last checkpoint,
            recorded already, and a chat's full history rendered again at every turn
            would make a thread's recording grow with the square of its length.
        user_keys: config metadata keys naming the run's user, first present wins
            (recorded as ``user_id`` on ``run_start``; default ``langfuse_user_id``, what
            ``External.config(user_id=...)`` sets).
        run_keys: more config metadata keys recorded on ``run_start`` as
            ``run_metadata`` (e.g. the Agent Server's ``assistant_id``, ``run_id``).
    """

    run_inline = True  # only enqueues: call it directly, also from async code

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        record_chains: bool = False,
        checkpointed: Callable[[str], bool] | None = None,
        user_keys: Sequence[str] = (USER_ID_KEY,),
        run_keys: Sequence[str] = (),
    ) -> None:
        self.pipeline = pipeline
        self.user_keys = tuple(user_keys)
        self.run_keys = tuple(run_keys)
        self.checkpointed = checkpointed
        self._key: WorkspaceCipher | None = getattr(pipeline, "cipher", None)
        self.record_chains = record_chains
        self.raise_error = pipeline.strict
        self._book = RunBook()

    def root_run_id(self, run_id: UUID | str | None) -> str | None:
        """The root run id of a run in progress (``None`` if the handler does not know it).

        It is the ``run_id`` of the ``run_start`` event of the graph invocation, and the
        ``root_run_id`` of every event of that invocation: what other sources (the memory
        adapter) record to join with the run.

        Example:
            >>> from langgraph_external.ledger.memory import InMemoryLedger
            >>> from langgraph_external.pipeline.pipeline import Pipeline
            >>> with Pipeline(InMemoryLedger()) as p:
            ...     AuditCallbackHandler(p).root_run_id("not-running") is None
            True
        """
        if run_id is None:
            return None
        try:
            key = run_id if isinstance(run_id, UUID) else UUID(str(run_id))
        except ValueError:
            return None
        run = self._book.get(key)
        return run.root if run is not None else None

    # -- plumbing ----------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        emit_checked(self.pipeline, event)

    def _finish(
        self, kind: EventKind, run_id: UUID, parent_run_id: UUID | None, **fields: Any
    ) -> None:
        """Emit the end of a run started earlier (nothing if the start was not seen)."""
        run = self._book.pop(run_id)
        if run is not None:
            self._emit(end_event(kind, run, run_id, parent_run_id, **fields))

    # -- graph and nodes ---------------------------------------------------------------
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A graph run, a node, a router, or a chain nested in a node starts."""
        name = kwargs.get("name") or (serialized or {}).get("name")
        md = metadata or {}
        parent = self._book.get(parent_run_id)
        if parent is None:
            run = self._book.start("graph", run_id, None, md, name)
            self._graph_start(run, run_id, inputs, tags, md)
            return
        if name is not None and name == md.get("langgraph_node") and _is_step(tags):
            run = self._book.start("node", run_id, parent_run_id, md, name)
            payload = {
                "triggers": list(md.get("langgraph_triggers") or ()),
                "path": [str(p) for p in md.get("langgraph_path") or ()],
            }
            self._emit(run_event(EventKind.NODE_START, run, run_id, parent_run_id, payload=payload))
            return
        kind = "router" if parent.kind == "node" and md.get("langgraph_node") else "chain"
        self._book.start_inside(parent, kind, run_id, parent_run_id, md, name)

    def _graph_start(
        self, run: Run, run_id: UUID, inputs: Any, tags: list[str] | None, md: Any
    ) -> None:
        payload: dict[str, Any] = {"input": inputs, "exact": Exact(inputs)}
        resume = getattr(inputs, "resume", None)
        if resume is not None:
            payload = {"command": "resume"}
            kind, resumed = EventKind.RESUME, {"value": resume}
            self._emit(run_event(kind, run, run_id, None, payload=resumed, build=render_payload))
        user = next((md[k] for k in self.user_keys if md.get(k) is not None), None)
        if user is not None:
            payload["user_id"] = str(user)
        known = {k: md[k] for k in self.run_keys if md.get(k) is not None}
        if known:
            payload["run_metadata"] = known
        run_tags = md.get(TAGS_KEY) or tags
        if run_tags:
            payload["tags"] = [str(t) for t in run_tags]
        self._emit(
            run_event(EventKind.RUN_START, run, run_id, None, payload=payload, build=render_payload)
        )

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """A node returns its update (recorded), a router decides, the graph finishes."""
        run = self._book.get(run_id)
        if run is None:
            return
        build: Callable[[Event], Event] = render_payload
        if run.kind == "graph":
            kind, payload = EventKind.RUN_END, {"output": outputs}
            if self.checkpointed is not None and self.checkpointed(run.thread_id):
                build = render_run_end
        elif run.kind == "node":
            kind, payload = EventKind.NODE_END, {"update": outputs}
            self._book.note_step(run, interrupted=())
        elif run.kind == "router" and isinstance(outputs, (str, list, tuple)):
            kind, payload = EventKind.ROUTE, {"destination": outputs}
        else:
            self._book.pop(run_id)
            return
        self._finish(kind, run_id, parent_run_id, status="ok", payload=payload, build=build)

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A node or the graph raised (interrupts are recorded by ``on_interrupt``)."""
        run = self._book.get(run_id)
        if run is None or run.kind not in ("graph", "node"):
            self._book.pop(run_id)
            return
        interrupted = type(error).__name__ in ("GraphInterrupt", "ParentCommand", "GraphBubbleUp")
        if run.kind == "node" and interrupted:
            raised = error.args[0] if error.args else ()
            ids = [getattr(i, "id", None) for i in raised] if isinstance(raised, Sequence) else []
            self._book.note_step(run, interrupted=[i for i in ids if i])
        self._finish(
            EventKind.RUN_END if run.kind == "graph" else EventKind.NODE_END,
            run_id,
            parent_run_id,
            status="interrupted" if interrupted else "error",
            payload={},
            error=error,
        )

    # -- tools -------------------------------------------------------------------------
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool is called: name, arguments and ``tool_call_id``."""
        name = kwargs.get("name") or (serialized or {}).get("name")
        run = self._book.start("tool", run_id, parent_run_id, metadata, name)
        run.extra["tool_call_id"] = call_id = kwargs.get("tool_call_id")
        payload = {"args": inputs if inputs is not None else input_str, "tool_call_id": call_id}
        kind, build = EventKind.TOOL_START, render_payload
        self._emit(run_event(kind, run, run_id, parent_run_id, payload=payload, build=build))

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """A tool returns: the raw result as bytes, and the parsed value."""
        run = self._book.get(run_id)
        if run is None:
            return
        content = getattr(output, "content", output)
        failed = getattr(output, "status", "success") == "error"  # ToolNode's handled errors
        self._finish(
            EventKind.TOOL_ERROR if failed else EventKind.TOOL_END,
            run_id,
            parent_run_id,
            status="error" if failed else "ok",
            raw=raw_bytes(content),
            payload={
                "tool_call_id": getattr(output, "tool_call_id", None)
                or run.extra.get("tool_call_id"),
                "result": content,
                "artifact": getattr(output, "artifact", None),
                "exact": Exact(output) if hasattr(output, "content") else None,
            },
            build=render_tool_result,
        )

    def on_tool_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool raised: the error and its type."""
        run = self._book.get(run_id)
        payload = {"tool_call_id": run.extra.get("tool_call_id") if run else None}
        kind = EventKind.TOOL_ERROR
        self._finish(kind, run_id, parent_run_id, status="error", payload=payload, error=error)

    # -- models ------------------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A chat model is called with the exact messages and tool schemas."""
        name = kwargs.get("name") or (serialized or {}).get("name")
        payload = {"messages": [list(m) for m in messages]}
        self._model_start(run_id, parent_run_id, metadata, name, kwargs, payload)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A completion model is called with text prompts."""
        payload = {"prompts": list(prompts)}
        self._model_start(run_id, parent_run_id, metadata, kwargs.get("name"), kwargs, payload)

    def _model_start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        name: str | None,
        kwargs: dict[str, Any],
        payload: dict[str, Any],
    ) -> None:
        payload = {"params": dict(kwargs.get("invocation_params") or {}), **payload}
        kind, build = EventKind.LLM_START, functools.partial(render_llm_start, key=self._key)
        run = self._book.start("llm", run_id, parent_run_id, metadata, name)
        self._emit(run_event(kind, run, run_id, parent_run_id, payload=payload, build=build))

    def on_llm_end(
        self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """The model answered: text, requested tool calls, token usage."""
        self._finish(
            EventKind.LLM_END,
            run_id,
            parent_run_id,
            status="ok",
            payload={"response": response},
            build=render_llm_end,
        )

    def on_llm_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """The model call failed."""
        self._finish(
            EventKind.LLM_END, run_id, parent_run_id, status="error", payload={}, error=error
        )

    # -- retrievers --------------------------------------------------------------------
    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A retriever is queried."""
        name = kwargs.get("name") or (serialized or {}).get("name")
        run = self._book.start("retriever", run_id, parent_run_id, metadata, name)
        run.extra["query"] = query

    def on_retriever_end(
        self,
        documents: Sequence[Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """The retriever's hits: ids, scores, content."""
        run = self._book.get(run_id)
        query = run.extra.get("query") if run else None
        self._finish(
            EventKind.RETRIEVAL,
            run_id,
            parent_run_id,
            status="ok",
            payload={"query": query, "documents": list(documents)},
            build=render_retrieval,
        )

    def on_retriever_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """The retriever failed."""
        run = self._book.get(run_id)
        payload = {"query": run.extra.get("query") if run else None}
        self._finish(
            EventKind.RETRIEVAL, run_id, parent_run_id, status="error", payload=payload, error=error
        )

    # -- interrupts --------------------------------------------------------------------
    def on_interrupt(self, event: GraphInterruptEvent) -> None:
        """The graph paused: the interrupt values and where (node, step, task).

        Each interrupt names the node that raised it (``node``, ``step``, ``task_id`` and
        ``checkpoint_ns`` of the task that called ``interrupt()``, in a subgraph too); the
        event's own ``node`` and ``step`` are the root graph's task (the node when all
        interrupts come from one node). A static interrupt (``interrupt_before`` /
        ``interrupt_after``) raises none: its step is the one about to run or just run,
        and ``interrupt_after`` names the nodes of that step.
        """
        run = self._book.graphs.get(str(event.run_id)) if event.run_id else None
        self._emit(interrupt_event(run, event))

    def on_resume(self, event: GraphResumeEvent) -> None:
        """The graph resumed from a checkpoint (the value is on the ``resume`` event)."""
        run = self._book.graphs.get(str(event.run_id)) if event.run_id else None
        if run is not None:
            self._emit(resume_event(run, event))


def emit_checked(pipeline: Pipeline, event: Event) -> None:
    """Hand ``event`` to ``pipeline``; a thread id the record cannot hold is refused as
    the checkpointer refuses it, before anything is buffered (the ledger could never
    store it, and recording it under an escaped id would file the run under another
    thread). Failures are logged, and raised only by a strict pipeline."""
    try:
        check_thread_id(event.thread_id)
    except InvalidThreadIdError as exc:
        if pipeline.strict:
            raise
        logger.warning("langgraph-external: not recording a %s event: %s", event.kind, exc)
        return
    try:
        pipeline.emit(event)
    except Exception:
        if pipeline.strict:
            raise
        logger.exception("langgraph-external could not record a %s event", event.kind)


def _is_step(tags: Sequence[str] | None) -> bool:
    """Whether a chain's tags mark it as a graph step's task (a node)."""
    return any(t.startswith("graph:step:") for t in (tags or ()))


DEPRECATED_NAMES = {
    "AsyncAuditCallbackHandler": (  # the same handler under its earlier name
        lambda: AuditCallbackHandler,
        "use AuditCallbackHandler (the same handler; it serves async graphs too)",
    )
}
"""Names this module (and :mod:`langgraph_external.callbacks`) gave, kept until 0.3."""

__getattr__ = deprecated_names(__name__, DEPRECATED_NAMES)
