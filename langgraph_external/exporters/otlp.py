"""OTLP export: the ledger as traces in any OpenTelemetry backend, never losing a span.

:class:`OtlpExporter` is a projection of the ledger with its own cursor in
``projection_cursors`` (one per configuration: ``langfuse``, ``phoenix``, ``otlp`` or a
name you choose). It reads each thread's committed events after its cursor, maps them to
spans (:mod:`~langgraph_external.exporters._langfuse_map`), POSTs them as OTLP/HTTP
protobuf and moves the cursor only once the receiver accepted the batch. Ids are derived
from ledger ids, so a batch sent twice creates nothing new. One exporter at a time writes
a thread (an advisory lock in Postgres), so any number of app processes and
``lgx export otlp --follow`` sidecars can run.

:class:`OtlpExport` is the whole configuration: a plain, picklable dataclass that
:meth:`~OtlpExport.to_dict`/:meth:`~OtlpExport.from_dict` turn into JSON data and back,
completed from the environment by :meth:`~OtlpExport.resolved` — so another process
(a sidecar, a worker) builds the same exporter from it.

Presets:

* ``langfuse``: Langfuse's endpoint (``<base>/api/public/otel/v1/traces``), Basic auth
  with the project's keys, Langfuse's attributes only (what ``langfuse=True`` sends);
* ``phoenix``: Arize Phoenix (``<base>/v1/traces``, default ``http://localhost:6006``),
  an optional API key, the ``openinference.project.name`` of ``project``;
* ``otlp``: any OTLP/HTTP collector (``<base>/v1/traces``, default
  ``http://localhost:4318``), headers of your choice.

``phoenix`` and ``otlp`` spans carry Langfuse's attributes, the OpenInference ones, the
OpenTelemetry GenAI ones (``gen_ai.*``) and ours (``lgx.*``).

Example:
    >>> cfg = OtlpExport(preset="phoenix", endpoint="http://127.0.0.1:6006", project="agents")
    >>> cfg.resolved().url
    'http://127.0.0.1:6006/v1/traces'
    >>> OtlpExport.from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from urllib.parse import unquote

import psycopg

from langgraph_external import ledger as ledger_sql
from langgraph_external.errors import ConfigurationError, LedgerUnavailableError
from langgraph_external.events import Event
from langgraph_external.exporters import _sql
from langgraph_external.exporters._langfuse_map import (
    END_KINDS,
    POINT_KINDS,
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

_MAPPERS_KEPT = 512
_LOG_EVERY = 60.0  # seconds between two log lines of one failure kind


@dataclass(frozen=True)
class _Preset:
    path: str
    endpoint: str | None  # default base URL (None: required)
    semconv: bool


PRESETS: dict[str, _Preset] = {
    "langfuse": _Preset("/api/public/otel/v1/traces", None, semconv=False),
    "phoenix": _Preset("/v1/traces", "http://localhost:6006", semconv=True),
    "otlp": _Preset("/v1/traces", "http://localhost:4318", semconv=True),
}
"""What each preset sets: the traces path, the default endpoint, the attribute dialects."""

_CURSOR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$")
_RESERVED_CURSORS = frozenset({"workspace"})


@dataclass(frozen=True)
class OtlpExport:
    """Where and how to export the ledger as OTLP traces.

    Unset values are read from the environment by :meth:`resolved`, per preset:
    ``langfuse``: ``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY``, ``LANGFUSE_BASE_URL``
    (or ``LANGFUSE_HOST``), ``LANGFUSE_TRACING_ENVIRONMENT``, ``LANGFUSE_RELEASE``;
    ``phoenix``: ``PHOENIX_COLLECTOR_ENDPOINT``, ``PHOENIX_API_KEY``,
    ``PHOENIX_PROJECT_NAME``, ``PHOENIX_CLIENT_HEADERS``; ``otlp``:
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the whole URL) or
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL), ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or
    ``OTEL_EXPORTER_OTLP_HEADERS`` (``key=value,key2=value2``).

    Args:
        preset: ``"langfuse"``, ``"phoenix"`` or ``"otlp"``.
        endpoint: the receiver's base URL (``http://127.0.0.1:6006``).
        path: the traces path under ``endpoint`` (default: the preset's; ``""`` when
            ``endpoint`` is already the whole URL).
        headers: sent with every request (e.g. ``{"x-honeycomb-team": "..."}``).
        api_key: sent as ``Authorization: Bearer <api_key>``.
        public_key, secret_key: Langfuse's project keys (Basic auth).
        project: the Phoenix project (resource attribute ``openinference.project.name``).
        cursor: the name of this export's cursor in ``projection_cursors`` (default: the
            preset's name). Two exports to different receivers need different cursors.
        semantic_conventions: also send the OpenInference, GenAI and ``lgx.*``
            attributes (default: ``False`` for ``langfuse``, else ``True``).
        max_payload_bytes: an input, output or raw result whose JSON is larger is sent
            as a preview plus its address in the workspace (each value gets a third).
        timeout: seconds to connect and to wait for an answer.
        batch_spans: most spans per POST.
        gzip: compress request bodies.
        verify: TLS verification (``True``, ``False``, or a CA bundle path).
        proxies: ``{"https": "http://proxy:3128"}``; ``HTTPS_PROXY`` works too.
        environment, release: Langfuse environment and release of every trace.
        poll_interval: seconds between scans for threads written by other processes.
        linger: seconds the live exporter waits after a commit to batch what follows.
        backoff_max: most seconds between retries while the receiver is unreachable.
    """

    preset: str = "otlp"
    endpoint: str | None = None
    path: str | None = None
    headers: dict[str, str] | None = None
    api_key: str | None = None
    public_key: str | None = None
    secret_key: str | None = None
    project: str | None = None
    cursor: str | None = None
    semantic_conventions: bool | None = None
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

    # -- plain data ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The configuration as JSON data (secrets included: keep it where keys live)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OtlpExport:
        """Rebuild a configuration from :meth:`to_dict`'s data.

        Raises:
            ConfigurationError: a key that is not an option.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigurationError(f"unknown OTLP export option(s): {', '.join(unknown)}")
        return cls(**dict(data))

    # -- resolution ---------------------------------------------------------------------
    def resolved(self, environ: Mapping[str, str] | None = None) -> OtlpExport:
        """This configuration completed from the environment and checked.

        Raises:
            ConfigurationError: an unknown preset, a missing key or URL, or an invalid value.
        """
        env = os.environ if environ is None else environ
        preset = PRESETS.get(self.preset)
        if preset is None:
            raise ConfigurationError(
                f"unknown OTLP preset {self.preset!r}: choose one of {', '.join(PRESETS)}"
            )
        cfg = self
        if self.preset == "langfuse":
            cfg = _langfuse_from_env(cfg, env)
        elif self.preset == "phoenix":
            cfg = _phoenix_from_env(cfg, env)
        else:
            cfg = _otlp_from_env(cfg, env)
        cfg = replace(
            cfg,
            endpoint=cfg.endpoint or preset.endpoint,
            path=preset.path if cfg.path is None else cfg.path,
            cursor=cfg.cursor or cfg.preset,
            semantic_conventions=(
                preset.semconv if cfg.semantic_conventions is None else cfg.semantic_conventions
            ),
        )
        what = "Langfuse base_url" if cfg.preset == "langfuse" else "OTLP endpoint"
        if not cfg.endpoint:
            raise ConfigurationError(f"{cfg.preset} export needs an endpoint")
        if not cfg.endpoint.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"{what} must start with http:// or https://, not {cfg.endpoint!r}"
            )
        if cfg.path and not cfg.path.startswith("/"):
            raise ConfigurationError(f"the OTLP path must start with '/', not {cfg.path!r}")
        assert cfg.cursor is not None
        if not _CURSOR_NAME.match(cfg.cursor) or cfg.cursor in _RESERVED_CURSORS:
            raise ConfigurationError(
                f"cursor {cfg.cursor!r}: letters, digits, '_', '.', ':', '-' (not 'workspace')"
            )
        if cfg.max_payload_bytes < 1024:
            raise ConfigurationError("max_payload_bytes must be at least 1024")
        if cfg.batch_spans < 1 or cfg.timeout <= 0:
            raise ConfigurationError("batch_spans must be >= 1 and timeout > 0")
        return cfg

    @property
    def url(self) -> str:
        """Where batches are POSTed (of a :meth:`resolved` configuration)."""
        return (self.endpoint or "").rstrip("/") + (self.path or "")

    def request_headers(self) -> dict[str, str]:
        """The headers of every POST: authentication and ``headers``."""
        out = dict(self.headers or {})
        if self.preset == "langfuse" or (self.public_key and self.secret_key):
            import base64

            pair = f"{self.public_key}:{self.secret_key}".encode()
            out["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
            out["x-langfuse-public-key"] = str(self.public_key)
            out["x-langfuse-sdk-name"] = "langgraph-external"
        elif self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out

    def resource_attributes(self) -> dict[str, str]:
        """Resource attributes besides ``service.*`` (Phoenix's project)."""
        return {"openinference.project.name": self.project} if self.project else {}

    @property
    def command(self) -> str:
        """The ``lgx`` command that sends what this export left behind."""
        if self.preset == "langfuse":
            return "lgx export langfuse"
        cmd = f"lgx export otlp --preset {self.preset} --endpoint {self.endpoint}"
        return cmd + (f" --cursor {self.cursor}" if self.cursor != self.preset else "")


def _langfuse_from_env(cfg: OtlpExport, env: Mapping[str, str]) -> OtlpExport:
    cfg = replace(
        cfg,
        public_key=cfg.public_key or env.get("LANGFUSE_PUBLIC_KEY"),
        secret_key=cfg.secret_key or env.get("LANGFUSE_SECRET_KEY"),
        endpoint=cfg.endpoint or env.get("LANGFUSE_BASE_URL") or env.get("LANGFUSE_HOST"),
        environment=cfg.environment or env.get("LANGFUSE_TRACING_ENVIRONMENT"),
        release=cfg.release or env.get("LANGFUSE_RELEASE"),
    )
    missing = [
        name
        for name, value in (
            ("public_key (LANGFUSE_PUBLIC_KEY)", cfg.public_key),
            ("secret_key (LANGFUSE_SECRET_KEY)", cfg.secret_key),
            ("base_url (LANGFUSE_BASE_URL or LANGFUSE_HOST)", cfg.endpoint),
        )
        if not value
    ]
    if missing:
        raise ConfigurationError("Langfuse export needs " + ", ".join(missing))
    return cfg


def _phoenix_from_env(cfg: OtlpExport, env: Mapping[str, str]) -> OtlpExport:
    endpoint, path = cfg.endpoint, cfg.path
    if endpoint is None and env.get("PHOENIX_COLLECTOR_ENDPOINT"):
        endpoint = env["PHOENIX_COLLECTOR_ENDPOINT"].rstrip("/")
        if endpoint.endswith("/v1/traces") and path is None:
            path = ""  # Phoenix's clients accept the whole URL there too
    headers = cfg.headers
    if headers is None and env.get("PHOENIX_CLIENT_HEADERS"):
        headers = parse_headers(env["PHOENIX_CLIENT_HEADERS"])
    return replace(
        cfg,
        endpoint=endpoint,
        path=path,
        headers=headers,
        api_key=cfg.api_key or env.get("PHOENIX_API_KEY") or None,
        project=cfg.project or env.get("PHOENIX_PROJECT_NAME") or None,
    )


def _otlp_from_env(cfg: OtlpExport, env: Mapping[str, str]) -> OtlpExport:
    endpoint, path = cfg.endpoint, cfg.path
    if endpoint is None:
        if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
            path = "" if path is None else path  # the whole URL, as the OTel SDKs use it
        elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    headers = cfg.headers
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS")
    if headers is None and raw:
        headers = parse_headers(raw)
    return replace(cfg, endpoint=endpoint, path=path, headers=headers)


def parse_headers(text: str) -> dict[str, str]:
    """``key=value,key2=value2`` (values URL-encoded, as ``OTEL_EXPORTER_OTLP_HEADERS``).

    Example:
        >>> parse_headers("api-key=a%20b, x-team=blue")
        {'api-key': 'a b', 'x-team': 'blue'}

    Raises:
        ConfigurationError: an item without ``=``.
    """
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"a header must be key=value, not {item.strip()!r}")
        out[unquote(key.strip())] = unquote(value.strip())
    return out


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


