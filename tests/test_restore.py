"""Restore verifies the workspace copy before it writes anything into the target saver."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_external import External, Workspace
from langgraph_external.errors import ExternalError, RestoreError
from langgraph_external.ops.restore import load_checkpoint, restore_thread
from langgraph_external.options import Options
from langgraph_external.record.crypto import DecryptionError, WorkspaceCipher
from tests.graphs import blob_chat, state_history

BIG = "x" * 40_000  # serialized above the 16 KiB inline limit: a blob file


class S(TypedDict):
    note: str
    big: str
    n: int


def _graph(checkpointer: Any) -> Any:
    g = StateGraph(S)
    g.add_node("first", lambda s: {"note": "first", "n": s["n"] + 1})
    g.add_node("second", lambda s: {"big": BIG, "n": s["n"] + 1})
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    g.add_edge("second", END)
    return g.compile(checkpointer=checkpointer)


@pytest.fixture
def recorded(dsn: str, tmp_path: Path, spool_dir: Path) -> Path:
    """A workspace holding thread ``r`` (inline values, a blob file, pending writes).

    Exact copies in clear (``encrypt=False``), so the tests can alter them byte by byte;
    their addresses are keyed either way. Encrypted copies: ``tests/test_security.py``.
    """
    ws = tmp_path / "ws"
    with External(
        dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir, encrypt=False)
    ) as ext:
        _graph(ext.checkpointer).invoke({"note": "", "big": "", "n": 0}, ext.config("r"))
        ext.flush()
    return ws


@pytest.fixture(params=["sqlite", "postgres"])
def target(
    request: pytest.FixtureRequest, tmp_path: Path, pg_server: str
) -> Iterator[BaseCheckpointSaver[Any]]:
    """A fresh, empty saver to restore into."""
    if request.param == "sqlite":
        conn = sqlite3.connect(tmp_path / "target.sqlite", check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
        conn.close()
        return
    name = f"lgx_target_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'create database "{name}"')
    params: dict[str, Any] = dict(conninfo_to_dict(pg_server))
    params["dbname"] = name
    try:
        with PostgresSaver.from_conn_string(make_conninfo(**params)) as pg_saver:
            pg_saver.setup()
            yield pg_saver
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(f'drop database if exists "{name}" with (force)')


def _root_log(ws: Path) -> Path:
    return ws / "threads" / "r" / "checkpoints" / "_root.jsonl"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _write_lines(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def _assert_refused(
    ws: Path, target: BaseCheckpointSaver[Any], error: type[ExternalError], *needles: str
) -> None:
    with pytest.raises(error) as info:
        restore_thread(Workspace(ws), "r", target)
    for needle in needles:
        assert needle in str(info.value), str(info.value)
    assert list(target.list(None)) == []  # nothing was written


def test_an_intact_workspace_restores_into_a_fresh_saver(
    recorded: Path, target: BaseCheckpointSaver[Any]
) -> None:
    n = restore_thread(Workspace(recorded), "r", target)
    assert n == 4  # input, first, second, and the loop's start
    state = _graph(target).get_state({"configurable": {"thread_id": "r"}})
    assert state.values == {"note": "first", "big": BIG, "n": 2}


def test_restore_refuses_an_inline_value_with_one_byte_flipped(
    recorded: Path, target: BaseCheckpointSaver[Any]
) -> None:
    path = _root_log(recorded)
    lines = _lines(path)
    n, line = next((i, x) for i, x in enumerate(lines, 1) if x.get("blobs"))
    sha, b64 = next(iter(line["blobs"].items()))
    line["blobs"][sha] = base64.b64encode(_flip(base64.b64decode(b64), 0)).decode()
    _write_lines(path, lines)
    _assert_refused(
        recorded,
        target,
        RestoreError,
        f"_root.jsonl: line {n}",
        line["checkpoint_id"],
        f"expected {sha}",
        "do not match their address",
    )


def test_restore_refuses_a_blob_file_with_one_byte_flipped(
    recorded: Path, target: BaseCheckpointSaver[Any]
) -> None:
    blobs = list((recorded / "threads" / "r" / "checkpoints" / "blobs").iterdir())
    assert len(blobs) == 1
    blobs[0].write_bytes(_flip(blobs[0].read_bytes(), 1000))
    _assert_refused(
        recorded, target, RestoreError, f"blobs/{blobs[0].name}", "do not match their address"
    )


def test_restore_refuses_an_events_line_with_one_byte_flipped(
    recorded: Path, target: BaseCheckpointSaver[Any]
) -> None:
    path = recorded / "threads" / "r" / "events.jsonl"
    raw = path.read_bytes().splitlines(keepends=True)
    at = raw[2].index(b'"event_id":"') + len(b'"event_id":"')
    raw[2] = _flip(raw[2], at)  # still valid JSON, different content
    path.write_bytes(b"".join(raw))
    _assert_refused(
        recorded,
        target,
        RestoreError,
        "events.jsonl: line 3",
        "hash chain broken",
        "seq 3: hash does not match",
    )


def test_an_events_file_rewritten_in_another_json_layout_still_verifies(
    recorded: Path, target: BaseCheckpointSaver[Any]
) -> None:
    """The chain is checked on the events' content, not on their text: the same events
    written with spaces and other key order verify and restore."""
    path = recorded / "threads" / "r" / "events.jsonl"
    envelopes = _lines(path)
    path.write_text("".join(json.dumps(dict(reversed(e.items()))) + "\n" for e in envelopes))
    assert restore_thread(Workspace(recorded), "r", target) == 4


def test_restore_refuses_a_torn_checkpoint_line(
    recorded: Path, target: BaseCheckpointSaver[Any]
) -> None:
    path = _root_log(recorded)
    data = path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    n = data[:last_start].count(b"\n") + 1
    path.write_bytes(data[: last_start + (len(data) - last_start) // 2])  # a crash mid-append
    _assert_refused(recorded, target, RestoreError, f"_root.jsonl: line {n} is torn")


def test_a_value_altered_together_with_its_address_still_fails_against_the_chain(
    recorded: Path, target: BaseCheckpointSaver[Any]
) -> None:
    """Rewriting the bytes and the log's address consistently is caught by the hash chain."""
    path = _root_log(recorded)
    lines = _lines(path)
    n, line = next(
        (i, x)
        for i, x in enumerate(lines, 1)
        if x.get("record") == "checkpoint"
        and x["channels"].get("note", {}).get("in") == x["checkpoint_id"]
        and b"first" in base64.b64decode(x["blobs"][x["channels"]["note"]["sha256"]])
    )
    ref = line["channels"]["note"]
    old = ref["sha256"]
    forged = base64.b64decode(line["blobs"][old]).replace(b"first", b"forgd")
    new = hashlib.sha256(forged).hexdigest()
    assert new != old
    del line["blobs"][old]
    line["blobs"][new] = base64.b64encode(forged).decode()
    ref["sha256"] = new
    _write_lines(path, lines)
    _assert_refused(
        recorded,
        target,
        RestoreError,
        f"_root.jsonl: line {n}",
        "channel 'note' sha256",
        "hash-chained event",
    )


