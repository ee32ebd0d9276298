"""The event pipeline: sources emit, processors transform in order, sinks persist.

Sinks run in their declared order (workspace first, then the Postgres ledger, then any
exporter). By default a background writer drains a bounded queue in batches, so the
app's thread only pays for an enqueue; a full queue blocks the producer (back-pressure)
rather than dropping. A sink that fails gets its batches spooled to local disk and
replayed, in order, as soon as it works again. Nothing is dropped silently.

``strict=True`` processes every event on the caller's thread and raises
:class:`~langgraph_external.errors.SinkError` when a sink fails (after spooling).

Example:
    >>> from langgraph_external.sinks.memory import InMemorySink
    >>> sink = InMemorySink()
    >>> with Pipeline([sink]) as p:
    ...     p.emit(Event.new("error", "t1", payload={"x": 1}))
    ...     _ = p.flush()
    >>> [(e.thread_id, e.seq) for e in sink.events]
    [('t1', 1)]
"""

from __future__ import annotations

import atexit
import base64
import inspect
import json
import logging
import os
import queue
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langgraph_external.errors import SinkError
from langgraph_external.events import Event
from langgraph_external.processors import (
    Offload,
    Processor,
    Redact,
    Redactor,
    Sequencer,
    materialize,
)
from langgraph_external.sinks.base import Sink

logger = logging.getLogger("langgraph_external")

_FLUSH = object()
_STOP = object()


@dataclass
class SinkFailure:
    """One failed delivery, kept for :meth:`Pipeline.health`."""

    sink: str
    error: str
    events: int
    at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


class Spool:
    """Local, append-only backlog of batches a sink could not take yet.

    One file per batch under ``<dir>/<sink>/``, replayed oldest first.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)

    def _sink_dir(self, sink: str) -> Path:
        return self.dir / sink

    def pending(self, sink: str) -> list[Path]:
        """Spooled batch files of ``sink``, oldest first."""
        d = self._sink_dir(sink)
        if not d.is_dir():
            return []
        return sorted(p for p in d.iterdir() if p.suffix == ".jsonl")

    def put(self, sink: str, events: Sequence[Event]) -> Path:
        """Write ``events`` as one spool file and fsync it."""
        d = self._sink_dir(sink)
        d.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.jsonl"
        tmp = d / ("." + name)
        with open(tmp, "w", encoding="utf-8") as f:
            for e in events:
                env = e.envelope()
                env["attachments"] = {
                    k: base64.b64encode(v).decode() for k, v in e.attachments.items()
                }
                env["detail"] = e.detail
                f.write(json.dumps(env, ensure_ascii=False, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        final = d / name
        os.replace(tmp, final)
        return final

    @staticmethod
    def load(path: Path) -> list[Event]:
        """Read a spool file back into events."""
        out = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                env = json.loads(line)
                atts = {k: base64.b64decode(v) for k, v in env.pop("attachments", {}).items()}
                detail = env.pop("detail", None)
                out.append(Event.from_envelope(env).replace(attachments=atts, detail=detail))
        return out

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Furthest spooled position per thread (events not yet in some sink)."""
        wanted = set(thread_ids)
        out: dict[str, tuple[int, str]] = {}
        if not self.dir.is_dir():
            return out
        for sink_dir in self.dir.iterdir():
            if not sink_dir.is_dir():
                continue
            for path in sorted(sink_dir.glob("*.jsonl")):
                for e in self.load(path):
                    if (
                        e.thread_id in wanted
                        and e.seq is not None
                        and e.hash is not None
                        and e.seq > out.get(e.thread_id, (0, ""))[0]
                    ):
                        out[e.thread_id] = (e.seq, e.hash)
        return out


