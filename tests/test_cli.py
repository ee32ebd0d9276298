"""The ``lgx`` command line over a real ledger and workspace recorded by a real graph."""

from __future__ import annotations

import base64
import json
import operator
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner, Result

from langgraph_external import External, Workspace
from langgraph_external.cli import app
from langgraph_external.ledger import schema as ledger
from langgraph_external.options import Options
from langgraph_external.read.inspection import place_events

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/x?connect_timeout=1"
ODD_ID = "team/β 7 [bold]"  # needs encoding on disk and escaping in rich markup


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    n: int


def _first(state: State) -> dict[str, Any]:
    return {"items": ["first"], "n": state["n"] + 1}


def _second(state: State) -> dict[str, Any]:
    return {"items": ["second"], "n": state["n"] * 10}


def _builder() -> StateGraph[State]:
    builder = StateGraph(State)
    builder.add_node("first", _first)
    builder.add_node("second", _second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder


@dataclass
class Recorded:
    dsn: str
    ws: Path


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})


@pytest.fixture
def recorded(dsn: str, tmp_path: Path, spool_dir: Path) -> Recorded:
    """Two threads recorded by the library: thread-1 (two runs) and an odd id."""
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = _builder().compile(checkpointer=ext.checkpointer)
        graph.invoke({"items": [], "n": 1}, ext.config("thread-1"))
        graph.invoke({"items": ["again"], "n": 3}, ext.config("thread-1"))
        graph.invoke({"items": [], "n": 5}, ext.config(ODD_ID))
    return Recorded(dsn, ws)


def lgx(runner: CliRunner, rec: Recorded, *args: str) -> Result:
    return runner.invoke(app, ["--dsn", rec.dsn, "--workspace", str(rec.ws), *args])


def assert_clean_failure(result: Result, code: int, *needles: str) -> None:
    """Non-zero exit with a one-line message on stderr and no traceback."""
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output


