"""``lgx repair`` and ``lgx verify`` against what the saver committed: nothing the saver
holds stays without its record, a lost workspace is rebuilt, one bad thread never stops
the others."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from typer.testing import CliRunner, Result

from langgraph_external import External, verify_chain
from langgraph_external.cli import app
from langgraph_external.options import Options
from tests.graphs import fanout_with_subgraph, react_agent


def _lgx(dsn: str, ws: Path, *args: str) -> Result:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})
    return runner.invoke(app, ["--dsn", dsn, "--workspace", str(ws), *args])


def _record(dsn: str, ws: Path, spool: Path) -> None:
    from langchain_core.messages import HumanMessage

    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool)) as ext:
        react_agent(ext.checkpointer).invoke(
            {"messages": [HumanMessage("weather?")]}, ext.config("agent")
        )
        fanout_with_subgraph(ext.checkpointer).invoke({"items": [], "total": 0}, ext.config("fan"))


def _growing_doc(nodes: tuple[str, ...], words: int) -> Any:
    """A graph whose nodes each append a section of ``words`` words to one document."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        doc: list[str]
        n: int

    def grow(s: S) -> S:
        return {"doc": [*s["doc"], f"<section {s['n']}>" + "lorem ipsum " * words], "n": s["n"] + 1}

    builder = StateGraph(S)
    previous = START
    for name in nodes:
        builder.add_node(name, grow)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


def _mirror_files(ws: Path) -> dict[Path, bytes]:
    """The workspace's files but the derived ``state.json`` and ``thread.json``."""
    return {
        p.relative_to(ws): p.read_bytes()
        for p in (ws / "threads").rglob("*")
        if p.is_file() and p.name not in ("state.json", "thread.json")
    }