class Pipeline:
    """Runs events through processors into sinks.

    Args:
        sinks: in write order; the first is normally the workspace.
        redactor: optional callable applied to payloads before anything is written.
        offload_threshold: payloads or raw bytes larger than this go to artifacts.
        strict: process synchronously and raise on any sink failure.
        spool_dir: where failed batches wait for replay (default: a per-user cache dir).
        queue_size: events the background queue holds before producers block.
        batch_size: most events handed to a sink at once.
        linger: seconds the writer waits after the first event of a batch so that one
            transaction and one file append carry many events (the app never waits).
        retry_interval: seconds between replay attempts of a failing sink.
    """

    def __init__(
        self,
        sinks: Sequence[Sink],
        *,
        redactor: Redactor | None = None,
        offload_threshold: int = 64 * 1024,
        extra_processors: Sequence[Processor] = (),
        strict: bool = False,
        spool_dir: str | os.PathLike[str] | None = None,
        queue_size: int = 20_000,
        batch_size: int = 5_000,
        linger: float = 0.05,
        retry_interval: float = 2.0,
    ) -> None:
        self.sinks = list(sinks)
        self.strict = strict
        self.spool = Spool(spool_dir or default_spool_dir())
        self.sequencer = Sequencer(self._positions)
        self.processors: list[Processor] = [
            materialize,
            Redact(redactor),
            *extra_processors,
            Offload(offload_threshold),
            self.sequencer,
        ]
        self.batch_size = batch_size
        self.linger = linger
        self.retry_interval = retry_interval
        self.failures: list[SinkFailure] = []
        self.delivered = 0
        self.writer_cpu = 0.0  # CPU seconds the background writer spent
        self._failing: dict[str, float] = {}  # sink name -> time of next retry
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._lock = threading.RLock()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[Sequence[Event]], None]] = []
        self._flush_hooks: list[Callable[[], Callable[[], None] | None]] = []
        if not strict:
            self._thread = threading.Thread(
                target=self._run, name="langgraph-external-writer", daemon=True
            )
            self._thread.start()
        # an app that never calls close() still gets everything written at exit
        ref = weakref.ref(self)
        self._atexit = lambda: (p := ref()) is not None and p._close_at_exit()
        atexit.register(self._atexit)

    # -- producer side -------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        """Submit one event. Blocks only when the queue is full."""
        self.emit_many((event,))

    def emit_many(self, events: Iterable[Event]) -> None:
        """Submit events in order."""
        if self._closed:
            raise SinkError("the pipeline is closed; events can no longer be recorded")
        if self.strict:
            with self._lock:
                self._process(list(events))
            return
        for e in events:
            self._queue.put(e)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything emitted so far reached every sink (or its spool).

        Also retries spooled backlogs once. Returns ``False`` on timeout.
        """
        self._run_flush_hooks()
        if self.strict or self._thread is None:
            with self._lock:
                self._retry_spooled(force=True)
            return True
        done = threading.Event()
        self._queue.put((_FLUSH, done))
        return done.wait(timeout)

    def add_flush_hook(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` at the start of every flush (sources emit what they still hold).

        Bound methods are held weakly, so a source that is gone is not kept alive.
        """
        ref: Callable[[], Callable[[], None] | None] = (
            weakref.WeakMethod(fn) if inspect.ismethod(fn) else (lambda: fn)
        )
        self._flush_hooks.append(ref)

    def _run_flush_hooks(self) -> None:
        alive = []
        for ref in self._flush_hooks:
            hook = ref()
            if hook is not None:
                hook()
                alive.append(ref)
        self._flush_hooks = alive

    def add_listener(self, fn: Callable[[Sequence[Event]], None]) -> None:
        """Call ``fn`` with every processed batch (after the sinks); used by testing helpers."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[Sequence[Event]], None]) -> None:
        """Stop calling ``fn``."""
        if fn in self._listeners:
            self._listeners.remove(fn)

    def close(self) -> None:
        """Flush, stop the writer, and close sinks. Spooled batches stay on disk."""
        if self._closed:
            return
        atexit.unregister(self._atexit)
        self._run_flush_hooks()
        if self._thread is not None:
            self._queue.put((_STOP, None))
            self._thread.join()
        else:
            self.flush()
        self._closed = True
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # closing must not hide the app's own error
                logger.warning("closing sink %s failed: %s", sink.name, exc)

    def _close_at_exit(self) -> bool:
        try:
            self.close()
        except Exception:  # exiting: report, never raise
            logger.exception("langgraph-external could not flush its pipeline at exit")
        return True

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> dict[str, Any]:
        """Failures so far, sinks currently failing, spooled batches per sink."""
        return {
            "delivered": self.delivered,
            "writer_cpu_seconds": round(self.writer_cpu, 3),
            "failures": [f.__dict__ for f in self.failures],
            "failing": sorted(self._failing),
            "spooled": {s.name: len(self.spool.pending(s.name)) for s in self.sinks},
        }

    # -- consumer side -------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if self.linger > 0 and not _is_control(item):
                time.sleep(self.linger)  # let a batch build up: fewer commits, less GIL churn
            batch: list[Event] = []
            controls: list[Any] = []
            while True:
                if _is_control(item):
                    controls.append(item)
                    break
                batch.append(item)
                if len(batch) >= self.batch_size:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            started = time.thread_time()
            try:
                with self._lock:
                    if batch:
                        self._process(batch)
                    if controls:
                        self._retry_spooled(force=True)
                    elif self._failing:
                        self._retry_spooled(force=False)
            except Exception:  # never let the writer die; _process records failures
                logger.exception("langgraph-external writer failed to process a batch")
            self.writer_cpu += time.thread_time() - started
            stop = False
            for kind, arg in controls:
                if kind is _FLUSH:
                    arg.set()
                else:
                    stop = True
            if stop:
                return

    def _positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        best: dict[str, tuple[int, str]] = {}
        sources: list[Callable[[Collection[str]], dict[str, tuple[int, str]]]] = [
            s.positions for s in self.sinks
        ]
        sources.append(self.spool.positions)
        for source in sources:
            try:
                found = source(thread_ids)
            except Exception as exc:  # a down sink cannot tell; the others can
                logger.debug("position lookup failed: %s", exc)
                continue
            for tid, pos in found.items():
                if pos[0] > best.get(tid, (0, ""))[0]:
                    best[tid] = pos
        return best

    def _process(self, events: list[Event]) -> None:
        self.sequencer.prime({e.thread_id for e in events})
        for proc in self.processors:
            events = [proc(e) for e in events]
        errors: list[str] = []
        for sink in self.sinks:
            err = self._deliver(sink, events)
            if err:
                errors.append(err)
        self.delivered += len(events)
        for fn in list(self._listeners):
            try:
                fn(events)
            except Exception:
                logger.exception("event listener failed")
        if errors and self.strict:
            raise SinkError("; ".join(errors))

    def _deliver(self, sink: Sink, events: Sequence[Event]) -> str | None:
        if sink.name in self._failing or self.spool.pending(sink.name):
            # keep order: never write past a backlog
            self._retry_sink(sink, force=self.strict)
            if sink.name in self._failing:
                return self._spool(sink, events, "sink is failing; batch spooled")
        try:
            sink.write(events)
            return None
        except Exception as exc:
            self._failing[sink.name] = time.monotonic() + self.retry_interval
            return self._spool(sink, events, f"{type(exc).__name__}: {exc}")

    def _spool(self, sink: Sink, events: Sequence[Event], why: str) -> str:
        msg = f"sink {sink.name!r} failed ({why}); {len(events)} events spooled to {self.spool.dir}"
        self.failures.append(SinkFailure(sink.name, why, len(events)))
        del self.failures[:-100]
        try:
            self.spool.put(sink.name, events)
        except OSError as exc:
            msg = f"sink {sink.name!r} failed ({why}) and the spool failed too ({exc})"
            logger.error(msg)
            raise SinkError(msg) from exc
        logger.warning(msg)
        return msg

    def _retry_spooled(self, *, force: bool) -> None:
        for sink in self.sinks:
            if sink.name in self._failing or self.spool.pending(sink.name):
                self._retry_sink(sink, force=force)

    def _retry_sink(self, sink: Sink, *, force: bool) -> None:
        due = self._failing.get(sink.name, 0.0)
        if not force and time.monotonic() < due:
            return
        for path in self.spool.pending(sink.name):
            try:
                sink.write(Spool.load(path))
            except Exception as exc:
                self._failing[sink.name] = time.monotonic() + self.retry_interval
                logger.debug("replay to %s still failing: %s", sink.name, exc)
                return
            path.unlink()
        self._failing.pop(sink.name, None)


def _is_control(item: Any) -> bool:
    return isinstance(item, tuple) and bool(item) and item[0] in (_FLUSH, _STOP)


def default_spool_dir() -> Path:
    """``$LGX_SPOOL_DIR`` or ``~/.cache/langgraph-external/spool``."""
    env = os.environ.get("LGX_SPOOL_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "langgraph-external" / "spool"