def _ledger_events(dsn: str, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        return ledger.fetch_events(conn, thread_id)


def _events_path(rec: Recorded, thread_id: str) -> Path:
    return Path(Workspace(rec.ws).thread_dir(thread_id)) / "events.jsonl"


def _rewrite_lines(path: Path, lines: Sequence[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


# -- setup -------------------------------------------------------------------------------
def test_setup_creates_the_schema_and_reports_its_version(
    runner: CliRunner, dsn: str, tmp_path: Path
) -> None:
    args = ["--dsn", dsn, "--workspace", str(tmp_path / "ws")]
    before = runner.invoke(app, [*args, "threads"])
    assert_clean_failure(before, 2, "not set up", "lgx setup")

    result = runner.invoke(app, [*args, "setup"])
    assert result.exit_code == 0, result.output
    assert f"version {len(ledger.MIGRATIONS) - 1}" in result.stdout
    again = runner.invoke(app, [*args, "setup"])  # idempotent
    assert again.exit_code == 0, again.output

    empty = runner.invoke(app, [*args, "threads"])
    assert empty.exit_code == 0, empty.output
    assert "no threads recorded yet" in empty.stdout


def test_setup_in_a_custom_schema(runner: CliRunner, dsn: str, tmp_path: Path) -> None:
    args = ["--dsn", dsn, "--workspace", str(tmp_path / "ws")]
    assert runner.invoke(app, [*args, "--schema", "audit_x", "setup"]).exit_code == 0
    assert runner.invoke(app, [*args, "--schema", "audit_x", "threads"]).exit_code == 0
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "select count(*) from information_schema.tables where table_schema = %s",
            ("audit_x",),
        ).fetchone()
    assert found is not None and found[0] >= 3
    # the default schema was not touched
    assert_clean_failure(runner.invoke(app, [*args, "threads"]), 2, "not set up")


def test_invalid_schema_name_is_rejected(runner: CliRunner, recorded: Recorded) -> None:
    result = lgx(runner, recorded, "--schema", "Bad-Name;drop", "threads")
    assert_clean_failure(result, 2, "schema name")


# -- threads -----------------------------------------------------------------------------
def test_threads_lists_recorded_threads(runner: CliRunner, recorded: Recorded) -> None:
    result = lgx(runner, recorded, "threads")
    assert result.exit_code == 0, result.output
    assert "thread-1" in result.stdout
    assert ODD_ID in result.stdout  # printed literally, not read as markup
    assert "2 threads" in result.stdout

    rows = [
        json.loads(line) for line in lgx(runner, recorded, "threads", "--json").stdout.splitlines()
    ]
    by_id = {r["thread_id"]: r for r in rows}
    assert set(by_id) == {"thread-1", ODD_ID}
    events = _ledger_events(recorded.dsn, "thread-1")
    assert by_id["thread-1"]["last_seq"] == events[-1]["seq"]
    assert by_id["thread-1"]["checkpoints"] == sum(e["kind"] == "checkpoint" for e in events)
    assert by_id["thread-1"]["deleted_at"] is None

    one = lgx(runner, recorded, "threads", "--limit", "1", "--json")
    assert len(one.stdout.splitlines()) == 1
    assert json.loads(one.stdout)["thread_id"] == ODD_ID  # most recently updated first
    assert "1 of 2 threads" in lgx(runner, recorded, "threads", "--limit", "1").stdout


def test_threads_reads_the_dsn_from_the_environment(runner: CliRunner, recorded: Recorded) -> None:
    result = runner.invoke(
        app, ["--workspace", str(recorded.ws), "threads"], env={"LGX_DSN": recorded.dsn}
    )
    assert result.exit_code == 0, result.output
    assert "thread-1" in result.stdout


# -- show --------------------------------------------------------------------------------
def test_show_summarizes_a_thread(runner: CliRunner, recorded: Recorded) -> None:
    events = _ledger_events(recorded.dsn, "thread-1")
    checkpoints = sum(e["kind"] == "checkpoint" for e in events)
    result = lgx(runner, recorded, "show", "thread-1", "--limit", "5")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"events: {len(events)}" in out
    assert f"checkpoints: {checkpoints}" in out
    # the last state, read from state.json: second run of thread-1 ends with n = (3+1)*10
    state = json.loads(
        (Path(Workspace(recorded.ws).thread_dir("thread-1")) / "state.json").read_text()
    )
    assert state["values"]["n"] == 40
    assert '"n": 40' in out
    assert '"again"' in out
    # the table of the last 5 events in step order (writes with their step)
    assert "last 5 events in step order" in out
    placed = [p.event for p in place_events(events)]
    last_seqs = [str(e["seq"]) for e in placed[-5:]]
    positions = [out.index(f"│ {s:>3} │") for s in last_seqs]
    assert positions == sorted(positions)
    assert f"│ {placed[-6]['seq']:>3} │" not in out
    assert "checkpoint" in out


def test_show_json_prints_the_ledger_envelopes(runner: CliRunner, recorded: Recorded) -> None:
    events = _ledger_events(recorded.dsn, "thread-1")
    result = lgx(runner, recorded, "show", "thread-1", "--json", "--limit", "0")
    assert result.exit_code == 0, result.output
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert printed == events
    # ... which are exactly the workspace's events.jsonl lines
    assert printed == list(Workspace(recorded.ws).iter_events("thread-1"))

    last3 = lgx(runner, recorded, "show", "thread-1", "--json", "-n", "3")
    assert [json.loads(line)["seq"] for line in last3.stdout.splitlines()] == [
        e["seq"] for e in events[-3:]
    ]


def test_show_an_encoded_thread_id(runner: CliRunner, recorded: Recorded) -> None:
    result = lgx(runner, recorded, "show", ODD_ID)
    assert result.exit_code == 0, result.output
    assert ODD_ID in result.stdout
    assert '"n": 60' in result.stdout  # (5 + 1) * 10, from the encoded directory's state.json


def test_show_a_thread_only_in_the_workspace(runner: CliRunner, recorded: Recorded) -> None:
    wk = list(Workspace(recorded.ws).iter_events(ODD_ID))
    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        for table in ("events", "checkpoints", "threads"):
            conn.execute(f"delete from langgraph_external.{table} where thread_id = %s", (ODD_ID,))
    result = lgx(runner, recorded, "show", ODD_ID)
    assert result.exit_code == 0, result.output
    assert "not in the ledger" in result.stdout
    assert '"n": 60' in result.stdout

    as_json = lgx(runner, recorded, "show", ODD_ID, "--json", "-n", "0")
    assert as_json.exit_code == 0, as_json.output
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == wk
    assert "not in the ledger" in as_json.stderr

    verified = lgx(runner, recorded, "verify", ODD_ID)
    assert verified.exit_code == 1
    assert "ledger: the thread is not in the ledger, but the workspace holds" in verified.stdout
    # the workspace itself is fine; what is missing is the saver's record of the thread
    also = [line for line in verified.stdout.splitlines() if "also:" in line]
    assert also and all("saver:" in line for line in also)


def test_show_of_a_missing_thread_is_one_clean_error_line(
    runner: CliRunner, recorded: Recorded
) -> None:
    result = lgx(runner, recorded, "show", "no-such-thread")
    assert_clean_failure(result, 1, "no-such-thread", "not found")
    assert result.stderr.strip().count("\n") == 0
    assert_clean_failure(lgx(runner, recorded, "show", "no-such-thread", "--json"), 1)


# -- verify ------------------------------------------------------------------------------
def test_verify_passes_an_untouched_thread_and_all_threads(
    runner: CliRunner, recorded: Recorded
) -> None:
    n = len(_ledger_events(recorded.dsn, "thread-1"))
    result = lgx(runner, recorded, "verify", "thread-1")
    assert result.exit_code == 0, result.output
    assert "OK" in result.stdout and f"{n} events" in result.stdout

    everything = lgx(runner, recorded, "verify", "--all")
    assert everything.exit_code == 0, everything.output
    assert "2 threads" in everything.stdout


def test_verify_detects_a_tampered_workspace_payload(runner: CliRunner, recorded: Recorded) -> None:
    path = _events_path(recorded, "thread-1")
    lines = path.read_text(encoding="utf-8").splitlines()
    env = json.loads(lines[2])
    assert env["seq"] == 3
    env["payload"]["tampered"] = True  # the stored hash is left as it was
    lines[2] = json.dumps(env)
    _rewrite_lines(path, lines)

    result = lgx(runner, recorded, "verify", "thread-1")
    assert result.exit_code == 1, result.output
    assert "FAIL" in result.stdout
    assert "workspace events.jsonl: seq 3: hash does not match" in result.stdout
    assert "ledger:" not in result.stdout  # the ledger itself is intact

    everything = lgx(runner, recorded, "verify", "--all")
    assert everything.exit_code == 1
    assert "thread-1" in everything.stdout and "seq 3" in everything.stdout
    assert ODD_ID not in everything.stdout  # only failures are listed
    assert "1 failed" in everything.stdout


def test_verify_detects_a_tampered_ledger_row(runner: CliRunner, recorded: Recorded) -> None:
    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        conn.execute(
            "update langgraph_external.events set node = 'intruder' "
            "where thread_id = %s and seq = 2",
            (ODD_ID,),
        )
    result = lgx(runner, recorded, "verify", ODD_ID)
    assert result.exit_code == 1, result.output
    assert "ledger: seq 2: hash does not match" in result.stdout
    assert ODD_ID in result.stdout


def test_verify_detects_events_missing_from_the_workspace(
    runner: CliRunner, recorded: Recorded
) -> None:
    path = _events_path(recorded, "thread-1")
    lines = path.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])["seq"]
    _rewrite_lines(path, lines[:-1])
    result = lgx(runner, recorded, "verify", "thread-1")
    assert result.exit_code == 1, result.output
    assert f"seq {last} and later (1 event) are in the ledger but missing from the workspace" in (
        result.stdout
    )


