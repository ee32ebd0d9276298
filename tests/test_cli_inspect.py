"""``lgx sql``, ``lgx events`` and ``lgx state`` over a ledger and workspace recorded by a graph."""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner, Result

from langgraph_external import External, Workspace
from langgraph_external.cli import app
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.embedded import server_status, stop_server
from langgraph_external.options import Options

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/x?connect_timeout=1"


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    n: int


def _builder() -> StateGraph[State]:
    builder = StateGraph(State)
    builder.add_node("first", lambda s: {"items": ["first"], "n": s["n"] + 1})
    builder.add_node("second", lambda s: {"items": ["second"], "n": s["n"] * 10})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder


@dataclass
class Recorded:
    dsn: str
    ws: Path
    history: list[tuple[str, dict[str, Any]]]  # (checkpoint id, values), newest first


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})


@pytest.fixture
def recorded(dsn: str, tmp_path: Path, spool_dir: Path) -> Recorded:
    """thread-1 run twice and thread-2 once, with the graph's own state history."""
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = _builder().compile(checkpointer=ext.checkpointer)
        graph.invoke({"items": [], "n": 1}, ext.config("thread-1"))
        graph.invoke({"items": ["again"], "n": 3}, ext.config("thread-1"))
        graph.invoke({"items": [], "n": 5}, ext.config("thread-2"))
        history = [
            (str(snap.config["configurable"]["checkpoint_id"]), dict(snap.values))
            for snap in graph.get_state_history(ext.config("thread-1"))
        ]
    return Recorded(dsn, ws, history)


def lgx(runner: CliRunner, rec: Recorded, *args: str, **kwargs: Any) -> Result:
    return runner.invoke(app, ["--dsn", rec.dsn, "--workspace", str(rec.ws), *args], **kwargs)


def assert_clean_failure(result: Result, code: int, *needles: str) -> None:
    """Non-zero exit with a one-line message on stderr and no traceback."""
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.stderr.startswith("error:"), result.stderr
    assert result.stderr.strip().count("\n") == 0, result.stderr
    for needle in needles:
        assert needle in result.output, result.output


