"""The one place where the record is assembled: ledger, processors, projections, and
the official Postgres saver the record is captured with.

Both :class:`~langgraph_external.External` and a standalone
:class:`~langgraph_external.sources.checkpointer.ExternalCheckpointer` get their pipeline here,
so every path a user can take has the same processors (redaction on by default) and the
same projections. The official saver's tables are set up by :func:`setup_saver` on every
path (``External``, ``lgx setup --roles``, ``lgx import``): two processes may run it at
once on a fresh database, and it retries what that race raises.

Example:
    >>> rec = Recording.__new__(Recording)  # doctest: +SKIP
    >>> with assemble(workspace="./ws", dsn=None) as rec:  # doctest: +SKIP
    ...     rec.pipeline.emit(Event.new("error", "t"))
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_external.errors import ConfigurationError, LedgerUnavailableError
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.contract import Projection
from langgraph_external.ledger.embedded import EmbeddedPostgres
from langgraph_external.ledger.pools import POOL_MAX_IDLE, acheck_idle, check_idle
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.pipeline.pipeline import Pipeline, default_spool_dir
from langgraph_external.processes.worker import HelperProcess, NotifyingBackend, WorkerConfig
from langgraph_external.proof.heads import make_signer, sign_interval_from_env
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.keys import load_key
from langgraph_external.record.processors import Redactor
from langgraph_external.record.redaction import as_redactor
from langgraph_external.upstream import langgraph as _compat
from langgraph_external.upstream import saver_ops
from langgraph_external.upstream.saver_lock import NoLock
from langgraph_external.upstream.serde import portable_serde
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.projection import WorkspaceProjection

logger = logging.getLogger("langgraph_external")


SEALING_MODES = ("process", "thread", "worker")
"""Where captures are sealed (see :func:`assemble`)."""


@dataclass
class Recording:
    """What :func:`assemble` built: close it to flush and stop everything it started.

    ``mirror`` is the workspace projection when it runs in this process (``sealing``
    ``"thread"``), else ``None``.
    """

    pipeline: Pipeline
    dsn: str
    workspace: Workspace | None
    mirror: WorkspaceProjection | None
    embedded: EmbeddedPostgres | None
    sealing: str = "thread"

    def close(self) -> None:
        """Flush and close the pipeline, then release an embedded server it started (the
        server keeps running for the next process)."""
        try:
            self.pipeline.close()
        finally:
            if self.embedded is not None:
                self.embedded.release()  # the server stays up for the next process

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def resolve_redactor(
    redaction: str = "standard", redactor: Redactor | None = None
) -> Redactor | None:
    """The redactor for a level name (``None`` for ``"off"``), or ``redactor`` itself."""
    if redactor is not None:
        return redactor
    try:
        return as_redactor(redaction)  # type: ignore[arg-type]
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(str(exc)) from exc


def resolve_sealing(sealing: str | None) -> str:
    """``sealing``, else ``$LGX_SEALING``, else ``"process"``; checked.

    Raises:
        ConfigurationError: not one of :data:`SEALING_MODES`.
    """
    mode = sealing or os.environ.get("LGX_SEALING") or "process"
    if mode not in SEALING_MODES:
        raise ConfigurationError(f"sealing must be one of {', '.join(SEALING_MODES)}, not {mode!r}")
    return mode


def embedded_for(
    workspace: Workspace, embedded_dir: str | os.PathLike[str] | None
) -> EmbeddedPostgres:
    """The embedded server used when no DSN is configured."""
    if embedded_dir is None:
        if not workspace.is_local:
            raise ConfigurationError(
                "a remote workspace needs dsn=... or embedded_dir=... for Postgres"
            )
        embedded_dir = Path(workspace.root) / ".lgx" / "pgdata"
    return EmbeddedPostgres(embedded_dir)


def assemble(
    *,
    workspace: str | os.PathLike[str] | Workspace | None,
    dsn: str | None = None,
    schema: str = ledger.DEFAULT_SCHEMA,
    redaction: str = "standard",
    redactor: Redactor | None = None,
    cipher: WorkspaceCipher | None = None,
    key: str | bytes | None = None,
    encrypt: bool = True,
    serde: SerializerProtocol | None = None,
    strict: bool = False,
    offload_threshold: int = 64 * 1024,
    spool_dir: str | os.PathLike[str] | None = None,
    embedded: EmbeddedPostgres | None = None,
    embedded_dir: str | os.PathLike[str] | None = None,
    projections: Sequence[Projection] = (),
    sealing: str | None = None,
    exports: Sequence[Any] = (),
    **pipeline_options: Any,
) -> Recording:
    """Start what is needed, set the ledger up, and build the pipeline and its sealer.

    ``dsn=None`` reads ``LGX_DSN`` and otherwise starts an embedded PostgreSQL.
    ``cipher`` (else ``key``, else the deployment key: ``$LGX_KEY`` or the key file,
    created on first use, see :mod:`langgraph_external.record.keys`) keys every content
    address, anchors the chain heads and, with ``encrypt``, seals the exact copies.

    ``sealing`` (default ``$LGX_SEALING`` or ``"process"``): ``"process"`` starts a helper
    process that seals, mirrors the workspace and runs the ``exports``, stopped with the
    pipeline; ``"thread"`` does that in threads of this process (also chosen, with a log
    line, when something must stay here: custom ``projections``, or a redactor or
    serializer that cannot be pickled); ``"worker"`` seals nothing here — ``lgx worker``
    processes do (``workspace`` may then be ``None``).

    Raises:
        LedgerUnavailableError: Postgres cannot be reached.
        WorkspaceError: the workspace is not writable.
        ConfigurationError: no workspace where one is needed, an unknown ``sealing``.
    """
    schema = ledger.validate_schema(schema)
    mode = resolve_sealing(sealing)
    sign_interval = sign_interval_from_env()
    red = resolve_redactor(redaction, redactor)
    ws = (
        workspace if isinstance(workspace, Workspace) or workspace is None else Workspace(workspace)
    )
    if ws is None and mode != "worker":
        raise ConfigurationError("a workspace is needed unless sealing='worker'")
    if cipher is None:
        cipher = load_key(key, workspace_root=ws.root if ws is not None and ws.is_local else None)
    dsn = dsn if dsn is not None else os.environ.get("LGX_DSN") or None
    server = embedded
    if dsn is None:
        if ws is None:
            raise ConfigurationError("sealing='worker' needs dsn=... (the database it shares)")
        server = server or embedded_for(ws, embedded_dir)
        dsn = server.start()
    try:
        # reach Postgres before touching the workspace: a wrong DSN leaves nothing behind
        try:
            with ledger.connect(dsn, autocommit=True, connect_timeout=10) as conn:
                if ws is not None and mode != "worker":
                    ws.check_writable()
                ledger.setup(conn, schema)
        except psycopg.Error as exc:
            raise LedgerUnavailableError(f"cannot set up the ledger: {exc}") from exc
        store = PostgresLedger(dsn, schema, cipher=cipher)
        config = None
        if mode == "process":
            assert ws is not None
            config = WorkerConfig(
                dsn=dsn,
                schema=schema,
                # absolute: the helper may have been forked where another cwd held
                workspace=ws.root if ws.is_local else ws.location,
                storage_options=ws.storage_options,
                fsync=ws.fsync,
                cipher=cipher,
                encrypt=encrypt,
                redactor=red,
                offload_threshold=offload_threshold,
                serde=portable_serde(serde),
                exports=list(exports),
                spool_dir=os.path.abspath(spool_dir or default_spool_dir()),
                sign_interval=sign_interval,
            )
            why = "custom projections run here" if projections else HelperProcess.picklable(config)
            if why is not None:
                logger.info("langgraph-external: sealing in a thread of this process (%s)", why)
                mode = "thread"
        mirror = None
        backend: Any
        if mode == "process":
            assert config is not None
            backend = HelperProcess(config)
        elif mode == "worker":
            backend = NotifyingBackend(store, schema)
        else:
            assert ws is not None
            mirror = WorkspaceProjection(ws, serde=serde, redactor=red, cipher=cipher)
            backend = "thread"
        # sealing here: this process signs the log's heads (the key is loaded first)
        signer = make_signer(store, interval=sign_interval) if backend == "thread" else None
        pipeline = Pipeline(
            store,
            projections=[mirror, *projections] if mirror is not None else [],
            redactor=red,
            offload_threshold=offload_threshold,
            strict=strict,
            spool_dir=spool_dir,
            cipher=cipher,
            encrypt=encrypt,
            serde=serde,
            sealing=backend,
            # the app's events are redacted where they are sealed — by this app's own
            # helper or threads, with its processors — never by an `lgx worker`, whose
            # redactor may be another
            defer=mode in ("thread", "process"),
            **pipeline_options,
        )
        if pipeline.service is not None and signer is not None:
            # what the service sealed before it had the signer (a replayed spool) is
            # covered by its first head
            signer.note_sealed()
            pipeline.service.signer = signer
    except BaseException:
        if server is not None and embedded is None:
            server.release()
        raise
    return Recording(pipeline, dsn, ws, mirror, server if embedded is None else None, mode)


# -- the official Postgres saver ---------------------------------------------------------
SAVER_CONN_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
"""Connection settings the official saver needs of its pool."""

SETUP_ATTEMPTS = 50
SETUP_RACES = (
    psycopg.errors.UniqueViolation,  # both recorded the same migration
    psycopg.errors.DuplicateObject,  # both created the same table (its row type)
    psycopg.errors.DuplicateTable,
    # one's CREATE INDEX CONCURRENTLY waits for the other's transaction, which waits for it
    psycopg.errors.DeadlockDetected,
)
"""What two processes running the official saver's ``setup()`` at once may raise."""


