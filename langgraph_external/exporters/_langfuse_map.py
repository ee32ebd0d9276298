"""Ledger events → spans: Langfuse observations, and with ``MapperOptions.semconv`` also
the OpenInference, OpenTelemetry GenAI and ``lgx.*`` attributes (pure: no I/O,
deterministic ids; :mod:`~langgraph_external.exporters._semconv`).

One :class:`ThreadMapper` per thread reads the thread's events in ``seq`` order and
returns :class:`SpanRecord` objects once an observation is complete (its end event has
been read). Everything a record holds comes from the ledger, so mapping the same events
twice gives byte-identical records:

* trace id: ``sha256(root run id)[:16]`` of the run that opened the trace — the same value
  as ``Langfuse.create_trace_id(seed=root_run_id)``. A resume (``Command(resume=...)``
  after an interrupt, in any process) continues the trace of the run it resumes.
* span id: ``sha256("run|" + run_id)[:8]`` for runs (graph, node, tool, model,
  retriever), ``sha256("event|" + event_id)[:8]`` for point events (interrupt, resume,
  policy violation, error, memory writes).

Example:
    >>> trace_id_for_run("run-1") == hashlib.sha256(b"run-1").digest()[:16].hex()
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langgraph_external.record.events import Event
from langgraph_external.record.namespaces import split_task
from langgraph_external.workspace.files import encode_thread_id

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
_POINT_KINDS = {
    "interrupt": ("event", "DEFAULT"),
    "resume": ("event", "DEFAULT"),
    "policy_violation": ("event", "WARNING"),
    "error": ("event", "ERROR"),
    "memory_add": ("event", "DEFAULT"),
    "memory_update": ("event", "DEFAULT"),
    "memory_delete": ("event", "DEFAULT"),
    "memory_erase": ("event", "DEFAULT"),
    "memory_put": ("event", "DEFAULT"),
}
_RETRIEVER_KINDS = ("retrieval", "memory_search", "memory_get")
END_KINDS = ("run_end", "node_end", "tool_end", "tool_error", "llm_end")
"""Kinds that complete a span of a run (when the event has a run id)."""
POINT_KINDS = (*_RETRIEVER_KINDS, *_POINT_KINDS)
"""Kinds that are a span by themselves."""
_QUERY_KEYS = ("query_hash", "collection", "namespace", "filter", "top_k", "limit", "threshold")


def trace_id_for_run(root_run_id: str) -> str:
    """The Langfuse trace id (32 hex) of the run ``root_run_id`` and its resumes.

    Equal to ``Langfuse.create_trace_id(seed=root_run_id)``.
    """
    return hashlib.sha256(root_run_id.encode()).digest()[:16].hex()


def span_id_for_run(run_id: str) -> str:
    """The observation id (16 hex) of a graph, node, tool, model or retriever run."""
    return hashlib.sha256(f"run|{run_id}".encode()).digest()[:8].hex()


def _span_id_for_event(event_id: str) -> str:
    return hashlib.sha256(f"event|{event_id}".encode()).digest()[:8].hex()


@dataclass(frozen=True)
class SpanRecord:
    """One finished observation, ready to encode as an OTLP span."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    error: str | None = None
    seq: int = 0  # the ledger event that completed it
    ok: bool = False  # OTel status OK (only with semantic conventions; Langfuse: unset)


@dataclass
class _Chain:
    """A trace: a run and every resume of it."""

    trace_id: str
    root_span: str
    interrupted: bool = False


@dataclass
class _Open:
    """A run whose start was read and whose end was not yet."""

    event: Event
    route: Any = None


def _ns(ts: datetime) -> int:
    return int(ts.timestamp()) * 1_000_000_000 + ts.microsecond * 1000


def _is_continuation(e: Event) -> bool:
    p = e.payload
    return p.get("command") == "resume" or ("input" in p and p.get("input") is None)


