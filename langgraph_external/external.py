"""``External``: the facade that wires Postgres, the workspace and the checkpointer together.

Example:
    >>> from langgraph_external import External                       # doctest: +SKIP
    >>> with External(workspace="./agent_workspace") as ext:            # doctest: +SKIP
    ...     graph = builder.compile(checkpointer=ext.checkpointer)
    ...     graph.invoke(inputs, ext.config("thread-42"))
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_external import _compat, ledger
from langgraph_external._nolock import NoLock
from langgraph_external._pools import acheck_idle, check_idle
from langgraph_external.assembly import (
    Recording,
    assemble,
    embedded_for,
    resolve_redactor,
    resolve_sealing,
)
from langgraph_external.callbacks import (
    POLICY_HASH_KEY,
    TAGS_KEY,
    USER_ID_KEY,
    AuditCallbackHandler,
)
from langgraph_external.checkpointers import ExternalCheckpointer, untapped_serde
from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.embedded import EmbeddedPostgres
from langgraph_external.errors import ConfigurationError
from langgraph_external.exporters.langfuse import LangfuseExport, LangfuseExporter
from langgraph_external.exporters.otlp import OtlpExport, OtlpExporter
from langgraph_external.keys import load_key
from langgraph_external.pipeline import Pipeline
from langgraph_external.processors import Redactor
from langgraph_external.sinks.base import Projection
from langgraph_external.stores import AuditedStore
from langgraph_external.thread_ids import check_thread_id
from langgraph_external.workspace import Workspace

_SAVER_CONN_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


class External:
    """Record a LangGraph app into Postgres and a file workspace.

    Args:
        dsn: PostgreSQL connection string. ``None`` reads ``LGX_DSN``; if that is unset
            too, an embedded PostgreSQL is started under ``embedded_dir``.
        workspace: local directory or fsspec URL of the workspace.
        schema: ledger schema name.
        strict: raise on any recording failure instead of spooling and continuing.
        redaction: ``"standard"`` (default: keys, tokens, JWTs, card numbers, values of
            sensitive keys), ``"strict"`` (also emails, phone numbers, IP addresses, long
            digit runs) or ``"off"``; applied before anything is recorded. See
            :mod:`langgraph_external.redaction`.
        redactor: your own ``(value) -> (value, count)`` callable instead of a level.
        offload_threshold: payloads larger than this many bytes become artifacts.
        spool_dir: local directory for batches a sink could not take yet.
        embedded_dir: data directory of the embedded server (default
            ``<workspace>/.lgx/pgdata`` for a local workspace).
        fsync: fsync workspace files as they are written.
        pool_size: most connections the checkpointer uses at once.
        inner: a saver to wrap instead of the official Postgres saver.
        projections: more views fed from the ledger after the workspace (e.g. an exporter).
        record_behaviour: attach the :class:`AuditCallbackHandler` in :meth:`config`.
        key: the deployment key (32 bytes, or base64 / hex text). Default ``$LGX_KEY``,
            else the key file ``$LGX_KEY_FILE`` or ``~/.config/langgraph-external/key``,
            created (mode 0600) on first use. It keys every content address (HMAC), anchors
            each thread's chain head, and encrypts the exact checkpoint copies. See
            :mod:`langgraph_external.keys` and ``docs/security.md``.
        encrypt: encrypt the exact checkpoint copies (ledger and workspace) with the key,
            AES-256-GCM (default). ``False`` keeps them in clear: they are your app's
            state, unredacted.
        encryption_key: the earlier name of ``key``.
        langfuse: ``True`` (keys and URL from ``LANGFUSE_*``) or a
            :class:`~langgraph_external.exporters.LangfuseExport`: a background exporter
            sends the ledger to Langfuse (see docs/langfuse.md); the graph never waits.
        export: an :class:`~langgraph_external.exporters.OtlpExport` (or several): a
            background exporter each sends the ledger as OTLP traces — to Phoenix, any
            OpenTelemetry collector, or Langfuse (see docs/otlp.md). Each has its own
            cursor; the graph never waits.
        sealing: where the record is sealed after commit (hash chain, keyed heads,
            encryption), the workspace mirrored and traces exported. ``"process"`` (the
            default, or ``$LGX_SEALING``): a helper process started and stopped with this
            ``External`` — the app's threads only capture; ``"thread"``: background
            threads of this process; ``"worker"``: nothing here, ``lgx worker`` processes
            do it for every app on the database (``workspace`` is then theirs; pass
            ``workspace=None``). See docs/architecture.md.

    Use it as a context manager (``with`` or ``async with``) or call :meth:`setup` /
    :meth:`close` yourself. ``async with`` wraps the official async Postgres saver.
    """

    def __init__(
        self,
        dsn: str | None = None,
        workspace: str | os.PathLike[str] | None = "./agent_workspace",
        *,
        schema: str = ledger.DEFAULT_SCHEMA,
        strict: bool = False,
        redaction: str = "standard",
        redactor: Redactor | None = None,
        offload_threshold: int = 64 * 1024,
        spool_dir: str | os.PathLike[str] | None = None,
        embedded_dir: str | os.PathLike[str] | None = None,
        fsync: bool = False,
        pool_size: int = 8,
        storage_options: dict[str, Any] | None = None,
        inner: BaseCheckpointSaver[Any] | None = None,
        projections: Sequence[Projection] = (),
        record_behaviour: bool = True,
        key: str | bytes | None = None,
        encrypt: bool = True,
        encryption_key: str | bytes | None = None,
        langfuse: bool | LangfuseExport | None = None,
        export: OtlpExport | LangfuseExport | Sequence[OtlpExport | LangfuseExport] | None = None,
        sealing: str | None = None,
    ) -> None:
        self.schema = ledger.validate_schema(schema)
        self.sealing = resolve_sealing(sealing)
        if workspace is None and self.sealing != "worker":
            raise ConfigurationError("workspace=None needs sealing='worker' (workers mirror)")
        self.workspace: Workspace | None = (
            Workspace(workspace, fsync=fsync, storage_options=storage_options)
            if workspace is not None
            else None
        )
        self.dsn = dsn if dsn is not None else os.environ.get("LGX_DSN") or None
        self.strict = strict
        self.redactor = resolve_redactor(redaction, redactor)
        self.offload_threshold = offload_threshold
        self.spool_dir = spool_dir
        self.pool_size = pool_size
        self._inner_given = inner
        self._projections = list(projections)
        self._recording: Recording | None = None
        self.record_behaviour = record_behaviour
        ws = self.workspace
        self.cipher: WorkspaceCipher = load_key(
            key if key is not None else encryption_key,
            workspace_root=ws.root if ws is not None and ws.is_local else None,
        )
        self.encrypt = encrypt
        self._audit: AuditCallbackHandler | None = None
        self._embedded: EmbeddedPostgres | None = None
        if self.dsn is None:
            if ws is None:
                raise ConfigurationError("sealing='worker' needs dsn=... (the shared database)")
            self._embedded = embedded_for(ws, embedded_dir)
        self._pool: ConnectionPool[Any] | None = None
        self._apool: AsyncConnectionPool[Any] | None = None
        self._checkpointer: ExternalCheckpointer | None = None
        self.pipeline: Pipeline | None = None
        self._is_setup = False
        self._export_configs = _export_configs(langfuse, export)
        if self._export_configs and self.sealing == "worker":
            raise ConfigurationError(
                "with sealing='worker' the workers export: run `lgx worker --langfuse`"
                " (or `lgx export otlp --follow`)"
            )
        self.exporters: list[OtlpExporter] = []
        """The exporters (``External(export=...)``, ``langfuse=``), once set up: running
        here with ``sealing="thread"``; else the helper process runs them and these answer
        questions about them (``trace_context``)."""
        self.langfuse: OtlpExporter | None = None
        """The exporter of the ``langfuse`` preset, if one is configured."""
        self._exports_here = False

    # -- lifecycle ----------------------------------------------------------------------
    def _prepare(self) -> str:
        """Everything both setups share: server, workspace, ledger, pipeline, sealer."""
        given = self._inner_given
        self._recording = assemble(
            workspace=self.workspace,
            dsn=self.dsn,
            schema=self.schema,
            redactor=self.redactor,
            cipher=self.cipher,
            encrypt=self.encrypt,
            serde=untapped_serde(given.serde) if given is not None else None,
            strict=self.strict,
            offload_threshold=self.offload_threshold,
            spool_dir=self.spool_dir,
            embedded=self._embedded,
            projections=self._projections,
            sealing=self.sealing,
            exports=list(self._export_configs),
        )
        self.pipeline = self._recording.pipeline
        self.dsn = self._recording.dsn
        self._exports_here = self._recording.sealing == "thread"
        for config in self._export_configs:
            cls = LangfuseExporter if config.preset == "langfuse" else OtlpExporter
            exporter = cls(config, self.dsn, self.schema)
            if self._exports_here:
                exporter.attach(self.pipeline)
            self.exporters.append(exporter)
            if config.preset == "langfuse" and self.langfuse is None:
                self.langfuse = exporter
        return self.dsn

    def setup(self) -> External:
        """Start what is needed, run migrations, and build the sync checkpointer.

        Raises:
            LedgerUnavailableError: Postgres cannot be reached.
            WorkspaceError: the workspace is not writable.
        """
        if self._is_setup:
            return self
        try:
            dsn = self._prepare()
            inner = self._inner_given
            outbox: bool | None = None
            if inner is None:
                from langgraph.checkpoint.postgres import PostgresSaver

                self._pool = ConnectionPool(
                    dsn,
                    min_size=1,
                    max_size=self.pool_size,
                    kwargs=dict(_SAVER_CONN_KWARGS),
                    # a connection that idled through a database restart is replaced
                    # before it is handed out (see _pools)
                    check=check_idle,
                    open=True,
                )
                saver = PostgresSaver(self._pool)
                if not _saver_current(self._pool, len(saver.MIGRATIONS)):
                    _saver_setup(saver.setup)
                _compat.replace_lock(saver, NoLock())
                inner = saver
                outbox = True  # same database as the ledger: the record commits with it
            self._wrap(inner, outbox)
        except BaseException:
            self.close()
            raise
        self._is_setup = True
        return self

    async def asetup(self) -> External:
        """Async :meth:`setup`: wraps the official async Postgres saver."""
        if self._is_setup:
            return self
        import asyncio

        try:
            dsn = await asyncio.to_thread(self._prepare)
            inner = self._inner_given
            outbox: bool | None = None
            if inner is None:
                from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

                self._apool = AsyncConnectionPool(
                    dsn,
                    min_size=1,
                    max_size=self.pool_size,
                    kwargs=dict(_SAVER_CONN_KWARGS),
                    check=acheck_idle,
                    open=False,
                )
                await self._apool.open()
                saver = AsyncPostgresSaver(self._apool)
                current = await asyncio.to_thread(_saver_current, dsn, len(saver.MIGRATIONS))
                for attempt in range(0 if current else _SETUP_ATTEMPTS):
                    try:
                        await saver.setup()
                        break
                    except _SETUP_RACES:
                        if attempt == _SETUP_ATTEMPTS - 1:
                            raise
                        await asyncio.sleep(0.2)
                _compat.replace_lock(saver, NoLock())
                inner = saver
                outbox = True
            self._wrap(inner, outbox)
        except BaseException:
            await self.aclose()
            raise
        self._is_setup = True
        return self

    def _wrap(self, inner: BaseCheckpointSaver[Any], outbox: bool | None) -> None:
        assert self.pipeline is not None and self._recording is not None
        if self._recording.mirror is not None:
            self._recording.mirror.serde = inner.serde
        if self.pipeline.service is not None:  # inline values and Send packets
            self.pipeline.service.sealer.reader.serde = untapped_serde(inner.serde)
        self._checkpointer = ExternalCheckpointer(
            inner,
            pipeline=self.pipeline,
            outbox=outbox,
            saver_blob_refs=outbox is True,
        )
        self._audit = (
            AuditCallbackHandler(self.pipeline, checkpointed=self._checkpointer.checkpointed)
            if self.record_behaviour
            else None
        )

    def close(self) -> None:
        """Flush every recorded event, close connections, release the embedded server
        (which keeps running for the next process: ``lgx db stop`` stops it)."""
        if self.exporters:
            if self.pipeline is not None and self._exports_here:
                self.pipeline.flush(10.0)  # so the exporters see the last commits
            for exporter in self.exporters:
                exporter.close()  # what it could not send waits in the ledger
            self.exporters = []
            self.langfuse = None
        if self._recording is not None:
            self._recording.close()
            self._recording = None
            self.pipeline = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._embedded is not None:
            self._embedded.release()  # the server stays up for the next process
        self._is_setup = False

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        import asyncio

        if self._apool is not None:
            await self._apool.close()
            self._apool = None
        await asyncio.to_thread(self.close)

    def __enter__(self) -> External:
        return self.setup()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> External:
        return await self.asetup()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- use ----------------------------------------------------------------------------
    def store(self, inner: BaseStore) -> AuditedStore:
        """Wrap a LangGraph ``BaseStore`` so every memory operation is recorded.

        Example:
            >>> from langgraph.store.memory import InMemoryStore          # doctest: +SKIP
            >>> graph = builder.compile(checkpointer=ext.checkpointer,    # doctest: +SKIP
            ...                         store=ext.store(InMemoryStore()))
        """
        if self.pipeline is None:
            raise ConfigurationError("call setup() (or use `with External(...)`) first")
        return AuditedStore(inner, self.pipeline)

    @property
    def audit_handler(self) -> AuditCallbackHandler:
        """The callback handler :meth:`config` attaches (usable in your own configs)."""
        if self._audit is None:
            raise ConfigurationError("call setup() first (and keep record_behaviour=True)")
        return self._audit

    @property
    def checkpointer(self) -> ExternalCheckpointer:
        """The recording checkpointer to pass to ``builder.compile(checkpointer=...)``."""
        if self._checkpointer is None:
            raise ConfigurationError("call setup() (or use `with External(...)`) first")
        return self._checkpointer

    def config(
        self,
        thread_id: str,
        *,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        callbacks: Sequence[Any] = (),
        policy: Any = None,
        user_id: str | None = None,
        tags: Sequence[str] = (),
        run_id: Any = None,
        **configurable: Any,
    ) -> RunnableConfig:
        """A ``RunnableConfig`` for ``thread_id`` with the audit callback handler attached.

        The handler records node transitions, tool calls, model calls, retriever hits,
        interrupts and resumes (see :mod:`langgraph_external.callbacks`). Pass the
        ``policy`` of a guarded graph to record its content hash with every event.
        ``user_id`` and ``tags`` are recorded with the run (``run_start``) and become the
        Langfuse trace's user and tags; they travel as the config metadata keys
        ``langfuse_user_id`` / ``langfuse_tags`` that Langfuse's own handler reads too.
        ``run_id`` fixes the LangChain run id of the invocation (see
        :func:`~langgraph_external.exporters.trace_context_for_run`).

        Raises:
            InvalidThreadIdError: ``thread_id`` cannot be recorded (see
                :func:`~langgraph_external.thread_ids.check_thread_id`).

        Example:
            >>> External.__new__(External).config("t-1")["configurable"]
            {'thread_id': 't-1'}
        """
        check_thread_id(thread_id)  # refused here, before any run, as every source refuses it
        conf: dict[str, Any] = {"thread_id": thread_id, **configurable}
        if checkpoint_ns is not None:
            conf["checkpoint_ns"] = checkpoint_ns
        if checkpoint_id is not None:
            conf["checkpoint_id"] = checkpoint_id
        out: dict[str, Any] = {"configurable": conf}
        metadata: dict[str, Any] = {}
        if policy is not None:
            # the policy's content hash travels with the run: configurable keys reach the
            # checkpoint metadata, config metadata reaches every callback
            conf[POLICY_HASH_KEY] = policy.hash
            metadata[POLICY_HASH_KEY] = policy.hash
        if user_id is not None:
            metadata[USER_ID_KEY] = str(user_id)
        if tags:
            out["tags"] = [str(t) for t in tags]
            metadata[TAGS_KEY] = list(out["tags"])
        if metadata:
            out["metadata"] = metadata
        if run_id is not None:
            out["run_id"] = run_id
        handlers = list(callbacks)
        audit = getattr(self, "_audit", None)
        if audit is not None:
            handlers.insert(0, audit)
        if handlers:
            out["callbacks"] = handlers
        return out  # type: ignore[return-value]

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything recorded so far is in the workspace and the ledger (and
        in each export's receiver). ``False`` when that did not finish within ``timeout``;
        nothing is dropped, it is retried."""
        if self.pipeline is None:
            return True
        start = time.monotonic()
        ok = self.pipeline.flush(timeout)
        for exporter in self.exporters if self._exports_here else ():  # else the helper's
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
            ok = exporter.flush(left) and ok
        return ok

    def events(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's events from the ledger, in order (flushes first)."""
        self.flush()
        assert self.dsn is not None
        with ledger.connect(self.dsn, options="-c timezone=UTC") as conn:
            return ledger.fetch_events(conn, thread_id, self.schema)

    def health(self) -> dict[str, Any]:
        """Recording health: delivered events, failures, spooled batches, and each export
        (``"exports"`` by cursor name; ``"langfuse"`` for the Langfuse export)."""
        out = self.pipeline.health() if self.pipeline is not None else {}
        if self.exporters and self._exports_here:
            out["exports"] = {x.name: x.health() for x in self.exporters}
        elif "exports" in out.get("sealing", {}):  # the helper process exports
            out["exports"] = out["sealing"]["exports"]
        if self.langfuse is not None and self.langfuse.name in out.get("exports", {}):
            out["langfuse"] = out["exports"][self.langfuse.name]
        return out


_SETUP_ATTEMPTS = 50
_SETUP_RACES = (
    psycopg.errors.UniqueViolation,  # both recorded the same migration
    psycopg.errors.DuplicateObject,  # both created the same table (its row type)
    psycopg.errors.DuplicateTable,
    # one's CREATE INDEX CONCURRENTLY waits for the other's transaction, which waits for it
    psycopg.errors.DeadlockDetected,
)


def _export_configs(
    langfuse: bool | LangfuseExport | None,
    export: OtlpExport | LangfuseExport | Sequence[OtlpExport | LangfuseExport] | None,
) -> list[OtlpExport]:
    """The resolved export configurations (``ConfigurationError`` now, not at the first run)."""
    configs: list[OtlpExport] = []
    if langfuse is not None and langfuse is not False:
        config = LangfuseExport() if langfuse is True else langfuse
        if not isinstance(config, LangfuseExport):
            raise ConfigurationError("langfuse= takes True or a LangfuseExport")
        configs.append(config.to_otlp().resolved())
    given = [export] if isinstance(export, (OtlpExport, LangfuseExport)) else list(export or [])
    for item in given:
        if isinstance(item, LangfuseExport):
            item = item.to_otlp()
        if not isinstance(item, OtlpExport):
            raise ConfigurationError("export= takes an OtlpExport (or a list of them)")
        configs.append(item.resolved())
    names = [str(c.cursor) for c in configs]
    if len(set(names)) != len(names):
        raise ConfigurationError(
            f"two exports share a cursor ({', '.join(names)}): give each its own cursor="
        )
    return configs


_SAVER_VERSION_SQL = (
    "select case when to_regclass('checkpoint_migrations') is null then -1"
    " else (select coalesce(max(v), -1) from checkpoint_migrations) end as v"
)


def _saver_current(where: ConnectionPool[Any] | str, migrations: int) -> bool:
    """Whether the official saver's tables are set up already (a read: no DDL rights needed).

    An application role granted only data rights (``lgx setup --roles``) cannot run the
    saver's ``setup()``, whose first statement is a ``CREATE TABLE IF NOT EXISTS``.
    """
    try:
        if isinstance(where, str):
            with psycopg.connect(where, autocommit=True, connect_timeout=10) as conn:
                row = conn.execute(_SAVER_VERSION_SQL).fetchone()
                version = row[0] if row else -1
        else:
            with where.connection() as conn:
                found = conn.execute(_SAVER_VERSION_SQL).fetchone()
                version = found["v"] if found else -1
    except psycopg.Error:
        return False
    return int(version) >= migrations - 1


def _saver_setup(setup: Any) -> None:
    """Run the official saver's ``setup()``, which two processes cannot run at once.

    On a fresh database both create the same tables or record the same migration and one
    fails (a unique violation, a duplicate object);
    its migrations use ``CREATE INDEX CONCURRENTLY``, so a lock around it would wait for
    the other process's lock request forever. Retrying once the other is done is safe:
    every migration is idempotent and a finished setup is a no-op.
    """
    for attempt in range(_SETUP_ATTEMPTS):
        try:
            setup()
            return
        except _SETUP_RACES:
            if attempt == _SETUP_ATTEMPTS - 1:
                raise
            time.sleep(0.2)
