"""``ExternalCheckpointer``: the drop-in saver that records every checkpoint it stores —
into the pipeline it is given (``External`` gives it one), or into one it builds itself
from ``workspace`` and ``dsn`` (the standalone checkpointer) and closes with
:meth:`~ExternalCheckpointer.close`.

It is :class:`~langgraph_external.sources.checkpointer.RecordingSaver` (the recording)
with this constructor: building a pipeline is the composition root's work
(:func:`~langgraph_external.assembly.assemble`), which sits above the sources.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> ws = Path(tempfile.mkdtemp())
    >>> with ExternalCheckpointer(InMemorySaver(), workspace=ws) as saver:
    ...     sorted(saver.capabilities)
    []

    Without ``dsn`` the ledger is the embedded server in ``ws/.lgx/pgdata``, which stays up
    for the next process until ``lgx db stop``:

    >>> from langgraph_external.ledger.embedded import stop_server
    >>> stop_server(ws / ".lgx" / "pgdata").stopped
    True

    With the ledger too: ``ExternalCheckpointer(PostgresSaver(pool), workspace="./ws",
    dsn="postgresql://...")``; or let :class:`~langgraph_external.External` build it all.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_external._moved import warn_deprecated
from langgraph_external.assembly import Recording, assemble
from langgraph_external.errors import ConfigurationError
from langgraph_external.options import Options, options_from_keywords
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.processors import Redactor
from langgraph_external.settings import Settings
from langgraph_external.sources.checkpointer import RecordingSaver
from langgraph_external.sources.serde_tap import untapped_serde
from langgraph_external.upstream import langgraph as _compat

__all__ = ["ExternalCheckpointer"]

_EARLIER = ("schema", "strict", "spool_dir", "encrypt")
"""Keywords of 0.1 that are :class:`Options` fields now."""


class ExternalCheckpointer(RecordingSaver):
    """Wrap ``inner`` so every checkpoint and write it stores is recorded.

    Args:
        inner: the saver that stores and serves checkpoints.
        pipeline: where events go (``External`` builds one). Without it, one is built
            from ``workspace`` (required then) and ``dsn`` (optional ledger) and closed
            by :meth:`close`.
        workspace: local path, fsspec URL or
            :class:`~langgraph_external.workspace.files.Workspace` for the mirror.
        dsn: Postgres DSN of the ledger (its schema created if missing); ``None``: the
            embedded server.
        key: the deployment key of the pipeline built here (default: ``$LGX_KEY`` or
            the key file, created on first use).
        redaction: the redaction of the pipeline built here: a level name
            (``"standard"``, ``"strict"``, ``"off"``) or your own callable.
        options: the rest of the pipeline built here
            (:class:`~langgraph_external.options.Options`: schema, strict, spool
            directory, encryption, offload threshold, processors). ``schema=``,
            ``strict=``, ``spool_dir=`` and ``encrypt=`` as keywords still work until 0.3,
            with a ``DeprecationWarning``; so do ``digest=`` and ``saver_blob_refs=``,
            which do nothing.
        reject_nul: refuse thread ids containing NUL (PostgreSQL text cannot hold it).
        outbox: capture in the wrapped saver's own transaction (``None``: when it
            stores in the ledger's database).

    The instance's class is a subclass of ``ExternalCheckpointer`` that carries
    exactly the optional methods that work for ``inner`` (see :attr:`capabilities`).
    """

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        *,
        pipeline: Pipeline | None = None,
        workspace: str | os.PathLike[str] | Any | None = None,
        dsn: str | None = None,
        key: str | bytes | None = None,
        redaction: str | Redactor = "standard",
        options: Options | None = None,
        reject_nul: bool = True,
        outbox: bool | None = None,
        **deprecated: Any,
    ) -> None:
        if not isinstance(inner, BaseCheckpointSaver):
            raise TypeError(f"inner must be a BaseCheckpointSaver, got {type(inner).__name__}")
        self.digest = deprecated.pop("digest", None)
        if self.digest is not None:
            warnings.warn(
                "ExternalCheckpointer(digest=...) is deprecated and unused: the sealer "
                "addresses exact bytes with the deployment key",
                DeprecationWarning,
                stacklevel=2,
            )
        if deprecated.pop("saver_blob_refs", None) is not None:
            warn_deprecated(
                "ExternalCheckpointer(saver_blob_refs=...)", "it does nothing (the sealer decides)"
            )
        opts = options_from_keywords(
            options, deprecated, owner="ExternalCheckpointer", allowed=_EARLIER
        )
        self._recording: Recording | None = None
        if pipeline is None:
            if workspace is None:
                raise ConfigurationError("pass pipeline=... or workspace=... (and dsn=...)")
            settings = Settings.resolve(
                workspace=workspace, dsn=dsn, key=key, redaction=redaction, options=opts
            )
            given = None if isinstance(workspace, (str, os.PathLike)) else workspace
            self._recording = assemble(
                settings.replace(serde=untapped_serde(inner.serde)),
                workspace=given,  # a Workspace object: the mirror shares it
                projections=opts.projections,
            )
            pipeline = self._recording.pipeline
            if outbox is None:
                outbox = _compat.same_database(inner, self._recording.dsn)
        super().__init__(inner, pipeline=pipeline, reject_nul=reject_nul, outbox=outbox)

    def close(self) -> None:
        """Flush what is recorded; close the pipeline if this checkpointer built it."""
        if self._recording is not None:
            self._recording.close()
        else:
            super().close()
