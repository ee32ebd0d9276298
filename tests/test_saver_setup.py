"""The official saver's tables are set up by one function on every path, and processes that
start together on a fresh database all get a working saver (the setup race is retried)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver

from langgraph_external.assembly import open_saver, saver_is_current, setup_saver


def test_saver_is_current_only_once_the_tables_are_set_up(dsn: str) -> None:
    migrations = len(PostgresSaver.MIGRATIONS)
    assert not saver_is_current(dsn, migrations)  # a fresh database: no table at all
    with psycopg.connect(dsn, autocommit=True) as conn:
        setup_saver(PostgresSaver(conn).setup)
    assert saver_is_current(dsn, migrations)
    assert not saver_is_current(dsn, migrations + 1)  # a newer saver has more to run


def test_savers_opened_at_once_on_a_fresh_database_all_work(dsn: str) -> None:
    n = 6
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []
    opened: list[Any] = []

    def start() -> None:
        try:
            barrier.wait()
            opened.append(open_saver(dsn, 2))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert not errors, errors
        assert len(opened) == n
        for i, (saver, _pool) in enumerate(opened):
            conf = {"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}
            stored = saver.put(conf, empty_checkpoint(), {}, {})
            assert saver.get_tuple(stored) is not None
    finally:
        for _saver, pool in opened:
            pool.close()


def test_a_setup_that_keeps_failing_for_another_reason_fails_at_once() -> None:
    calls = []

    def setup() -> None:
        calls.append(1)
        raise psycopg.errors.InsufficientPrivilege("permission denied for schema public")

    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        setup_saver(setup)
    assert len(calls) == 1  # only the races of two setups are retried
