"""A sealing process's work, wherever it runs (the app's helper process, ``lgx worker``):
the configuration it gets (:class:`WorkerConfig`, picklable) and the running service
with what it owns (:class:`Running`: ledger, sealer, workspace mirror, exporters, and a
``LISTEN`` thread that wakes it on ``NOTIFY``).

Example:
    >>> notify_channel("langgraph_external")
    'lgx_capture_langgraph_external'
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import psycopg

from langgraph_external.ledger import schema as ledger_sql
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.pipeline.failures import Failures
from langgraph_external.pipeline.processing import EventProcessing
from langgraph_external.pipeline.service import SealingService
from langgraph_external.pipeline.wal import default_spool_dir
from langgraph_external.proof.heads import DEFAULT_SIGN_INTERVAL, make_signer
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.keys import load_key
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.projection import WorkspaceProjection

logger = logging.getLogger("langgraph_external")

__all__ = ["Running", "WorkerConfig", "notify_channel"]


def notify_channel(schema: str) -> str:
    """The ``LISTEN``/``NOTIFY`` channel captures of ``schema`` are announced on."""
    return f"lgx_capture_{schema}"


@dataclass
class WorkerConfig:
    """Everything a sealing process needs (picklable: it travels to a helper over a pipe).

    Args:
        dsn: the database with the saver's tables, the ledger and the captures.
        schema: the ledger schema.
        workspace: local path or fsspec URL of the workspace to mirror (``None``: none).
        storage_options, fsync: the workspace's fsspec options and fsync.
        cipher: the deployment key (``None``: ``$LGX_KEY`` or the key file).
        encrypt: encrypt exact copies.
        redactor: redaction of the events the app left to the sealer and of the readable
            views (checkpoint metadata and values).
        offload_threshold: payloads or raw bytes larger than this go to artifacts.
        serde: the saver's serializer (``None``: LangGraph's default).
        exports: exporter configurations (``OtlpExport``, ``LangfuseExport``) to run beside
            the mirror.
        spool_dir: where refused captures are kept for a person.
        poll_interval, retry_interval: seconds between looks for work, and retries.
        sign_interval: seconds between signed heads of the log while anything is sealed
            (0: none are signed; see :mod:`langgraph_external.proof.heads`).
        signing_key_file: the log's signing key (``None``: ``$LGX_SIGNING_KEY_FILE`` or
            the default file, created on first use).
    """

    dsn: str
    schema: str = "langgraph_external"
    workspace: str | None = None
    storage_options: dict[str, Any] | None = None
    fsync: bool = False
    cipher: WorkspaceCipher | None = None
    encrypt: bool = True
    redactor: Any = None
    offload_threshold: int = 64 * 1024
    serde: Any = None
    exports: list[Any] = field(default_factory=list)
    spool_dir: str | None = None
    poll_interval: float = 1.0
    retry_interval: float = 1.0
    sign_interval: float = DEFAULT_SIGN_INTERVAL
    signing_key_file: str | None = None


class Running:
    """A started sealing service with what it owns (ledger, exporters, and with ``listen``
    a thread that wakes it on ``NOTIFY``)."""

    def __init__(self, config: WorkerConfig, *, listen: bool = False) -> None:
        self.config = config
        cipher = config.cipher or load_key(None)
        with ledger_sql.connect(config.dsn, autocommit=True, connect_timeout=10) as conn:
            ledger_sql.setup(conn, config.schema)
        self.ledger = PostgresLedger(config.dsn, config.schema, cipher=cipher)
        projections: list[Any] = []
        if config.workspace is not None:
            ws = Workspace(
                config.workspace, fsync=config.fsync, storage_options=config.storage_options
            )
            projections.append(
                WorkspaceProjection(ws, serde=config.serde, redactor=config.redactor, cipher=cipher)
            )
        spool = config.spool_dir or str(default_spool_dir())
        self.service = SealingService(
            self.ledger,
            projections=projections,
            cipher=cipher,
            encrypt=config.encrypt,
            serde=config.serde,
            # the app's processors (what it leaves to the sealer is processed alike)
            processors=EventProcessing(
                Failures(), redactor=config.redactor, offload_threshold=config.offload_threshold
            ).processors,
            poll_interval=config.poll_interval,
            retry_interval=config.retry_interval,
            quarantine_dir=os.path.join(spool, "quarantine", self.ledger.identity()),
            signer=make_signer(
                self.ledger, interval=config.sign_interval, key_file=config.signing_key_file
            ),
        ).start()
        self.exporters: list[Any] = []
        for export in config.exports:
            # exporters sit above the pipeline; only a process that exports imports them
            # (and the OpenTelemetry SDK)
            from langgraph_external.exporters.langfuse import LangfuseExporter  # lazy: the SDK
            from langgraph_external.exporters.otlp import OtlpExport, OtlpExporter  # lazy: SDK

            otlp = export if isinstance(export, OtlpExport) else export.to_otlp()
            cls = LangfuseExporter if otlp.preset == "langfuse" else OtlpExporter
            exporter = cls(otlp, config.dsn, config.schema)
            exporter.attach(self.service)
            self.exporters.append(exporter)
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        if listen:
            self._listener = threading.Thread(
                target=self._listen, name="langgraph-external-listen", daemon=True
            )
            self._listener.start()

    def _listen(self) -> None:
        """Wake the sealer on ``NOTIFY`` (apps announce captures); reconnect on errors."""
        channel = notify_channel(self.config.schema)
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.config.dsn, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f'listen "{channel}"')
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self.service.wake()
            except psycopg.Error as exc:
                logger.debug("LISTEN connection lost (%s); polling until it is back", exc)
                self._stop.wait(self.config.retry_interval)

    def flush(
        self,
        threads: Collection[str],
        horizon: str,
        timeout: float | None,
        exports: bool = True,
    ) -> bool:
        start = time.monotonic()
        ok = self.service.flush(threads, horizon, timeout)
        for exporter in self.exporters if exports else ():
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
            ok = exporter.flush(left) and ok
        return ok

    def health(self) -> dict[str, Any]:
        out = self.service.health()
        if self.exporters:
            out["exports"] = {x.name: x.health() for x in self.exporters}
        # this process's database connections (an outage fills pools up; they shrink back)
        pools = {"ledger": self.ledger.connections()}
        for x in self.exporters:
            if (
                isinstance(getattr(x, "ledger", None), PostgresLedger)
                and x.ledger is not self.ledger
            ):
                pools[f"export {x.name}"] = x.ledger.connections()
        out["connections"] = pools
        return out

    def close(self, timeout: float = 30.0) -> bool:
        self._stop.set()
        start = time.monotonic()
        ok = self.service.close(timeout)
        for exporter in self.exporters:
            exporter.close()
        self.ledger.close()
        if self._listener is not None:
            self._listener.join(timeout=max(0.0, timeout - (time.monotonic() - start)))
        return ok
