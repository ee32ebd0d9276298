"""Ledger events → spans: Langfuse observations, and with ``MapperOptions.semconv`` also
the OpenInference, OpenTelemetry GenAI and ``lgx.*`` attributes (pure: no I/O,
deterministic ids).

One :class:`ThreadMapper` per thread reads the thread's events in ``seq`` order and
returns :class:`SpanRecord` objects once an observation is complete (its end event has
been read). Everything a record holds comes from the ledger, so mapping the same events
twice gives byte-identical records. Like Langfuse's own callback handler, there is one
mapping per event kind (a graph run, a node, a tool, a model call, a retrieval, a point
event); the parts they share are in their own modules:

* :mod:`~langgraph_external.exporters._span_tree`: trace and span ids, which trace an
  event belongs to and which span is its parent;
* :mod:`~langgraph_external.exporters._span_values`: values as attribute text (previews
  with the record's address when too large);
* :mod:`~langgraph_external.exporters._semconv`: the OpenInference and GenAI attributes.

Example:
    >>> from langgraph_external.record.events import Event
    >>> m = ThreadMapper("t")
    >>> m.feed([Event(kind="run_start", thread_id="t", run_id="r1", seq=1, name="g")])
    []
    >>> [(r.name, r.trace_id == trace_id_for_run("r1")) for r in m.feed(
    ...     [Event(kind="run_end", thread_id="t", run_id="r1", seq=2, name="g")])]
    [('g', True)]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import ModuleType
from typing import Any

from langgraph_external.exporters._span_tree import (
    OpenRun,
    SpanRecord,
    SpanTree,
    Trace,
    chain_start,
    span_id_for_event,
    span_id_for_run,
    timestamp_ns,
    trace_id_for_run,
)
from langgraph_external.exporters._span_values import MapperOptions, SpanValues, json_text
from langgraph_external.record.events import Event

__all__ = [
    "END_KINDS",
    "POINT_KINDS",
    "MapperOptions",
    "SpanRecord",
    "ThreadMapper",
    "chain_start",
    "span_id_for_run",
    "trace_id_for_run",
]

TRACE_NAME = "langfuse.trace.name"
TRACE_TAGS = "langfuse.trace.tags"
TRACE_METADATA = "langfuse.trace.metadata"
SESSION_ID = "session.id"
USER_ID = "user.id"
OBS_TYPE = "langfuse.observation.type"
OBS_LEVEL = "langfuse.observation.level"
OBS_STATUS = "langfuse.observation.status_message"
OBS_INPUT = "langfuse.observation.input"
OBS_OUTPUT = "langfuse.observation.output"
OBS_METADATA = "langfuse.observation.metadata"
OBS_MODEL = "langfuse.observation.model.name"
OBS_MODEL_PARAMS = "langfuse.observation.model.parameters"
OBS_USAGE = "langfuse.observation.usage_details"
"""Langfuse's OTel attribute names (``langfuse/_client/attributes.py``, SDK 5.x)."""

_USAGE_KEYS = {"input_tokens": "input", "output_tokens": "output", "total_tokens": "total"}
_MEMORY_WRITES = ("memory_add", "memory_update", "memory_delete", "memory_erase", "memory_put")
_POINT_KINDS = ("interrupt", "resume", "policy_violation", "error", *_MEMORY_WRITES)
_POINT_LEVELS = {"policy_violation": "WARNING", "error": "ERROR"}  # the others: DEFAULT
_RETRIEVER_KINDS = ("retrieval", "memory_search", "memory_get")
END_KINDS = ("run_end", "node_end", "tool_end", "tool_error", "llm_end")
"""Kinds that complete a span of a run (when the event has a run id)."""
POINT_KINDS = (*_RETRIEVER_KINDS, *_POINT_KINDS)
"""Kinds that are a span by themselves."""
_QUERY_KEYS = ("query_hash", "collection", "namespace", "filter", "top_k", "limit", "threshold")


