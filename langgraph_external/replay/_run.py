"""Drive a replay: fork at a checkpoint, re-issue the recorded invocations, compare."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from langgraph.types import Command

from langgraph_external.errors import ConfigurationError
from langgraph_external.ledger import schema as ledger
from langgraph_external.read.diff import (
    PathDiff,
    StateDiff,
    diff_paths,
    diff_values,
    load_path,
    message_lines,
    render_path,
    render_state,
    unified_prompt_diff,
)
from langgraph_external.read.inspection import (
    REPLAY_PREFIX,
    NotFoundError,
)
from langgraph_external.record.artifacts import artifact_digests, expand
from langgraph_external.record.escapes import has_marks, unmark
from langgraph_external.record.events import canonical_json, new_id
from langgraph_external.record.namespaces import scope_of
from langgraph_external.record.render import to_readable
from langgraph_external.replay._fork import fork, resolve_checkpoint
from langgraph_external.replay._intercept import (
    Divergence,
    ReplayDivergenceError,
    ReplaySession,
    intercepting,
    load_exact,
)
from langgraph_external.replay._record import Invocation, index_calls, invocations

if TYPE_CHECKING:
    from langgraph_external.external import External

logger = logging.getLogger("langgraph_external")

MODES = ("recorded", "regression")
TOOL_MODES = ("recorded", "live")


@dataclass
class ReplayReport:
    """What a replay did and where it first differed from the record.

    Attributes:
        source_thread_id: the recorded thread.
        thread_id: the thread the replay ran in (a new one).
        mode: ``recorded`` or ``regression``; tools: ``recorded`` or ``live``.
        from_checkpoint_id: the checkpoint the replay started from (``None``: the start).
        diverged: the replay differed from the record (see ``divergence``).
        divergence: the first difference; ``divergences`` all of them, in order.
        completed: every recorded invocation was re-issued (``False``: stopped at a call
            the record could not answer).
        invocations: how many ``invoke`` calls the replay made.
        model_calls / tool_calls_executed: calls that reached the real model / tool.
        model_calls_answered / tool_calls_answered: calls answered from the record.
        path / state: the node path and final state of the replay against the record's.
        notes: remarks (the replay stopped early, the copy could not be deleted).
        kept: the replay's thread was kept (``keep``, or ``into`` named it); otherwise
            it was deleted after the comparison, like ``delete_thread`` deletes a thread
            (only its tombstone stays, under
            :data:`~langgraph_external.record.thread_ids.REPLAY_PREFIX`).
    """

    source_thread_id: str
    thread_id: str
    mode: str
    tools: str
    from_checkpoint_id: str | None
    diverged: bool
    divergence: Divergence | None
    divergences: list[Divergence]
    completed: bool
    invocations: int
    model_calls: int
    model_calls_answered: int
    tool_calls_executed: int
    tool_calls_answered: int
    path: PathDiff
    state: StateDiff
    notes: list[str] = field(default_factory=list)
    kept: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        out = asdict(self)
        out["path"] = self.path.to_dict()
        out["state"] = self.state.to_dict()
        return json.loads(json.dumps(to_readable(out), default=str))

    def lines(self) -> list[str]:
        """A readable report: what ran, then each divergence with its before/after (the
        unified diff of the first prompt that differs, the answers, tool calls, path and
        state that differ), one ``diverged:`` line each."""
        where = "kept" if self.kept else "deleted after the comparison; --keep keeps it"
        out = [
            f"replayed {self.source_thread_id} into {self.thread_id} ({where}; {self.mode}, "
            f"tools {self.tools}): {self.invocations} invocation(s), "
            f"{self.model_calls_answered} model and {self.tool_calls_answered} tool calls "
            f"answered from the record, {self.model_calls} model calls and "
            f"{self.tool_calls_executed} tool calls made live"
        ]
        shown: set[str] = set()
        for d in self.divergences:
            out.append(f"diverged: {d.message}")
            if d.kind in shown:
                continue
            shown.add(d.kind)
            out += [f"  {line}" for line in _divergence_detail(d, self)]
        out += [f"note: {n}" for n in self.notes]
        if not self.diverged:
            out.append("no divergence: same calls, same path, same state")
        return out


def _at(d: Divergence) -> str:
    scope = "/".join(scope_of(d.checkpoint_ns))
    return f"{scope + '/' if scope else ''}{d.node or '?'}@{d.step}"


def _divergence_detail(d: Divergence, report: ReplayReport) -> list[str]:
    """The before/after of one divergence, as text lines (recorded first)."""
    rec, rep = f"recorded {report.source_thread_id}", f"replay {report.thread_id}"
    if d.kind == "llm_input":
        want = (d.expected or {}).get("messages")
        got = (d.actual or {}).get("messages")
        if want is None or got is None:  # not in the record at all: the replay's prompt
            return ["the replay's prompt:", *message_lines(got or [])] if got else []
        return unified_prompt_diff(want, got, f"{rec} {_at(d)}", f"{rep} {_at(d)}")
    if d.kind == "llm_output":
        want = [{"role": "assistant", **a} for a in d.expected or []]
        got = [{"role": "assistant", **a} for a in d.actual or []]
        return unified_prompt_diff(want, got, f"{rec} answer", f"{rep} answer")
    if d.kind == "tool_call":

        def call(c: Any) -> str:
            return f"{c['name']}({canonical_json(c.get('args'))})" if c else "(none)"

        return [f"- recorded: {call(d.expected)}", f"+ replay:   {call(d.actual)}"]
    if d.kind == "path":
        return render_path(report.path)[1:]
    if d.kind == "state":
        return render_state(report.state)
    if d.kind == "error":
        return [str((d.actual or {}).get("error", ""))]
    return []


def _resolver(ext: External, thread_id: str) -> Any:
    """Payloads offloaded to artifacts come back from the workspace."""

    def resolve(payload: Mapping[str, Any]) -> Mapping[str, Any]:
        if not artifact_digests(payload):
            return unmark(payload) if has_marks(payload) else payload
        ws = ext.workspace
        if ws is None:
            raise ConfigurationError("an offloaded payload is in the workspace: give External one")
        loaded = expand(payload, lambda d: ws.read_bytes(ws.artifact_path(thread_id, d)))
        return loaded if isinstance(loaded, dict) else {}

    return resolve


def _recorded_interrupts(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Recorded interrupt id -> its value (readable), from ``interrupt`` events."""
    out: dict[str, Any] = {}
    for e in events:
        if e["kind"] == "interrupt":
            for i in (e.get("payload") or {}).get("interrupts") or ():
                if isinstance(i, Mapping) and i.get("id"):
                    out[str(i["id"])] = i.get("value")
    return out


