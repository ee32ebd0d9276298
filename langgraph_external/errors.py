"""Typed errors raised by langgraph-external.

Every error the package raises on purpose derives from :class:`ExternalError`, so an
application can catch the whole family with one ``except`` clause.
"""

from __future__ import annotations


class ExternalError(Exception):
    """Base class of every error raised by langgraph-external."""


class ConfigurationError(ExternalError, ValueError):
    """The package was configured with a value it cannot use (bad schema name, URL, ...)."""


class InvalidThreadIdError(ExternalError, ValueError):
    """A thread id cannot be recorded (wrong type, empty, or not valid text)."""


class InvalidCheckpointIdError(ExternalError, ValueError):
    """A checkpoint id or namespace cannot be stored (not text, NUL, or not valid text)."""


class InvalidFilterError(ExternalError, ValueError):
    """A metadata filter holds what no stored metadata can (NUL, NaN, non-text keys, ...)."""


class SerializationError(ExternalError, TypeError):
    """A checkpoint or write holds a value the serializer cannot encode.

    Raised *before* anything is stored, so the thread is left exactly as it was.
    """


class LedgerUnavailableError(ExternalError, ConnectionError):
    """The Postgres ledger cannot be reached (wrong DSN, server down, refused)."""


class WorkspaceError(ExternalError, OSError):
    """The workspace cannot be written (read-only, missing, unsupported URL)."""


class SinkError(ExternalError):
    """A sink failed to persist events. Raised in strict mode, recorded otherwise."""


class ChainConflictError(SinkError):
    """The ledger already holds a different event at the same (thread, seq).

    Two writers recorded the same thread concurrently, or the workspace and the
    ledger diverged. Nothing is overwritten.
    """


class PositionMovedError(ChainConflictError):
    """A thread's position in the ledger moved since its events were sequenced.

    Another writer (another process, or a concurrent commit) recorded the thread first.
    The events were not stored; the writer re-reads the position and sequences again.
    """


class RecordingError(SinkError):
    """Events could not be recorded (strict mode, or a flush that could not finish)."""


class RestoreError(ExternalError):
    """A thread cannot be restored from the workspace: data is missing, torn or altered.

    Raised before anything is written to the target saver; the message names the file,
    the line or checkpoint, and what differs.
    """


class ArchiveError(ExternalError):
    """A thread archive cannot be written, or cannot be trusted when read.

    Raised when an archive is damaged, altered (a file does not match the manifest's
    sha256, the events' hash chain breaks), unsafe (links, absolute paths, ``..``) or
    not an lgx archive; nothing is imported from it.
    """


class ImportConflictError(ExternalError):
    """An imported thread already exists in the target ledger, saver or workspace.

    Nothing is overwritten or merged; import into another database or workspace.
    """


class MissingExtraError(ExternalError, ImportError):
    """A feature needs packages of an optional extra that is not installed.

    The message names the extra to install (``pip install 'langgraph-external[ui]'``);
    being an :class:`ImportError` too, it is caught where a missing module would be.
    """