def setup_saver(setup: Callable[[], Any]) -> None:
    """Run the official saver's ``setup`` (e.g. ``PostgresSaver(conn).setup``), which two
    processes cannot run at once.

    On a fresh database both create the same tables or record the same migration and one
    fails (a unique violation, a duplicate object); its migrations use ``CREATE INDEX
    CONCURRENTLY``, so a lock around it would wait for the other process's lock request
    forever. Retrying once the other is done is safe: every migration is idempotent and a
    finished setup is a no-op.

    Example:
        >>> setup_saver(lambda: None)  # a setup that has nothing to do
    """
    for attempt in range(SETUP_ATTEMPTS):
        try:
            setup()
            return
        except SETUP_RACES:
            if attempt == SETUP_ATTEMPTS - 1:
                raise
            time.sleep(0.2)


async def asetup_saver(setup: Callable[[], Awaitable[Any]]) -> None:
    """Async :func:`setup_saver` (e.g. ``AsyncPostgresSaver(pool).setup``)."""
    for attempt in range(SETUP_ATTEMPTS):
        try:
            await setup()
            return
        except SETUP_RACES:
            if attempt == SETUP_ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.2)


def saver_is_current(where: ConnectionPool[Any] | str, migrations: int) -> bool:
    """Whether the official saver's tables are set up already (a read: no DDL rights needed).

    An application role granted only data rights (``lgx setup --roles``) cannot run the
    saver's ``setup()``, whose first statement is a ``CREATE TABLE IF NOT EXISTS``.
    """
    try:
        if isinstance(where, str):
            with psycopg.connect(where, autocommit=True, connect_timeout=10) as conn:
                row = conn.execute(saver_ops.SAVER_VERSION_SQL).fetchone()
                version = row[0] if row else -1
        else:
            with where.connection() as conn:
                found = conn.execute(saver_ops.SAVER_VERSION_SQL).fetchone()
                version = found["v"] if found else -1
    except psycopg.Error:
        return False
    return int(version) >= migrations - 1


