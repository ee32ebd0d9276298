"""Savers the record cannot join (in-memory, SQLite, yours) are captured *by value*: the
capture commits in a ledger transaction before the saver stores, holds what the saver was
given encrypted with the deployment key, and the sealer builds the events from it (one
recording path for every saver)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_external import External, Workspace
from langgraph_external.ops.restore import restore_thread
from langgraph_external.options import Options
from tests.crash_harness import lgx
from tests.graphs import blob_chat, cpu_burner, state_history

SECRET = "launch code 0000-SECRET-7777"


def _captures(dsn: str) -> list[tuple[str, bytes | None]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select kind, material from langgraph_external.captures").fetchall()
    return [(r[0], None if r[1] is None else bytes(r[1])) for r in rows]


def test_a_capture_by_value_commits_before_put_returns_and_holds_nothing_in_clear(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    # nothing seals here (an `lgx worker` would): what put left behind is the capture
    saver = InMemorySaver()
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        sealing="worker",
        options=Options(spool_dir=spool_dir, saver=saver),
    ) as ext:
        graph = blob_chat(ext.checkpointer)
        graph.invoke({"messages": [HumanMessage(SECRET)]}, ext.config("t"))
        stored = list(saver.list({"configurable": {"thread_id": "t"}}))
        caps = _captures(dsn)
        checkpoints = [m for k, m in caps if k == "checkpoint"]
        writes = [m for k, m in caps if k == "writes"]
        assert len(checkpoints) == len(stored) and writes
        assert all(m is not None and m[0] == 1 for k, m in caps if k != "events")  # sealed
        assert not any(m is not None and b"SECRET" in m for _, m in caps)
    # an `lgx worker`'s sealer (here `lgx repair`'s) builds the events: the state restores
    repaired = lgx(dsn, tmp_path / "ws", "repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert [k for k, _ in _captures(dsn)] == []
    target = InMemorySaver()
    n = restore_thread(Workspace(tmp_path / "ws"), "t", target, cipher=ext.cipher)
    assert n == len(stored)
    assert state_history(blob_chat(target), "t") == state_history(blob_chat(saver), "t")


def test_a_child_sealed_by_a_sealer_that_never_saw_its_parent_restores_exactly(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """A by-value capture carries only the changed channels once its parent was captured
    here; a sealer that did not seal that parent (another process, a restart) reads the
    parent's references back from the ledger."""
    saver = InMemorySaver()
    ws = tmp_path / "ws"
    with External(
        dsn=dsn,
        workspace=ws,
        sealing="worker",
        options=Options(spool_dir=spool_dir, saver=saver),
    ) as ext:
        graph = blob_chat(ext.checkpointer)
        for turn in range(3):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}")]}, ext.config("t"))
            # a fresh sealer process each turn: it knows none of the earlier checkpoints
            repaired = lgx(dsn, ws, "repair")
            assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    with psycopg.connect(dsn) as conn:
        full = [
            r[0]
            for r in conn.execute(
                "select payload ->> 'full' from langgraph_external.events "
                "where thread_id = 't' and kind = 'checkpoint' order by seq"
            )
        ]
    assert full.count("false") >= len(full) - 1  # unchanged channels named, not copied
    target = InMemorySaver()
    restore_thread(Workspace(ws), "t", target, cipher=ext.cipher)
    assert state_history(blob_chat(target), "t") == state_history(blob_chat(saver), "t")
    verified = lgx(dsn, ws, "verify", "t")
    assert verified.returncode == 0, verified.stdout + verified.stderr


class FailingSaver(InMemorySaver):
    """Stores nothing once ``fail`` is set (a disk that filled, a locked file)."""

    fail = False

    def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.fail:
            raise OSError("disk full")
        return super().put(*args, **kwargs)


def test_a_store_that_fails_after_its_capture_is_recorded_as_failed(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    saver = FailingSaver()
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, saver=saver),
    ) as ext:
        graph = blob_chat(ext.checkpointer)
        graph.invoke({"messages": [HumanMessage("one")]}, ext.config("t"))
        saver.fail = True
        with pytest.raises(OSError, match="disk full"):
            graph.invoke({"messages": [HumanMessage("two")]}, ext.config("t"))
        assert ext.flush()
        events = ext.events("t")
    failed = [e for e in events if e["name"] == "checkpoint_not_stored"]
    assert len(failed) == 1
    assert failed[0]["payload"]["error"] == "OSError: disk full"
    recorded = [e for e in events if e["kind"] == "checkpoint"]
    assert failed[0]["checkpoint_id"] == recorded[-1]["checkpoint_id"]  # names which
    assert len(recorded) == len(list(saver.list({"configurable": {"thread_id": "t"}}))) + 1


