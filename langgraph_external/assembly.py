"""The one place where the record is assembled: ledger, processors, projections, and
the official Postgres saver the record is captured with.

Both :class:`~langgraph_external.External` and a standalone
:class:`~langgraph_external.sources.checkpointer.ExternalCheckpointer` get their pipeline here,
so every path a user can take has the same processors (redaction on by default) and the
same projections. The official saver's tables are set up by :func:`setup_saver` on every
path (``External``, ``lgx setup --roles``, ``lgx import``): two processes may run it at
once on a fresh database, and it retries what that race raises.

Example:
    >>> settings = Settings.resolve(workspace="./ws")  # doctest: +SKIP
    >>> with assemble(settings) as rec:  # doctest: +SKIP
    ...     rec.pipeline.emit(Event.new("error", "t"))
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_external.errors import LedgerUnavailableError
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.contract import Projection
from langgraph_external.ledger.embedded import EmbeddedPostgres
from langgraph_external.ledger.pools import POOL_MAX_IDLE, acheck_idle, check_idle
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.processes.worker import HelperProcess, NotifyingBackend
from langgraph_external.proof.heads import make_signer
from langgraph_external.settings import Settings
from langgraph_external.upstream import langgraph as _compat
from langgraph_external.upstream import saver_ops
from langgraph_external.upstream.saver_lock import NoLock
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.projection import WorkspaceProjection

logger = logging.getLogger("langgraph_external")


@dataclass
class Recording:
    """What :func:`assemble` built: close it to flush and stop everything it started.

    ``mirror`` is the workspace projection when it runs in this process (``sealing``
    ``"thread"``), else ``None``. ``settings`` is what was assembled, with the DSN of the
    embedded server when one was started and the sealing mode that was taken.
    """

    pipeline: Pipeline
    settings: Settings
    workspace: Workspace | None
    mirror: WorkspaceProjection | None
    embedded: EmbeddedPostgres | None

    @property
    def dsn(self) -> str:
        """The database the record is in."""
        assert self.settings.dsn is not None
        return self.settings.dsn

    @property
    def sealing(self) -> str:
        """Where captures are sealed (``"thread"`` when ``"process"`` could not be)."""
        return self.settings.sealing

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


def assemble(
    settings: Settings,
    *,
    workspace: Workspace | None = None,
    projections: Sequence[Projection] = (),
    **pipeline_options: Any,
) -> Recording:
    """Start what is needed, set the ledger up, and build the pipeline and its sealer.

    Without a DSN in ``settings`` the embedded server in ``settings.embedded_dir`` is
    started (and released by :meth:`Recording.close`; it keeps running for the next
    process). ``settings.sealing``: ``"process"`` starts a helper process that seals,
    mirrors the workspace and runs the exports, stopped with the pipeline, and gets
    ``settings`` itself; ``"thread"`` does that in threads of this process (also chosen,
    with a log line, when something must stay here: custom ``projections``, or a
    redactor, processor or serializer that cannot be pickled); ``"worker"`` seals nothing
    here — ``lgx worker`` processes do. ``workspace``: the caller's own object for
    ``settings.workspace`` (the mirror then shares it), else one is opened.

    Raises:
        LedgerUnavailableError: Postgres cannot be reached.
        WorkspaceError: the workspace is not writable.
    """
    ws = workspace if workspace is not None else settings.open_workspace()
    server = None
    if settings.dsn is None:
        assert settings.embedded_dir is not None
        server = EmbeddedPostgres(settings.embedded_dir)
        settings = settings.replace(dsn=server.start())
    try:
        return _assemble(settings, ws, server, projections, pipeline_options)
    except BaseException:
        if server is not None:
            server.release()
        raise


def _assemble(
    settings: Settings,
    ws: Workspace | None,
    server: EmbeddedPostgres | None,
    projections: Sequence[Projection],
    pipeline_options: dict[str, Any],
) -> Recording:
    dsn, schema = settings.dsn, settings.schema
    assert dsn is not None
    # reach Postgres before touching the workspace: a wrong DSN leaves nothing behind
    try:
        with ledger.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            if ws is not None and settings.sealing != "worker":
                ws.check_writable()
            ledger.setup(conn, schema)
    except psycopg.Error as exc:
        raise LedgerUnavailableError(f"cannot set up the ledger: {exc}") from exc
    store = PostgresLedger(dsn, schema, cipher=settings.cipher)
    if settings.sealing == "process":
        why = "custom projections run here" if projections else HelperProcess.picklable(settings)
        if why is not None:
            logger.info("langgraph-external: sealing in a thread of this process (%s)", why)
            settings = settings.replace(sealing="thread")
    mirror = None
    backend: Any
    if settings.sealing == "process":
        backend = HelperProcess(settings)
    elif settings.sealing == "worker":
        backend = NotifyingBackend(store, schema)
    else:
        assert ws is not None
        mirror = WorkspaceProjection(
            ws, serde=settings.serde, redactor=settings.redactor, cipher=settings.cipher
        )
        backend = "thread"
    # sealing here: this process signs the log's heads (the key is loaded first)
    signer = (
        make_signer(store, interval=settings.sign_interval, key_file=settings.signing_key_file)
        if backend == "thread"
        else None
    )
    pipeline = Pipeline(
        store,
        projections=[mirror, *projections] if mirror is not None else [],
        redactor=settings.redactor,
        offload_threshold=settings.offload_threshold,
        extra_processors=settings.processors,
        strict=settings.strict,
        spool_dir=settings.spool_dir,
        cipher=settings.cipher,
        encrypt=settings.encrypt,
        serde=settings.serde,
        sealing=backend,
        # the app's events are redacted where they are sealed — by this app's own
        # helper or threads, with its processors — never by an `lgx worker`, whose
        # redactor may be another
        defer=settings.sealing in ("thread", "process"),
        **pipeline_options,
    )
    if pipeline.service is not None and signer is not None:
        # what the service sealed before it had the signer (a replayed spool) is
        # covered by its first head
        signer.note_sealed()
        pipeline.service.signer = signer
    return Recording(pipeline, settings, ws, mirror, server)


# -- the official Postgres saver ---------------------------------------------------------
SAVER_CONN_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
"""Connection settings the official saver needs of its pool."""


def _pool_settings(pool_size: int) -> dict[str, Any]:
    return {
        "min_size": 1,
        "max_size": pool_size,
        "kwargs": dict(SAVER_CONN_KWARGS),
        "max_idle": POOL_MAX_IDLE,
    }


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
        with (
            psycopg.connect(where, autocommit=True, connect_timeout=10)
            if isinstance(where, str)
            else where.connection()
        ) as conn:
            row = conn.cursor(row_factory=tuple_row).execute(saver_ops.SAVER_VERSION_SQL).fetchone()
    except psycopg.Error:
        return False
    return int(row[0] if row else -1) >= migrations - 1


def open_saver(dsn: str, pool_size: int) -> tuple[PostgresSaver, ConnectionPool[Any]]:
    """The official sync saver on its own pool, its tables set up, its lock removed.

    A connection that idled through a database restart is replaced before it is handed
    out (:func:`~langgraph_external.ledger.pools.check_idle`); the saver's per-instance
    lock, which would serialize the whole pool, is swapped for no lock. Close the pool.
    """
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn, **_pool_settings(pool_size), check=check_idle, open=True
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
        dsn, **_pool_settings(pool_size), check=acheck_idle, open=False
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
