"""Pooled connections that died while idle are replaced before anyone uses them.

A connection waiting in a pool while the database restarts (``pg_ctl stop``/``start``, a
failover, ``pg_terminate_backend``, ``idle_session_timeout``) is dead, and the pool does not
know until it hands it out: the caller then gets ``AdminShutdown`` or "server closed the
connection unexpectedly" although the database is back. psycopg_pool's ``check`` callback
runs when a connection is requested; its own :meth:`ConnectionPool.check_connection` asks
the server (one round trip per request: +20 % on a 10-node graph's invoke over the official
saver, since the saver takes a connection per call). These checks ask only when there is
reason to: the server never speaks to an idle connection unless it is closing it (or has a
notice or notification for it), so a socket with nothing to read is alive as far as anyone
can tell without a round trip, and one with something to read is checked by the library's
round trip (and replaced by the pool if that fails).

Example:
    >>> from psycopg_pool import ConnectionPool
    >>> pool = ConnectionPool("postgresql:///app", check=check_idle, open=False)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import select
from typing import Any

from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_external.upstream.psycopg_pool import pool_of

__all__ = ["POOL_MAX_IDLE", "acheck_idle", "check_idle", "ledger_pool", "share_our_priority"]

LEDGER_CONNECT_OPTIONS = (
    "-c timezone=UTC -c statement_timeout=30000 -c idle_in_transaction_session_timeout=60000"
)
"""Every ledger connection works in UTC and is bounded: statements time out after 30 s,
idle transactions after 60 s."""

POOL_MAX_IDLE = 10.0
"""Seconds after which our pools (the ledger's, the saver's, the Mem0 adapter's) close one
connection nobody needed (psycopg_pool's default, 600 s). An outage or a freeze fills a
pool up to its maximum — every waiting caller asks for a connection — and psycopg_pool
closes at most one unused connection per ``max_idle``: at the default, a pool grown by a
restart every few minutes never came back down (the soak's connections stepped up at
each restart); at 60 s, restarts a few minutes apart still left the connections of the
soak's last minutes 18–21 % above those of minutes 5–10. Reopening a connection costs
milliseconds, paid by a pool that had one unused for 10 s."""


def _has_input(conn: Any) -> bool:
    """Whether the connection's socket has something to read (or is closed), now."""
    poller = select.poll()  # every platform with fcntl, which the package needs, has poll
    poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def check_idle(conn: Any) -> None:
    """``check`` callback of a :class:`~psycopg_pool.ConnectionPool`: raise if ``conn`` died
    while it waited in the pool (the pool then discards it and hands out another).

    A dead one means the others idled through the same restart: the whole pool is checked
    at once (:meth:`~psycopg_pool.ConnectionPool.check`). Found one by one, each would cost
    the caller a pause of psycopg_pool's backoff (1, 2, 4, 8, 16 s): five dead connections
    outlast its 30 s timeout.
    """
    if conn.closed or _has_input(conn):
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            pool = pool_of(conn)
            if isinstance(pool, ConnectionPool):
                pool.check()
            raise


async def acheck_idle(conn: Any) -> None:
    """Async twin of :func:`check_idle`, for an :class:`~psycopg_pool.AsyncConnectionPool`."""
    if conn.closed or _has_input(conn):
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            pool = pool_of(conn)
            if isinstance(pool, AsyncConnectionPool):
                await pool.check()
            raise


def share_our_priority(conn: Any) -> None:
    """``configure`` callback: a process that runs below normal CPU priority (our sealing
    processes, :mod:`~langgraph_external.processes.gc_tuning`) gives the server process of
    its session the same priority, when that runs on this machine (a Unix-socket
    connection, as to the embedded server) and this process may lower it (same user, or
    root). Sealing is the server's work as much as ours: at normal priority its backend
    would take the cores from the app's own sessions. Elsewhere it does nothing.
    """
    try:
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        if ours <= 0 or not str(conn.info.host).startswith("/"):
            return
        pid = int(conn.info.backend_pid)
        with open(f"/proc/{pid}/comm", encoding="ascii", errors="replace") as f:
            if f.read().strip() != "postgres":
                return  # not a server process of this machine
        if os.getpriority(os.PRIO_PROCESS, pid) < ours:
            os.setpriority(os.PRIO_PROCESS, pid, ours)
    except (OSError, AttributeError, ValueError):
        return  # not permitted, not Linux: the session keeps its priority


def ledger_pool(dsn: str, connect_timeout: int) -> ConnectionPool[Any]:
    """The ledger's small pool of autocommit connections (the flusher, the projector,
    look-ups), opened now.

    A pool, not one connection per thread: look-ups also run on LangGraph's short-lived
    executor threads, and a connection per thread would outlive them.
    """
    return ConnectionPool(
        dsn,
        min_size=0,
        max_size=6,
        kwargs={
            "autocommit": True,
            "connect_timeout": connect_timeout,
            "options": LEDGER_CONNECT_OPTIONS,
        },
        timeout=connect_timeout,
        max_idle=POOL_MAX_IDLE,
        check=check_idle,  # died in a database restart: replaced
        configure=share_our_priority,  # a sealing process's sessions yield to the app's
        name="langgraph-external-ledger",
        open=True,
    )
