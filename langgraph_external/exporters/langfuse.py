"""Langfuse export: the ledger as a self-hosted Langfuse view that never loses a span.

:class:`LangfuseExporter` is a projection of the ledger with its own cursor
(``projection_cursors.projection = 'langfuse'``). It reads each thread's committed
events after its cursor, maps them to Langfuse observations
(:mod:`~langgraph_external.exporters._langfuse_map`), POSTs them as OTLP to
``<base_url>/api/public/otel/v1/traces`` and moves the cursor only once the server
accepted the batch. Ids are derived from ledger ids, so a batch sent twice creates
nothing new. One exporter at a time writes a thread (an advisory lock in Postgres), so
any number of app processes and ``lgx export langfuse --follow`` sidecars can run.

Example:
    >>> cfg = LangfuseExport(public_key="pk-lf-1", secret_key="sk-lf-1",
    ...                      base_url="http://127.0.0.1:3000")
    >>> cfg.resolved().base_url
    'http://127.0.0.1:3000'
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import psycopg

from langgraph_external import ledger as ledger_sql
from langgraph_external.errors import ConfigurationError, LedgerUnavailableError
from langgraph_external.events import Event
from langgraph_external.exporters import _sql
from langgraph_external.exporters._langfuse_map import (
    MapperOptions,
    SpanRecord,
    ThreadMapper,
    chain_start,
    span_id_for_run,
    trace_id_for_run,
)
from langgraph_external.inspection import REPLAY_PREFIX, is_replay_copy
from langgraph_external.sinks.postgres import PostgresLedger, unpack_detail

logger = logging.getLogger("langgraph_external")

PROJECTION = "langfuse"
"""The exporter's cursor name in ``projection_cursors``."""

_MAPPERS_KEPT = 512


@dataclass(frozen=True)
class LangfuseExport:
    """Where and how to export to Langfuse.

    Unset keys and URL are read from ``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY`` and
    ``LANGFUSE_BASE_URL`` (or ``LANGFUSE_HOST``) by :meth:`resolved`.

    Args:
        public_key, secret_key: the Langfuse project's API keys.
        base_url: the Langfuse host, e.g. ``https://langfuse.internal.example``.
        max_payload_bytes: an input, output or raw result whose JSON is larger is sent
            as a preview plus its address in the workspace (Langfuse drops events over
            1 MB).
        timeout: seconds to connect and to wait for an answer.
        batch_spans: most spans per POST.
        gzip: compress request bodies.
        verify: TLS verification (``True``, ``False``, or a CA bundle path).
        proxies: ``{"https": "http://proxy:3128"}``; ``HTTPS_PROXY`` works too.
        environment, release: Langfuse environment and release of every trace.
        poll_interval: seconds between scans for threads written by other processes.
        linger: seconds the live exporter waits after a commit to batch what follows
            (``flush()`` does not wait).
        backoff_max: most seconds between retries while Langfuse is unreachable.
    """

    public_key: str | None = None
    secret_key: str | None = None
    base_url: str | None = None
    max_payload_bytes: int = 256 * 1024
    timeout: float = 10.0
    batch_spans: int = 200
    gzip: bool = True
    verify: bool | str = True
    proxies: dict[str, str] | None = None
    environment: str | None = None
    release: str | None = None
    poll_interval: float = 1.0
    linger: float = 0.5
    backoff_max: float = 30.0

    def resolved(self) -> LangfuseExport:
        """This configuration with unset values taken from the environment.

        Raises:
            ConfigurationError: a key or the base URL is missing, or a value is invalid.
        """
        env = os.environ
        cfg = replace(
            self,
            public_key=self.public_key or env.get("LANGFUSE_PUBLIC_KEY"),
            secret_key=self.secret_key or env.get("LANGFUSE_SECRET_KEY"),
            base_url=self.base_url or env.get("LANGFUSE_BASE_URL") or env.get("LANGFUSE_HOST"),
            environment=self.environment or env.get("LANGFUSE_TRACING_ENVIRONMENT"),
            release=self.release or env.get("LANGFUSE_RELEASE"),
        )
        missing = [
            name
            for name, value in (
                ("public_key (LANGFUSE_PUBLIC_KEY)", cfg.public_key),
                ("secret_key (LANGFUSE_SECRET_KEY)", cfg.secret_key),
                ("base_url (LANGFUSE_BASE_URL or LANGFUSE_HOST)", cfg.base_url),
            )
            if not value
        ]
        if missing:
            raise ConfigurationError("Langfuse export needs " + ", ".join(missing))
        assert cfg.base_url is not None
        if not cfg.base_url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"Langfuse base_url must start with http:// or https://, not {cfg.base_url!r}"
            )
        if cfg.max_payload_bytes < 1024:
            raise ConfigurationError("max_payload_bytes must be at least 1024")
        if cfg.batch_spans < 1 or cfg.timeout <= 0:
            raise ConfigurationError("batch_spans must be >= 1 and timeout > 0")
        return cfg


