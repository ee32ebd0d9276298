"""OTLP export: the ledger as traces in any OpenTelemetry backend, never losing a span.

:class:`OtlpExporter` is a projection target of the ledger with its own cursor in
``projection_cursors`` (one per configuration: ``langfuse``, ``phoenix``, ``otlp`` or a
name you choose), run by the one projection runner
(:class:`~langgraph_external.pipeline.runner.ProjectionRunner`) like the workspace mirror.
It reads each thread's committed events after its cursor, maps them to spans
(:mod:`~langgraph_external.exporters._langfuse_map`), POSTs them as OTLP/HTTP protobuf and
moves the cursor only once the receiver accepted the batch. Ids are derived from ledger
ids, so a batch sent twice creates nothing new. One exporter at a time writes a thread
(an advisory lock in Postgres), so any number of app processes and
``lgx export otlp --follow`` sidecars can run. The configuration is :class:`OtlpExport`
(:mod:`~langgraph_external.exporters.otlp_config`).

Example:
    >>> cfg = OtlpExport(preset="phoenix", endpoint="http://127.0.0.1:6006", project="agents")
    >>> cfg.resolved().url
    'http://127.0.0.1:6006/v1/traces'
    >>> OtlpExport.from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib.metadata import version
from typing import Any

from langgraph_external.errors import ConfigurationError, LedgerUnavailableError
from langgraph_external.exporters._langfuse_map import (
    MapperOptions,
    SpanRecord,
    ThreadMapper,
    chain_start,
    span_id_for_run,
    trace_id_for_run,
)
from langgraph_external.exporters._span_tree import is_continuation
from langgraph_external.exporters.otlp_config import PRESETS, OtlpExport, parse_headers
from langgraph_external.exporters.reader import ExportReader
from langgraph_external.ledger import schema as ledger_sql
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.pipeline.runner import ProjectionRunner, TargetStalled
from langgraph_external.record.events import Event
from langgraph_external.record.thread_ids import is_replay_copy

logger = logging.getLogger("langgraph_external")

_MAPPERS_KEPT = 512
_LOG_EVERY = 60.0  # seconds between two log lines of one failure kind
_RETRY = 0.25  # least seconds between two attempts of a thread that failed


@dataclass
class ExportReport:
    """What one export pass did.

    ``spans_waiting``: spans of the threads in ``behind`` that the receiver has not
    accepted (they wait in the ledger); ``waiting``: the same per thread; ``reason``: why
    the receiver did not take them (the last failure), if it refused.
    """

    threads: int = 0
    events: int = 0
    spans: int = 0
    behind: dict[str, str] = field(default_factory=dict)  # thread -> why it is not done
    spans_waiting: int = 0
    waiting: dict[str, int] = field(default_factory=dict)
    reason: str | None = None


@dataclass(frozen=True)
class _Pending:
    """Records of the events after ``cursor`` up to ``upto``, not yet accepted."""

    cursor: int
    records: list[SpanRecord]
    upto: int


class ExportStalled(TargetStalled):
    """The receiver did not accept a batch; the thread's cursor stays where it was."""