def test_load_checkpoint_verifies_too(recorded: Path) -> None:
    blob = next((recorded / "threads" / "r" / "checkpoints" / "blobs").iterdir())
    blob.write_bytes(blob.read_bytes() + b"!")
    last = _lines(_root_log(recorded))[-1]
    cid = str(last["checkpoint_id"])
    with pytest.raises(RestoreError, match="do not match their address"):
        load_checkpoint(Workspace(recorded), "r", "", cid)


def test_an_encrypted_workspace_verifies_with_the_keyed_address(
    dsn: str, tmp_path: Path, spool_dir: Path, target: BaseCheckpointSaver[Any]
) -> None:
    key = WorkspaceCipher.generate_key()
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, key=key, options=Options(spool_dir=spool_dir)) as ext:
        _graph(ext.checkpointer).invoke({"note": "", "big": "", "n": 0}, ext.config("r"))
        ext.flush()
    cipher = WorkspaceCipher(key)
    assert restore_thread(Workspace(ws), "r", target, target_thread_id="ok", cipher=cipher) == 4
    blob = next((ws / "threads" / "r" / "checkpoints" / "blobs").iterdir())
    blob.write_bytes(_flip(blob.read_bytes(), 100))
    with pytest.raises(DecryptionError, match=f"blobs/{blob.name}"):
        restore_thread(Workspace(ws), "r", target, target_thread_id="bad", cipher=cipher)
    assert list(target.list({"configurable": {"thread_id": "bad"}})) == []