@dataclass
class ExportReport:
    """What one export pass did."""

    threads: int = 0
    events: int = 0
    spans: int = 0
    behind: dict[str, str] = field(default_factory=dict)  # thread -> why it is not done


@dataclass(frozen=True)
class _Pending:
    """Records of the events after ``cursor`` up to ``upto``, not yet accepted."""

    cursor: int
    records: list[SpanRecord]
    upto: int


class ExportStalled(Exception):
    """Langfuse did not accept a batch; the thread's cursor stays where it was."""


class LangfuseExporter:
    """Tails the ledger and sends every thread's observations to Langfuse.

    Use it through ``External(langfuse=...)`` (live: a background thread fed by the
    pipeline's commits), ``lgx export langfuse`` (:meth:`export`, :meth:`follow`), or
    directly.

    Args:
        config: a :class:`LangfuseExport` (resolved against the environment).
        dsn: the ledger's database.
        schema: the ledger's schema.
        ledger: an open :class:`PostgresLedger` to share (else one is opened).
    """

    name = PROJECTION

    def __init__(
        self,
        config: LangfuseExport,
        dsn: str,
        schema: str = ledger_sql.DEFAULT_SCHEMA,
        *,
        ledger: PostgresLedger | None = None,
    ) -> None:
        try:
            from langgraph_external.exporters._otlp import OtlpSender
        except ImportError as exc:  # the OpenTelemetry SDK comes with the extra
            raise ConfigurationError(
                f"Langfuse export needs `pip install 'langgraph-external[langfuse]'` ({exc})"
            ) from exc
        self.config = config.resolved()
        self.dsn = dsn
        self.schema = ledger_sql.validate_schema(schema)
        self._own_ledger = ledger is None
        self.ledger = ledger if ledger is not None else PostgresLedger(dsn, schema)
        assert self.config.base_url and self.config.public_key and self.config.secret_key
        self.sender = OtlpSender(
            self.config.base_url,
            self.config.public_key,
            self.config.secret_key,
            timeout=self.config.timeout,
            gzip_body=self.config.gzip,
            verify=self.config.verify,
            proxies=self.config.proxies,
        )
        self.options = MapperOptions(
            max_value_bytes=max(1024, self.config.max_payload_bytes // 3),
            environment=self.config.environment,
            release=self.config.release,
        )
        self._sql = {
            k: ledger_sql.q(v, self.schema)
            for k, v in {
                "cursor": _sql.SELECT_CURSOR,
                "markers": _sql.SELECT_RUN_MARKERS,
                "threads": _sql.SELECT_THREADS,
                "reset": _sql.RESET_CURSORS,
                "open_chain": _sql.OPEN_CHAIN,
                "events": _sql.SELECT_EVENTS_LEAN,
            }.items()
        }
        self._mappers: OrderedDict[str, ThreadMapper] = OrderedDict()  # most recent last
        self._pending: dict[str, _Pending] = {}
        self.stalled = False  # the last delivery failed: Langfuse is down or refusing
        self._cv = threading.Condition()
        self._target: dict[str, int] = {}  # thread -> highest committed seq seen (live)
        self._done: dict[str, int] = {}  # thread -> exported seq
        self._touched: set[str] = set()
        self._stop = False
        self._force = 0  # flush() calls waiting: no linger
        self._thread: threading.Thread | None = None
        self._backoff = 0.0
        self.spans_sent = 0
        self.batches_sent = 0
        self.last_error: str | None = None
        self._last_logged: tuple[str, float] | None = None
        self._version = _package_version()
        self._conn: psycopg.Connection[Any] | None = None
        self._db_lock = threading.Lock()

    # -- one thread -----------------------------------------------------------------------
    def export_thread(
        self, thread_id: str, *, on_spans: Callable[[int], None] | None = None
    ) -> int | None:
        """Send every observation of ``thread_id`` after the cursor; returns the new cursor.

        ``None`` when another exporter holds the thread right now.

        Raises:
            ExportStalled: Langfuse did not accept a batch (nothing was lost: the cursor
                stays at the last accepted event).
            LedgerUnavailableError: the ledger could not be read.
        """
        with self.ledger.projection_lock(self.name, thread_id) as held:
            if not held:
                return None
            if is_replay_copy(thread_id):  # never exported: the cursor moves past it unsent
                head = self.ledger.positions([thread_id]).get(thread_id, (0, ""))[0]
                self.ledger.set_cursor(self.name, thread_id, head, None)
                self._mark_done(thread_id, head)
                return head
            cursor, _ = self._cursor(thread_id)
            mapper = self._mappers.get(thread_id)
            pending = self._pending.pop(thread_id, None)
            if pending is not None and (
                pending.cursor != cursor or mapper is None or mapper.pos != pending.upto
            ):
                pending, mapper = None, None  # another exporter moved on meanwhile
            if pending is None and (mapper is None or mapper.pos != cursor):
                mapper = self._rebuild(thread_id, cursor)
            assert mapper is not None
            self._mappers[thread_id] = mapper
            self._mappers.move_to_end(thread_id)
            while len(self._mappers) > _MAPPERS_KEPT:  # an evicted one is rebuilt when needed
                self._mappers.popitem(last=False)
            try:
                unsent = pending
                if pending is not None:  # what Langfuse did not take last time, as it was
                    self._settle(thread_id, pending, on_spans)
                    cursor = pending.upto
                while True:
                    events = self._read(thread_id, mapper.pos, 500)
                    if not events:
                        break
                    if events[0].seq != mapper.pos + 1:  # older events deleted with the thread
                        mapper = ThreadMapper(thread_id, self.options, pos=(events[0].seq or 1) - 1)
                        self._mappers[thread_id] = mapper
                    for chunk in _chunks(events, 100):
                        assert chunk[-1].seq is not None
                        unsent = _Pending(cursor, mapper.feed(chunk), chunk[-1].seq)
                        self._settle(thread_id, unsent, on_spans)
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
            return mapper.pos

    def _settle(
        self, thread_id: str, batch: _Pending, on_spans: Callable[[int], None] | None
    ) -> None:
        """Deliver ``batch``; once accepted, move the cursor past it."""
        self._deliver(batch.records)
        if on_spans is not None:
            on_spans(len(batch.records))
        self.ledger.set_cursor(self.name, thread_id, batch.upto, None)
        self._mark_done(thread_id, batch.upto)

    def _deliver(self, records: Sequence[SpanRecord]) -> None:
        """POST ``records`` in batches; raise :class:`ExportStalled` unless all accepted."""
        from langgraph_external.exporters._otlp import Verdict, encode

        for batch in _chunks(list(records), self.config.batch_spans):
            outcome = self.sender.send(encode(batch, service_version=self._version))
            if outcome.verdict is not Verdict.ACCEPTED:
                self.stalled = True
                self.last_error = outcome.detail
                self._log_failure(outcome.verdict.value, outcome.detail)
                self._backoff = (
                    self.config.backoff_max
                    if outcome.verdict is Verdict.REJECTED
                    else min(self.config.backoff_max, max(0.25, self._backoff * 2))
                )
                if outcome.retry_after is not None:
                    self._backoff = max(self._backoff, min(outcome.retry_after, 300.0))
                raise ExportStalled(outcome.detail)
            self.spans_sent += len(batch)
            self.batches_sent += 1
            self.stalled = False
            if self.last_error is not None:
                logger.warning("langfuse export: delivering again (%s)", outcome.detail)
            self.last_error = None
            self._backoff = 0.0

    def _log_failure(self, verdict: str, detail: str) -> None:
        now = time.monotonic()
        if self._last_logged and self._last_logged[0] == detail and now - self._last_logged[1] < 60:
            return
        self._last_logged = (detail, now)
        if verdict == "rejected":
            logger.error(
                "langfuse export refused: %s — nothing is dropped; the spans are sent once "
                "the configuration is fixed (`lgx export langfuse`)",
                detail,
            )
        else:
            logger.warning("langfuse export deferred: %s; retrying with backoff", detail)

    @contextmanager
    def _db(self) -> Iterator[psycopg.Connection[Any]]:
        """The exporter's own connection (kept open; reopened after a failure)."""
        with self._db_lock:
            try:
                if self._conn is None or self._conn.closed or self._conn.broken:
                    self._conn = ledger_sql.connect(
                        self.dsn,
                        autocommit=True,
                        connect_timeout=10,
                        options="-c timezone=UTC -c statement_timeout=30000",
                    )
                yield self._conn
            except psycopg.Error as exc:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                raise LedgerUnavailableError(f"cannot read the ledger: {exc}") from exc

    def _read(self, thread_id: str, after: int, limit: int) -> list[Event]:
        """Events after ``after``; checkpoint and writes events without their bulk."""
        with self._db() as conn:
            rows = conn.execute(self._sql["events"], (thread_id, after, limit)).fetchall()
        out = []
        for row in rows:
            _, files = unpack_detail(row[-1])
            out.append(
                Event.from_envelope(ledger_sql.row_to_envelope(row[:-1])).replace(attachments=files)
            )
        return out

    def _cursor(self, thread_id: str) -> tuple[int, str | None]:
        with self._db() as conn:
            row = conn.execute(self._sql["cursor"], (self.name, thread_id)).fetchone()
        return (int(row[0]), row[1]) if row else (0, None)

    def _rebuild(self, thread_id: str, cursor: int) -> ThreadMapper:
        """A mapper positioned at ``cursor``: the open trace's events are re-read, not sent."""
        if cursor == 0:
            return ThreadMapper(thread_id, self.options)
        with self._db() as conn:
            rows = conn.execute(self._sql["markers"], (thread_id, cursor)).fetchall()
        start = chain_start([(int(r[0]), r[1], r[2] or {}) for r in rows], cursor)
        mapper = ThreadMapper(thread_id, self.options, pos=start - 1)
        while mapper.pos < cursor:
            events = [
                e for e in self._read(thread_id, mapper.pos, 2000) if e.seq and e.seq <= cursor
            ]
            if not events:
                break
            mapper.feed(events)
        mapper.pos = cursor
        return mapper

    # -- many threads -----------------------------------------------------------------------
    def threads(
        self,
        thread_ids: Sequence[str] = (),
        *,
        since: datetime | None = None,
        all_threads: bool = False,
    ) -> list[tuple[str, int, int]]:
        """``(thread_id, ledger seq, exported seq)`` of the threads an export would visit.

        Without ``thread_ids`` and ``all_threads``: the threads Langfuse is behind on.
        """
        with self._db() as conn:
            rows = conn.execute(
                self._sql["threads"],
                {
                    "projection": self.name,
                    "all": bool(all_threads),
                    "threads": list(thread_ids),
                    "since": since,
                    "replays": REPLAY_PREFIX,
                },
            ).fetchall()
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def resend(self, thread_ids: Sequence[str]) -> None:
        """Set the cursors of ``thread_ids`` back to the start (the same ids are sent again)."""
        with self._db() as conn:
            conn.execute(self._sql["reset"], {"projection": self.name, "threads": list(thread_ids)})
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

        A thread Langfuse does not accept after ``attempts`` tries (with backoff), or that
        another exporter holds, is reported in ``behind``; once Langfuse refused a thread
        that many times, the remaining threads are reported behind with the same reason
        without trying them. Nothing is lost either way.
        """
        report = ExportReport()
        down: str | None = None
        for tid in thread_ids:
            if down is not None:
                report.behind[tid] = down
                report.threads += 1
                if on_thread is not None:
                    on_thread(tid, 0)
                continue
            sent_before = self.spans_sent
            for attempt in range(attempts):
                try:
                    pos = self.export_thread(tid, on_spans=on_spans)
                except ExportStalled as exc:
                    report.behind[tid] = str(exc)
                    if attempt < attempts - 1:
                        time.sleep(min(self._backoff, 5.0))
                    continue
                if pos is None:
                    report.behind[tid] = "another exporter is writing it"
                    time.sleep(0.2)
                    continue
                report.behind.pop(tid, None)
                break
            if self.stalled and tid in report.behind:
                down = report.behind[tid]
            report.threads += 1
            report.spans += self.spans_sent - sent_before
            if on_thread is not None:
                on_thread(tid, self.spans_sent - sent_before)
        return report

    def follow(self, stop: threading.Event, on_spans: Callable[[int], None] | None = None) -> None:
        """Export every thread that falls behind until ``stop`` is set (``--follow``)."""
        while not stop.is_set():
            try:
                lag = [t for t, _, _ in self.ledger.lagging(self.name)]
            except Exception as exc:
                logger.warning("langfuse export: cannot scan the ledger: %s", exc)
                stop.wait(self.config.poll_interval)
                continue
            for tid in lag:
                if stop.is_set():
                    return
                self._export_quietly(tid, on_spans)
                if self.stalled:  # Langfuse is down for every thread: wait, then rescan
                    stop.wait(self._backoff)
                    break
            stop.wait(self.config.poll_interval if not lag else 0.05)

    def _export_quietly(self, tid: str, on_spans: Callable[[int], None] | None = None) -> bool:
        """:meth:`export_thread` that logs instead of raising; ``True`` when done."""
        try:
            pos = self.export_thread(tid, on_spans=on_spans)
        except ExportStalled:
            return False
        except (LedgerUnavailableError, ConnectionError) as exc:
            logger.warning("langfuse export: ledger unavailable: %s", exc)
            self._backoff = min(self.config.backoff_max, max(0.5, self._backoff * 2))
            return False
        except Exception as exc:  # a value that cannot be mapped: set the thread aside
            err = f"{type(exc).__name__}: {exc}"[:2000]
            logger.error("langfuse export set thread %r aside: %s", tid, err)
            try:
                cursor, _ = self._cursor(tid)
                self.ledger.set_cursor(self.name, tid, cursor, err)
            except Exception:
                logger.debug("could not record the quarantine of %r", tid)
            return False
        if pos is None:
            try:
                cursor, _ = self._cursor(tid)
                self._mark_done(tid, cursor)
            except Exception:
                return False
            return False
        return True

    # -- live -----------------------------------------------------------------------------
    def attach(self, pipeline: Any) -> None:
        """Follow ``pipeline``'s commits in a background thread (``External(langfuse=...)``)."""
        pipeline.add_listener(self._on_commit)
        self._thread = threading.Thread(
            target=self._loop, name="langgraph-external-langfuse", daemon=True
        )
        self._thread.start()

    def _on_commit(self, events: Sequence[Event]) -> None:
        # runs on the committing thread (inside the app's put): only bookkeeping
        with self._cv:
            for e in events:
                if e.seq is not None and e.seq > self._target.get(e.thread_id, 0):
                    self._target[e.thread_id] = e.seq
                self._touched.add(e.thread_id)
            self._cv.notify_all()

    def _mark_done(self, tid: str, seq: int) -> None:
        with self._cv:
            if seq > self._done.get(tid, 0):
                self._done[tid] = seq
            self._cv.notify_all()

    def _loop(self) -> None:
        last_scan = 0.0
        while True:
            with self._cv:
                while not self._stop and not self._touched:
                    self._cv.wait(self.config.poll_interval)
                    if time.monotonic() - last_scan >= self.config.poll_interval:
                        break
                if self._stop:
                    return
                if self._touched and not self._force and self.config.linger:
                    # let the run go on: export its commits together, off its hot path
                    deadline = time.monotonic() + self.config.linger
                    while not self._stop and not self._force:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._cv.wait(left)
                touched, self._touched = self._touched, set()
            todo = dict.fromkeys(sorted(touched))
            if time.monotonic() - last_scan >= self.config.poll_interval:
                last_scan = time.monotonic()
                try:
                    todo.update(dict.fromkeys(t for t, _, _ in self.ledger.lagging(self.name)))
                except Exception as exc:
                    logger.debug("langfuse export: scan failed: %s", exc)
            failed: set[str] = set()
            for tid in todo:
                if self._stop:
                    return
                if not self._export_quietly(tid):
                    failed.add(tid)
                    if self.stalled:  # Langfuse is down for every thread: wait, then retry
                        failed.update(todo)
                        break
            if failed:
                with self._cv:
                    self._touched |= failed
                    if not self._stop:
                        self._cv.wait(max(0.25, self._backoff))

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every event committed so far (by this process) is in Langfuse.

        Returns ``False`` when Langfuse did not accept everything in time; nothing is
        dropped — the cursor stays and the export goes on in the background.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            target = dict(self._target)
            self._touched |= {t for t, s in target.items() if self._done.get(t, 0) < s}
            self._force += 1
            self._cv.notify_all()
            try:
                while any(self._done.get(t, 0) < s for t, s in target.items()):
                    if self._thread is None or not self._thread.is_alive():
                        return False
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._cv.wait(0.1 if left is None else min(left, 0.1))
            finally:
                self._force -= 1
        return True

    def health(self) -> dict[str, Any]:
        """Spans sent, the last error, and how many threads are behind (this process)."""
        with self._cv:
            behind = sum(1 for t, s in self._target.items() if self._done.get(t, 0) < s)
        return {
            "spans_sent": self.spans_sent,
            "batches_sent": self.batches_sent,
            "threads_behind": behind,
            "last_error": self.last_error,
        }

    def close(self, timeout: float = 5.0) -> None:
        """Give the export ``timeout`` seconds to catch up, then stop (the rest waits in the
        ledger for the next start or ``lgx export langfuse``)."""
        if self._thread is not None:
            if not self.flush(timeout):
                logger.warning(
                    "langfuse export: not caught up at close (%s); the rest is sent by the "
                    "next start or `lgx export langfuse`",
                    self.last_error or "still sending",
                )
            with self._cv:
                self._stop = True
                self._cv.notify_all()
            self._thread.join(timeout=self.config.timeout + 5)
        self.sender.close()
        with self._db_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        if self._own_ledger:
            self.ledger.close()

    # -- linking other instrumentation ----------------------------------------------------------
    def trace_context(self, thread_id: str) -> dict[str, str] | None:
        """The trace a resume of ``thread_id`` continues (for Langfuse's own handler).

        ``{"trace_id", "parent_span_id"}`` of the thread's latest run if it ended at an
        interrupt, else ``None`` (the next run opens a new trace: use
        :func:`trace_context_for_run`).
        """
        with self._db() as conn:
            rows = conn.execute(self._sql["open_chain"], (thread_id,)).fetchall()
        root: str | None = None
        interrupted = False
        for _seq, kind, run_id, payload in rows:
            if kind == "interrupt":
                interrupted = True
                continue
            p = payload or {}
            cont = p.get("command") == "resume" or ("input" in p and p.get("input") is None)
            if not (interrupted and cont) or root is None:
                root = run_id
            interrupted = False
        if root is None or not interrupted:
            return None
        return trace_context_for_run(root)


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


def _package_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("langgraph-external")
    except Exception:
        return None


__all__ = [
    "PROJECTION",
    "ExportReport",
    "ExportStalled",
    "LangfuseExport",
    "LangfuseExporter",
    "trace_context_for_run",
]
