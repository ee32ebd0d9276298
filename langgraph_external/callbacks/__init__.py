"""``AuditCallbackHandler``: records what a graph *does*, next to what it *stores*.

The checkpointer records state; this handler records behaviour: graph runs, every node
start/end with the update it returned (step, task id, triggers), router decisions, tool
calls (arguments, ``tool_call_id``, raw and parsed result, errors), chat-model calls (model,
parameters, the exact messages and tool schemas, a ``prompt_context_hash``, the answer,
requested tool calls, token usage), retriever hits, interrupts and resumes. Every event
carries the thread id, checkpoint namespace, LangChain run ids and the task id, which is
the join key with the checkpointer's ``writes`` events (``put_writes`` gets the same id).

The handler only builds a small event and enqueues it; payloads are rendered later by the
pipeline's writer. It never raises into the graph unless the pipeline is strict.

Example:
    >>> from langgraph_external.pipeline import Pipeline
    >>> from langgraph_external.sinks.memory import InMemoryLedger
    >>> handler = AuditCallbackHandler(Pipeline(InMemoryLedger()))
    >>> handler.run_inline
    True
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.load import dumpd
from langchain_core.messages import BaseMessage, messages_to_dict
from langgraph.callbacks import GraphCallbackHandler, GraphInterruptEvent, GraphResumeEvent

from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.errors import InvalidThreadIdError
from langgraph_external.events import Event, EventKind, canonical_json
from langgraph_external.pipeline import Pipeline
from langgraph_external.render import message_to_dict, to_readable
from langgraph_external.thread_ids import check_thread_id

__all__ = ["AsyncAuditCallbackHandler", "AuditCallbackHandler", "prompt_context_hash"]

logger = logging.getLogger("langgraph_external")

POLICY_HASH_KEY = "lgx_policy_hash"
"""Config metadata key carrying the content hash of the transition policy of a run."""

USER_ID_KEY = "langfuse_user_id"
"""Config metadata key of the run's user id (``External.config(user_id=...)``)."""

TAGS_KEY = "langfuse_tags"
"""Config metadata key of the run's tags (``External.config(tags=...)``)."""

NO_THREAD = "_no_thread"
"""Thread id recorded for runs invoked without ``configurable.thread_id``."""


@dataclass(slots=True)
class _Run:
    """What the handler remembers between a run's start and end callbacks."""

    kind: str
    thread_id: str
    root: str
    started: float
    node: str | None = None
    step: int | None = None
    task_id: str | None = None
    checkpoint_ns: str = ""
    name: str | None = None
    policy_hash: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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
    text = canonical_json(body)
    if key is not None:
        return key.tag("prompt", text)
    return hashlib.sha256(text.encode()).hexdigest()


