"""The official checkpoint conformance suite over ExternalCheckpointer.

Over the async Postgres saver every test passes, optional capabilities included (two of
them are implemented here in SQL). Over InMemorySaver and SqliteSaver every base test
passes and no capability is claimed that fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import CapabilityReport

from langgraph_external import ExternalCheckpointer
from langgraph_external.assembly import assemble
from langgraph_external.options import Options
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.settings import Settings


def _failures(report: CapabilityReport) -> dict[str, Any]:
    return {cap: res.failures for cap, res in report.results.items() if res.passed is False}


def _counts(report: CapabilityReport) -> dict[str, tuple[bool, int, int]]:
    return {
        cap: (res.detected, res.tests_passed, res.tests_failed)
        for cap, res in report.results.items()
    }


def _pipeline(tmp_path: Path, dsn: str, spool: Path) -> Pipeline:
    return assemble(
        Settings.resolve(workspace=tmp_path / "ws", dsn=dsn, options=Options(spool_dir=spool))
    ).pipeline


async def test_async_postgres_saver_passes_all_81(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    pipeline = _pipeline(tmp_path, dsn, spool_dir)

    @checkpointer_test(name="External(AsyncPostgresSaver)")
    async def factory() -> AsyncIterator[ExternalCheckpointer]:
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
            await saver.setup()
            yield ExternalCheckpointer(saver, pipeline=pipeline)

    report = await validate(factory)
    pipeline.close()
    assert _failures(report) == {}
    assert report.passed_all_base()
    counts = _counts(report)
    assert {c: counts[c] for c in ("copy_thread", "delete_for_runs", "prune")} == {
        "copy_thread": (True, 8, 0),
        "delete_for_runs": (True, 7, 0),
        "prune": (True, 8, 0),
    }
    assert sum(p for _, p, _ in counts.values()) == 81
    assert pipeline.failures == []


async def test_in_memory_saver_passes_base_and_claims_nothing_false(
    tmp_path: Path, spool_dir: Path, dsn: str
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    pipeline = _pipeline(tmp_path, dsn, spool_dir)

    @checkpointer_test(name="External(InMemorySaver)")
    async def factory() -> AsyncIterator[ExternalCheckpointer]:
        yield ExternalCheckpointer(InMemorySaver(), pipeline=pipeline)

    report = await validate(factory)
    pipeline.close()
    assert report.passed_all_base()
    assert _failures(report) == {}
    assert sum(p for _, p, _ in _counts(report).values()) >= 58


async def test_sqlite_saver_passes_base_and_claims_nothing_false(
    tmp_path: Path, spool_dir: Path, dsn: str
) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    pipeline = _pipeline(tmp_path, dsn, spool_dir)

    @checkpointer_test(name="External(AsyncSqliteSaver)")
    async def factory() -> AsyncIterator[ExternalCheckpointer]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver:
            yield ExternalCheckpointer(saver, pipeline=pipeline)

    report = await validate(factory)
    pipeline.close()
    assert report.passed_all_base()
    assert _failures(report) == {}
    assert sum(p for _, p, _ in _counts(report).values()) >= 58


def test_capabilities_follow_the_wrapped_saver(tmp_path: Path, spool_dir: Path, dsn: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres import PostgresSaver

    pipeline = _pipeline(tmp_path, dsn, spool_dir)
    mem = ExternalCheckpointer(InMemorySaver(), pipeline=pipeline)
    assert mem.capabilities == frozenset()
    assert not hasattr(type(mem), "acopy_thread") or type(mem).acopy_thread is (
        ExternalCheckpointer.__mro__[1].acopy_thread  # the base class default
    )
    pg = ExternalCheckpointer(PostgresSaver.__new__(PostgresSaver), pipeline=pipeline)
    assert pg.capabilities == {"copy_thread", "delete_for_runs", "prune"}
    assert isinstance(pg, ExternalCheckpointer)
    pipeline.close()