def test_verify_detects_a_swapped_event_and_a_broken_line(
    runner: CliRunner, recorded: Recorded
) -> None:
    path = _events_path(recorded, "thread-1")
    lines = path.read_text(encoding="utf-8").splitlines()
    head = lines[:2]
    _rewrite_lines(path, [*head, lines[3], lines[2], *lines[4:]])
    swapped = lgx(runner, recorded, "verify", "thread-1")
    assert swapped.exit_code == 1
    assert "workspace events.jsonl: gap in sequence: expected seq 3, found 4" in swapped.stdout

    _rewrite_lines(path, [*head, "{not json", *lines[2:]])
    broken = lgx(runner, recorded, "verify", "thread-1")
    assert broken.exit_code == 1
    assert "line 3 is not valid JSON" in broken.stdout


def test_verify_detects_a_truncated_head(runner: CliRunner, recorded: Recorded) -> None:
    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        conn.execute(
            "delete from langgraph_external.events where thread_id = 'thread-1' and seq = 1"
        )
    path = _events_path(recorded, "thread-1")
    _rewrite_lines(path, path.read_text(encoding="utf-8").splitlines()[1:])
    result = lgx(runner, recorded, "verify", "thread-1")
    assert result.exit_code == 1, result.output
    assert "ledger: events before seq 2 are missing" in result.stdout
    assert "workspace events.jsonl: events before seq 2 are missing" in result.stdout