@pytest.fixture
def operated(dsn: str, tmp_path: Path, spool_dir: Path) -> tuple[Workspace, dict[str, Any]]:
    """Threads after delete (id reused), prune, and copy (the copy went on running)."""
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        app = _graph(ext.checkpointer)
        start = {"note": "", "big": "", "n": 0}
        app.invoke(start, ext.config("src"))
        ext.checkpointer.copy_thread("src", "copy")  # type: ignore[attr-defined]
        app.invoke({**start, "n": 10}, ext.config("copy"))
        app.invoke(start, ext.config("gone"))
        ext.checkpointer.delete_thread("gone")
        app.invoke({**start, "n": 5}, ext.config("gone"))
        app.invoke(start, ext.config("p"))
        app.invoke({**start, "n": 7}, ext.config("p"))
        ext.checkpointer.prune(["p"])  # type: ignore[attr-defined]
        ext.flush()
        want = {t: app.get_state(ext.config(t)).values for t in ("copy", "gone", "p")}
        return ext.workspace, want


@pytest.mark.parametrize("thread", ["gone", "p"])
def test_threads_after_delete_and_prune_still_verify_and_restore(
    operated: tuple[Workspace, dict[str, Any]], thread: str
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    ws, want = operated
    target = InMemorySaver()
    assert restore_thread(ws, thread, target) > 0
    assert _graph(target).get_state({"configurable": {"thread_id": thread}}).values == want[thread]


def test_a_copied_thread_that_went_on_restores(
    operated: tuple[Workspace, dict[str, Any]],
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    ws, want = operated
    target = InMemorySaver()
    restore_thread(ws, "copy", target)
    assert _graph(target).get_state({"configurable": {"thread_id": "copy"}}).values == want["copy"]


def test_restore_recorded_when_only_the_saver_lost_the_thread(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph_external.ops.restore import restore_recorded
    from langgraph_external.record.events import verify_chain

    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        app = _graph(ext.checkpointer)
        app.invoke({"note": "", "big": "", "n": 0}, ext.config("r"))
        ext.flush()
        want = app.get_state(ext.config("r")).values
        before = ext.events("r")
        with psycopg.connect(dsn, autocommit=True) as conn:
            for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
                conn.execute(f"delete from public.{table} where thread_id = 'r'")  # type: ignore[arg-type]
        assert ext.checkpointer.get_tuple(ext.config("r")) is None
        done = restore_recorded(ext, "r")
        assert done.checkpoints == 4
        assert app.get_state(ext.config("r")).values == want
        after = ext.events("r")
    # the record is the same record, plus one event: no checkpoint recorded twice
    assert [e["hash"] for e in after[:-1]] == [e["hash"] for e in before]
    assert after[-1]["kind"] == "thread_restored"
    assert after[-1]["payload"]["last_checkpoint_id"] == done.last_checkpoint_id
    verify_chain(after)
    lines = (tmp_path / "ws" / "threads" / "r" / "events.jsonl").read_text().splitlines()
    assert [json.loads(x)["hash"] for x in lines] == [e["hash"] for e in after]


def test_restore_recorded_refuses_a_ledger_that_holds_another_record(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph_external.ops.restore import restore_recorded
    from langgraph_external.record.events import Event

    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        _graph(ext.checkpointer).invoke({"note": "", "big": "", "n": 0}, ext.config("r"))
        ext.flush()
        with psycopg.connect(dsn, autocommit=True) as conn:
            for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
                conn.execute(f"delete from public.{table} where thread_id = 'r'")  # type: ignore[arg-type]
        # the workspace lags the ledger by one event
        log = tmp_path / "ws" / "threads" / "r" / "events.jsonl"
        assert ext.pipeline is not None
        kept = log.read_bytes()
        ext.pipeline.emit(Event.new("error", "r", payload={"x": 1}))
        ext.flush()
        log.write_bytes(kept)
        with pytest.raises(RestoreError, match="different records"):
            restore_recorded(ext, "r")
        assert ext.checkpointer.get_tuple(ext.config("r")) is None


def test_a_thread_with_subgraphs_sends_and_an_interrupt_restores_in_bulk_and_resumes(
    dsn: str, second_dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into the official Postgres saver the rows go in bulk (never through its ``put``);
    the restored thread reads back exactly like the original and resumes the same way."""
    from langgraph.types import Command

    from tests.graphs import fanout_with_interrupt

    ws = tmp_path / "ws"
    config: Any = {"configurable": {"thread_id": "f"}}
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        fanout_with_interrupt(ext.checkpointer).invoke({"items": [], "total": 0}, ext.config("f"))
        ext.flush()
    with (
        PostgresSaver.from_conn_string(dsn) as original,
        PostgresSaver.from_conn_string(second_dsn) as target,
    ):
        target.setup()

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("restore went through put/put_writes")

        with monkeypatch.context() as m:
            m.setattr(target, "put", refuse)
            m.setattr(target, "put_writes", refuse)
            assert restore_thread(Workspace(ws), "f", target) == len(list(original.list(config)))

        namespaces = {t.config["configurable"]["checkpoint_ns"] for t in original.list(config)}
        assert "" in namespaces and any(ns.startswith("review:") for ns in namespaces)
        assert list(target.list(config)) == list(original.list(config))
        for ns in namespaces:
            conf = {"configurable": {"thread_id": "f", "checkpoint_ns": ns}}
            assert target.get_tuple(conf) == original.get_tuple(conf)
        written = {ch for t in original.list(config) for _, ch, _ in t.pending_writes or []}
        assert {"__interrupt__", "__pregel_tasks"} <= written  # an interrupt, Send packets

        before, after = fanout_with_interrupt(original), fanout_with_interrupt(target)
        assert before.get_state(config).interrupts
        assert list(after.get_state_history(config)) == list(before.get_state_history(config))
        assert after.get_state(config, subgraphs=True) == before.get_state(config, subgraphs=True)
        resumed = after.invoke(Command(resume="yes"), config)
        assert resumed == before.invoke(Command(resume="yes"), config)
        assert resumed["total"] == 120
        assert after.get_state(config).values == before.get_state(config).values


# -- exact bytes into the savers that store them (ops/exact.py) ----------------------------
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_saver_that_stores_serialized_bytes_gets_every_checkpoint_back_identically(
    dsn: str, tmp_path: Path, spool_dir: Path, kind: str
) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        original = blob_chat(ext.checkpointer)
        for turn in range(4):
            original.invoke({"messages": [HumanMessage(f"turn {turn}")]}, ext.config("c"))
        assert ext.flush()
        before = state_history(original, "c")
        conn = sqlite3.connect(tmp_path / "t.sqlite", check_same_thread=False)
        saver: Any = InMemorySaver() if kind == "memory" else SqliteSaver(conn)
        n = restore_thread(Workspace(tmp_path / "ws"), "c", saver, cipher=ext.cipher)
        assert n == len(before)
        restored = blob_chat(saver)
        assert state_history(restored, "c") == before  # every checkpoint, values and metadata
        # and it resumes as the original does
        original.invoke({"messages": [HumanMessage("again")]}, ext.config("c"))
        restored.invoke({"messages": [HumanMessage("again")]}, {"configurable": {"thread_id": "c"}})
        assert [
            m.content
            for m in restored.get_state({"configurable": {"thread_id": "c"}}).values["messages"]
        ] == [
            m.content
            for m in original.get_state({"configurable": {"thread_id": "c"}}).values["messages"]
        ]
        conn.close()


def test_a_restore_into_sqlite_that_fails_half_way_leaves_nothing(
    recorded: Path, tmp_path: Path
) -> None:
    conn = sqlite3.connect(tmp_path / "half.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    # the database itself refuses the third checkpoint (as a full disk would)
    conn.execute(
        "create trigger refuse_third after insert on checkpoints "
        "when (select count(*) from checkpoints) >= 3 "
        "begin select raise(abort, 'the disk says no'); end"
    )
    conn.commit()
    with pytest.raises(sqlite3.DatabaseError, match="the disk says no"):
        restore_thread(Workspace(recorded), "r", saver)
    assert list(saver.list(None)) == []  # nothing of the thread was written
    assert conn.execute("select count(*) from writes").fetchone() == (0,)
    # the saver works as before once the block is left
    conn.execute("drop trigger refuse_third")
    conn.commit()
    assert restore_thread(Workspace(recorded), "r", saver) == 4
    conn.close()