def open_saver(dsn: str, pool_size: int) -> tuple[PostgresSaver, ConnectionPool[Any]]:
    """The official sync saver on its own pool, its tables set up, its lock removed.

    A connection that idled through a database restart is replaced before it is handed
    out (:func:`~langgraph_external.ledger.pools.check_idle`); the saver's per-instance
    lock, which would serialize the whole pool, is swapped for no lock. Close the pool.
    """
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn,
        min_size=1,
        max_size=pool_size,
        kwargs=dict(SAVER_CONN_KWARGS),
        max_idle=POOL_MAX_IDLE,
        check=check_idle,
        open=True,
    )
    try:
        saver = PostgresSaver(pool)
        if not saver_is_current(pool, len(saver.MIGRATIONS)):
            setup_saver(saver.setup)
        _compat.replace_lock(saver, NoLock())
    except BaseException:
        pool.close()
        raise
    return saver, pool


async def aopen_saver(
    dsn: str, pool_size: int
) -> tuple[AsyncPostgresSaver, AsyncConnectionPool[Any]]:
    """Async :func:`open_saver`: the official async saver on its own pool."""
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn,
        min_size=1,
        max_size=pool_size,
        kwargs=dict(SAVER_CONN_KWARGS),
        max_idle=POOL_MAX_IDLE,
        check=acheck_idle,
        open=False,
    )
    await pool.open()
    try:
        saver = AsyncPostgresSaver(pool)
        if not await asyncio.to_thread(saver_is_current, dsn, len(saver.MIGRATIONS)):
            await asetup_saver(saver.setup)
        _compat.replace_lock(saver, NoLock())
    except BaseException:
        await pool.close()
        raise
    return saver, pool