def test_what_a_plain_saver_committed_is_recorded_by_repair(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws = tmp_path / "ws"
    _record(dsn, ws, spool_dir)
    # another process writes the same database with the plain saver: no record of it
    with PostgresSaver.from_conn_string(dsn) as plain:
        fanout_with_subgraph(plain).invoke(
            {"items": [], "total": 0}, {"configurable": {"thread_id": "plain"}}
        )
    result = _lgx(dsn, ws, "verify", "--all")
    assert result.exit_code == 1
    assert "plain" in result.output and "without a checkpoint event" in result.output

    result = _lgx(dsn, ws, "repair", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["checkpoints_recovered"] == 8  # 5 root + 3 subgraph checkpoints
    assert report["writes_recovered"] >= 7
    assert _lgx(dsn, ws, "verify", "--all").exit_code == 0
    again = json.loads(_lgx(dsn, ws, "repair", "--json").output)  # idempotent
    assert again["checkpoints_recovered"] == again["writes_recovered"] == 0

    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        events = ext.events("plain")
    verify_chain(events)
    recovered = [e for e in events if e["kind"] == "checkpoint"]
    assert all(e["payload"]["recovered"] for e in recovered)
    root = sorted((e for e in recovered if e["checkpoint_ns"] == ""), key=lambda e: e["step"])
    assert [e["payload"]["nodes"] for e in root] == [
        [],
        ["__start__"],
        ["split"],
        ["work"],
        ["summarize"],
    ]


def test_a_lost_or_damaged_workspace_is_rebuilt_from_the_ledger(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws = tmp_path / "ws"
    _record(dsn, ws, spool_dir)
    before = {
        p.relative_to(ws): p.read_bytes()
        for p in (ws / "threads").rglob("*")
        if p.is_file() and p.name != "state.json"
    }
    shutil.rmtree(ws / "threads" / "agent")
    log = ws / "threads" / "fan" / "events.jsonl"
    log.write_bytes(log.read_bytes()[:-40])  # a torn tail
    assert _lgx(dsn, ws, "verify", "--all").exit_code == 1
    result = _lgx(dsn, ws, "repair", "--rebuild", "agent", "--rebuild", "fan")
    assert result.exit_code == 0, result.output
    after = {
        p.relative_to(ws): p.read_bytes()
        for p in (ws / "threads").rglob("*")
        if p.is_file() and p.name != "state.json"
    }
    assert after.keys() == before.keys()
    for path, data in before.items():
        if path.name == "thread.json":
            continue  # its creation time is the rebuild's
        assert after[path] == data, path
    assert _lgx(dsn, ws, "verify", "--all").exit_code == 0


def test_verify_all_reports_every_bad_thread_and_goes_on(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws = tmp_path / "ws"
    _record(dsn, ws, spool_dir)
    lonely = ws / "threads" / "lonely"
    lonely.mkdir()
    (lonely / "thread.json").write_text(json.dumps({"thread_id": "lonely"}))
    (ws / "threads" / "fan" / "events.jsonl").write_bytes(b"\xff\xfe not json\n")
    result = _lgx(dsn, ws, "verify", "--all")
    assert result.exit_code == 1
    out: Any = result.output
    assert "FAIL lonely" in out and "FAIL fan" in out and "2 failed: 3 threads" in out
    with psycopg.connect(dsn) as conn:
        n = conn.execute("select count(*) from langgraph_external.events").fetchone()
    assert n is not None and n[0] > 0


def test_large_values_live_once_in_postgres_and_still_rebuild_the_workspace(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """A large channel value is the saver's row, named (not copied) by the ledger's event;
    a workspace rebuilt from the ledger reads it from there, byte for byte."""
    from langgraph_external import Workspace
    from langgraph_external.ops.restore import iter_checkpoint_ids, load_checkpoint

    builder = _growing_doc(("grow", "again"), 4000)
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        builder.compile(checkpointer=ext.checkpointer).invoke(
            {"doc": "", "n": 0}, ext.config("big")
        )
        ext.flush()
        with psycopg.connect(dsn) as conn:
            biggest_event, biggest_blob = conn.execute(
                """select (select max(octet_length(detail)) from langgraph_external.events
                           where thread_id = 'big' and kind = 'checkpoint'),
                          (select max(octet_length(blob)) from checkpoint_blobs
                           where thread_id = 'big')"""
            ).fetchone()  # type: ignore[misc]
        assert biggest_blob > 90_000 and biggest_event < 20_000  # referenced, not copied
        files = _mirror_files(ws)
        saver = ext.checkpointer
        stored = [
            saver.get_tuple(
                {"configurable": {"thread_id": "big", "checkpoint_ns": ns, "checkpoint_id": cid}}
            )
            for ns, cid in iter_checkpoint_ids(ext.workspace, "big")
        ]
    shutil.rmtree(ws / "threads")
    assert _lgx(dsn, ws, "repair", "--rebuild", "big").exit_code == 0
    assert _mirror_files(ws) == files
    for want in stored:
        assert want is not None
        got = load_checkpoint(
            Workspace(ws),
            "big",
            want.config["configurable"]["checkpoint_ns"],
            want.config["configurable"]["checkpoint_id"],
        )
        assert got.checkpoint["channel_values"] == want.checkpoint["channel_values"]
    assert _lgx(dsn, ws, "verify", "--all").exit_code == 0


def test_a_thread_larger_than_one_read_is_mirrored_in_bounded_reads(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """Each checkpoint of a growing document names the whole document (the saver's row):
    reading the thread back holds at most ``max_bytes`` (plus one event) at a time, the
    reads together return every event once and in order, and a workspace rebuilt that way
    is the original, byte for byte."""
    from langgraph_external.ledger.postgres import READ_BUDGET

    builder = _growing_doc(("grow",), 2000)
    graph_ws = tmp_path / "ws"

    def size(e: Any) -> int:
        return sum(len(b) for b in e.attachments.values())

    with External(dsn=dsn, workspace=graph_ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = builder.compile(checkpointer=ext.checkpointer)
        state: dict[str, Any] = {"doc": [], "n": 0}
        for _ in range(30):
            state = graph.invoke(state, ext.config("doc"))
        ext.flush()
        ledger = ext.pipeline.ledger  # type: ignore[union-attr]
        whole = ledger.read("doc", 0, limit=10**6, max_bytes=10**12)
        assert sum(size(e) for e in whole) > 3 * READ_BUDGET  # the default would cut it
        budget = 1_000_000
        batches, after = [], 0
        while batch := ledger.read("doc", after, max_bytes=budget):
            batches.append(batch)
            after = batch[-1].seq
        assert len(batches) > 3
        for batch in batches:
            assert sum(size(e) for e in batch[:-1]) < budget  # stopped once it was reached
        got = [e for b in batches for e in b]
        assert [e.seq for e in got] == [e.seq for e in whole] == list(range(1, len(whole) + 1))
        assert [e.attachments for e in got] == [e.attachments for e in whole]
        files = _mirror_files(graph_ws)
    shutil.rmtree(graph_ws / "threads")
    assert _lgx(dsn, graph_ws, "repair", "--rebuild", "doc").exit_code == 0
    assert _mirror_files(graph_ws) == files
    assert _lgx(dsn, graph_ws, "verify", "doc").exit_code == 0
