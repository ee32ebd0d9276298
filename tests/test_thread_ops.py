"""Thread operations (delete, copy, delete runs, prune) act on the saver *and* the record,
and migrations are idempotent and safe to run from two processes at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_external import External, verify_chain
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.restore import iter_checkpoint_ids
from langgraph_external.options import Options


class S(TypedDict):
    n: int


def _graph(checkpointer: Any) -> Any:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"n": s["n"] + 1})
    g.add_node("b", lambda s: {"n": s["n"] * 2})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=checkpointer)


def _rows(dsn: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture
def ext(dsn: str, tmp_path: Path, spool_dir: Path) -> Any:
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as e:
        yield e


def test_delete_thread_removes_everything_and_leaves_a_tombstone(ext: External) -> None:
    app = _graph(ext.checkpointer)
    app.invoke({"n": 1}, ext.config("doomed"))
    app.invoke({"n": 1}, ext.config("kept"))
    ext.flush()
    last_hash = ext.events("doomed")[-1]["hash"]
    ext.checkpointer.delete_thread("doomed")
    dsn = ext.dsn or ""
    assert _rows(dsn, "select count(*) from checkpoints where thread_id = 'doomed'") == [(0,)]
    assert _rows(
        dsn, "select count(*) from langgraph_external.checkpoints where thread_id = 'doomed'"
    ) == [(0,)]
    (tomb,) = ext.events("doomed")
    assert tomb["kind"] == "thread_deleted" and tomb["prev"] == last_hash
    assert list(ext.workspace.iter_events("doomed")) == [tomb]
    assert list(iter_checkpoint_ids(ext.workspace, "doomed")) == []
    assert not Path(ext.workspace.thread_dir("doomed"), "state.json").exists()
    (deleted_at,) = _rows(
        dsn, "select deleted_at from langgraph_external.threads where thread_id = 'doomed'"
    )
    assert deleted_at[0] is not None
    # other threads are untouched, and the id can be reused with a continuing chain
    assert app.get_state(ext.config("kept")).values == {"n": 4}
    app.invoke({"n": 5}, ext.config("doomed"))
    ext.flush()
    events = ext.events("doomed")
    assert events[0]["kind"] == "thread_deleted" and events[1]["seq"] == tomb["seq"] + 1
    verify_chain(events)


def test_copy_thread_copies_saver_rows_and_the_mirror(ext: External) -> None:
    app = _graph(ext.checkpointer)
    app.invoke({"n": 1}, ext.config("src"))
    ext.checkpointer.copy_thread("src", "dst/copy")  # type: ignore[attr-defined]
    assert app.get_state(ext.config("dst/copy")).values == {"n": 4}
    src_hist = [s.values for s in app.get_state_history(ext.config("src"))]
    dst_hist = [s.values for s in app.get_state_history(ext.config("dst/copy"))]
    assert src_hist == dst_hist
    ws = ext.workspace
    assert {cid for _, cid in iter_checkpoint_ids(ws, "dst/copy")} == {
        cid for _, cid in iter_checkpoint_ids(ws, "src")
    }
    dsn = ext.dsn or ""
    assert _rows(
        dsn,
        "select count(*) from langgraph_external.checkpoints where thread_id = 'dst/copy'",
    ) == [(4,)]
    (copied,) = [e for e in ext.events("dst/copy") if e["kind"] == "thread_copied"]
    assert copied["payload"]["source_thread_id"] == "src"
    # the copy continues on its own
    app.invoke({"n": 0}, ext.config("dst/copy"))
    assert app.get_state(ext.config("src")).values == {"n": 4}


def test_a_copied_thread_verifies_with_the_task_writes_it_came_with(ext: External) -> None:
    """copy_thread copies the saver's task writes too; the copy's record stands for them
    as it stands for its checkpoints (verify said "committed task writes without a writes
    event" on every copy)."""
    from langgraph_external.ops.verify import verify_thread

    app = _graph(ext.checkpointer)
    app.invoke({"n": 1}, ext.config("src"))
    ext.checkpointer.copy_thread("src", "copied")  # type: ignore[attr-defined]
    app.invoke({"n": 0}, ext.config("copied"))  # and goes on, recorded as usual
    assert ext.flush()
    dsn = ext.dsn or ""
    assert _rows(dsn, "select count(*) > 0 from checkpoint_writes where thread_id = 'copied'") == [
        (True,)
    ]
    with psycopg.connect(dsn) as conn:
        for tid in ("src", "copied"):
            res = verify_thread(conn, ext.workspace, tid, ext.schema, cipher=ext.cipher)
            assert res.ok, (tid, res.problems)


def test_delete_for_runs_removes_one_run_everywhere(ext: External) -> None:
    app = _graph(ext.checkpointer)
    # like LangGraph Platform, the run id travels in the config's metadata
    run_1, run_2 = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
    cfg1 = {**ext.config("runs"), "metadata": {"run_id": run_1}}
    cfg2 = {**ext.config("runs"), "metadata": {"run_id": run_2}}
    app.invoke({"n": 1}, cfg1)
    app.invoke({"n": 1}, cfg2)
    ext.flush()
    dsn = ext.dsn or ""
    run1 = {
        r[0]
        for r in _rows(
            dsn,
            "select checkpoint_id from checkpoints where metadata->>'run_id' = %s",
            run_1,
        )
    }
    assert run1
    ext.checkpointer.delete_for_runs([run_1])  # type: ignore[attr-defined]
    remaining = {r[0] for r in _rows(dsn, "select checkpoint_id from checkpoints")}
    assert remaining and not (remaining & run1)
    mirrored = {cid for _, cid in iter_checkpoint_ids(ext.workspace, "runs")}
    assert mirrored == remaining
    indexed = {r[0] for r in _rows(dsn, "select checkpoint_id from langgraph_external.checkpoints")}
    assert indexed == remaining
    (note,) = [e for e in ext.events("runs") if e["kind"] == "runs_deleted"]
    assert sorted(note["payload"]["removed"][""]) == sorted(run1)


def test_prune_keep_latest_prunes_the_mirror_too(ext: External) -> None:
    app = _graph(ext.checkpointer)
    app.invoke({"n": 1}, ext.config("p"))
    ext.checkpointer.prune(["p"])  # type: ignore[attr-defined]
    dsn = ext.dsn or ""
    remaining = {r[0] for r in _rows(dsn, "select checkpoint_id from checkpoints")}
    assert len(remaining) == 1
    assert {cid for _, cid in iter_checkpoint_ids(ext.workspace, "p")} == remaining
    assert app.get_state(ext.config("p")).values == {"n": 4}


def _setup_in_process(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return ledger.setup(conn, "concurrent_schema")


def test_migrations_are_idempotent_and_safe_from_two_processes(dsn: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        versions = pool.map(_setup_in_process, [dsn, dsn])
    assert versions == [len(ledger.MIGRATIONS) - 1] * 2
    assert _setup_in_process(dsn) == len(ledger.MIGRATIONS) - 1
    applied = _rows(dsn, "select v from concurrent_schema.migrations order by v")
    assert [v for (v,) in applied] == list(range(len(ledger.MIGRATIONS)))