def test_verify_detects_a_stale_thread_position(runner: CliRunner, recorded: Recorded) -> None:
    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        conn.execute(
            "update langgraph_external.threads set last_seq = 999 where thread_id = 'thread-1'"
        )
    result = lgx(runner, recorded, "verify", "thread-1")
    assert result.exit_code == 1, result.output
    assert "threads row says last seq 999" in result.stdout


def test_verify_with_the_wrong_workspace(
    runner: CliRunner, recorded: Recorded, tmp_path: Path
) -> None:
    result = runner.invoke(
        app,
        ["--dsn", recorded.dsn, "--workspace", str(tmp_path / "elsewhere"), "verify", "thread-1"],
    )
    assert result.exit_code == 1, result.output
    assert "workspace: no events at" in result.stdout


def test_verify_missing_thread_and_usage(runner: CliRunner, recorded: Recorded) -> None:
    assert_clean_failure(lgx(runner, recorded, "verify", "ghost"), 1, "ghost", "not found")
    assert_clean_failure(lgx(runner, recorded, "verify"), 2, "THREAD_ID or --all")
    assert_clean_failure(lgx(runner, recorded, "verify", "thread-1", "--all"), 2)


# -- sql ---------------------------------------------------------------------------------
def _statements(text: str) -> list[str]:
    return [s.strip() for s in text.split(";\n") if s.strip()]


def test_sql_examples_run_against_the_ledger(runner: CliRunner, recorded: Recorded) -> None:
    result = runner.invoke(app, ["sql", "--thread", "thread-1", "--node", "first"])
    assert result.exit_code == 0, result.output
    statements = _statements(result.stdout)
    assert len(statements) >= 5
    assert all(s.startswith("--") for s in statements)  # each has a comment saying what it does
    events = _ledger_events(recorded.dsn, "thread-1")
    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        results = {s.splitlines()[0]: conn.execute(s).fetchall() for s in statements}
    by_title = {re.split(r"[(,:]", t.lstrip("- "))[0].strip(): rows for t, rows in results.items()}
    assert len(by_title["Events of a thread"]) == len(events)
    path = by_title["The path a thread took"]
    lineage = by_title["The lineage of the latest checkpoint only"]
    assert len(path) == sum(e["kind"] == "checkpoint" for e in events)
    assert len(lineage) == len(path)  # no forks in this thread
    written = by_title["Checkpoints written by a node"]
    # across all threads: one per run of thread-1, one for the other thread
    assert sorted(r[0] for r in written) == sorted(["thread-1", "thread-1", ODD_ID])
    # "first" runs right after the input: steps 0 -> 1 in each first run, 4 -> 5 in the rerun
    assert sorted(r[3] for r in written) == [1, 1, 5]

    # literals are quoted, so any thread id is safe to paste
    quoted = runner.invoke(app, ["sql", "--thread", "o'brien; drop table x"]).stdout
    assert "'o''brien; drop table x'" in quoted
    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        for s in _statements(quoted):
            conn.execute(s).fetchall()


def test_sql_examples_name_the_chosen_schema(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--schema", "audit_x", "sql", "--examples"])
    assert result.exit_code == 0
    assert '"audit_x".events' in result.stdout
    assert "langgraph_external" not in result.stdout


# -- errors and the embedded server ------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [["setup"], ["threads"], ["show", "thread-1"], ["verify", "thread-1"], ["verify", "--all"]],
)
def test_unreachable_ledger_is_one_clean_line(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    result = runner.invoke(app, ["--dsn", UNREACHABLE, "--workspace", str(tmp_path), *args])
    assert_clean_failure(result, 2, "cannot connect to the ledger database")
    assert result.stdout == ""
    assert result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("error:")


def test_an_invalid_dsn_is_a_clean_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["--dsn", "not a dsn", "--workspace", str(tmp_path), "threads"])
    assert_clean_failure(result, 2, "invalid DSN")


