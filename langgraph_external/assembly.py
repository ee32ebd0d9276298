"""The one place where the record is assembled: ledger, processors, projections.

Both :class:`~langgraph_external.External` and a standalone
:class:`~langgraph_external.checkpointers.ExternalCheckpointer` get their pipeline here,
so every path a user can take has the same processors (redaction on by default) and the
same projections.

Example:
    >>> rec = Recording.__new__(Recording)  # doctest: +SKIP
    >>> with assemble(workspace="./ws", dsn=None) as rec:  # doctest: +SKIP
    ...     rec.pipeline.emit(Event.new("error", "t"))
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external import ledger
from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.embedded import EmbeddedPostgres
from langgraph_external.errors import ConfigurationError, LedgerUnavailableError
from langgraph_external.keys import load_key
from langgraph_external.pipeline import Pipeline
from langgraph_external.processors import Redactor
from langgraph_external.redaction import as_redactor
from langgraph_external.sinks.base import Projection
from langgraph_external.sinks.postgres import PostgresLedger
from langgraph_external.sinks.workspace import WorkspaceProjection
from langgraph_external.workspace import Workspace


@dataclass
class Recording:
    """What :func:`assemble` built: close it to flush and stop everything it started."""

    pipeline: Pipeline
    dsn: str
    workspace: Workspace
    mirror: WorkspaceProjection
    embedded: EmbeddedPostgres | None

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
    workspace: str | os.PathLike[str] | Workspace,
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
    **pipeline_options: Any,
) -> Recording:
    """Start what is needed, set the ledger up, and build the pipeline.

    ``dsn=None`` reads ``LGX_DSN`` and otherwise starts an embedded PostgreSQL.
    ``cipher`` (else ``key``, else the deployment key: ``$LGX_KEY`` or the key file,
    created on first use, see :mod:`langgraph_external.keys`) keys every content
    address, anchors the chain heads and, with ``encrypt``, seals the exact copies.

    Raises:
        LedgerUnavailableError: Postgres cannot be reached.
        WorkspaceError: the workspace is not writable.
    """
    schema = ledger.validate_schema(schema)
    red = resolve_redactor(redaction, redactor)
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    if cipher is None:
        cipher = load_key(key, workspace_root=ws.root if ws.is_local else None)
    dsn = dsn if dsn is not None else os.environ.get("LGX_DSN") or None
    server = embedded
    if dsn is None:
        server = server or embedded_for(ws, embedded_dir)
        dsn = server.start()
    try:
        # reach Postgres before touching the workspace: a wrong DSN leaves nothing behind
        try:
            with ledger.connect(dsn, autocommit=True, connect_timeout=10) as conn:
                ws.check_writable()
                ledger.setup(conn, schema)
        except psycopg.Error as exc:
            raise LedgerUnavailableError(f"cannot set up the ledger: {exc}") from exc
        mirror = WorkspaceProjection(ws, serde=serde, redactor=red, cipher=cipher)
        pipeline = Pipeline(
            PostgresLedger(dsn, schema, cipher=cipher),
            projections=[mirror, *projections],
            redactor=red,
            offload_threshold=offload_threshold,
            strict=strict,
            spool_dir=spool_dir,
            cipher=cipher,
            encrypt=encrypt,
            **pipeline_options,
        )
    except BaseException:
        if server is not None and embedded is None:
            server.release()
        raise
    return Recording(pipeline, dsn, ws, mirror, server if embedded is None else None)