def _remap_resume(value: Any, recorded: Mapping[str, Any], pending: Sequence[Any]) -> Any:
    """A resume keyed by recorded interrupt ids, keyed by the replay's interrupt ids.

    Interrupt ids derive from task ids, which are new in the replay: each recorded
    interrupt is matched with a pending one of the same value (else in order).
    """
    if not (isinstance(value, Mapping) and value and all(k in recorded for k in value)):
        return value
    free = list(pending)
    out: dict[str, Any] = {}
    for rid, answer in value.items():
        same = [p for p in free if to_readable(p.value) == recorded[rid]]
        if not (same or free):
            return value
        match = (same or free)[0]
        free.remove(match)
        out[match.id] = answer
    return out


@dataclass
class _Replay:
    """One replay, planned from the record: what to issue and what to answer from."""

    ext: External
    source: str
    target: str
    mode: str
    tools: str
    start_seq: int
    start_id: str | None
    session: ReplaySession
    todo: list[Invocation]
    config: dict[str, Any]
    interrupts: dict[str, Any]
    issued: int = 0
    completed: bool = True

    def resume_value(self, inv: Invocation, pending: Sequence[Any]) -> Any:
        """The input of ``inv`` (a resume re-keyed to ``pending`` interrupts)."""
        if inv.resume:
            value = inv.input
            if isinstance(value, Mapping) and self.interrupts:
                value = _remap_resume(value, self.interrupts, pending)
            return Command(resume=value)
        if inv.exact is not None:
            with suppress(Exception):  # recorded from a value LangChain cannot rebuild
                return load_exact(inv.exact)
        return inv.input  # the readable form

    def failed(self, inv: Invocation, exc: Exception) -> bool:
        """The replay raised: a divergence unless the recorded invocation failed too."""
        if inv.status == "error":
            return False
        self.session.divergences.append(
            Divergence(
                kind="error",
                message=f"the replay raised {type(exc).__name__}: {exc}",
                actual={"error": str(exc), "error_type": type(exc).__name__},
            )
        )
        self.completed = False
        return True

    def report(self, source_values: Any, target_values: Any) -> ReplayReport:
        """Compare with the record and build the report (after the run)."""
        self.ext.flush()
        session = self.session
        if self.completed and self.mode == "recorded" and self.tools == "recorded":
            missing = session.index.unanswered()
            if missing:
                first = missing[0]
                session.divergences.append(
                    Divergence(
                        kind="missing_call",
                        message=f"{len(missing)} recorded call(s) were not made, first a "
                        f"{first.kind} call {first.name!r} at step {first.step} in node "
                        f"{first.node!r}",
                        **first.where(),
                        expected={"name": first.name, "kind": first.kind},
                    )
                )
        assert self.ext.dsn is not None
        with ledger.connect(self.ext.dsn) as conn:
            pa = [e for s, e in load_path(conn, self.source, self.ext.schema) if s > self.start_seq]
            pb = [
                e
                for _, e in load_path(conn, self.target, self.ext.schema)
                if self.start_id is None or e.checkpoint_id > self.start_id
            ]
        path = diff_paths(pa, pb)
        state = diff_values(to_readable(source_values), to_readable(target_values))
        if not path.same:
            session.divergences.append(
                Divergence(
                    kind="path",
                    message=f"the replay took another path from entry {path.first_difference}",
                    expected=path.a,
                    actual=path.b,
                    diff=path.ops,
                )
            )
        if not state.same:
            session.divergences.append(
                Divergence(
                    kind="state", message="the replay ended in another state", diff=state.to_dict()
                )
            )
        divs = list(session.divergences)
        return ReplayReport(
            source_thread_id=self.source,
            thread_id=self.target,
            mode=self.mode,
            tools=self.tools,
            from_checkpoint_id=self.start_id,
            diverged=bool(divs),
            divergence=divs[0] if divs else None,
            divergences=divs,
            completed=self.completed,
            invocations=self.issued,
            model_calls=session.model_calls,
            model_calls_answered=session.model_calls_answered,
            tool_calls_executed=session.tool_calls_executed,
            tool_calls_answered=session.tool_calls_answered,
            path=path,
            state=state,
            notes=[] if self.completed else ["the replay stopped at its first divergence"],
        )