@dataclass
class MapperOptions:
    """How values are rendered into attributes."""

    max_value_bytes: int = 256 * 1024
    """A value whose JSON is larger becomes a preview plus its address in the workspace."""
    preview_chars: int = 2000
    environment: str | None = None
    release: str | None = None
    semconv: bool = False
    """Also the OpenInference, OpenTelemetry GenAI and our own (``lgx.*``) attributes."""


@dataclass
class ThreadMapper:
    """Maps one thread's events, in ``seq`` order, to finished observations."""

    thread_id: str
    options: MapperOptions = field(default_factory=MapperOptions)
    pos: int = 0
    _open: dict[str, _Open] = field(default_factory=dict)
    _runs: dict[str, str] = field(default_factory=dict)  # run id -> span id (recorded runs)
    _graph_chain: dict[str, _Chain] = field(default_factory=dict)  # graph run id -> trace
    _task_node: dict[tuple[str, str], str] = field(default_factory=dict)
    _last_chain: _Chain | None = None
    _trace_attrs: dict[str, dict[str, Any]] = field(default_factory=dict)
    _offloaded: dict[str, str] = field(default_factory=dict)  # event id -> artifact digest
    _ckpt: dict[tuple[str, int], str] = field(default_factory=dict)  # (ns, step) -> id
    _last_ckpt: dict[str, str] = field(default_factory=dict)  # ns -> latest checkpoint id
    _conv: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.options.semconv:  # the attribute names come with the export's extra
            from langgraph_external.exporters import _semconv

            self._conv = _semconv

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
        e = self._expand(e)
        k = e.kind
        if k == "run_start":
            self._run_start(e)
            return None
        if k in ("node_start", "tool_start", "llm_start"):
            if e.run_id:
                self._open[e.run_id] = _Open(e)
                self._runs[e.run_id] = span_id_for_run(e.run_id)
                if k == "node_start" and e.task_id and e.root_run_id:
                    self._task_node[(e.root_run_id, e.task_id)] = e.run_id
            return None
        if k == "route":
            parent = self._open.get(e.parent_run_id or "")
            if parent is not None:
                parent.route = e.payload.get("destination")
            return None
        if k == "run_end":
            return self._run_end(e)
        if k == "node_end":
            return self._node_end(e)
        if k in ("tool_end", "tool_error"):
            return self._tool_end(e)
        if k == "llm_end":
            return self._llm_end(e)
        if k in _RETRIEVER_KINDS:
            return self._retrieval(e)
        if k in _POINT_KINDS:
            return self._point(e)
        if k == "checkpoint" and self._conv is not None and e.checkpoint_id:
            ns = e.checkpoint_ns or ""
            if e.step is not None:
                self._ckpt[(ns, e.step)] = e.checkpoint_id
            self._last_ckpt[ns] = e.checkpoint_id
        return None  # checkpoints, writes, thread bookkeeping: not behaviour

    def _run_start(self, e: Event) -> None:
        if not e.run_id:
            return
        last = self._last_chain
        if last is not None and last.interrupted and _is_continuation(e):
            chain = last
            chain.interrupted = False
        else:
            # a new trace: what earlier traces needed is no longer needed (a late event of
            # an earlier run still finds its trace: the id comes from its root run id)
            self._forget_earlier_traces()
            self._ckpt.clear()  # a trace's checkpoints are read from its first event on
            self._last_ckpt.clear()
            chain = _Chain(trace_id_for_run(e.run_id), span_id_for_run(e.run_id))
            self._trace_attrs[chain.trace_id] = self._trace_level(e)
        self._last_chain = chain
        self._graph_chain[e.run_id] = chain
        self._runs[e.run_id] = span_id_for_run(e.run_id)
        self._open[e.run_id] = _Open(e)

    def _run_end(self, e: Event) -> SpanRecord | None:
        chain = self._graph_chain.get(e.run_id or "")
        if chain is None or e.run_id is None:
            return None
        start = self._take_start(e)
        span_id = span_id_for_run(e.run_id)
        resumed = span_id != chain.root_span
        attrs = {
            OBS_TYPE: "agent",
            OBS_OUTPUT: self._value(e.payload.get("output"), e, "output"),
            **self._meta({"run_id": e.run_id, "resumed": resumed or None, "seq": e.seq}),
        }
        given: Any = None
        if start is not None and start.payload.get("command") == "resume":
            given = start.payload
            attrs[OBS_INPUT] = self._value(given, start, "input")
        elif start is not None:
            given = start.payload.get("input")
            attrs[OBS_INPUT] = self._value(given, start, "input")
        if not resumed:
            trace = self._trace_attrs.get(chain.trace_id, {})
            attrs.update(trace)
            attrs[TRACE_NAME] = e.name or "LangGraph"
        conv = None
        if self._conv is not None:
            conv = {
                **self._conv.agent_attrs(e.name or "LangGraph", self.thread_id),
                **self._io("input", attrs.get(OBS_INPUT), given),
                **self._io("output", attrs[OBS_OUTPUT], e.payload.get("output")),
                **self._ours(e, self._last_ckpt.get(e.checkpoint_ns or "")),
            }
        return self._record(
            e,
            chain,
            span_id,
            chain.root_span if resumed else None,
            e.name or "LangGraph",
            start,
            attrs,
            conv,
        )

    def _closing(self, e: Event) -> tuple[_Open | None, _Chain, str] | None:
        """For an end event: the run it closes (if its start was read), its trace, its id."""
        if not e.run_id:
            return None
        chain = self._chain_of(e)
        if chain is None:
            return None
        return self._open.pop(e.run_id, None), chain, span_id_for_run(e.run_id)

    def _node_end(self, e: Event) -> SpanRecord | None:
        closing = self._closing(e)
        if closing is None:
            return None
        opened, chain, span_id = closing
        start = opened.event if opened else None
        sp = start.payload if start else {}
        meta = {
            "step": e.step,
            "task_id": e.task_id,
            "checkpoint_ns": e.checkpoint_ns or None,
            "triggers": sp.get("triggers"),
            "path": sp.get("path"),
            "route": opened.route if opened else None,
            "status": e.status,
            "seq": e.seq,
        }
        attrs = {
            OBS_TYPE: "span",
            OBS_OUTPUT: self._value(e.payload.get("update"), e, "output"),
            **self._meta(meta),
        }
        conv = None
        if self._conv is not None:
            conv = {
                **self._conv.chain_attrs(self.thread_id),
                **self._io("output", attrs[OBS_OUTPUT], e.payload.get("update")),
                **self._ours(e, self._step_checkpoint(e)),
            }
        return self._record(
            e, chain, span_id, self._parent(e), e.node or e.name or "node", start, attrs, conv
        )

    def _tool_end(self, e: Event) -> SpanRecord | None:
        closing = self._closing(e)
        if closing is None:
            return None
        opened, chain, span_id = closing
        start = opened.event if opened else None
        raw: Any = None
        if e.raw is not None:
            raw = e.raw.decode("utf-8", "replace")
        elif e.artifact:
            raw = {"artifact": self._artifact_path(e.artifact)}
        attrs = {
            OBS_TYPE: "tool",
            OBS_INPUT: self._value(
                start.payload.get("args") if start else None, start or e, "input"
            ),
            OBS_OUTPUT: self._value(e.payload.get("parsed", e.payload.get("result")), e, "output"),
            **self._meta(
                {
                    "tool_call_id": e.payload.get("tool_call_id"),
                    "raw_result": self._value(raw, e, "raw"),
                    "artifact": e.payload.get("artifact"),
                    "node": e.node,
                    "step": e.step,
                    "task_id": e.task_id,
                    "seq": e.seq,
                }
            ),
        }
        conv = None
        if self._conv is not None:
            args = start.payload.get("args") if start else None
            result = e.payload.get("parsed", e.payload.get("result"))
            conv = {
                **self._conv.tool_attrs(
                    name=e.name or "tool",
                    call_id=e.payload.get("tool_call_id")
                    or (start.payload.get("tool_call_id") if start else None),
                    args=attrs[OBS_INPUT],
                    result=attrs[OBS_OUTPUT],
                ),
                **self._io("input", attrs[OBS_INPUT], args),
                **self._io("output", attrs[OBS_OUTPUT], result),
                **self._ours(e, self._step_checkpoint(e)),
            }
        return self._record(
            e, chain, span_id, self._parent(e), e.name or "tool", start, attrs, conv
        )

    def _llm_end(self, e: Event) -> SpanRecord | None:
        closing = self._closing(e)
        if closing is None:
            return None
        opened, chain, span_id = closing
        start = opened.event if opened else None
        sp = start.payload if start else {}
        gens = e.payload.get("generations") or []
        output: Any = gens[0] if len(gens) == 1 else gens
        usage = {
            _USAGE_KEYS.get(k, k): int(v)
            for k, v in (e.payload.get("usage") or {}).items()
            if isinstance(v, (int, float))
        }
        params = sp.get("params") or {}
        attrs: dict[str, Any] = {
            OBS_TYPE: "generation",
            OBS_MODEL: sp.get("model") or e.name,
            OBS_MODEL_PARAMS: _json({k: v for k, v in params.items() if v is not None}),
            OBS_INPUT: self._value(
                sp.get("messages") if "messages" in sp else sp.get("prompts"), start or e, "input"
            ),
            OBS_OUTPUT: self._value(output, e, "output"),
            **self._meta(
                {
                    "tools": sp.get("tools"),
                    "prompt_context_hash": sp.get("prompt_context_hash"),
                    "node": e.node,
                    "step": e.step,
                    "task_id": e.task_id,
                    "seq": e.seq,
                }
            ),
        }
        if usage:
            attrs[OBS_USAGE] = _json(usage)
        conv = None
        if self._conv is not None:
            messages = sp.get("messages")
            prompts = sp.get("prompts")
            conv = {
                **self._conv.llm_attrs(
                    thread_id=self.thread_id,
                    model=sp.get("model") or e.name,
                    params=params if isinstance(params, Mapping) else {},
                    tools=sp.get("tools") if isinstance(sp.get("tools"), list) else None,
                    messages=messages if isinstance(messages, list) else None,
                    prompts=prompts if isinstance(prompts, list) else None,
                    generations=gens if isinstance(gens, list) else [],
                    usage=e.payload.get("usage") or {},
                    clip=lambda text: self._clip(text, e),
                ),
                **self._io("input", attrs[OBS_INPUT], messages if "messages" in sp else prompts),
                **self._io("output", attrs[OBS_OUTPUT], output),
                **self._ours(e, self._step_checkpoint(e)),
            }
        return self._record(e, chain, span_id, self._parent(e), e.name or "llm", start, attrs, conv)

    def _retrieval(self, e: Event) -> SpanRecord | None:
        chain = self._chain_of(e)
        if chain is None:
            return None
        p = e.payload
        hits = p.get("hits", p.get("results", p))
        query = p.get("query")
        if query is None:  # the memory adapter records a hash of the query, and its scope
            query = {k: p[k] for k in _QUERY_KEYS if p.get(k) is not None} or None
        attrs = {
            OBS_TYPE: "retriever",
            OBS_INPUT: self._value(query, e, "input"),
            OBS_OUTPUT: self._value(hits, e, "output"),
            **self._meta({"node": e.node, "step": e.step, "kind": e.kind, "seq": e.seq}),
        }
        span_id = span_id_for_run(e.run_id) if e.run_id else _span_id_for_event(e.event_id)
        if e.run_id and e.kind != "retrieval":
            span_id = _span_id_for_event(e.event_id)  # memory adapters share the node's run
        conv = None
        if self._conv is not None:
            scope = p.get("collection") or p.get("namespace")
            source = "/".join(str(x) for x in scope) if isinstance(scope, list) else scope
            conv = {
                **self._conv.retriever_attrs(
                    thread_id=self.thread_id,
                    query=p.get("query"),
                    hits=hits,
                    source=str(source) if source else None,
                    clip=lambda text: self._clip(text, e),
                ),
                **self._io("input", attrs[OBS_INPUT], query),
                **self._io("output", attrs[OBS_OUTPUT], hits),
                **self._ours(e, self._step_checkpoint(e)),
            }
        return self._record(e, chain, span_id, self._parent(e), e.name or e.kind, None, attrs, conv)

    def _point(self, e: Event) -> SpanRecord | None:
        last = self._last_chain
        if (
            e.kind == "resume"
            and e.run_id
            and e.run_id not in self._graph_chain
            and last is not None
            and last.interrupted
        ):
            # the resume value is recorded just before the resumed run starts: same trace
            self._graph_chain[e.run_id] = last
        if e.kind == "interrupt":
            chain = self._graph_chain.get(e.run_id or "")
            if chain is not None:
                chain.interrupted = True
        chain = self._chain_of(e)
        if chain is None:
            return None
        otype, level = _POINT_KINDS[e.kind]
        if e.kind == "error" and e.status == "quarantined":
            level = "ERROR"
        attrs: dict[str, Any] = {
            OBS_TYPE: otype,
            OBS_LEVEL: level,
            OBS_OUTPUT: self._value(dict(e.payload), e, "output"),
            **self._meta(
                {"kind": e.kind, "status": e.status, "node": e.node, "step": e.step, "seq": e.seq}
            ),
        }
        message = e.payload.get("error") or e.payload.get("reason") or e.payload.get("message")
        if level != "DEFAULT" and message:
            attrs[OBS_STATUS] = str(message)[:2000]
        name = e.kind if e.kind != "resume" or e.name != "checkpoint" else "resume (checkpoint)"
        parent = self._graph_parent(e)
        conv = None
        if self._conv is not None:
            if e.kind == "policy_violation":
                kind_attrs = {
                    **self._conv.chain_attrs(self.thread_id, self._conv.GUARDRAIL),
                    **self._conv.policy_attrs(e.payload),
                }
            else:
                kind_attrs = self._conv.chain_attrs(self.thread_id)
            conv = {
                **kind_attrs,
                **self._io("output", attrs[OBS_OUTPUT], dict(e.payload)),
                **self._ours(e, e.checkpoint_id or self._step_checkpoint(e)),
            }
        return self._record(
            e, chain, _span_id_for_event(e.event_id), parent, name, None, attrs, conv
        )

    # -- helpers --------------------------------------------------------------------------
    def _step_checkpoint(self, e: Event) -> str | None:
        """The checkpoint the event's step ran from (the latest of step - 1 in its namespace)."""
        if e.step is None:
            return None
        return self._ckpt.get((e.checkpoint_ns or "", e.step - 1))

    def _ours(self, e: Event, checkpoint_id: str | None) -> dict[str, Any]:
        """``lgx.*`` attributes and OpenInference ``metadata`` of a span ending at ``e``."""
        assert self._conv is not None
        return self._conv.ours(
            {
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
        )

    def _io(self, part: str, text: str | None, value: Any) -> dict[str, Any]:
        """``input.*``/``output.*`` of a value rendered as ``text`` (plain text if it was)."""
        assert self._conv is not None
        return self._conv.io_attrs(part, text, is_text=isinstance(value, str) and text == value)

    def _clip(self, text: str, e: Event) -> str:
        """``text``, or its first characters and the record's address when too large."""
        if len(text.encode("utf-8", "replace")) <= self.options.max_value_bytes:
            return text
        if e.event_id in self._offloaded:
            where = self._artifact_path(self._offloaded[e.event_id])
        else:
            where = f"threads/{encode_thread_id(self.thread_id)}/events.jsonl#seq={e.seq}"
        return (
            f"{text[: self.options.preview_chars]}… [truncated: {len(text)} characters;"
            f" the whole value is in {where}]"
        )

    def _forget_earlier_traces(self) -> None:
        if self._open and len(self._runs) < 10_000:
            return  # a run of the thread is still going: keep what its events need
        for known in (
            self._runs,
            self._task_node,
            self._graph_chain,
            self._trace_attrs,
            self._offloaded,
            self._open,  # left open by a process that died: bounded memory anyway
        ):
            known.clear()

    def _expand(self, e: Event) -> Event:
        """An event whose payload was offloaded to an artifact, with the payload back."""
        p = e.payload
        if not (isinstance(p, Mapping) and "$artifact" in p and len(p) <= 2):
            return e
        body = e.attachments.get(f"artifacts/{p['$artifact']}")
        if body is None:
            return e
        try:
            full = json.loads(body)
        except ValueError:
            return e
        self._offloaded[e.event_id] = str(p["$artifact"])
        while len(self._offloaded) > 10_000:
            self._offloaded.pop(next(iter(self._offloaded)))
        return e.replace(payload=full if isinstance(full, dict) else {"value": full})

    def _take_start(self, e: Event) -> Event | None:
        opened = self._open.pop(e.run_id or "", None)
        return opened.event if opened else None

    def _chain_of(self, e: Event) -> _Chain | None:
        root = e.root_run_id or e.run_id
        chain = self._graph_chain.get(root or "")
        if chain is None and self._last_chain is not None and root is None:
            chain = self._last_chain  # e.g. a guard or memory event outside a callback run
        if chain is None and root:
            # a run whose start is not in the record (e.g. recorded without the handler)
            chain = _Chain(trace_id_for_run(root), span_id_for_run(root))
            self._graph_chain[root] = chain
        return chain

    def _graph_parent(self, e: Event) -> str | None:
        """The span of the graph run an event belongs to."""
        root = e.root_run_id or e.run_id
        if root and root in self._runs:
            return self._runs[root]
        chain = self._chain_of(e)
        return chain.root_span if chain else None

    def _parent(self, e: Event) -> str | None:
        """The nearest recorded ancestor: the parent run, the task's node, the graph run."""
        if e.parent_run_id and e.parent_run_id in self._runs:
            return self._runs[e.parent_run_id]
        ns = e.checkpoint_ns
        if ns and e.root_run_id:
            task = split_task(ns).task_id
            node = self._task_node.get((e.root_run_id, task or ""))
            if node is not None and node != e.run_id:
                return self._runs[node]
        if e.kind not in ("node_end",) and e.task_id and e.root_run_id:
            node = self._task_node.get((e.root_run_id, e.task_id))
            if node is not None and node != e.run_id:
                return self._runs[node]
        return self._graph_parent(e)

    def _trace_level(self, e: Event) -> dict[str, Any]:
        """Attributes every span of the trace carries: session, user, tags, environment."""
        p = e.payload
        out: dict[str, Any] = {SESSION_ID: self.thread_id}
        if p.get("user_id"):
            out[USER_ID] = str(p["user_id"])
        tags = p.get("tags")
        if tags:
            out[TRACE_TAGS] = [str(t) for t in tags]
            if self._conv is not None:
                out["tag.tags"] = [str(t) for t in tags]
        if self.options.environment:
            out["langfuse.environment"] = self.options.environment
        if self.options.release:
            out["langfuse.release"] = self.options.release
        out[f"{TRACE_METADATA}.thread_id"] = _json(self.thread_id)
        return out

    def _meta(self, values: Mapping[str, Any]) -> dict[str, str]:
        return {f"{OBS_METADATA}.{k}": _json(v) for k, v in values.items() if v is not None}

    def _artifact_path(self, digest: str) -> str:
        return f"threads/{encode_thread_id(self.thread_id)}/artifacts/{digest}"

    def _value(self, value: Any, e: Event, part: str) -> str | None:
        """JSON of ``value``; a preview plus the workspace address when it is too large."""
        if value is None:
            return None
        if isinstance(value, Mapping) and "$artifact" in value and len(value) <= 2:
            digest = str(value["$artifact"])
            body = e.attachments.get(f"artifacts/{digest}")
            preview = body[: self.options.preview_chars].decode("utf-8", "replace") if body else ""
            return _json(
                {
                    "preview": preview,
                    "truncated": True,
                    "size": value.get("size"),
                    "artifact": self._artifact_path(digest),
                }
            )
        text = value if isinstance(value, str) else _json(value)
        if len(text.encode("utf-8", "replace")) <= self.options.max_value_bytes:
            return text
        if e.artifact and part == "raw":
            where = self._artifact_path(e.artifact)
        elif e.event_id in self._offloaded:
            where = self._artifact_path(self._offloaded[e.event_id])
        else:
            where = f"threads/{encode_thread_id(self.thread_id)}/events.jsonl#seq={e.seq}"
        return _json(
            {
                "preview": text[: self.options.preview_chars],
                "truncated": True,
                "size": len(text),
                "artifact": where,
            }
        )

    def _record(
        self,
        e: Event,
        chain: _Chain,
        span_id: str,
        parent: str | None,
        name: str,
        start: Event | None,
        attrs: dict[str, Any],
        conv: dict[str, Any] | None = None,
    ) -> SpanRecord:
        end_ns = _ns(e.ts)
        if start is not None:
            start_ns = _ns(start.ts)
        elif e.duration_ms:
            start_ns = _ns(e.ts - timedelta(milliseconds=e.duration_ms))
        else:
            start_ns = end_ns
        attrs = {k: v for k, v in attrs.items() if v is not None}
        if conv:  # the other conventions, after Langfuse's (whose bytes stay as they were)
            attrs.update((k, v) for k, v in conv.items() if v is not None)
        for k, v in self._trace_attrs.get(chain.trace_id, {}).items():
            attrs.setdefault(k, v)
        error = None
        if e.status == "error":
            error = str(e.payload.get("error") or "error")[:2000]
            attrs[OBS_LEVEL] = "ERROR"
            attrs[OBS_STATUS] = f"{e.payload.get('error_type') or 'Error'}: {error}"
        elif e.status == "interrupted":
            attrs.setdefault(OBS_STATUS, "interrupted")
        return SpanRecord(
            trace_id=chain.trace_id,
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


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, sort_keys=True)


ChainStartFinder = Callable[[str, int], int]
"""``(thread_id, seq) -> seq`` of the first event of the trace that holds ``seq``."""


def chain_start(runs: list[tuple[int, str, Mapping[str, Any]]], upto: int) -> int:
    """Where to start re-reading a thread to rebuild a mapper positioned at ``upto``.

    ``runs`` are the thread's ``(seq, kind, payload)`` of ``run_start`` and ``interrupt``
    events with ``seq <= upto``, in order. The answer is the ``seq`` of the run_start
    that opened the trace still possibly open at ``upto`` (1 if none).

    Example:
        >>> chain_start([(1, "run_start", {"input": 1}), (5, "interrupt", {}),
        ...              (9, "run_start", {"command": "resume"})], 12)
        1
        >>> chain_start([(1, "run_start", {"input": 1}), (9, "run_start", {"input": 2})], 12)
        9
    """
    start = 1
    interrupted = False
    for seq, kind, payload in runs:
        if kind == "interrupt":
            interrupted = True
        elif kind == "run_start":
            cont = payload.get("command") == "resume" or (
                "input" in payload and payload.get("input") is None
            )
            if not (interrupted and cont):
                start = seq
            interrupted = False
    return start