class OtlpExporter:
    """Tails the ledger and sends every thread's spans to an OTLP receiver.

    Use it through ``External(export=...)`` (live: the projection runner in a background
    thread, fed by the sealer's batches), ``lgx export otlp`` / ``lgx export langfuse``
    (:meth:`export`, :meth:`follow`), or directly. As a projection target it has
    ``name``, :meth:`position`, :meth:`read`, :meth:`apply` and ``backoff``.

    Args:
        config: an :class:`OtlpExport` (resolved against the environment).
        dsn: the ledger's database.
        schema: the ledger's schema.
        ledger: an open :class:`PostgresLedger` to share (else one is opened).

    Raises:
        ConfigurationError: the configuration is incomplete, or the OpenTelemetry SDK
            (the ``otlp`` extra) is not installed.
    """

    def __init__(
        self,
        config: OtlpExport,
        dsn: str,
        schema: str = ledger_sql.DEFAULT_SCHEMA,
        *,
        ledger: PostgresLedger | None = None,
    ) -> None:
        try:
            from langgraph_external.exporters._otlp import (  # lazy: the optional `otlp` extra
                LANGFUSE_HINTS,
                Hints,
                OtlpSender,
            )
        except ImportError as exc:
            raise ConfigurationError(
                f"OTLP export needs `pip install 'langgraph-external[otlp]'` ({exc})"
            ) from exc
        self.config = config.resolved()
        assert self.config.cursor is not None
        self.name = self.config.cursor
        """This export's cursor in ``projection_cursors``."""
        self.label = self.name if self.name == self.config.preset else f"{self.name} (otlp)"
        self.url = self.config.url
        self.dsn = dsn
        self.schema = ledger_sql.validate_schema(schema)
        self._own_ledger = ledger is None
        self.ledger = ledger if ledger is not None else PostgresLedger(dsn, schema)
        self.reader = ExportReader(dsn, self.schema, self.name)
        self.sender = OtlpSender(
            self.url,
            self.config.request_headers(),
            timeout=self.config.timeout,
            gzip_body=self.config.gzip,
            verify=self.config.verify,
            proxies=self.config.proxies,
            hints=LANGFUSE_HINTS if self.config.preset == "langfuse" else Hints(),
        )
        self.options = MapperOptions(
            max_value_bytes=max(1024, self.config.max_payload_bytes // 3),
            environment=self.config.environment,
            release=self.config.release,
            semconv=bool(self.config.semantic_conventions),
        )
        self._resource = self.config.resource_attributes()
        self._mappers: OrderedDict[str, ThreadMapper] = OrderedDict()  # most recent last
        self._cursors: dict[str, int] = {}  # thread -> the cursor position() last read
        self._pending: dict[str, _Pending] = {}
        self.stalled = False  # the last delivery failed: the receiver is down or refusing
        self.backoff = 0.0
        """Seconds every thread waits before the next attempt (the runner reads it)."""
        self.spans_sent = 0
        self.batches_sent = 0
        self.last_error: str | None = None
        self._logged: dict[str, float] = {}  # failure kind -> when it was last logged
        self._gave_up_at: int | None = None  # spans_sent when a flush() last timed out
        self._on_spans: Callable[[int], None] | None = None
        self._version = _package_version()
        self.runner = ProjectionRunner(
            self.ledger,
            [self],
            poll_interval=self.config.poll_interval,
            retry_interval=_RETRY,
            linger=self.config.linger,
            fresh=False,  # it reads its own lean rows
            drain_on_stop=False,  # close() gave it its time already
            track=True,
            name=self.name,
        )

    # -- the projection target ------------------------------------------------------------
    def position(self, thread_id: str) -> int:
        """The thread's exported ``seq`` (its cursor; a replay copy's head: never sent)."""
        if is_replay_copy(thread_id):
            return self.ledger.positions([thread_id]).get(thread_id, (0, ""))[0]
        cursor = self.reader.cursor(thread_id)
        if len(self._cursors) > _MAPPERS_KEPT:
            self._cursors.clear()
        self._cursors[thread_id] = cursor
        return cursor

    def read(self, thread_id: str, after: int) -> list[Event]:
        """The events after ``after``, without their bulk, 500 at a time."""
        return self.reader.events(thread_id, after, 500)

    def apply(self, thread_id: str, events: Sequence[Event]) -> None:
        """Send the spans ``events`` complete; the cursor moves with each accepted batch.

        Raises:
            ExportStalled: the receiver did not accept a batch (nothing was lost: the cursor
                stays at the last accepted event; the retry sends the same bytes).
        """
        if not events or is_replay_copy(thread_id):
            return
        cursor = (events[0].seq or 1) - 1
        mapper, pending = self._mapper_at(thread_id, cursor)
        unsent = pending
        try:
            if pending is not None:  # what the receiver did not take last time, as it was
                self._settle(thread_id, pending)
                cursor = pending.upto
            for chunk in _chunks([e for e in events if (e.seq or 0) > cursor], 100):
                assert chunk[-1].seq is not None
                unsent = _Pending(cursor, mapper.feed(chunk), chunk[-1].seq)
                self._settle(thread_id, unsent)
                cursor = unsent.upto
        except ExportStalled:
            # keep the mapper and the unsent records: the retry sends the same bytes
            # without mapping the thread again
            assert unsent is not None
            self._pending[thread_id] = unsent
            raise
        except BaseException:
            self._mappers.pop(thread_id, None)  # rebuilt from the cursor next time
            raise

    def _mapper_at(self, thread_id: str, cursor: int) -> tuple[ThreadMapper, _Pending | None]:
        """The thread's mapper positioned at ``cursor`` (cached, or rebuilt), and the
        records the receiver did not take last time, if they follow ``cursor``."""
        mapper = self._mappers.get(thread_id)
        pending = self._pending.pop(thread_id, None)
        if pending is not None and (
            pending.cursor != cursor or mapper is None or mapper.pos != pending.upto
        ):
            pending, mapper = None, None  # another exporter moved on meanwhile
        if pending is None and (mapper is None or mapper.pos != cursor):
            legacy = _keeps_old_names(self.ledger, thread_id)
            if self._cursors.get(thread_id, cursor) != cursor:
                # older events deleted with the thread: its chain starts over here
                mapper = ThreadMapper(thread_id, self.options, pos=cursor, legacy=legacy)
            else:
                mapper = rebuild_mapper(self.reader, self.options, thread_id, cursor, legacy=legacy)
        assert mapper is not None
        self._mappers[thread_id] = mapper
        self._mappers.move_to_end(thread_id)
        while len(self._mappers) > _MAPPERS_KEPT:  # an evicted one is rebuilt when needed
            self._mappers.popitem(last=False)
        return mapper, pending

    def _settle(self, thread_id: str, batch: _Pending) -> None:
        """Deliver ``batch``; once accepted, move the cursor past it."""
        self._deliver(batch.records)
        if self._on_spans is not None:
            self._on_spans(len(batch.records))
        self.ledger.set_cursor(self.name, thread_id, batch.upto, None)
        self._cursors[thread_id] = batch.upto

    def _deliver(self, records: Sequence[SpanRecord]) -> None:
        """POST ``records`` in batches; raise :class:`ExportStalled` unless all accepted."""
        from langgraph_external.exporters._otlp import Verdict, encode  # lazy: the optional SDK

        for batch in _chunks(list(records), self.config.batch_spans):
            body = encode(batch, service_version=self._version, resource_attributes=self._resource)
            outcome = self.sender.send(body)
            if outcome.verdict is not Verdict.ACCEPTED:
                self.stalled = True
                self.last_error = outcome.detail
                kind = outcome.failure.value if outcome.failure else outcome.verdict.value
                rejected = outcome.verdict is Verdict.REJECTED
                self._log_failure(rejected, kind, outcome.detail)
                most = self.config.backoff_max
                self.backoff = most if rejected else min(most, max(0.25, self.backoff * 2))
                if outcome.retry_after is not None:
                    self.backoff = max(self.backoff, min(outcome.retry_after, 300.0))
                raise ExportStalled(outcome.detail)
            self.spans_sent += len(batch)
            self.batches_sent += 1
            self.stalled = False
            if self.last_error is not None:
                logger.warning("%s export: the receiver takes spans again", self.label)
                self._logged.clear()  # the next outage is reported at once
            self.last_error = None
            self.backoff = 0.0

    def _log_failure(self, rejected: bool, kind: str, detail: str) -> None:
        """One line per failure kind and minute (not per attempt), with what waits."""
        now = time.monotonic()
        if now - self._logged.get(kind, -_LOG_EVERY) < _LOG_EVERY:
            return
        self._logged[kind] = now
        args = (self.label, detail, self._waiting_text())
        if rejected:
            logger.error(
                "%s export refused: %s — %s wait in the ledger (nothing is dropped); fix the "
                "configuration, then `%s` sends them",
                *args,
                self.config.command,
            )
        else:
            logger.warning(
                "%s export: %s — %s wait in the ledger (nothing is dropped); retrying", *args
            )

    def count_waiting(self, thread_ids: Sequence[str] = ()) -> dict[str, int]:
        """Spans the receiver has not accepted yet, per thread (``thread_ids``: only those).

        Counted in the ledger: the events after this export's cursor that complete a span.
        """
        return self.reader.count_waiting(thread_ids)

    def _waiting_text(self) -> str:
        try:
            counts = self.count_waiting()
        except Exception:  # the ledger is down too: say what is known
            return "the spans"
        return f"{_n(sum(counts.values()), 'span')} of {_n(len(counts), 'thread')}"

    # -- one thread, many threads ------------------------------------------------------------
    def export_thread(
        self, thread_id: str, *, on_spans: Callable[[int], None] | None = None
    ) -> int | None:
        """Send every span of ``thread_id`` after the cursor; returns the new cursor.

        ``None`` when another exporter holds the thread right now.

        Raises:
            ExportStalled: the receiver did not accept a batch (nothing was lost: the cursor
                stays at the last accepted event).
            LedgerUnavailableError: the ledger could not be read.
        """
        self._on_spans = on_spans
        try:
            return self.runner.project_thread(self, thread_id)
        finally:
            self._on_spans = None

    def threads(
        self,
        thread_ids: Sequence[str] = (),
        *,
        since: datetime | None = None,
        all_threads: bool = False,
    ) -> list[tuple[str, int, int]]:
        """``(thread_id, ledger seq, exported seq)`` of the threads an export would visit.

        Without ``thread_ids`` and ``all_threads``: the threads this export is behind on.
        """
        return self.reader.threads(thread_ids, since, all_threads)

    def resend(self, thread_ids: Sequence[str]) -> None:
        """Set the cursors of ``thread_ids`` back to the start (the same ids are sent again)."""
        self.reader.reset(thread_ids)
        for tid in thread_ids:
            self._mappers.pop(tid, None)

    def export(
        self,
        thread_ids: Iterable[str],
        *,
        attempts: int = 3,
        on_thread: Callable[[str, int], None] | None = None,
        on_spans: Callable[[int], None] | None = None,
    ) -> ExportReport:
        """Export each thread up to the ledger's head (back-fill).

        A thread the receiver does not accept after ``attempts`` tries (with backoff), or
        that another exporter holds, is reported in ``behind`` with the spans it still
        has waiting; once the receiver refused a thread that many times, the remaining
        threads are reported behind with the same reason without trying them. Nothing is
        lost either way.
        """
        report = ExportReport()
        down: str | None = None
        for tid in thread_ids:
            sent_before = self.spans_sent
            for attempt in range(attempts if down is None else 0):
                try:
                    pos = self.export_thread(tid, on_spans=on_spans)
                except ExportStalled as exc:
                    report.behind[tid] = str(exc)
                    if attempt < attempts - 1:
                        time.sleep(min(self.backoff, 5.0))
                    continue
                if pos is None:
                    report.behind[tid] = "another exporter is writing it"
                    time.sleep(0.2)
                    continue
                report.behind.pop(tid, None)
                break
            if down is not None:
                report.behind[tid] = down
            elif self.stalled and tid in report.behind:
                down = report.behind[tid]
            report.threads += 1
            report.spans += self.spans_sent - sent_before
            if on_thread is not None:
                on_thread(tid, self.spans_sent - sent_before)
        if report.behind:
            report.reason = down or self.last_error or next(iter(report.behind.values()))
            try:
                report.waiting = self.count_waiting(list(report.behind))
            except LedgerUnavailableError:
                report.waiting = {}
            report.spans_waiting = sum(report.waiting.values())
        return report

    def follow(self, stop: threading.Event, on_spans: Callable[[int], None] | None = None) -> None:
        """Export every thread that falls behind until ``stop`` is set (``--follow``)."""
        self._on_spans = on_spans
        try:
            self.runner.follow(stop)
        finally:
            self._on_spans = None

    # -- live -----------------------------------------------------------------------------
    def attach(self, pipeline: Any) -> None:
        """Follow ``pipeline``'s sealed batches in a background thread (``export=``)."""
        pipeline.add_listener(self.runner.hand_over)  # on the sealing thread: bookkeeping only
        self.runner.start()

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every event committed so far (by this process) is in the receiver.

        Returns ``False`` when the receiver did not accept everything in time; nothing is
        dropped — the cursor stays and the export goes on in the background.
        """
        ok = self.runner.flush(timeout)
        self._gave_up_at = None if ok or not self.runner.running else self.spans_sent
        return ok

    def health(self) -> dict[str, Any]:
        """Spans sent, the last error, and how many threads are behind (this process)."""
        return {
            "cursor": self.name,
            "url": self.url,
            "spans_sent": self.spans_sent,
            "batches_sent": self.batches_sent,
            "threads_behind": self.runner.threads_behind(),
            "last_error": self.last_error,
        }

    def close(self, timeout: float = 5.0) -> None:
        """Give the export ``timeout`` seconds to catch up, then stop (the rest waits in the
        ledger for the next start or ``lgx export``).

        No second wait: after a :meth:`flush` that timed out, with no span accepted since,
        it stops at once.
        """
        if self.runner.started:
            waited_in_vain = self._gave_up_at is not None and self._gave_up_at == self.spans_sent
            if waited_in_vain or not self.flush(timeout):
                logger.warning(
                    "%s export: %s not sent at close (%s); they wait in the ledger for the "
                    "next start or `%s`",
                    self.label,
                    self._waiting_text(),
                    self.last_error or "still sending",
                    self.config.command,
                )
            self.runner.stop(self.config.timeout + 5, close=False)
        self.sender.close()
        self.reader.close()
        if self._own_ledger:
            self.ledger.close()

    # -- linking other instrumentation ----------------------------------------------------------
    def trace_context(self, thread_id: str) -> dict[str, str] | None:
        """The trace a resume of ``thread_id`` continues (e.g. for Langfuse's own handler).

        ``{"trace_id", "parent_span_id"}`` of the thread's latest run if it ended at an
        interrupt, else ``None`` (the next run opens a new trace: use
        :func:`trace_context_for_run`).
        """
        return resumed_trace(self.reader.open_chain(thread_id))


def resumed_trace(rows: Iterable[tuple[Any, ...]]) -> dict[str, str] | None:
    """The trace a resume continues, from ``(seq, kind, run_id, payload)`` of a thread's
    latest runs (``None``: the last run did not end at an interrupt)."""
    root: str | None = None
    interrupted = False
    for _seq, kind, run_id, payload in rows:
        if kind == "interrupt":
            interrupted = True
            continue
        if not (interrupted and is_continuation(payload or {})) or root is None:
            root = run_id
        interrupted = False
    return trace_context_for_run(root) if root is not None and interrupted else None


def _keeps_old_names(ledger: Any, thread_id: str) -> bool:
    """Whether the thread keeps its workspace folder of the old rule (the ledger's word)."""
    lookup = getattr(ledger, "legacy_named", None)
    return lookup is not None and thread_id in lookup([thread_id])


def rebuild_mapper(
    reader: ExportReader,
    options: MapperOptions,
    thread_id: str,
    cursor: int,
    *,
    legacy: bool = False,
) -> ThreadMapper:
    """A mapper positioned at ``cursor``: the open trace's events are re-read, not sent
    (``legacy``: the thread keeps its workspace folder of the old rule)."""
    if cursor == 0:
        return ThreadMapper(thread_id, options, legacy=legacy)
    start = chain_start(reader.markers(thread_id, cursor), cursor)
    mapper = ThreadMapper(thread_id, options, pos=start - 1, legacy=legacy)
    while mapper.pos < cursor:
        events = [
            e for e in reader.events(thread_id, mapper.pos, 2000) if e.seq and e.seq <= cursor
        ]
        if not events:
            break
        mapper.feed(events)
    mapper.pos = cursor
    return mapper


def trace_context_for_run(run_id: Any) -> dict[str, str]:
    """``{"trace_id", "parent_span_id"}`` of the trace the run ``run_id`` opens.

    Pass it to Langfuse's ``CallbackHandler(trace_context=...)`` and invoke the graph
    with ``config["run_id"] = run_id``: both exports land in one trace, the handler's
    observations under the run's root observation.

    Example:
        >>> ctx = trace_context_for_run("00000000-0000-0000-0000-000000000001")
        >>> len(ctx["trace_id"]), len(ctx["parent_span_id"])
        (32, 16)
    """
    rid = str(run_id)
    return {"trace_id": trace_id_for_run(rid), "parent_span_id": span_id_for_run(rid)}


def _chunks(items: list[Any], n: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _package_version() -> str | None:
    try:
        return version("langgraph-external")
    except Exception:
        return None


__all__ = [
    "PRESETS",
    "ExportReport",
    "ExportStalled",
    "OtlpExport",
    "OtlpExporter",
    "parse_headers",
    "trace_context_for_run",
]