def _plan(
    graph: Any,
    thread_id: str,
    ext: External,
    mode: str,
    tools: str,
    into: str | None,
    checkpoint_id: str | None,
    configurable: Mapping[str, Any] | None,
) -> _Replay:
    if mode not in MODES:
        raise ConfigurationError(f"mode must be one of {MODES}, not {mode!r}")
    if tools not in TOOL_MODES:
        raise ConfigurationError(f"tools must be one of {TOOL_MODES}, not {tools!r}")
    if getattr(graph, "checkpointer", None) is not ext.checkpointer:
        raise ConfigurationError("replay needs the graph compiled with ext.checkpointer")
    events = ext.events(thread_id)
    if not events:
        raise NotFoundError(f"thread {thread_id!r} is not in the ledger")
    target = into or f"{REPLAY_PREFIX}{thread_id}:{new_id()[:8]}"
    if ext.events(target):
        raise ConfigurationError(f"thread {target!r} already exists; pick an unused id")
    resolve = _resolver(ext, thread_id)
    start_seq, start_id = 0, None
    if checkpoint_id is not None:
        start = resolve_checkpoint(events, checkpoint_id)
        start_seq, start_id = int(start["seq"]), str(start["checkpoint_id"])
    return _Replay(
        ext=ext,
        source=thread_id,
        target=target,
        mode=mode,
        tools=tools,
        start_seq=start_seq,
        start_id=start_id,
        session=ReplaySession(
            index_calls(events, after_seq=start_seq, resolve=resolve),
            answer_models=mode == "recorded",
            answer_tools=tools == "recorded",
            key=getattr(ext.pipeline, "cipher", None),
            redactor=getattr(ext, "redactor", None),
        ),
        todo=[inv for inv in invocations(events, resolve=resolve) if inv.seq > start_seq],
        config=dict(ext.config(target, **dict(configurable or {}))),
        interrupts=_recorded_interrupts(events),
    )


