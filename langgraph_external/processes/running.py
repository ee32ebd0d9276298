"""A sealing process's work, wherever it runs (the app's helper process, ``lgx worker``):
the running service, built from the resolved
:class:`~langgraph_external.settings.Settings` the process is handed, with what it owns
 (:class:`Running`: ledger, sealer, workspace mirror, exporters, and a
``LISTEN`` thread that wakes it on ``NOTIFY``).

Example:
    >>> notify_channel("langgraph_external")
    'lgx_capture_langgraph_external'
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import psycopg

from langgraph_external.ledger import schema as ledger_sql
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.pipeline.backend import FlushRequest
from langgraph_external.pipeline.background import BackgroundThread, Deadline
from langgraph_external.pipeline.processing import build_processors
from langgraph_external.pipeline.service import SealingService
from langgraph_external.pipeline.wal import default_spool_dir
from langgraph_external.proof.heads import make_signer
from langgraph_external.record.keys import load_key
from langgraph_external.settings import Settings
from langgraph_external.workspace.projection import WorkspaceProjection

logger = logging.getLogger("langgraph_external")

__all__ = ["Running", "notify_channel"]


def notify_channel(schema: str) -> str:
    """The ``LISTEN``/``NOTIFY`` channel captures of ``schema`` are announced on."""
    return f"lgx_capture_{schema}"


class Running:
    """A started sealing service with what it owns (ledger, exporters, and with ``listen``
    a thread that wakes it on ``NOTIFY``)."""

    def __init__(self, config: Settings, *, listen: bool = False) -> None:
        self.config = config
        if config.dsn is None:
            raise ValueError("a sealing process needs the settings' dsn (start the server first)")
        self.dsn: str = config.dsn
        cipher = config.cipher or load_key(None)
        with ledger_sql.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            ledger_sql.setup(conn, config.schema)
        self.ledger = PostgresLedger(self.dsn, config.schema, cipher=cipher)
        projections: list[Any] = []
        ws = config.open_workspace()
        if ws is not None:
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
            processors=build_processors(
                redactor=config.redactor,
                offload_threshold=config.offload_threshold,
                extra=config.processors,
            ),
            poll_interval=config.poll_interval,
            retry_interval=config.retry_interval,
            quarantine_dir=os.path.join(spool, "quarantine", self.ledger.identity()),
            signer=make_signer(
                self.ledger, interval=config.sign_interval, key_file=config.signing_key_file
            ),
        ).start()
        self.exporters: list[Any] = []
        if config.exports:
            # exporters sit above the pipeline; only a process that exports imports them
            from langgraph_external.exporters.build import build_exporters  # lazy: OTel SDK

            self.exporters = build_exporters(config.exports, self.dsn, config.schema)
            for exporter in self.exporters:
                exporter.attach(self.service)
        self._stop = threading.Event()
        self._listener = BackgroundThread("listen", self._listen, wake=self._stop.set)
        if listen:
            self._listener.start()

    def _listen(self) -> None:
        """Wake the sealer on ``NOTIFY`` (apps announce captures); reconnect on errors."""
        channel = notify_channel(self.config.schema)
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f'listen "{channel}"')
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self.service.wake()
            except psycopg.Error as exc:
                logger.debug("LISTEN connection lost (%s); polling until it is back", exc)
                self._stop.wait(self.config.retry_interval)

    def flush(self, request: FlushRequest) -> bool:
        """The service's flush, then the exporters' (with ``request.exports``)."""
        deadline = Deadline(request.timeout)
        ok = self.service.flush(request)
        for exporter in self.exporters if request.exports else ():
            ok = exporter.flush(deadline.left()) and ok
        return ok

    def health(self) -> dict[str, Any]:
        out = self.service.health()
        if self.exporters:
            out["exports"] = {x.name: x.health() for x in self.exporters}
        # this process's database connections (an outage fills pools up; they shrink back)
        pools = {"ledger": self.ledger.connections()}
        for x in self.exporters:
            own = getattr(x, "ledger", None)
            if isinstance(own, PostgresLedger) and own is not self.ledger:
                pools[f"export {x.name}"] = own.connections()
        out["connections"] = pools
        return out

    def close(self, timeout: float = 30.0) -> bool:
        self._stop.set()
        deadline = Deadline(timeout)
        ok = self.service.close(timeout)
        for exporter in self.exporters:
            exporter.close()
        self.ledger.close()
        self._listener.stop(timeout=deadline.left())
        return ok