class ExportStalled(Exception):
    """The receiver did not accept a batch; the thread's cursor stays where it was."""


class OtlpExporter:
    """Tails the ledger and sends every thread's spans to an OTLP receiver.

    Use it through ``External(export=...)`` (live: a background thread fed by the
    pipeline's commits), ``lgx export otlp`` / ``lgx export langfuse`` (:meth:`export`,
    :meth:`follow`), or directly.

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
            from langgraph_external.exporters._otlp import LANGFUSE_HINTS, Hints, OtlpSender
        except ImportError as exc:  # the OpenTelemetry SDK comes with the extra
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
        self._sql = {
            k: ledger_sql.q(v, self.schema)
            for k, v in {
                "cursor": _sql.SELECT_CURSOR,
                "markers": _sql.SELECT_RUN_MARKERS,
                "threads": _sql.SELECT_THREADS,
                "reset": _sql.RESET_CURSORS,
                "open_chain": _sql.OPEN_CHAIN,
                "events": _sql.SELECT_EVENTS_LEAN,
                "waiting": _sql.COUNT_WAITING,
            }.items()
        }
        self._mappers: OrderedDict[str, ThreadMapper] = OrderedDict()  # most recent last
        self._pending: dict[str, _Pending] = {}
        self.stalled = False  # the last delivery failed: the receiver is down or refusing
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
        self._logged: dict[str, float] = {}  # failure kind -> when it was last logged
        self._gave_up_at: int | None = None  # spans_sent when a flush() last timed out
        self._version = _package_version()
        self._conn: psycopg.Connection[Any] | None = None
        self._db_lock = threading.Lock()

    # -- one thread -----------------------------------------------------------------------
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
        with self.ledger.projection_lock(self.name, thread_id) as held:
            if not held:
                return None
            if is_replay_copy(thread_id):  # never exported: the cursor moves past it unsent
                head = self.ledger.positions([thread_id]).get(thread_id, (0, ""))[0]
                self.ledger.set_cursor(self.name, thread_id, head, None)
                self._mark_done(thread_id, head)
                return head
            cursor, _ = self._cursor(thread_id)
            # the receiver holds every span up to the cursor, whichever exporter sent them
            # (another process's may have sent all there is): done that far for flush()
            self._mark_done(thread_id, cursor)
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
                if pending is not None:  # what the receiver did not take last time, as it was
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
            body = encode(batch, service_version=self._version, resource_attributes=self._resource)
            outcome = self.sender.send(body)
            if outcome.verdict is not Verdict.ACCEPTED:
                self.stalled = True
                self.last_error = outcome.detail
                kind = outcome.failure.value if outcome.failure else outcome.verdict.value
                self._log_failure(outcome.verdict is Verdict.REJECTED, kind, outcome.detail)
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
                logger.warning("%s export: the receiver takes spans again", self.label)
                self._logged.clear()  # the next outage is reported at once
            self.last_error = None
            self._backoff = 0.0

    def _log_failure(self, rejected: bool, kind: str, detail: str) -> None:
        """One line per failure kind and minute (not per attempt), with what waits."""
        now = time.monotonic()
        if now - self._logged.get(kind, -_LOG_EVERY) < _LOG_EVERY:
            return
        self._logged[kind] = now
        waiting = self._waiting_text()
        if rejected:
            logger.error(
                "%s export refused: %s — %s wait in the ledger (nothing is dropped); fix the "
                "configuration, then `%s` sends them",
                self.label,
                detail,
                waiting,
                self.config.command,
            )
        else:
            logger.warning(
                "%s export: %s — %s wait in the ledger (nothing is dropped); retrying",
                self.label,
                detail,
                waiting,
            )

    def count_waiting(self, thread_ids: Sequence[str] = ()) -> dict[str, int]:
        """Spans the receiver has not accepted yet, per thread (``thread_ids``: only those).

        Counted in the ledger: the events after this export's cursor that complete a span.
        """
        with self._db() as conn:
            rows = conn.execute(
                self._sql["waiting"],
                {
                    "projection": self.name,
                    "threads": list(thread_ids),
                    "ends": list(END_KINDS),
                    "points": list(POINT_KINDS),
                },
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows if r[1]}

    def _waiting_text(self) -> str:
        try:
            counts = self.count_waiting()
        except Exception:  # the ledger is down too: say what is known
            return "the spans"
        return f"{_n(sum(counts.values()), 'span')} of {_n(len(counts), 'thread')}"

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

        Without ``thread_ids`` and ``all_threads``: the threads this export is behind on.
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

        A thread the receiver does not accept after ``attempts`` tries (with backoff), or
        that another exporter holds, is reported in ``behind`` with the spans it still
        has waiting; once the receiver refused a thread that many times, the remaining
        threads are reported behind with the same reason without trying them. Nothing is
        lost either way.
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
        while not stop.is_set():
            try:
                lag = [t for t, _, _ in self.ledger.lagging(self.name)]
            except Exception as exc:
                logger.warning("%s export: cannot scan the ledger: %s", self.label, exc)
                stop.wait(self.config.poll_interval)
                continue
            for tid in lag:
                if stop.is_set():
                    return
                self._export_quietly(tid, on_spans)
                if self.stalled:  # the receiver is down for every thread: wait, then rescan
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
            logger.warning("%s export: ledger unavailable: %s", self.label, exc)
            self._backoff = min(self.config.backoff_max, max(0.5, self._backoff * 2))
            return False
        except Exception as exc:  # a value that cannot be mapped: set the thread aside
            err = f"{type(exc).__name__}: {exc}"[:2000]
            logger.error("%s export set thread %r aside: %s", self.label, tid, err)
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
        """Follow ``pipeline``'s commits in a background thread (``External(export=...)``)."""
        pipeline.add_listener(self._on_commit)
        self._thread = threading.Thread(
            target=self._loop, name=f"langgraph-external-{self.name}", daemon=True
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
                    logger.debug("%s export: scan failed: %s", self.label, exc)
            failed: set[str] = set()
            for tid in todo:
                if self._stop:
                    return
                if not self._export_quietly(tid):
                    failed.add(tid)
                    if self.stalled:  # the receiver is down for every thread: wait, then retry
                        failed.update(todo)
                        break
            if failed:
                with self._cv:
                    self._touched |= failed
                    if not self._stop:
                        self._cv.wait(max(0.25, self._backoff))

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every event committed so far (by this process) is in the receiver.

        Returns ``False`` when the receiver did not accept everything in time; nothing is
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
                        self._gave_up_at = self.spans_sent
                        return False
                    self._cv.wait(0.1 if left is None else min(left, 0.1))
            finally:
                self._force -= 1
            self._gave_up_at = None
        return True

    def health(self) -> dict[str, Any]:
        """Spans sent, the last error, and how many threads are behind (this process)."""
        with self._cv:
            behind = sum(1 for t, s in self._target.items() if self._done.get(t, 0) < s)
        return {
            "cursor": self.name,
            "url": self.url,
            "spans_sent": self.spans_sent,
            "batches_sent": self.batches_sent,
            "threads_behind": behind,
            "last_error": self.last_error,
        }

    def close(self, timeout: float = 5.0) -> None:
        """Give the export ``timeout`` seconds to catch up, then stop (the rest waits in the
        ledger for the next start or ``lgx export``).

        No second wait: after a :meth:`flush` that timed out, with no span accepted since,
        it stops at once.
        """
        if self._thread is not None:
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
        """The trace a resume of ``thread_id`` continues (e.g. for Langfuse's own handler).

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


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _package_version() -> str | None:
    try:
        from importlib.metadata import version

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