def json_lines(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def ledger_events(dsn: str, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        return ledger.fetch_events(conn, thread_id)


# -- sql ---------------------------------------------------------------------------------
def test_sql_runs_a_query_and_prints_a_table(runner: CliRunner, recorded: Recorded) -> None:
    events = ledger_events(recorded.dsn, "thread-1")
    kinds = sorted({e["kind"] for e in events})
    result = lgx(
        runner,
        recorded,
        "sql",
        "select kind, count(*) as n from events where thread_id = 'thread-1' "
        "group by kind order by kind",
    )
    assert result.exit_code == 0, result.output
    for kind in kinds:
        n = sum(e["kind"] == kind for e in events)
        assert any(kind in line and f" {n} " in line for line in result.stdout.splitlines())
    assert f"({len(kinds)} rows)" in result.stdout


def test_sql_json_prints_one_object_per_row(runner: CliRunner, recorded: Recorded) -> None:
    rows = json_lines(
        lgx(
            runner,
            recorded,
            "sql",
            "--json",
            "select seq, ts, kind, payload, 1 as x, 2 as x from events "
            "where thread_id = 'thread-1' order by seq",
        )
    )
    events = ledger_events(recorded.dsn, "thread-1")
    assert [r["seq"] for r in rows] == [e["seq"] for e in events]
    assert [r["payload"] for r in rows] == [e["payload"] for e in events]  # jsonb as JSON
    assert [datetime.fromisoformat(r["ts"]) for r in rows] == [
        datetime.fromisoformat(e["ts"]) for e in events
    ]
    assert {(r["x"], r["x_2"]) for r in rows} == {(1, 2)}  # repeated names stay apart


def test_sql_errors_are_one_clean_line_with_exit_code_1(
    runner: CliRunner, recorded: Recorded
) -> None:
    syntax = lgx(runner, recorded, "sql", "selec 1")
    assert_clean_failure(syntax, 1, "query failed", "syntax error", "SQLSTATE 42601")
    missing = lgx(runner, recorded, "sql", "select * from no_such_table")
    assert_clean_failure(missing, 1, "query failed", "no_such_table")
    assert missing.stdout == ""


def test_sql_is_read_only_unless_write(runner: CliRunner, recorded: Recorded) -> None:
    n = len(ledger_events(recorded.dsn, "thread-1"))
    denied = lgx(runner, recorded, "sql", "delete from events where thread_id = 'thread-1'")
    assert_clean_failure(denied, 1, "read-only", "--write")
    assert len(ledger_events(recorded.dsn, "thread-1")) == n

    written = lgx(
        runner,
        recorded,
        "sql",
        "--write",
        "create table public.notes (x int); insert into public.notes values (7), (8)",
    )
    assert written.exit_code == 0, written.output
    assert "CREATE TABLE" in written.stderr and "INSERT 0 2" in written.stderr
    with psycopg.connect(recorded.dsn) as conn:
        assert conn.execute("select sum(x) from public.notes").fetchone() == (15,)


def test_sql_reads_piped_statements_from_stdin(runner: CliRunner, recorded: Recorded) -> None:
    piped = lgx(runner, recorded, "sql", "--json", input="select 1 as one;\nselect 2 as two;\n")
    assert json_lines(piped) == [{"one": 1}, {"two": 2}]
    dash = lgx(runner, recorded, "sql", "--json", "-", input="select 'a' as letter")
    assert json_lines(dash) == [{"letter": "a"}]
    empty = lgx(runner, recorded, "sql", input="")
    assert_clean_failure(empty, 2, "no SQL given", "--examples")


def test_sql_interactive_survives_errors_and_stops_at_quit(
    runner: CliRunner, recorded: Recorded
) -> None:
    session = "\n".join(
        [
            "select 1 as one;",
            "select nope;",  # an error does not end the session
            "select",
            "  2 as two;",  # a statement may span lines
            "\\examples",
            "\\q",
            "select 3 as never;",
        ]
    )
    result = lgx(runner, recorded, "sql", "--interactive", "--json", input=session + "\n")
    assert result.exit_code == 0, result.output
    data = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert data == [{"one": 1}, {"two": 2}]
    assert "thread_summary" in result.stdout  # \examples
    assert "lgx=>" in result.stderr and "lgx->" in result.stderr
    assert 'query failed: column "nope" does not exist' in result.stderr
    assert "Traceback" not in result.output


def test_sql_examples_stay_reachable(runner: CliRunner, recorded: Recorded) -> None:
    result = runner.invoke(app, ["sql", "--examples"])  # no database needed
    assert result.exit_code == 0, result.output
    assert "thread_summary" in result.stdout and "'thread-42'" in result.stdout
    statements = [s.strip() for s in result.stdout.split(";\n") if s.strip()]
    with psycopg.connect(recorded.dsn) as conn:
        for statement in statements:
            conn.execute(statement).fetchall()
    filled = runner.invoke(app, ["sql", "--thread", "thread-1", "--node", "first"])
    assert "'thread-1'" in filled.stdout and "'first'" in filled.stdout
    both = runner.invoke(app, ["sql", "--examples", "select 1"])
    assert_clean_failure(both, 2, "--examples")


def test_sql_tables_do_not_wrap_when_piped(recorded: Recorded) -> None:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": None})
    result = lgx(runner, recorded, "sql", "select repeat('x', 300) as long, 'tail' as tail")
    assert result.exit_code == 0, result.output
    assert any("x" * 300 in line and "tail" in line for line in result.stdout.splitlines())
    shown = lgx(runner, recorded, "events", "thread-1")
    assert shown.exit_code == 0, shown.output
    assert all("…" not in line for line in shown.stdout.splitlines())


@pytest.mark.parametrize(
    "args", [["sql", "select 1"], ["events", "thread-1"], ["sql", "--json", "select 1"]]
)
def test_unreachable_ledger_is_one_clean_line(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    result = runner.invoke(app, ["--dsn", UNREACHABLE, "--workspace", str(tmp_path), *args])
    assert_clean_failure(result, 2, "cannot connect to the ledger database")
    assert result.stdout == ""


def test_sql_uses_the_embedded_server_and_leaves_it_running(
    runner: CliRunner, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LGX_DSN", raising=False)
    ws = tmp_path / "ws"
    pgdata = ws / ".lgx" / "pgdata"
    try:
        with External(
            workspace=ws, options=Options(spool_dir=spool_dir)
        ) as ext:  # dsn=None: embedded
            _builder().compile(checkpointer=ext.checkpointer).invoke(
                {"items": [], "n": 1}, ext.config("local-1")
            )
        assert server_status(pgdata).running  # the app left it running for the next process
        query = "select count(*) as n from threads"
        result = runner.invoke(app, ["--workspace", str(ws), "sql", "--json", query])
        assert json_lines(result) == [{"n": 1}]
        assert server_status(pgdata).running

        stop_server(pgdata)
        assert not server_status(pgdata).running
        again = runner.invoke(app, ["--workspace", str(ws), "sql", "--json", query])
        assert json_lines(again) == [{"n": 1}]
        assert server_status(pgdata).running  # started by the command, left running
    finally:
        stop_server(pgdata)
    assert not server_status(pgdata).running

    missing = runner.invoke(app, ["--workspace", str(tmp_path / "none"), "sql", "select 1"])
    assert_clean_failure(missing, 2, "no embedded database")


# -- events ------------------------------------------------------------------------------
def test_events_json_prints_the_ledger_envelopes(runner: CliRunner, recorded: Recorded) -> None:
    events = ledger_events(recorded.dsn, "thread-1")
    assert json_lines(lgx(runner, recorded, "events", "thread-1", "--json")) == events
    last3 = json_lines(lgx(runner, recorded, "events", "thread-1", "--json", "-n", "3"))
    assert last3 == events[-3:]


def test_events_filters_by_kind_node_and_name(runner: CliRunner, recorded: Recorded) -> None:
    events = ledger_events(recorded.dsn, "thread-1")
    by_kind = json_lines(
        lgx(runner, recorded, "events", "thread-1", "--kind", "checkpoint", "--json")
    )
    assert by_kind == [e for e in events if e["kind"] == "checkpoint"]
    two = json_lines(
        lgx(runner, recorded, "events", "thread-1", "-k", "checkpoint", "-k", "writes", "--json")
    )
    assert two == [e for e in events if e["kind"] in ("checkpoint", "writes")]
    node = json_lines(
        lgx(runner, recorded, "events", "thread-1", "-k", "writes", "--node", "first", "--json")
    )
    assert node == [e for e in events if e["kind"] == "writes" and e["node"] == "first"]
    assert node  # the writes of "first" in each run
    names = {e["name"] for e in events if e["name"]}
    name = sorted(names)[0]
    assert json_lines(lgx(runner, recorded, "events", "thread-1", "--name", name, "--json")) == [
        e for e in events if e["name"] == name
    ]
    nothing = lgx(runner, recorded, "events", "thread-1", "--node", "no-such-node")
    assert nothing.exit_code == 0 and nothing.stdout == ""
    assert "no events match" in nothing.stderr


def test_events_filters_by_time(runner: CliRunner, recorded: Recorded) -> None:
    events = ledger_events(recorded.dsn, "thread-1")
    middle = events[len(events) // 2]
    ts = datetime.fromisoformat(middle["ts"])
    since = json_lines(
        lgx(runner, recorded, "events", "thread-1", "--since", middle["ts"], "--json")
    )
    assert since == [e for e in events if datetime.fromisoformat(e["ts"]) >= ts]
    assert since[0]["seq"] <= middle["seq"]
    naive = ts.replace(tzinfo=None).isoformat()  # no offset: read as UTC
    until = json_lines(lgx(runner, recorded, "events", "thread-1", "--until", naive, "--json"))
    assert until == [e for e in events if datetime.fromisoformat(e["ts"]) < ts]
    window = json_lines(
        lgx(
            runner,
            recorded,
            "events",
            "thread-1",
            "--since",
            (ts - timedelta(days=1)).isoformat(),
            "--until",
            (ts + timedelta(days=1)).date().isoformat(),
            "--json",
        )
    )
    assert window == events
    bad = lgx(runner, recorded, "events", "thread-1", "--since", "yesterday")
    assert_clean_failure(bad, 2, "--since", "ISO 8601")


def test_events_prints_a_table_with_each_events_seq(runner: CliRunner, recorded: Recorded) -> None:
    events = ledger_events(recorded.dsn, "thread-1")
    result = lgx(runner, recorded, "events", "thread-1", "--kind", "checkpoint")
    assert result.exit_code == 0, result.output
    checkpoints = [e for e in events if e["kind"] == "checkpoint"]
    assert f"{len(checkpoints)} events in step order; seq: the commit order" in result.stdout
    for e in checkpoints:
        assert f"│ {e['seq']:>3} │" in result.stdout


def test_events_of_a_missing_thread(runner: CliRunner, recorded: Recorded) -> None:
    assert_clean_failure(lgx(runner, recorded, "events", "ghost"), 1, "ghost", "not found")
    assert_clean_failure(lgx(runner, recorded, "events", "ghost", "--json"), 1)


# -- state -------------------------------------------------------------------------------
def test_state_latest_is_the_state_json(runner: CliRunner, recorded: Recorded) -> None:
    [view] = json_lines(lgx(runner, recorded, "state", "thread-1", "--json"))
    state_json = json.loads(
        (Path(Workspace(recorded.ws).thread_dir("thread-1")) / "state.json").read_text()
    )
    assert view["checkpoint_id"] == state_json["checkpoint_id"] == recorded.history[0][0]
    assert (
        view["values"]
        == state_json["values"]
        == {"items": ["first", "second", "again", "first", "second"], "n": 40}
    )
    assert view["latest"] is True
    assert view["nodes"] == ["second"]
    assert view["path"] == "threads/thread-1/checkpoints/_root.jsonl"


def test_state_at_every_checkpoint_matches_the_graph(runner: CliRunner, recorded: Recorded) -> None:
    for checkpoint_id, values in recorded.history:
        [view] = json_lines(
            lgx(runner, recorded, "state", "thread-1", "-c", checkpoint_id, "--json")
        )
        assert view["checkpoint_id"] == checkpoint_id
        if checkpoint_id == recorded.history[-1][0]:
            # the input checkpoint stores no channel yet; the graph shows the reducer's
            # default (an empty list), which only the graph's code knows
            assert view["values"] == {} and values == {"items": []}
            continue
        assert view["values"] == values, checkpoint_id
    # a unique prefix is enough; the parent links follow the history
    oldest_id = recorded.history[-1][0]
    second_id = recorded.history[-2][0]
    [view] = json_lines(lgx(runner, recorded, "state", "thread-1", "-c", second_id[:30], "--json"))
    assert view["checkpoint_id"] == second_id
    assert view["parent_checkpoint_id"] == oldest_id
    assert view["latest"] is False


def test_state_shows_pending_writes(runner: CliRunner, recorded: Recorded) -> None:
    # the first run's step-1 checkpoint: "first" has run, "second" wrote against it
    step1 = next(cid for cid, values in reversed(recorded.history) if values.get("n") == 2)
    [view] = json_lines(lgx(runner, recorded, "state", "thread-1", "-c", step1, "--json"))
    assert view["step"] == 1 and view["nodes"] == ["first"]
    written = {(w["node"], w["channel"]): w["value"] for w in view["pending_writes"]}
    assert written[("second", "n")] == 20
    assert written[("second", "items")] == ["second"]


def test_state_text_names_the_checkpoint_its_values_and_writers(
    runner: CliRunner, recorded: Recorded
) -> None:
    result = lgx(runner, recorded, "state", "thread-1")
    assert result.exit_code == 0, result.output
    assert recorded.history[0][0] in result.stdout and "(latest)" in result.stdout
    assert '"n": 40' in result.stdout
    assert "written by: second" in result.stdout


def test_state_needs_no_database(runner: CliRunner, recorded: Recorded) -> None:
    result = runner.invoke(
        app, ["--dsn", UNREACHABLE, "--workspace", str(recorded.ws), "state", "thread-2", "--json"]
    )
    assert json_lines(result)[0]["values"]["n"] == 60


def test_state_of_a_missing_thread_or_checkpoint(runner: CliRunner, recorded: Recorded) -> None:
    assert_clean_failure(lgx(runner, recorded, "state", "ghost"), 1, "ghost", "no checkpoints")
    assert_clean_failure(lgx(runner, recorded, "state", "thread-1", "-c", "zzz"), 1, "'zzz'")
    common = recorded.history[0][0][:4]  # shared by every checkpoint id of one minute
    assert_clean_failure(
        lgx(runner, recorded, "state", "thread-1", "-c", common), 2, "matches", "more characters"
    )


def test_sql_json_values_are_valid_json(runner: CliRunner, recorded: Recorded) -> None:
    result = lgx(
        runner,
        recorded,
        "sql",
        "--json",
        "select 'NaN'::float8 as f, 1.50::numeric as d, 2::numeric as i, "
        "'\\x0102'::bytea as b, null as z, '2026-01-31 12:00+00'::timestamptz as t",
    )
    assert json_lines(result) == [
        {"f": "NaN", "d": 1.5, "i": 2, "b": "\\x0102", "z": None, "t": "2026-01-31T12:00:00+00:00"}
    ]


@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_a_reader_that_stops_early_is_not_an_error(recorded: Recorded, fmt: list[str]) -> None:
    import subprocess
    import sys

    query = "select g as n, repeat('x', 50) as pad from generate_series(1, 20000) g"  # > 1 MB
    proc = subprocess.Popen(
        [sys.executable, "-m", "langgraph_external.cli", "--dsn", recorded.dsn, "sql", *fmt, query],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # like `| head -1`
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in proc.stderr.read()


def test_the_dsn_and_workspace_come_from_the_environment_too(
    runner: CliRunner, recorded: Recorded
) -> None:
    env = {"LGX_DSN": recorded.dsn}
    events = runner.invoke(app, ["events", "thread-2", "--json", "-n", "1"], env=env)
    assert json_lines(events)[0]["thread_id"] == "thread-2"
    rows = runner.invoke(app, ["sql", "--json", "select count(*) as n from threads"], env=env)
    assert json_lines(rows) == [{"n": 2}]
    state = runner.invoke(app, ["-w", str(recorded.ws), "state", "thread-2", "--json"], env=env)
    assert json_lines(state)[0]["values"]["n"] == 60
