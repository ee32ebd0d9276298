"""Langfuse export: the ledger as a self-hosted Langfuse view that never loses a span.

The ``langfuse`` preset of the OTLP export (:mod:`~langgraph_external.exporters.otlp`):
each thread's committed events are mapped to Langfuse observations
(:mod:`~langgraph_external.exporters._langfuse_map`), POSTed as OTLP to
``<base_url>/api/public/otel/v1/traces`` with the project's keys, and the cursor
(``projection_cursors.projection = 'langfuse'``) moves only once Langfuse accepted the
batch. :class:`LangfuseExport` keeps the Langfuse names of the options (``base_url``,
``public_key``, ``secret_key``); :meth:`LangfuseExport.to_otlp` is the same
configuration as an :class:`~langgraph_external.exporters.OtlpExport`.

Example:
    >>> cfg = LangfuseExport(public_key="pk-lf-1", secret_key="sk-lf-1",
    ...                      base_url="http://127.0.0.1:3000")
    >>> cfg.resolved().base_url
    'http://127.0.0.1:3000'
    >>> cfg.to_otlp().resolved().url
    'http://127.0.0.1:3000/api/public/otel/v1/traces'
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from langgraph_external.exporters.otlp import (
    ExportReport,
    ExportStalled,
    OtlpExport,
    OtlpExporter,
    trace_context_for_run,
)
from langgraph_external.ledger import schema as ledger_sql
from langgraph_external.ledger.postgres import PostgresLedger

PROJECTION = "langfuse"
"""The Langfuse export's cursor name in ``projection_cursors``."""


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

    def to_otlp(self) -> OtlpExport:
        """The same export as an :class:`OtlpExport` (preset ``langfuse``): every option
        keeps its name there but ``base_url``, which is the ``endpoint``."""
        options = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "base_url"}
        return OtlpExport(preset="langfuse", endpoint=self.base_url, **options)

    def resolved(self) -> LangfuseExport:
        """This configuration with unset values taken from the environment.

        Raises:
            ConfigurationError: a key or the base URL is missing, or a value is invalid.
        """
        cfg = self.to_otlp().resolved()
        return replace(
            self,
            public_key=cfg.public_key,
            secret_key=cfg.secret_key,
            base_url=cfg.endpoint,
            environment=cfg.environment,
            release=cfg.release,
        )


class LangfuseExporter(OtlpExporter):
    """Tails the ledger and sends every thread's observations to Langfuse.

    An :class:`~langgraph_external.exporters.OtlpExporter` of the ``langfuse`` preset.
    Use it through ``External(langfuse=...)``, ``lgx export langfuse`` or directly.

    Args:
        config: a :class:`LangfuseExport` (or an ``OtlpExport`` of preset ``langfuse``).
        dsn: the ledger's database.
        schema: the ledger's schema.
        ledger: an open :class:`PostgresLedger` to share (else one is opened).
    """

    def __init__(
        self,
        config: LangfuseExport | OtlpExport,
        dsn: str,
        schema: str = ledger_sql.DEFAULT_SCHEMA,
        *,
        ledger: PostgresLedger | None = None,
    ) -> None:
        otlp = config.to_otlp() if isinstance(config, LangfuseExport) else config
        super().__init__(otlp, dsn, schema, ledger=ledger)


__all__ = [
    "PROJECTION",
    "ExportReport",
    "ExportStalled",
    "LangfuseExport",
    "LangfuseExporter",
    "trace_context_for_run",
]