@dataclass
class ThreadMapper:
    """Maps one thread's events, in ``seq`` order, to finished observations."""

    thread_id: str
    options: MapperOptions = field(default_factory=MapperOptions)
    pos: int = 0
    legacy: bool = False
    """The thread keeps its workspace folder of the old rule (previews name files there)."""
    _tree: SpanTree = field(default_factory=SpanTree, init=False, repr=False, compare=False)
    _values: SpanValues = field(init=False, repr=False, compare=False)
    _conv: ModuleType | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._values = SpanValues(self.thread_id, self.options, legacy=self.legacy)
        if self.options.semconv:
            import langgraph_external.exporters._semconv as conventions  # lazy: optional extra

            self._conv = conventions

    # -- public ---------------------------------------------------------------------------
    def feed(self, events: list[Event]) -> list[SpanRecord]:
        """Read ``events`` (consecutive, after :attr:`pos`); return what they completed."""
        out: list[SpanRecord] = []
        for e in events:
            rec = self._one(e)
            if rec is not None:
                out.append(rec)
            self.pos = e.seq or self.pos
        return out

    # -- per kind -------------------------------------------------------------------------
    def _one(self, e: Event) -> SpanRecord | None:
        e = self._values.expand(e)
        k = e.kind
        if k == "run_start":
            self._run_start(e)
        elif k in ("node_start", "tool_start", "llm_start"):
            self._tree.start_run(e)
        elif k == "route":
            self._tree.route(e)
        elif k == "run_end":
            return self._run_end(e)
        elif k in _CLOSERS:
            closing = self._tree.closing(e)
            if closing is None:
                return None
            opened, trace, span_id = closing
            start = opened.event if opened else None
            name, attrs, conv = _CLOSERS[k](self, e, opened, start)
            return self._record(e, trace, span_id, self._tree.parent(e), name, start, attrs, conv)
        elif k in _RETRIEVER_KINDS:
            return self._retrieval(e)
        elif k in _POINT_KINDS:
            return self._point(e)
        elif k == "checkpoint" and self._conv is not None:
            self._tree.checkpoint(e)
        return None  # starts, checkpoints, writes, thread bookkeeping: not spans yet

    def _run_start(self, e: Event) -> None:
        if not e.run_id:
            return
        trace = self._tree.continued(e)
        if trace is None:
            if self._tree.forget_earlier_traces():
                self._values.forget()
            trace = self._tree.new_trace(e.run_id, self._trace_level(e))
        self._tree.start_graph(e, trace)

    def _run_end(self, e: Event) -> SpanRecord | None:
        trace = self._tree.graphs.get(e.run_id or "")
        if trace is None or e.run_id is None:
            return None
        start = self._tree.take_start(e)
        span_id = span_id_for_run(e.run_id)
        resumed = span_id != trace.root_span
        name = e.name or "LangGraph"
        output = e.payload.get("output")
        attrs = {
            OBS_TYPE: "agent",
            OBS_OUTPUT: self._values.value(output, e, "output"),
            **metadata(run_id=e.run_id, resumed=resumed or None, seq=e.seq),
        }
        given: Any = None
        if start is not None:  # a resume's input is its whole payload (the command)
            resume = start.payload.get("command") == "resume"
            given = start.payload if resume else start.payload.get("input")
            attrs[OBS_INPUT] = self._values.value(given, start, "input")
        if not resumed:
            attrs.update(self._tree.trace_attrs.get(trace.trace_id, {}))
            attrs[TRACE_NAME] = name
        conv = self._conv_attrs(
            e,
            lambda c: c.agent_attrs(name, self.thread_id),
            self._tree.last_checkpoint.get(e.checkpoint_ns or ""),
            ("input", attrs.get(OBS_INPUT), given),
            ("output", attrs[OBS_OUTPUT], output),
        )
        parent = trace.root_span if resumed else None
        return self._record(e, trace, span_id, parent, name, start, attrs, conv)

    def _node_end(self, e: Event, opened: OpenRun | None, start: Event | None) -> _Span:
        sp = start.payload if start else {}
        update = e.payload.get("update")
        attrs = {
            OBS_TYPE: "span",
            OBS_OUTPUT: self._values.value(update, e, "output"),
            **metadata(
                step=e.step,
                task_id=e.task_id,
                checkpoint_ns=e.checkpoint_ns or None,
                triggers=sp.get("triggers"),
                path=sp.get("path"),
                route=opened.route if opened else None,
                status=e.status,
                seq=e.seq,
            ),
        }
        conv = self._conv_attrs(
            e,
            lambda c: c.chain_attrs(self.thread_id),
            self._tree.step_checkpoint(e),
            ("output", attrs[OBS_OUTPUT], update),
        )
        return e.node or e.name or "node", attrs, conv

    def _tool_end(self, e: Event, _opened: OpenRun | None, start: Event | None) -> _Span:
        raw: Any = None
        if e.raw is not None:
            raw = e.raw.decode("utf-8", "replace")
        elif e.artifact:
            raw = {"artifact": self._values.artifact_path(e.artifact)}
        args = start.payload.get("args") if start else None
        result = e.payload.get("parsed", e.payload.get("result"))
        attrs = {
            OBS_TYPE: "tool",
            OBS_INPUT: self._values.value(args, start or e, "input"),
            OBS_OUTPUT: self._values.value(result, e, "output"),
            **metadata(
                tool_call_id=e.payload.get("tool_call_id"),
                raw_result=self._values.value(raw, e, "raw"),
                artifact=e.payload.get("artifact"),
                node=e.node,
                step=e.step,
                task_id=e.task_id,
                seq=e.seq,
            ),
        }
        conv = self._conv_attrs(
            e,
            lambda c: c.tool_attrs(
                name=e.name or "tool",
                call_id=e.payload.get("tool_call_id")
                or (start.payload.get("tool_call_id") if start else None),
                args=attrs[OBS_INPUT],
                result=attrs[OBS_OUTPUT],
            ),
            self._tree.step_checkpoint(e),
            ("input", attrs[OBS_INPUT], args),
            ("output", attrs[OBS_OUTPUT], result),
        )
        return e.name or "tool", attrs, conv

    def _llm_end(self, e: Event, _opened: OpenRun | None, start: Event | None) -> _Span:
        sp = start.payload if start else {}
        gens = e.payload.get("generations") or []
        output: Any = gens[0] if len(gens) == 1 else gens
        usage = {
            _USAGE_KEYS.get(k, k): int(v)
            for k, v in (e.payload.get("usage") or {}).items()
            if isinstance(v, (int, float))
        }
        params = sp.get("params") or {}
        messages, prompts = sp.get("messages"), sp.get("prompts")
        given = messages if "messages" in sp else prompts
        attrs: dict[str, Any] = {
            OBS_TYPE: "generation",
            OBS_MODEL: sp.get("model") or e.name,
            OBS_MODEL_PARAMS: json_text({k: v for k, v in params.items() if v is not None}),
            OBS_INPUT: self._values.value(given, start or e, "input"),
            OBS_OUTPUT: self._values.value(output, e, "output"),
            **metadata(
                tools=sp.get("tools"),
                prompt_context_hash=sp.get("prompt_context_hash"),
                node=e.node,
                step=e.step,
                task_id=e.task_id,
                seq=e.seq,
            ),
        }
        if usage:
            attrs[OBS_USAGE] = json_text(usage)
        conv = self._conv_attrs(
            e,
            lambda c: c.llm_attrs(
                thread_id=self.thread_id,
                model=sp.get("model") or e.name,
                params=params if isinstance(params, Mapping) else {},
                tools=sp.get("tools") if isinstance(sp.get("tools"), list) else None,
                messages=messages if isinstance(messages, list) else None,
                prompts=prompts if isinstance(prompts, list) else None,
                generations=gens if isinstance(gens, list) else [],
                usage=e.payload.get("usage") or {},
                clip=lambda text: self._values.clip(text, e),
            ),
            self._tree.step_checkpoint(e),
            ("input", attrs[OBS_INPUT], given),
            ("output", attrs[OBS_OUTPUT], output),
        )
        return e.name or "llm", attrs, conv

    def _retrieval(self, e: Event) -> SpanRecord | None:
        trace = self._tree.trace_of(e)
        if trace is None:
            return None
        p = e.payload
        hits = p.get("hits", p.get("results", p))
        query = p.get("query")
        if query is None:  # the memory adapter records a hash of the query, and its scope
            query = {k: p[k] for k in _QUERY_KEYS if p.get(k) is not None} or None
        attrs = {
            OBS_TYPE: "retriever",
            OBS_INPUT: self._values.value(query, e, "input"),
            OBS_OUTPUT: self._values.value(hits, e, "output"),
            **metadata(node=e.node, step=e.step, kind=e.kind, seq=e.seq),
        }
        span_id = span_id_for_run(e.run_id) if e.run_id else span_id_for_event(e.event_id)
        if e.run_id and e.kind != "retrieval":
            span_id = span_id_for_event(e.event_id)  # memory adapters share the node's run
        scope = p.get("collection") or p.get("namespace")
        source = "/".join(str(x) for x in scope) if isinstance(scope, list) else scope
        conv = self._conv_attrs(
            e,
            lambda c: c.retriever_attrs(
                thread_id=self.thread_id,
                query=p.get("query"),
                hits=hits,
                source=str(source) if source else None,
                clip=lambda text: self._values.clip(text, e),
            ),
            self._tree.step_checkpoint(e),
            ("input", attrs[OBS_INPUT], query),
            ("output", attrs[OBS_OUTPUT], hits),
        )
        return self._record(
            e, trace, span_id, self._tree.parent(e), e.name or e.kind, None, attrs, conv
        )

    def _point(self, e: Event) -> SpanRecord | None:
        self._tree.point(e)
        trace = self._tree.trace_of(e)
        if trace is None:
            return None
        level = _POINT_LEVELS.get(e.kind, "DEFAULT")
        attrs: dict[str, Any] = {
            OBS_TYPE: "event",
            OBS_LEVEL: level,
            OBS_OUTPUT: self._values.value(dict(e.payload), e, "output"),
            **metadata(kind=e.kind, status=e.status, node=e.node, step=e.step, seq=e.seq),
        }
        message = e.payload.get("error") or e.payload.get("reason") or e.payload.get("message")
        if level != "DEFAULT" and message:
            attrs[OBS_STATUS] = str(message)[:2000]
        name = e.kind if e.kind != "resume" or e.name != "checkpoint" else "resume (checkpoint)"
        parent = self._tree.graph_parent(e)

        def kind_attrs(c: ModuleType) -> dict[str, Any]:
            if e.kind != "policy_violation":
                return c.chain_attrs(self.thread_id)
            return {**c.chain_attrs(self.thread_id, c.GUARDRAIL), **c.policy_attrs(e.payload)}

        conv = self._conv_attrs(
            e,
            kind_attrs,
            e.checkpoint_id or self._tree.step_checkpoint(e),
            ("output", attrs[OBS_OUTPUT], dict(e.payload)),
        )
        return self._record(
            e, trace, span_id_for_event(e.event_id), parent, name, None, attrs, conv
        )

    def _conv_attrs(
        self,
        e: Event,
        kind_attrs: Callable[[ModuleType], dict[str, Any]],
        checkpoint_id: str | None,
        *values: tuple[str, str | None, Any],
    ) -> dict[str, Any] | None:
        """The other conventions' attributes of a span ending at ``e`` (``None`` when they
        are not sent): its kind's, ``input.*``/``output.*`` of each ``(part, text, value)``
        (plain text if the value was), then ``lgx.*`` and OpenInference ``metadata``."""
        conv = self._conv
        if conv is None:
            return None
        out = kind_attrs(conv)
        for part, text, value in values:
            is_text = isinstance(value, str) and text == value
            out.update(conv.io_attrs(part, text, is_text=is_text))
        ours = {
            "thread_id": self.thread_id,
            "run_id": e.run_id,
            "node": e.node,
            "step": e.step,
            "task_id": e.task_id,
            "checkpoint_ns": e.checkpoint_ns or None,
            "checkpoint_id": checkpoint_id,
            "kind": e.kind,
            "seq": e.seq,
        }
        out.update(conv.ours(ours))
        return out

    def _trace_level(self, e: Event) -> dict[str, Any]:
        """What every span of the trace carries (session, user, tags, environment), from
        the ``run_start`` payload that opened it."""
        p, options = e.payload, self.options
        out: dict[str, Any] = {SESSION_ID: self.thread_id}
        if p.get("user_id"):
            out[USER_ID] = str(p["user_id"])
        tags = p.get("tags")
        if tags:
            out[TRACE_TAGS] = [str(t) for t in tags]
            if self._conv is not None:
                out["tag.tags"] = [str(t) for t in tags]
        if options.environment:
            out["langfuse.environment"] = options.environment
        if options.release:
            out["langfuse.release"] = options.release
        out[f"{TRACE_METADATA}.thread_id"] = json_text(self.thread_id)
        return out

    def _record(
        self,
        e: Event,
        trace: Trace,
        span_id: str,
        parent: str | None,
        name: str,
        start: Event | None,
        attrs: dict[str, Any],
        conv: dict[str, Any] | None,
    ) -> SpanRecord:
        """The span ``e`` completes: its times, its attributes (Langfuse's first, then the
        other conventions ``conv``, then the trace's), and its status."""
        end_ns = timestamp_ns(e.ts)
        if start is not None:
            start_ns = timestamp_ns(start.ts)
        elif e.duration_ms:
            start_ns = timestamp_ns(e.ts - timedelta(milliseconds=e.duration_ms))
        else:
            start_ns = end_ns
        attrs = {k: v for k, v in attrs.items() if v is not None}
        if conv:  # the other conventions, after Langfuse's (whose bytes stay as they were)
            attrs.update((k, v) for k, v in conv.items() if v is not None)
        for k, v in self._tree.trace_attrs.get(trace.trace_id, {}).items():
            attrs.setdefault(k, v)
        error = None
        if e.status == "error":
            error = str(e.payload.get("error") or "error")[:2000]
            attrs[OBS_LEVEL] = "ERROR"
            attrs[OBS_STATUS] = f"{e.payload.get('error_type') or 'Error'}: {error}"
        elif e.status == "interrupted":
            attrs.setdefault(OBS_STATUS, "interrupted")
        return SpanRecord(
            trace_id=trace.trace_id,
            span_id=span_id,
            parent_id=parent if parent != span_id else None,
            name=name,
            start_ns=min(start_ns, end_ns),
            end_ns=end_ns,
            attributes=attrs,
            error=error,
            seq=e.seq or 0,
            ok=conv is not None and e.status == "ok",
        )


def metadata(**values: Any) -> dict[str, str]:
    """Langfuse's observation metadata attributes of ``values`` (``None`` left out)."""
    return {f"{OBS_METADATA}.{k}": json_text(v) for k, v in values.items() if v is not None}


_Span = tuple[str, dict[str, Any], dict[str, Any] | None]
"""What a run's end makes of it: the span's name, Langfuse's attributes, the others'."""

_CLOSERS: dict[str, Callable[[ThreadMapper, Event, OpenRun | None, Event | None], _Span]] = {
    "node_end": ThreadMapper._node_end,
    "tool_end": ThreadMapper._tool_end,
    "tool_error": ThreadMapper._tool_end,
    "llm_end": ThreadMapper._llm_end,
}
