"""Readable workspace folder names (issue 33), and the folders of threads recorded before.

A new thread's folder spells its id (``sp-A`` is ``threads/sp-!a``); a thread recorded with
the earlier rule (``threads/~onyc2qi``) keeps its folder for good: it verifies, reads,
restores, grows and is rebuilt there. The old record is ``tests/data/legacy_record``, made
by the code of that time (``tests/data/make_legacy_record.py``).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import psycopg
import pytest
from graphs import fanout_with_subgraph
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner, Result

from langgraph_external import External, Workspace, decode_thread_id, encode_thread_id
from langgraph_external.cli import app
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.restore import restore_thread
from langgraph_external.options import Options
from langgraph_external.read.states import read_state
from langgraph_external.record.crypto import WorkspaceCipher

FIXTURE = Path(__file__).parent / "data" / "legacy_record"
KEY = b"k" * 32  # the key the fixture was recorded with
FAN_IN = {"items": [], "total": 0}


@pytest.mark.parametrize(
    ("thread_id", "folder"),
    [
        ("thread-42", "thread-42"),
        ("sp-A", "sp-!a"),
        ("refund-A-100", "refund-!a-100"),
        ("a/b", "a%2fb"),
        ("a\\b", "a%5cb"),
        ("..", "%2e%2e"),
        (".hidden", "%2ehidden"),
        ("ends.", "ends%2e"),
        ("-rf", "%2drf"),
        ("CON", "!c!o!n"),
        ("con", "co%6e"),
        ("nul.txt", "nu%6c.txt"),
        ("com1", "com%31"),
        ("~onyc2qi", "%7eonyc2qi"),
        ("100%!", "100%25%21"),
        ("用户-42", "用户-42"),
        ("é", "%c3%a9"),
        ("🦜 x", "%f0%9f%a6%9c%20x"),
        ("lgx-replay:t-1:0a1b2c3d", "lgx-replay%3at-1%3a0a1b2c3d"),
    ],
)
def test_a_folder_name_spells_the_id_and_escapes_only_what_is_unsafe(
    thread_id: str, folder: str
) -> None:
    assert encode_thread_id(thread_id) == folder
    assert decode_thread_id(folder) == thread_id


def test_ids_that_differ_only_in_case_get_folders_that_differ_in_any_case() -> None:
    ids = ["sp-a", "sp-A", "SP-A", "Sp-a", "ab", "aB", "Ab", "AB"]
    names = [encode_thread_id(t) for t in ids]
    assert names == ["sp-a", "sp-!a", "!s!p-!a", "!sp-a", "ab", "a!b", "!ab", "!a!b"]
    assert len({n.casefold() for n in names}) == len(ids)
    assert [decode_thread_id(n) for n in names] == ids


def test_a_very_long_id_gets_a_readable_start_and_its_hash() -> None:
    tid = "order-" + "Z" * 400
    name = encode_thread_id(tid)
    assert len(name) <= 200 and name.startswith("order-!z!z")
    assert "~" in name and decode_thread_id(name) is None  # the id is in thread.json
    assert encode_thread_id(tid + "z") != name


def _verify_all(dsn: str, ws: Path) -> Result:
    return CliRunner().invoke(app, ["--dsn", dsn, "--workspace", str(ws), "verify", "--all"])


def _paths(dsn: str, thread_id: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [
            e["payload"]["path"]
            for e in ledger.fetch_events(conn, thread_id)
            if e["kind"] == "checkpoint"
        ]


def test_new_threads_get_readable_folders_that_verify(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = ["sp-A", "refund-A-100", "a/b", "..", "CON", "用户-42", "Ab", "ab", "x" * 300]
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = fanout_with_subgraph(ext.checkpointer)
        for tid in ids:
            assert graph.invoke(FAN_IN, ext.config(tid))["total"] == 120
        assert ext.flush()
    names = os.listdir(ws / "threads")
    assert {"sp-!a", "refund-!a-100", "a%2fb", "%2e%2e", "!c!o!n", "用户-42", "!ab", "ab"} <= set(
        names
    )
    assert len(names) == len(ids) and len({n.casefold() for n in names}) == len(ids)
    long_name = encode_thread_id("x" * 300)
    assert long_name in names and long_name.startswith("x" * 100)
    assert json.loads((ws / "threads" / long_name / "thread.json").read_text())["thread_id"] == (
        "x" * 300
    )
    assert Workspace(ws).list_threads() == sorted(ids)
    # the record names the readable folder; a subgraph's log is readable too
    logs = sorted({p.removeprefix("threads/sp-!a/checkpoints/") for p in _paths(dsn, "sp-A")})
    assert len(logs) == 2 and logs[0] == "_root.jsonl" and logs[1].startswith("summarize%3a")
    result = _verify_all(dsn, ws)
    assert result.exit_code == 0, result.output
    # `lgx timeline` names its file the same way
    monkeypatch.chdir(tmp_path)
    page = CliRunner().invoke(app, ["--dsn", dsn, "--workspace", str(ws), "timeline", "sp-A"])
    assert page.exit_code == 0, page.output
    assert (tmp_path / "sp-!a.html").exists()


def _load_legacy_record(dsn: str, ws: Path) -> None:
    """The ledger and workspace an installation of the old rule left (ledger schema v9)."""
    dump = gzip.decompress((FIXTURE / "ledger.sql.gz").read_bytes()).decode()
    script = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(script)  # type: ignore[call-overload]  # a whole plain-SQL dump
    with tarfile.open(FIXTURE / "workspace.tar.gz") as tar:
        tar.extractall(ws, filter="data")


def _files(ws: Path, folder: str) -> list[str]:
    return sorted(
        str(p.relative_to(ws / "threads" / folder)) for p in (ws / "threads" / folder).rglob("*")
    )


def test_a_thread_recorded_with_the_old_names_verifies_reads_and_grows_in_its_old_folder(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LGX_KEY", base64.b64encode(KEY).decode())
    ws = tmp_path / "ws"
    _load_legacy_record(dsn, ws)
    threads = ws / "threads"
    assert sorted(os.listdir(threads)) == ["thread-42", "~onyc2qi"]
    old_logs = {t: _files(ws, f) for t, f in (("sp-A", "~onyc2qi"), ("thread-42", "thread-42"))}
    # as it was left: it verifies and reads (the ledger is migrated on the way)
    result = _verify_all(dsn, ws)
    assert result.exit_code == 0, result.output
    assert Workspace(ws).list_threads() == ["sp-A", "thread-42"]
    assert read_state(Workspace(ws), "sp-A").values["total"] == 120
    shown = CliRunner().invoke(app, ["--dsn", dsn, "--workspace", str(ws), "show", "sp-A"])
    assert shown.exit_code == 0, shown.output

    # it grows in its old folder, subgraph logs named the old way too; a new thread
    # gets a readable folder
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = fanout_with_subgraph(ext.checkpointer)
        for tid in ("sp-A", "thread-42", "sp-B"):
            graph.invoke(FAN_IN, ext.config(tid))
        ext.checkpointer.copy_thread("sp-A", "Copy-of-sp-A")
        assert ext.flush()
    assert sorted(os.listdir(threads)) == ["!copy-of-sp-!a", "sp-!b", "thread-42", "~onyc2qi"]
    # a copy of an old thread gets the new names, its copied logs and index renamed
    copied = sorted(os.listdir(threads / "!copy-of-sp-!a" / "checkpoints"))
    assert len(copied) == 3 and copied[0] == "_root.jsonl"
    assert all(n.startswith("summarize%3a") for n in copied[1:])
    with psycopg.connect(dsn) as conn:
        index = conn.execute(
            "select distinct workspace_path from langgraph_external.checkpoints"
            " where thread_id = 'Copy-of-sp-A'"
        ).fetchall()
    assert {p for (p,) in index} == {
        f"threads/!copy-of-sp-!a/checkpoints/{n}" for n in copied if n.endswith(".jsonl")
    }
    for tid, folder in (("sp-A", "~onyc2qi"), ("thread-42", "thread-42")):
        paths = _paths(dsn, tid)
        assert len(paths) > len([p for p in old_logs[tid] if p.endswith(".jsonl")])
        assert all(p.startswith(f"threads/{folder}/checkpoints/") for p in paths)
        logs = [p.rsplit("/", 1)[1] for p in set(paths)]
        assert len(logs) == 3 and all(n == "_root.jsonl" or n.startswith("~") for n in logs)
        assert set(old_logs[tid]) <= set(_files(ws, folder))
    assert all(p.startswith("threads/sp-!b/") for p in _paths(dsn, "sp-B"))
    result = _verify_all(dsn, ws)
    assert result.exit_code == 0, result.output

    # restored from the workspace alone
    saver = InMemorySaver()
    assert restore_thread(Workspace(ws), "sp-A", saver, cipher=WorkspaceCipher(KEY)) > 0
    restored: Any = saver.get_tuple({"configurable": {"thread_id": "sp-A"}})
    assert restored is not None
    # rebuilt from the ledger where it was, though its folder is gone
    rebuilt = CliRunner().invoke(
        app, ["--dsn", dsn, "--workspace", str(ws), "repair", "--rebuild", "sp-A"]
    )
    assert rebuilt.exit_code == 0, rebuilt.output
    assert sorted(os.listdir(threads)) == ["!copy-of-sp-!a", "sp-!b", "thread-42", "~onyc2qi"]
    result = _verify_all(dsn, ws)
    assert result.exit_code == 0, result.output


def test_an_old_thread_restored_into_an_empty_ledger_keeps_its_folder(
    dsn: str, second_dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LGX_KEY", base64.b64encode(KEY).decode())
    ws = tmp_path / "ws"
    _load_legacy_record(dsn, ws)  # the workspace is what counts: the ledger is lost
    threads = ws / "threads"

    def lgx(*args: str) -> Result:
        return CliRunner().invoke(app, ["--dsn", second_dsn, "--workspace", str(ws), *args])

    restored = lgx("restore", "sp-A")
    assert restored.exit_code == 0, restored.output
    copy = lgx("restore", "sp-A", "--as", "Sp-C")
    assert copy.exit_code == 0, copy.output
    # the record went back as it was, naming ~onyc2qi: the thread keeps it as it grows
    with External(dsn=second_dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        fanout_with_subgraph(ext.checkpointer).invoke(FAN_IN, ext.config("sp-A"))
        assert ext.flush()
    assert sorted(os.listdir(threads)) == ["!sp-!c", "thread-42", "~onyc2qi"]
    assert all(p.startswith("threads/~onyc2qi/") for p in _paths(second_dsn, "sp-A"))
    assert all(p.startswith("threads/!sp-!c/") for p in _paths(second_dsn, "Sp-C"))
    for tid in ("sp-A", "Sp-C"):
        verified = lgx("verify", tid)
        assert verified.exit_code == 0, verified.output


def test_an_old_thread_exported_and_imported_keeps_its_folder_there(
    dsn: str, second_dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LGX_KEY", base64.b64encode(KEY).decode())
    ws, target = tmp_path / "ws", tmp_path / "target"
    _load_legacy_record(dsn, ws)
    archive = tmp_path / "sp-a.tar.gz"
    exported = CliRunner().invoke(
        app, ["--dsn", dsn, "--workspace", str(ws), "export", "sp-A", "-o", str(archive)]
    )
    assert exported.exit_code == 0, exported.output
    imported = CliRunner().invoke(
        app, ["--dsn", second_dsn, "--workspace", str(target), "import", str(archive)]
    )
    assert imported.exit_code == 0, imported.output
    with External(dsn=second_dsn, workspace=target, options=Options(spool_dir=spool_dir)) as ext:
        graph = fanout_with_subgraph(ext.checkpointer)
        for tid in ("sp-A", "sp-D"):
            graph.invoke(FAN_IN, ext.config(tid))
        assert ext.flush()
    assert sorted(os.listdir(target / "threads")) == ["sp-!d", "~onyc2qi"]
    assert all(p.startswith("threads/~onyc2qi/") for p in _paths(second_dsn, "sp-A"))
    verified = _verify_all(second_dsn, target)
    assert verified.exit_code == 0, verified.output