def _task_ns(metadata: Mapping[str, Any]) -> tuple[str | None, str]:
    """(task id, namespace the node runs in) from ``langgraph_checkpoint_ns``."""
    ns = str(metadata.get("langgraph_checkpoint_ns") or "")
    if not ns:
        return None, ""
    parts = ns.split("|")
    last = parts[-1]
    task_id = last.split(":", 1)[1] if ":" in last else None
    return task_id, "|".join(parts[:-1])


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def _raw_bytes(value: Any) -> bytes | None:
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
    """

    run_inline = True  # only enqueues: call it directly, also from async code

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        record_chains: bool = False,
        checkpointed: Callable[[str], bool] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.checkpointed = checkpointed
        self._key: WorkspaceCipher | None = getattr(pipeline, "cipher", None)
        self.record_chains = record_chains
        self.raise_error = pipeline.strict
        self._runs: dict[UUID, _Run] = {}
        self._graph_runs: dict[str, _Run] = {}  # graph run id -> run (interrupt events)

    def root_run_id(self, run_id: UUID | str | None) -> str | None:
        """The root run id of a run in progress (``None`` if the handler does not know it).

        It is the ``run_id`` of the ``run_start`` event of the graph invocation, and the
        ``root_run_id`` of every event of that invocation: what other sources (the memory
        adapter) record to join with the run.

        Example:
            >>> from langgraph_external.sinks.memory import InMemoryLedger
            >>> from langgraph_external.pipeline import Pipeline
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
        run = self._runs.get(key)
        return run.root if run is not None else None

    # -- plumbing ----------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        try:
            check_thread_id(event.thread_id)
        except InvalidThreadIdError as exc:
            # refused as the checkpointer refuses it, before anything is buffered: the
            # ledger could never store it (and recording it under an escaped id would
            # file the run under another thread)
            if self.pipeline.strict:
                raise
            logger.warning("langgraph-external: not recording a %s event: %s", event.kind, exc)
            return
        try:
            self.pipeline.emit(event)
        except Exception:
            if self.pipeline.strict:
                raise
            logger.exception("langgraph-external could not record a %s event", event.kind)

    def _parent(self, parent_run_id: UUID | None) -> _Run | None:
        return self._runs.get(parent_run_id) if parent_run_id is not None else None

    def _start(
        self,
        kind: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: Mapping[str, Any] | None,
        name: str | None,
    ) -> _Run:
        md = metadata or {}
        parent = self._parent(parent_run_id)
        thread = md.get("thread_id")
        if thread is None:
            thread = parent.thread_id if parent else NO_THREAD
        task_id, ns = _task_ns(md)
        run = _Run(
            kind=kind,
            thread_id=str(thread),
            root=parent.root if parent else str(run_id),
            started=time.perf_counter(),
            node=md.get("langgraph_node") or (parent.node if parent else None),
            step=md.get("langgraph_step"),
            task_id=task_id,
            checkpoint_ns=ns,
            name=name,
            policy_hash=md.get(POLICY_HASH_KEY) or (parent.policy_hash if parent else None),
        )
        self._runs[run_id] = run
        return run

    def _event(
        self, kind: EventKind, run: _Run, run_id: UUID, parent_run_id: UUID | None, **fields: Any
    ) -> Event:
        if run.policy_hash is not None:  # a guarded run: every event names its policy
            fields["payload"] = {**fields.get("payload", {}), "policy_hash": run.policy_hash}
        return Event(
            kind=kind.value,
            thread_id=run.thread_id,
            checkpoint_ns=run.checkpoint_ns,
            run_id=str(run_id),
            parent_run_id=str(parent_run_id) if parent_run_id else None,
            root_run_id=run.root,
            node=run.node,
            step=run.step,
            task_id=run.task_id,
            name=fields.pop("name", run.name),
            **fields,
        )

    def _finish(
        self,
        kind: EventKind,
        run_id: UUID,
        parent_run_id: UUID | None,
        *,
        status: str,
        payload: dict[str, Any],
        error: BaseException | None = None,
        **fields: Any,
    ) -> None:
        """Emit the end of a run started earlier (nothing if the start was not seen)."""
        run = self._runs.pop(run_id, None)
        if run is None:
            return
        if error is not None:
            payload = {**payload, "error": str(error), "error_type": type(error).__name__}
        self._emit(
            self._event(
                kind,
                run,
                run_id,
                parent_run_id,
                status=status,
                duration_ms=_ms(run.started),
                payload=payload,
                **fields,
            )
        )

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
        parent = self._parent(parent_run_id)
        if parent is None:
            run = self._start("graph", run_id, parent_run_id, md, name)
            self._graph_runs[str(run_id)] = run
            payload: dict[str, Any] = {"input": inputs, "exact": _Exact(inputs)}
            resume = getattr(inputs, "resume", None)
            if resume is not None:
                payload = {"command": "resume"}
                self._emit(
                    self._event(
                        EventKind.RESUME,
                        run,
                        run_id,
                        None,
                        payload={"value": resume},
                        build=_render_payload,
                    )
                )
            if md.get(USER_ID_KEY) is not None:
                payload["user_id"] = str(md[USER_ID_KEY])
            run_tags = md.get(TAGS_KEY) or tags
            if run_tags:
                payload["tags"] = [str(t) for t in run_tags]
            self._emit(
                self._event(
                    EventKind.RUN_START, run, run_id, None, payload=payload, build=_render_payload
                )
            )
            return
        is_node = (
            name is not None
            and name == md.get("langgraph_node")
            and any(t.startswith("graph:step:") for t in (tags or ()))
        )
        if is_node:
            run = self._start("node", run_id, parent_run_id, md, name)
            self._emit(
                self._event(
                    EventKind.NODE_START,
                    run,
                    run_id,
                    parent_run_id,
                    payload={
                        "triggers": list(md.get("langgraph_triggers") or ()),
                        "path": [str(p) for p in md.get("langgraph_path") or ()],
                    },
                )
            )
            return
        kind = "router" if parent.kind == "node" and md.get("langgraph_node") else "chain"
        run = self._start(kind, run_id, parent_run_id, md, name)
        run.node = parent.node
        run.step = parent.step if run.step is None else run.step
        run.task_id = parent.task_id or run.task_id
        run.checkpoint_ns = parent.checkpoint_ns

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """A node returns its update (recorded), a router decides, the graph finishes."""
        run = self._runs.get(run_id)
        if run is None:
            return
        build: Callable[[Event], Event] = _render_payload
        if run.kind == "graph":
            self._graph_runs.pop(str(run_id), None)
            kind, payload = EventKind.RUN_END, {"output": outputs}
            if self.checkpointed is not None and self.checkpointed(run.thread_id):
                build = _render_run_end
        elif run.kind == "node":
            kind, payload = EventKind.NODE_END, {"update": outputs}
            self._note_step(run, interrupted=())
        elif run.kind == "router" and isinstance(outputs, (str, list, tuple)):
            kind, payload = EventKind.ROUTE, {"destination": outputs}
        else:
            self._runs.pop(run_id, None)
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
        run = self._runs.get(run_id)
        if run is None or run.kind not in ("graph", "node"):
            self._runs.pop(run_id, None)
            return
        if run.kind == "graph":
            self._graph_runs.pop(str(run_id), None)
        interrupted = type(error).__name__ in ("GraphInterrupt", "ParentCommand", "GraphBubbleUp")
        if run.kind == "node" and interrupted:
            raised = error.args[0] if error.args else ()
            ids = [getattr(i, "id", None) for i in raised] if isinstance(raised, Sequence) else []
            self._note_step(run, interrupted=[i for i in ids if i])
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
        run = self._start("tool", run_id, parent_run_id, metadata, name)
        run.extra["tool_call_id"] = kwargs.get("tool_call_id")
        self._emit(
            self._event(
                EventKind.TOOL_START,
                run,
                run_id,
                parent_run_id,
                payload={
                    "args": inputs if inputs is not None else input_str,
                    "tool_call_id": kwargs.get("tool_call_id"),
                },
                build=_render_payload,
            )
        )

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """A tool returns: the raw result as bytes, and the parsed value."""
        run = self._runs.get(run_id)
        if run is None:
            return
        content = getattr(output, "content", output)
        failed = getattr(output, "status", "success") == "error"  # ToolNode's handled errors
        self._finish(
            EventKind.TOOL_ERROR if failed else EventKind.TOOL_END,
            run_id,
            parent_run_id,
            status="error" if failed else "ok",
            raw=_raw_bytes(content),
            payload={
                "tool_call_id": getattr(output, "tool_call_id", None)
                or run.extra.get("tool_call_id"),
                "result": content,
                "artifact": getattr(output, "artifact", None),
                "exact": _Exact(output) if hasattr(output, "content") else None,
            },
            build=_render_tool_result,
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
        run = self._runs.get(run_id)
        call_id = run.extra.get("tool_call_id") if run else None
        self._finish(
            EventKind.TOOL_ERROR,
            run_id,
            parent_run_id,
            status="error",
            payload={"tool_call_id": call_id},
            error=error,
        )

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
        params = dict(kwargs.get("invocation_params") or {})
        name = kwargs.get("name") or (serialized or {}).get("name")
        run = self._start("llm", run_id, parent_run_id, metadata, name)
        batch = [list(m) for m in messages]
        self._emit(
            self._event(
                EventKind.LLM_START,
                run,
                run_id,
                parent_run_id,
                payload={"params": params, "messages": batch},
                build=functools.partial(_render_llm_start, key=self._key),
            )
        )

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
        params = dict(kwargs.get("invocation_params") or {})
        run = self._start("llm", run_id, parent_run_id, metadata, kwargs.get("name"))
        self._emit(
            self._event(
                EventKind.LLM_START,
                run,
                run_id,
                parent_run_id,
                payload={"params": params, "prompts": list(prompts)},
                build=functools.partial(_render_llm_start, key=self._key),
            )
        )

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
            build=_render_llm_end,
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
        run = self._start("retriever", run_id, parent_run_id, metadata, name)
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
        run = self._runs.get(run_id)
        self._finish(
            EventKind.RETRIEVAL,
            run_id,
            parent_run_id,
            status="ok",
            payload={
                "query": run.extra.get("query") if run else None,
                "documents": list(documents),
            },
            build=_render_retrieval,
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
        run = self._runs.get(run_id)
        self._finish(
            EventKind.RETRIEVAL,
            run_id,
            parent_run_id,
            status="error",
            payload={"query": run.extra.get("query") if run else None},
            error=error,
        )

    # -- interrupts --------------------------------------------------------------------
    def _note_step(self, run: _Run, *, interrupted: Sequence[str]) -> None:
        """Remember, on the graph run, where its nodes ended: the last root step and its
        nodes, and for each interrupt id the node (innermost and root) that raised it."""
        graph = self._graph_runs.get(run.root)
        if graph is None:
            return
        where = {"node": run.node, "step": run.step, "task_id": run.task_id}
        for iid in interrupted:
            seen = graph.extra.setdefault("interrupts", {}).setdefault(str(iid), {})
            seen.setdefault("inner", {**where, "checkpoint_ns": run.checkpoint_ns})
            if run.checkpoint_ns == "":
                seen["root"] = where
        if run.checkpoint_ns == "" and run.step is not None:
            if graph.extra.get("last_step") != run.step:
                graph.extra["last_step"], graph.extra["last_nodes"] = run.step, []
            if run.node not in graph.extra["last_nodes"]:
                graph.extra["last_nodes"].append(run.node)

    def on_interrupt(self, event: GraphInterruptEvent) -> None:
        """The graph paused: the interrupt values and where (node, step, task).

        Each interrupt names the node that raised it (``node``, ``step``, ``task_id`` and
        ``checkpoint_ns`` of the task that called ``interrupt()``, in a subgraph too); the
        event's own ``node`` and ``step`` are the root graph's task (the node when all
        interrupts come from one node). A static interrupt (``interrupt_before`` /
        ``interrupt_after``) raises none: its step is the one about to run or just run,
        and ``interrupt_after`` names the nodes of that step.
        """
        run = self._graph_runs.get(str(event.run_id)) if event.run_id else None
        thread = run.thread_id if run else NO_THREAD
        known: Mapping[str, Any] = run.extra.get("interrupts", {}) if run else {}
        items = []
        roots: list[Mapping[str, Any]] = []
        for i in event.interrupts:
            iid = getattr(i, "id", None)
            item: dict[str, Any] = {"id": iid, "value": getattr(i, "value", i)}
            seen = known.get(str(iid)) or {}
            if seen.get("inner"):
                item.update(seen["inner"])
            if seen.get("root"):
                roots.append(seen["root"])
            items.append(item)
        nodes = sorted({str(r["node"]) for r in roots if r.get("node")})
        steps = {r["step"] for r in roots if r.get("step") is not None}
        node = nodes[0] if len(nodes) == 1 else None
        step = next(iter(steps)) if len(steps) == 1 else None
        task_id = roots[0].get("task_id") if len(roots) == 1 else None
        payload: dict[str, Any] = {"interrupts": items}
        if not items and run is not None and run.extra.get("last_step") is not None:
            last = int(run.extra["last_step"])
            if event.status == "interrupt_after":
                step = last
                payload["nodes"] = list(run.extra.get("last_nodes") or [])
                node = payload["nodes"][0] if len(payload["nodes"]) == 1 else None
            elif event.status == "interrupt_before":
                step = last + 1
        if len(nodes) > 1:
            payload["nodes"] = nodes
        self._emit(
            Event(
                kind=EventKind.INTERRUPT.value,
                thread_id=thread,
                checkpoint_ns="|".join(event.checkpoint_ns),
                checkpoint_id=event.checkpoint_id,
                run_id=str(event.run_id) if event.run_id else None,
                root_run_id=run.root if run else None,
                node=node,
                step=step,
                task_id=task_id,
                status=event.status,
                payload=payload,
                build=_render_payload,
            )
        )

    def on_resume(self, event: GraphResumeEvent) -> None:
        """The graph resumed from a checkpoint (the value is on the ``resume`` event)."""
        run = self._graph_runs.get(str(event.run_id)) if event.run_id else None
        if run is None:
            return
        self._emit(
            Event(
                kind=EventKind.RESUME.value,
                thread_id=run.thread_id,
                checkpoint_ns="|".join(event.checkpoint_ns),
                checkpoint_id=event.checkpoint_id,
                run_id=str(event.run_id),
                root_run_id=run.root,
                status=event.status,
                name="checkpoint",
                payload={"from_checkpoint": event.checkpoint_id},
            )
        )


class AsyncAuditCallbackHandler(AuditCallbackHandler):
    """The same handler for async graphs (it never blocks, so it runs inline)."""


# -- deferred payload rendering (runs on the pipeline's writer thread) -------------------
class _Exact:
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
    if isinstance(value, _Exact):
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
    out = {k: (exact(v) if isinstance(v, _Exact) else to_readable(v)) for k, v in payload.items()}
    if out.get("exact") is None:
        out.pop("exact", None)
    return out


def _render_payload(event: Event) -> Event:
    return event.replace(payload=_render_exact(event.payload), build=None)


OUTPUT_TAIL = 20
"""Items kept of a long list in the output of a checkpointed thread's run (``run_end``)."""


def _tail(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and len(value) > OUTPUT_TAIL:
        return {"$items": len(value), "$tail": to_readable(list(value[-OUTPUT_TAIL:]))}
    return to_readable(value)


def _render_run_end(event: Event) -> Event:
    """A checkpointed run's output: its long lists cut to count and tail (O(change))."""
    output = event.payload.get("output")
    if isinstance(output, Mapping):
        rendered: Any = {str(k): _tail(v) for k, v in output.items()}
    else:
        rendered = _tail(output)
    payload = {**event.payload, "output": rendered, "state": "checkpoint"}
    return event.replace(payload=payload, build=None)


def _render_tool_result(event: Event) -> Event:
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


def _render_llm_start(event: Event, key: WorkspaceCipher | None = None) -> Event:
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
        out["prompt_context_hash"] = prompt_context_hash(flat, tools, params, key=key)
    else:
        out["prompts"] = p.get("prompts")
        out["prompt_context_hash"] = prompt_context_hash(
            [{"role": "user", "content": t} for t in p.get("prompts") or []],
            tools,
            params,
            key=key,
        )
    return event.replace(payload=out, build=None)


def _render_llm_end(event: Event) -> Event:
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
    out["tool_calls"] = tool_calls
    out["usage"] = usage
    return event.replace(payload=out, build=None)


def _render_retrieval(event: Event) -> Event:
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