def test_many_threads_capturing_by_value_under_load_lose_and_repeat_nothing(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    saver = InMemorySaver()
    errors: list[BaseException] = []
    with (
        cpu_burner(),
        External(
            dsn=dsn,
            workspace=tmp_path / "ws",
            options=Options(spool_dir=spool_dir, saver=saver),
        ) as ext,
    ):
        graph = blob_chat(ext.checkpointer)

        def run(i: int) -> None:
            try:
                for turn in range(5):
                    mode = "async" if (i + turn) % 2 else "sync"
                    graph.invoke(
                        {"messages": [HumanMessage(f"{i}/{turn}")]},
                        ext.config(f"t{i}"),
                        durability=mode,
                    )
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert ext.flush()
        assert errors == []
        for i in range(8):
            stored = {
                t.config["configurable"]["checkpoint_id"]
                for t in saver.list({"configurable": {"thread_id": f"t{i}"}})
            }
            got = [e["checkpoint_id"] for e in ext.events(f"t{i}") if e["kind"] == "checkpoint"]
            assert sorted(got) == sorted(stored)  # each once, none missing


def test_an_in_memory_saver_app_seals_in_its_helper_process(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    # the default serializer's msgpack hook cannot be pickled; the helper makes its own
    # (it used to keep sealing in the app's threads, on the app's GIL)
    saver = InMemorySaver()
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, saver=saver),
    ) as ext:
        assert ext.pipeline is not None
        assert getattr(ext.pipeline.sealing, "pid", None) is not None
        graph = blob_chat(ext.checkpointer)
        graph.invoke({"messages": [HumanMessage("hello")]}, ext.config("t"))
        assert ext.flush()
        stored = list(saver.list({"configurable": {"thread_id": "t"}}))
        got = [e for e in ext.events("t") if e["kind"] == "checkpoint"]
        assert len(got) == len(stored)
        state = (tmp_path / "ws" / "threads" / "t" / "state.json").read_text()
        assert "hello" in state  # the helper's serializer read the values back


@pytest.mark.parametrize("strict", [False, True])
def test_a_store_waits_for_a_ledger_that_is_down_or_raises_when_strict(
    strict: bool, spool_dir: Path
) -> None:
    from langgraph_external.checkpointers import ExternalCheckpointer
    from langgraph_external.errors import RecordingError
    from langgraph_external.pipeline.pipeline import Pipeline
    from tests.test_pipeline import FlakyLedger

    ledger = FlakyLedger()
    saver = InMemorySaver()
    with Pipeline(ledger, spool_dir=spool_dir, strict=strict, retry_interval=0.05) as p:
        graph = blob_chat(ExternalCheckpointer(saver, pipeline=p))
        config = {"configurable": {"thread_id": "t"}}
        graph.invoke({"messages": [HumanMessage("one")]}, config)
        ledger.down = True
        if strict:
            with pytest.raises(RecordingError, match="could not be captured"):
                graph.invoke({"messages": [HumanMessage("two")]}, config)
            stored = len(list(saver.list(config)))
            ledger.down = False
            assert p.flush(10)
            recorded = [e for e in ledger.events if e.kind == "checkpoint"]
            assert len(recorded) == stored  # the store it refused never happened
            return
        done = threading.Event()
        runner = threading.Thread(
            target=lambda: (graph.invoke({"messages": [HumanMessage("two")]}, config), done.set())
        )
        runner.start()
        assert not done.wait(0.5)  # the store waits for its capture
        assert "ledger" in p.health()["failing"]
        ledger.down = False
        runner.join(30)
        assert done.is_set()
        assert p.flush(10)
        stored = {t.config["configurable"]["checkpoint_id"] for t in saver.list(config)}
        assert {e.checkpoint_id for e in ledger.events if e.kind == "checkpoint"} == stored


def test_a_lone_surrogate_a_nul_and_100_kb_go_through_a_capture_by_value(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """msgpack cannot encode a lone surrogate: such text is captured marked, and every
    value reads back exactly as the saver stored it (the invoke failed on it)."""
    saver = InMemorySaver()
    odd = "file \udce9 name \x00 and " + "z" * 100_000
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, saver=saver),
    ) as ext:
        graph = blob_chat(ext.checkpointer)
        config = ext.config("t")
        config["configurable"]["note"] = "from \udce9.txt"
        config["metadata"] = {"tag": "m \udfff"}
        graph.invoke({"messages": [HumanMessage(odd)]}, config)
        assert ext.flush()
        events = ext.events("t")
        cps = [e for e in events if e["kind"] == "checkpoint"]
        assert len(cps) == len(list(saver.list({"configurable": {"thread_id": "t"}})))
        assert all(e["kind"] != "error" for e in events)
        assert ext.pipeline is not None and ext.pipeline.health()["record_failures"] == 0
    target = InMemorySaver()
    restore_thread(Workspace(tmp_path / "ws"), "t", target, cipher=ext.cipher)
    restored = state_history(blob_chat(target), "t")
    original = state_history(blob_chat(saver), "t")
    assert restored == original  # ids, values, next and metadata, as the saver holds them
    content = restored[0][1]["messages"][0].content  # as this saver's serializer stored it
    assert "\x00" in content and content.endswith("z" * 100_000)
    # the record itself holds the metadata as the app gave it (this saver wrote "?")
    with psycopg.connect(dsn) as conn:
        notes = {
            r[0]
            for r in conn.execute(
                "select payload -> 'metadata' ->> 'note' from langgraph_external.events "
                "where thread_id = 't' and kind = 'checkpoint'"
            )
        }
    assert notes == {'{"as": "text", "$escaped": "from \\\\udce9.txt"}'}


def test_digest_is_deprecated_and_says_so(dsn: str, tmp_path: Path, spool_dir: Path) -> None:
    from langgraph_external.checkpointers import ExternalCheckpointer
    from langgraph_external.ledger.memory import InMemoryLedger
    from langgraph_external.pipeline.pipeline import Pipeline

    with (
        Pipeline(InMemoryLedger(), spool_dir=spool_dir) as p,
        pytest.warns(DeprecationWarning, match="digest"),
    ):
        ExternalCheckpointer(InMemorySaver(), pipeline=p, digest=lambda b: "x")
