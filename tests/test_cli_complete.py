"""Every ``lgx`` command: help, usage errors (exit 2), ``--json`` that parses, environment
configuration, and output that is never wrapped when piped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner, Result

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.options import Options
from tests.graphs import react_agent

LONG = "thread-" + "long-id-" * 20  # 167 characters: wider than any default terminal

COMMANDS = [
    ["setup"],
    ["threads"],
    ["show", "T"],
    ["verify", "T"],
    ["repair"],
    ["events", "T"],
    ["state", "T"],
    ["sql", "select 1"],
    ["restore", "T"],
    ["timeline", "T"],
    ["ui"],
    ["export", "T"],
    ["export", "thread", "T"],
    ["export", "langfuse"],
    ["export", "otlp"],
    ["replay", "T", "--app", "m:g"],
    ["diff", "A", "B"],
    ["import", "F"],
    ["prune", "T", "--keep", "1"],
    ["db", "status"],
    ["db", "start"],
    ["db", "stop"],
    ["db", "url"],
    ["policy", "check", "P"],
    ["policy", "mermaid", "P"],
    ["log", "key"],
    ["log", "sign"],
    ["log", "head"],
    ["log", "bundle", "T"],
    ["log", "prove", "F"],
    ["log", "verify", "F"],
    ["log", "check"],
    ["log", "rotate"],
]


@dataclass
class Recorded:
    dsn: str
    ws: Path


@pytest.fixture
def recorded(dsn: str, tmp_path: Path, spool_dir: Path) -> Recorded:
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        react_agent(ext.checkpointer).invoke(
            {"messages": [HumanMessage("weather?")]}, ext.config(LONG)
        )
    return Recorded(dsn, ws)


def lgx(rec: Recorded, *args: str, env: dict[str, Any] | None = None) -> Result:
    # no COLUMNS: output goes to a pipe, as in `lgx ... | grep`
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": None, **(env or {})})
    return runner.invoke(app, ["--dsn", rec.dsn, "--workspace", str(rec.ws), *args])


def json_of(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    return json.loads(result.stdout) if len(lines) != 1 else json.loads(lines[0])


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_every_command_has_help_and_refuses_unknown_options_with_2(command: list[str]) -> None:
    runner = CliRunner()
    words = [w for w in command if w.isalpha() and w.islower()]
    assert runner.invoke(app, [*words, "--help"]).exit_code == 0
    bad = runner.invoke(app, [*command, "--no-such-option"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_json_output_of_every_data_command_parses(recorded: Recorded, tmp_path: Path) -> None:
    assert json_of(lgx(recorded, "setup", "--json"))["version"] >= 4
    (thread,) = [json.loads(x) for x in lgx(recorded, "threads", "--json").stdout.splitlines()]
    assert thread["thread_id"] == LONG
    shown = [
        json.loads(x)
        for x in lgx(recorded, "show", LONG, "--json", "-n", "0").stdout.split("\n")
        if x
    ]
    assert len(shown) == thread["last_seq"]
    verified = json_of(lgx(recorded, "verify", LONG, "--json"))
    assert verified["ok"] is True and verified["ledger_events"] == thread["last_seq"]
    everything = lgx(recorded, "verify", "--all", "--json")
    assert [json.loads(x)["thread_id"] for x in everything.stdout.splitlines()] == [LONG]
    events = lgx(recorded, "events", LONG, "--kind", "tool_start", "--json")
    assert [json.loads(x)["name"] for x in events.stdout.splitlines()] == [
        "get_weather",
        "get_time",
    ]
    assert json_of(lgx(recorded, "state", LONG, "--json"))["thread_id"] == LONG
    assert json_of(lgx(recorded, "sql", "select 41 + 1 as n", "--json")) == {"n": 42}
    assert json_of(lgx(recorded, "repair", "--json"))["ok"] is True
    page = json_of(lgx(recorded, "timeline", LONG, "-o", str(tmp_path / "t.html"), "--json"))
    assert page["lanes"] == ["(graph)", "agent", "tools"]
    archive = tmp_path / "t.tar.gz"
    exported = json_of(lgx(recorded, "export", LONG, "-o", str(archive), "--json"))
    assert exported["thread_id"] == LONG and exported["events"] == thread["last_seq"]
    plans = json_of(lgx(recorded, "prune", LONG, "--keep", "2", "--dry-run", "--json"))
    assert plans["thread_id"] == LONG and plans["removed"] == thread["checkpoints"] - 2
    restored = json_of(lgx(recorded, "restore", LONG, "--as", "copy", "--json"))
    assert restored["target_thread_id"] == "copy" and restored["checkpoints"] > 0
    # a workspace without an embedded server: `db status` is data too, and says so (exit 1)
    status = lgx(recorded, "db", "status", "--json")
    assert status.exit_code == 1 and json.loads(status.stdout)["running"] is False


def test_piped_output_is_never_wrapped(recorded: Recorded, tmp_path: Path) -> None:
    for args in (
        ["threads"],
        ["show", LONG],
        ["verify", LONG],
        ["state", LONG],
        ["timeline", LONG, "-o", str(tmp_path / "x.html")],
        ["export", LONG, "-o", str(tmp_path / "x.tar.gz")],
        ["prune", LONG, "--keep", "1", "--dry-run"],
    ):
        result = lgx(recorded, *args)
        assert result.exit_code == 0, (args, result.output)
        assert LONG in result.stdout, (args, result.stdout)


def test_workspace_and_schema_come_from_the_environment(recorded: Recorded) -> None:
    runner = CliRunner(
        env={"LGX_DSN": recorded.dsn, "LGX_WORKSPACE": str(recorded.ws), "COLUMNS": "300"}
    )
    shown = runner.invoke(app, ["show", LONG])
    assert shown.exit_code == 0 and "(absent)" not in shown.stdout
    other = runner.invoke(app, ["threads"], env={"LGX_SCHEMA": "no_such_schema"})
    assert other.exit_code == 2 and "no_such_schema" in other.stderr
    bad = runner.invoke(app, ["threads"], env={"LGX_SCHEMA": "Bad-Name"})
    assert bad.exit_code == 2