@dataclass(frozen=True)
class SyncOrAsync:
    """How a replay calls the graph and the checkpointer: directly (:func:`replay`), or
    each method's async twin (``ainvoke`` for ``invoke``, ``alist`` for ``list``;
    :func:`areplay`), with its blocking work (the ledger's reads) in a worker thread."""

    is_async: bool

    async def call(self, obj: Any, method: str, *args: Any) -> Any:
        if self.is_async:
            return await getattr(obj, "a" + method)(*args)
        return getattr(obj, method)(*args)

    async def collect(self, obj: Any, method: str, *args: Any) -> list[Any]:
        """What the iterator (or async iterator) a method returns yields."""
        if self.is_async:
            return [x async for x in getattr(obj, "a" + method)(*args)]
        return list(getattr(obj, method)(*args))

    async def blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.is_async:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)


def _run_sync(coro: Coroutine[Any, Any, ReplayReport]) -> ReplayReport:
    """The result of a coroutine that never waits (its calls are all synchronous)."""
    try:
        coro.send(None)
    except StopIteration as done:
        report: ReplayReport = done.value
        return report
    coro.close()
    raise RuntimeError("a synchronous replay waited")


async def _delete(calls: SyncOrAsync, saver: Any, target: str, report: ReplayReport | None) -> None:
    """Delete the replay's thread (after a failed replay too)."""
    try:
        await calls.call(saver, "delete_thread", target)
    except Exception as exc:  # never masks the replay's own error
        logger.warning("langgraph-external: could not delete the replay copy %r: %s", target, exc)
        if report is not None:
            report.notes.append(
                f"the replay's thread {target!r} could not be deleted ({exc}); it was kept"
            )
        return
    if report is not None:
        report.kept = False


async def _rerun(calls: SyncOrAsync, graph: Any, run: _Replay) -> None:
    """Run the recorded invocations again into ``run.target`` (first the rest of the step
    ``run.start_id`` was copied at, when given), answering interrupts with the recorded
    resume values. A divergence ends the run early: ``run.completed`` is then false."""
    config = run.config
    try:
        if run.start_id is not None:
            await fork(calls, graph.checkpointer, run.source, run.target, run.start_id)
            if (await calls.call(graph, "get_state", config)).next:
                run.issued += 1
                await calls.call(graph, "invoke", None, config)
        for inv in run.todo:
            run.issued += 1
            pending = (
                (await calls.call(graph, "get_state", config)).interrupts if inv.resume else ()
            )
            value = run.resume_value(inv, pending)
            try:
                await calls.call(graph, "invoke", value, config)
            except Exception as exc:
                if run.failed(inv, exc):
                    break
    except ReplayDivergenceError:
        run.completed = False