def test_no_dsn_and_no_embedded_database(runner: CliRunner, tmp_path: Path) -> None:
    ws = tmp_path / "empty"
    result = runner.invoke(app, ["--workspace", str(ws), "threads"])
    assert_clean_failure(result, 2, "--dsn", "LGX_DSN", str(ws / ".lgx" / "pgdata"))
    assert not (ws / ".lgx").exists()  # a read command creates nothing


def test_without_a_dsn_the_cli_uses_the_workspaces_embedded_server(
    runner: CliRunner, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LGX_DSN", raising=False)
    ws = tmp_path / "ws"
    with External(workspace=ws, options=Options(spool_dir=spool_dir)) as ext:  # dsn=None: embedded
        graph = _builder().compile(checkpointer=ext.checkpointer)
        graph.invoke({"items": [], "n": 1}, ext.config("local-1"))
    assert (ws / ".lgx" / "pgdata").is_dir()

    listed = runner.invoke(app, ["--workspace", str(ws), "threads"])
    assert listed.exit_code == 0, listed.output
    assert "local-1" in listed.stdout
    verified = runner.invoke(app, ["--workspace", str(ws), "verify", "--all"])
    assert verified.exit_code == 0, verified.output
    assert "1 thread," in verified.stdout
    stopped = runner.invoke(app, ["--workspace", str(ws), "db", "stop"])
    assert stopped.exit_code == 0, stopped.output


def test_console_script_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "langgraph_external.cli", "sql", "--examples"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "thread_summary" in done.stdout


def test_a_deleted_thread_still_verifies(
    runner: CliRunner, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    rec = Recorded(dsn, tmp_path / "ws")
    with External(dsn=dsn, workspace=rec.ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = _builder().compile(checkpointer=ext.checkpointer)
        graph.invoke({"items": [], "n": 1}, ext.config("gone"))
        ext.checkpointer.delete_thread("gone")
        graph.invoke({"items": [], "n": 2}, ext.config("gone"))  # the id is reused
    listed = lgx(runner, rec, "threads")
    assert listed.exit_code == 0, listed.output
    assert "deleted" in listed.stdout
    verified = lgx(runner, rec, "verify", "gone")
    assert verified.exit_code == 0, verified.output
    shown = lgx(runner, rec, "show", "gone")
    assert "deleted:" in shown.stdout
    assert "thread_deleted" in shown.stdout


def test_restore_rebuilds_a_thread_into_an_empty_database(
    runner: Any, tmp_path: Path, spool_dir: Path, dsn: str, pg_server: str
) -> None:
    import uuid

    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from langgraph_external import External

    class S(TypedDict):
        n: int

    g = StateGraph(S)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        app = g.compile(checkpointer=ext.checkpointer)
        app.invoke({"n": 1}, ext.config("r-1"))
        app.invoke({"n": 5}, ext.config("r-1"))
        want = [s.values for s in app.get_state_history(ext.config("r-1"))]
    fresh = f"lgx_restore_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'create database "{fresh}"')
    params = conninfo_to_dict(pg_server)
    params["dbname"] = fresh
    target = make_conninfo(**params)
    from langgraph_external.cli import app as cli_app

    result = runner.invoke(cli_app, ["--dsn", target, "--workspace", str(ws), "restore", "r-1"])
    assert result.exit_code == 0, result.output
    assert "restored" in result.output
    with PostgresSaver.from_conn_string(target) as saver:
        restored = g.compile(checkpointer=saver)
        got = [s.values for s in restored.get_state_history({"configurable": {"thread_id": "r-1"}})]
    assert got == want
    again = runner.invoke(cli_app, ["--dsn", target, "--workspace", str(ws), "restore", "r-1"])
    assert again.exit_code == 1 and "already has checkpoints" in again.output
    # the new database's ledger has the thread's verified record back, then the restore
    events = _ledger_events(target, "r-1")
    recorded = [json.loads(x) for x in (ws / "threads" / "r-1" / "events.jsonl").open()]
    assert [e["hash"] for e in events[:-1]] == [e["hash"] for e in recorded[:-1]]
    assert events[-1]["kind"] == "thread_restored" == recorded[-1]["kind"]
    verified = runner.invoke(cli_app, ["--dsn", target, "--workspace", str(ws), "verify", "r-1"])
    assert verified.exit_code == 0, verified.output
    shown = runner.invoke(cli_app, ["--dsn", target, "--workspace", str(ws), "show", "r-1"])
    assert shown.exit_code == 0 and "thread_restored" in shown.stdout, shown.output


def test_restore_as_a_new_id_records_the_thread_and_its_restore(
    runner: CliRunner, recorded: Recorded
) -> None:
    result = lgx(runner, recorded, "restore", "thread-1", "--as", "thread-1-copy")
    assert result.exit_code == 0, result.output
    assert "recorded as thread_restored" in result.stdout
    events = _ledger_events(recorded.dsn, "thread-1-copy")
    originals = _ledger_events(recorded.dsn, "thread-1")
    source_ckpts = [e for e in originals if e["kind"] == "checkpoint"]
    kinds = [e["kind"] for e in events]
    assert kinds.count("checkpoint") == len(source_ckpts)  # restored through the recorder
    [restored] = [e for e in events if e["kind"] == "thread_restored"]
    assert restored["seq"] == len(events)  # the restore closes the record
    assert restored["payload"] == {
        "source_thread_id": "thread-1",
        "workspace": str(recorded.ws),
        "checkpoints": len(source_ckpts),
        "last_checkpoint_id": source_ckpts[-1]["checkpoint_id"],
    }
    verified = lgx(runner, recorded, "verify", "thread-1-copy")
    assert verified.exit_code == 0, verified.output
    assert "ledger and workspace agree" in verified.stdout
    shown = lgx(runner, recorded, "show", "thread-1-copy")
    assert shown.exit_code == 0, shown.output
    assert "thread_restored" in shown.stdout and "last state" in shown.stdout
    state = json.loads(
        (Path(Workspace(recorded.ws).thread_dir("thread-1-copy")) / "state.json").read_text()
    )
    original = json.loads(
        (Path(Workspace(recorded.ws).thread_dir("thread-1")) / "state.json").read_text()
    )
    assert state["values"] == original["values"]
    # the restored thread is a working thread of the app
    with External(dsn=recorded.dsn, workspace=recorded.ws) as ext:
        graph = _builder().compile(checkpointer=ext.checkpointer)
        assert (
            graph.get_state(ext.config("thread-1-copy")).values
            == graph.get_state(ext.config("thread-1")).values
        )


def test_restore_of_an_altered_workspace_is_refused_and_writes_nothing(
    runner: CliRunner, recorded: Recorded
) -> None:
    log = Path(Workspace(recorded.ws).thread_dir("thread-1")) / "checkpoints" / "_root.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    holder = next(x for x in lines if x.get("blobs"))
    sha, b64 = next(iter(holder["blobs"].items()))
    raw = bytearray(base64.b64decode(b64))
    raw[0] ^= 1
    holder["blobs"][sha] = base64.b64encode(bytes(raw)).decode()
    _rewrite_lines(log, [json.dumps(x) for x in lines])
    result = lgx(runner, recorded, "restore", "thread-1", "--as", "tampered")
    assert_clean_failure(result, 1, "restore refused", "_root.jsonl", "wrong key or altered")
    assert _ledger_events(recorded.dsn, "tampered") == []
    with psycopg.connect(recorded.dsn) as conn:
        row = conn.execute(
            "select count(*) from checkpoints where thread_id = 'tampered'"
        ).fetchone()
    assert row == (0,)
    assert not Path(Workspace(recorded.ws).thread_dir("tampered")).exists()


def test_restore_of_an_encrypted_workspace_needs_its_key(
    runner: CliRunner, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph_external.record.crypto import WorkspaceCipher

    key = WorkspaceCipher.generate_key()
    rec = Recorded(dsn, tmp_path / "ws")
    with External(dsn=dsn, workspace=rec.ws, key=key, options=Options(spool_dir=spool_dir)) as ext:
        _builder().compile(checkpointer=ext.checkpointer).invoke(
            {"items": [], "n": 1}, ext.config("enc")
        )
    wrong = lgx(
        runner, rec, "restore", "enc", "--as", "enc-2", "--key", WorkspaceCipher.generate_key()
    )
    assert_clean_failure(wrong, 1, "restore refused", "cannot decrypt")
    assert _ledger_events(dsn, "enc-2") == []
    right = lgx(runner, rec, "restore", "enc", "--as", "enc-2", "--key", key)
    assert right.exit_code == 0, right.output
    assert lgx(runner, rec, "verify", "enc-2", "--key", key).exit_code == 0
