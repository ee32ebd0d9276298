"""``External``: the facade that wires Postgres, the workspace and the checkpointer together.

Example:
    >>> from langgraph_external import External                       # doctest: +SKIP
    >>> with External(workspace="./agent_workspace") as ext:            # doctest: +SKIP
    ...     graph = builder.compile(checkpointer=ext.checkpointer)
    ...     graph.invoke(inputs, ext.config("thread-42"))
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_external._moved import warn_deprecated
from langgraph_external.assembly import Recording, aopen_saver, assemble, open_saver
from langgraph_external.checkpointers import ExternalCheckpointer
from langgraph_external.errors import ConfigurationError
from langgraph_external.exporters.build import ExportSpec, build_exporters, resolve_exports
from langgraph_external.exporters.langfuse import LangfuseExport
from langgraph_external.exporters.otlp import OtlpExport, OtlpExporter
from langgraph_external.ledger import schema as ledger
from langgraph_external.options import Options, options_from_keywords
from langgraph_external.pipeline.background import Deadline
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.processors import Redactor
from langgraph_external.record.thread_ids import check_thread_id
from langgraph_external.settings import Settings
from langgraph_external.sources.callbacks import AuditCallbackHandler
from langgraph_external.sources.run_context import POLICY_HASH_KEY, TAGS_KEY, USER_ID_KEY
from langgraph_external.sources.serde_tap import untapped_serde
from langgraph_external.sources.stores import AuditedStore
from langgraph_external.upstream.serde import portable_serde
from langgraph_external.workspace.files import Workspace


class External:
    """Record a LangGraph app into Postgres and a file workspace.

    Args:
        dsn: PostgreSQL connection string. ``None`` reads ``LGX_DSN``; if that is unset
            too, an embedded PostgreSQL is started (``Options.embedded_dir``, default
            ``<workspace>/.lgx/pgdata``).
        workspace: local directory or fsspec URL of the workspace; ``None`` with
            ``sealing="worker"`` (the workers mirror).
        key: the deployment key (32 bytes, or base64 / hex text). Default ``$LGX_KEY``,
            else the key file ``$LGX_KEY_FILE`` or ``~/.config/langgraph-external/key``,
            created (mode 0600) on first use. It keys every content address (HMAC), anchors
            each thread's chain head, and encrypts the exact checkpoint copies. See
            :mod:`langgraph_external.record.keys` and ``docs/security.md``.
        redaction: ``"standard"`` (default: keys, tokens, JWTs, card numbers, values of
            sensitive keys), ``"strict"`` (also emails, phone numbers, IP addresses, long
            digit runs), ``"off"``, or your own ``(value) -> (value, count)`` callable;
            applied before anything readable is recorded. See
            :mod:`langgraph_external.record.redaction`.
        sealing: where the record is sealed after commit (hash chain, keyed heads,
            encryption), the workspace mirrored and traces exported. ``"process"`` (the
            default, or ``$LGX_SEALING``): a helper process started and stopped with this
            ``External`` — the app's threads only capture; ``"thread"``: background
            threads of this process; ``"worker"``: nothing here, ``lgx worker`` processes
            do it for every app on the database. See docs/architecture.md.
        export: an :class:`~langgraph_external.exporters.OtlpExport` or
            :class:`~langgraph_external.exporters.LangfuseExport` (or several): a
            background exporter each sends the ledger as traces — to Langfuse, Phoenix or
            any OpenTelemetry collector (docs/langfuse.md, docs/otlp.md). Each has its own
            cursor; the graph never waits.
        options: everything else (:class:`~langgraph_external.options.Options`): schema,
            strict, offload threshold, your own processors, spool and embedded-server
            directories, pool size, a saver to wrap, ...

    The keywords of 0.1 that are now :class:`~langgraph_external.options.Options` fields
    (``schema=``, ``spool_dir=``, ``inner=``, ...) and the earlier names ``redactor=``
    (now ``redaction=``), ``encryption_key=`` (``key=``) and ``langfuse=``
    (``export=LangfuseExport()``) still work until 0.3, with a ``DeprecationWarning``.

    Use it as a context manager (``with`` or ``async with``) or call :meth:`setup` /
    :meth:`close` yourself. ``async with`` wraps the official async Postgres saver.
    """

    def __init__(
        self,
        dsn: str | None = None,
        workspace: str | os.PathLike[str] | None = "./agent_workspace",
        *,
        key: str | bytes | None = None,
        redaction: str | Redactor = "standard",
        sealing: str | None = None,
        export: ExportSpec | Sequence[ExportSpec] | None = None,
        options: Options | None = None,
        **deprecated: Any,
    ) -> None:
        key, redaction, export = _renamed_keywords(deprecated, key, redaction, export)
        opts = options_from_keywords(options, deprecated, owner="External", allowed=_EARLIER)
        exports = resolve_exports(export)
        self.settings: Settings = Settings.resolve(
            dsn=dsn,
            workspace=workspace,
            key=key,
            redaction=redaction,
            sealing=sealing,
            exports=exports,
            options=opts,
        )
        """The resolved configuration (the one handed to the sealing helper)."""
        if self.settings.sealing == "worker":
            _check_worker_mode(opts, exports)
        self.options = opts
        self.workspace: Workspace | None = self.settings.open_workspace()
        self._recording: Recording | None = None
        self._audit: AuditCallbackHandler | None = None
        self._pool: ConnectionPool[Any] | None = None
        self._apool: AsyncConnectionPool[Any] | None = None
        self._checkpointer: ExternalCheckpointer | None = None
        self.pipeline: Pipeline | None = None
        self._is_setup = False
        self.exporters: list[OtlpExporter] = []
        """The exporters (``External(export=...)``), once set up: running here with
        ``sealing="thread"``; else the helper process runs them and these answer
        questions about them (``trace_context``)."""
        self.langfuse: OtlpExporter | None = None
        """The exporter of the ``langfuse`` preset, if one is configured."""
        self._exports_here = False

    # -- what was resolved ---------------------------------------------------------------
    @property
    def dsn(self) -> str | None:
        """The database (the embedded server's once set up; ``None`` before that)."""
        if self._recording is not None:
            return self._recording.dsn
        return self.settings.dsn

    @property
    def schema(self) -> str:
        """The ledger schema."""
        return self.settings.schema

    @property
    def sealing(self) -> str:
        """Where captures are sealed (see the ``sealing`` argument)."""
        if self._recording is not None:
            return self._recording.sealing
        return self.settings.sealing

    @property
    def cipher(self) -> WorkspaceCipher:
        """The deployment key."""
        assert self.settings.cipher is not None
        return self.settings.cipher

    # -- lifecycle ----------------------------------------------------------------------
    def _prepare(self) -> str:
        """Everything both setups share: server, workspace, ledger, pipeline, sealer."""
        given = self.options.saver
        settings = self.settings
        if given is not None:
            settings = settings.replace(serde=portable_serde(untapped_serde(given.serde)))
        self._recording = assemble(
            settings, workspace=self.workspace, projections=self.options.projections
        )
        self.pipeline = self._recording.pipeline
        dsn = self._recording.dsn
        self._exports_here = self._recording.sealing == "thread"
        self.exporters = build_exporters(settings.exports, dsn, settings.schema)
        for exporter in self.exporters:
            if self._exports_here:
                exporter.attach(self.pipeline)
            if exporter.config.preset == "langfuse" and self.langfuse is None:
                self.langfuse = exporter
        return dsn

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
            inner = self.options.saver
            if inner is None:
                inner, self._pool = open_saver(dsn, self.options.pool_size)
            self._wrap(inner)
        except BaseException:
            self.close()
            raise
        return self

    async def asetup(self) -> External:
        """Async :meth:`setup`: wraps the official async Postgres saver."""
        if self._is_setup:
            return self
        try:
            dsn = await asyncio.to_thread(self._prepare)
            inner = self.options.saver
            if inner is None:
                inner, self._apool = await aopen_saver(dsn, self.options.pool_size)
            self._wrap(inner)
        except BaseException:
            await self.aclose()
            raise
        return self

    def _wrap(self, inner: BaseCheckpointSaver[Any]) -> None:
        """Build the checkpointer around ``inner`` and the audit handler: set up."""
        assert self.pipeline is not None and self._recording is not None
        # the official saver is on the ledger's database: the record commits with it
        outbox = True if self.options.saver is None else None
        if self._recording.mirror is not None:
            self._recording.mirror.serde = inner.serde
        if self.pipeline.service is not None:  # inline values and Send packets
            self.pipeline.service.sealer.reader.serde = untapped_serde(inner.serde)
        self._checkpointer = ExternalCheckpointer(inner, pipeline=self.pipeline, outbox=outbox)
        self._audit = (
            AuditCallbackHandler(self.pipeline, checkpointed=self._checkpointer.checkpointed)
            if self.options.audit_callbacks
            else None
        )
        self._is_setup = True

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
            self._recording.close()  # releases an embedded server (it stays up for the next)
            self._recording = None
            self.pipeline = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._is_setup = False

    async def aclose(self) -> None:
        """Async :meth:`close`."""
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
            raise ConfigurationError("call setup() first (and keep Options(audit_callbacks=True))")
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
        interrupts and resumes (see :mod:`langgraph_external.sources.callbacks`). Pass the
        ``policy`` of a guarded graph to record its content hash with every event.
        ``user_id`` and ``tags`` are recorded with the run (``run_start``) and become the
        Langfuse trace's user and tags; they travel as the config metadata keys
        ``langfuse_user_id`` / ``langfuse_tags`` that Langfuse's own handler reads too.
        ``run_id`` fixes the LangChain run id of the invocation (see
        :func:`~langgraph_external.exporters.trace_context_for_run`).

        Raises:
            InvalidThreadIdError: ``thread_id`` cannot be recorded (see
                :func:`~langgraph_external.record.thread_ids.check_thread_id`).

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
        deadline = Deadline(timeout)
        ok = self.pipeline.flush(timeout)
        for exporter in self.exporters if self._exports_here else ():  # else the helper's
            ok = exporter.flush(deadline.left()) and ok
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


_EARLIER = (
    "schema",
    "strict",
    "offload_threshold",
    "spool_dir",
    "embedded_dir",
    "fsync",
    "pool_size",
    "storage_options",
    "inner",
    "projections",
    "record_behaviour",
    "encrypt",
)
"""``External`` keywords of 0.1 that are :class:`Options` fields now."""


def _renamed_keywords(
    given: dict[str, Any],
    key: str | bytes | None,
    redaction: Any,
    export: Any,
) -> tuple[Any, Any, Any]:
    """``key``, ``redaction`` and ``export`` with the earlier names of 0.1 folded in
    (``encryption_key=``, ``redactor=``, ``langfuse=``), each with a warning."""
    renamed = {"encryption_key": "key", "redactor": "redaction", "langfuse": "export"}
    for old, new in renamed.items():
        if old not in given:
            continue
        value = given.pop(old)
        hint = "export=LangfuseExport()" if old == "langfuse" else f"{new}=..."
        warn_deprecated(f"External({old}=...)", f"pass {hint}", stacklevel=4)
        if old == "encryption_key" and key is None:
            key = value
        elif old == "redactor" and value is not None:
            redaction = value
        elif old == "langfuse" and value is not None and value is not False:
            lf = LangfuseExport() if value is True else value
            if not isinstance(lf, LangfuseExport):
                raise ConfigurationError("langfuse= takes True or a LangfuseExport")
            others = [export] if isinstance(export, (OtlpExport, LangfuseExport)) else export
            export = [lf, *(others or [])]
    return key, redaction, export


def _check_worker_mode(options: Options, exports: Sequence[OtlpExport]) -> None:
    """What an app with ``sealing="worker"`` cannot ask for: the workers seal, mirror and
    export with their own configuration (``lgx worker --offload-threshold``, ...)."""
    if exports:
        raise ConfigurationError(
            "with sealing='worker' the workers export: run `lgx worker --langfuse`"
            " (or `lgx export otlp --follow`)"
        )
    if options.processors:
        raise ConfigurationError(
            "with sealing='worker' an lgx worker builds the checkpoint events and cannot run"
            " your processors: use sealing='process' or 'thread'"
        )
    if options.offload_threshold != Options().offload_threshold:
        raise ConfigurationError(
            "with sealing='worker' the workers offload checkpoint payloads: give them the"
            f" threshold (`lgx worker --offload-threshold {options.offload_threshold}`)"
            " and leave Options.offload_threshold at its default"
        )