async def _replay(
    calls: SyncOrAsync, graph: Any, plan: Callable[[], _Replay], keep: bool
) -> ReplayReport:
    """:func:`replay` and :func:`areplay`, calling through ``calls``."""
    run = await calls.blocking(plan)
    saver = graph.checkpointer
    if await calls.call(saver, "get_tuple", _thread(run.target)) is not None:
        raise ConfigurationError(f"thread {run.target!r} already exists; pick an unused id")
    report: ReplayReport | None = None
    try:
        with intercepting(run.session):
            await _rerun(calls, graph, run)
        source = (await calls.call(graph, "get_state", _thread(run.source))).values
        target = (await calls.call(graph, "get_state", _thread(run.target))).values
        report = await calls.blocking(run.report, source, target)
    finally:
        if not keep:
            await _delete(calls, saver, run.target, report)
    return report


def _thread(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def replay(
    graph: Any,
    thread_id: str,
    *,
    ext: External,
    mode: str = "recorded",
    tools: str = "recorded",
    into: str | None = None,
    checkpoint_id: str | None = None,
    configurable: Mapping[str, Any] | None = None,
    keep: bool | None = None,
) -> ReplayReport:
    """Run a recorded thread's invocations again, into a new thread, and compare.

    ``mode="recorded"``: the graph's code runs again, but every model call and tool call
    is answered from the record — no model is called, no tool runs. ``mode="regression"``:
    the current code *and model* run live; tools stay recorded (``tools="live"`` runs
    them too). Interrupts are answered with the recorded resume values. The replay is
    recorded like any run (its thread is ``into``), and the report says where it first
    differed from the record. Unless kept, that thread is deleted once compared (like
    ``delete_thread``: its checkpoints, events and workspace files go, its tombstone
    stays in the ledger); a replay copy (``lgx-replay:<thread>:<hex>``, the default id)
    leaves no workspace folder, and is never listed by ``lgx threads`` without
    ``--replays`` nor sent to Langfuse.

    Args:
        graph: the app's compiled graph, compiled with ``ext.checkpointer``.
        thread_id: the recorded thread.
        ext: the set-up :class:`~langgraph_external.External` that recorded it.
        mode: ``"recorded"`` or ``"regression"``.
        tools: ``"recorded"`` or ``"live"``.
        into: the new thread's id (default ``lgx-replay:<thread_id>:<random>``, a replay
            copy); must be unused. An id outside ``lgx-replay:`` is an ordinary thread.
        checkpoint_id: start from this root checkpoint of the thread (an id or unique
            prefix): its history is copied into ``into`` and the run goes on from there.
        configurable: more ``configurable`` keys for the replay's config.
        keep: keep the replay's thread after the comparison (default: kept when ``into``
            names it, deleted otherwise).

    Returns:
        A :class:`ReplayReport`.

    Raises:
        ConfigurationError: a bad mode, a graph without ``ext.checkpointer``, ``into`` used.
        NotFoundError: the thread or the checkpoint is not recorded.

    Example:
        >>> with External(workspace="./agent_workspace") as ext:          # doctest: +SKIP
        ...     graph = builder.compile(checkpointer=ext.checkpointer)
        ...     report = replay(graph, "thread-42", ext=ext, into="thread-42-replay")
        >>> report.diverged, report.model_calls, report.tool_calls_executed  # doctest: +SKIP
        (False, 0, 0)
    """
    plan = partial(_plan, graph, thread_id, ext, mode, tools, into, checkpoint_id, configurable)
    return _run_sync(
        _replay(SyncOrAsync(False), graph, plan, into is not None if keep is None else keep)
    )


async def areplay(
    graph: Any,
    thread_id: str,
    *,
    ext: External,
    mode: str = "recorded",
    tools: str = "recorded",
    into: str | None = None,
    checkpoint_id: str | None = None,
    configurable: Mapping[str, Any] | None = None,
    keep: bool | None = None,
) -> ReplayReport:
    """Async :func:`replay`, for graphs run with ``ainvoke`` (``async with External``).

    Example:
        >>> async with External(workspace="./agent_workspace") as ext:    # doctest: +SKIP
        ...     report = await areplay(graph, "thread-42", ext=ext)
    """
    plan = partial(_plan, graph, thread_id, ext, mode, tools, into, checkpoint_id, configurable)
    return await _replay(SyncOrAsync(True), graph, plan, into is not None if keep is None else keep)
