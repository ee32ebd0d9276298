"""lgx replay and lgx diff: exit codes, parsed --json, no tracebacks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from replay_apps import MODEL_CALLS, react_app, terse_react_app, tool_runs
from typer.testing import CliRunner, Result

from langgraph_external import External
from langgraph_external.cli import app


@pytest.fixture
def recorded(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    monkeypatch.setenv("LGX_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, spool_dir=spool_dir) as ext:
        msg = {"messages": [HumanMessage("Weather?")]}
        react_app(ext.checkpointer).invoke(msg, ext.config("t-1"))
        terse_react_app(ext.checkpointer).invoke(msg, ext.config("t-2"))
    (tmp_path / "tools.log").unlink()
    MODEL_CALLS[0] = 0
    yield ws


def lgx(dsn: str, ws: Path, *args: str) -> Result:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})
    return runner.invoke(app, ["--dsn", dsn, "--workspace", str(ws), *args])


def test_lgx_replay_recorded_json(dsn: str, recorded: Path) -> None:
    result = lgx(
        dsn, recorded, "replay", "t-1", "--app", "replay_apps:react_app", "--into", "r-1", "--json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["diverged"] is False and report["thread_id"] == "r-1"
    assert report["model_calls"] == 0 and report["tool_calls_executed"] == 0
    assert report["model_calls_answered"] == 3 and report["path"]["same"] is True
    assert tool_runs() == [] and MODEL_CALLS[0] == 0
    text = lgx(dsn, recorded, "replay", "t-1", "--app", "replay_apps:react_app")
    assert text.exit_code == 0 and "no divergence" in text.stdout


def test_lgx_replay_regression_divergence_exits_1(dsn: str, recorded: Path) -> None:
    result = lgx(
        dsn,
        recorded,
        "replay",
        "t-1",
        "--app",
        "replay_apps:terse_react_app",
        "--mode",
        "regression",
        "--json",
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    first = report["divergence"]
    assert (first["kind"], first["step"], first["node"]) == ("llm_input", 1, "agent")
    text = lgx(
        dsn,
        recorded,
        "replay",
        "t-1",
        "--app",
        "replay_apps:terse_react_app",
        "--mode",
        "regression",
    )
    assert text.exit_code == 1 and "diverged:" in text.stdout


def test_lgx_replay_bad_input_is_one_line(dsn: str, recorded: Path) -> None:
    missing = lgx(dsn, recorded, "replay", "nope", "--app", "replay_apps:react_app")
    assert missing.exit_code == 1 and "error:" in missing.stderr
    for args in (
        ["--app", "no_such_module:app"],
        ["--app", "nocolon"],
        ["--app", "replay_apps:react_app", "--mode", "sometimes"],
        ["--app", "replay_apps:react_app", "--into", "t-2"],
    ):
        bad = lgx(dsn, recorded, "replay", "t-1", *args)
        assert bad.exit_code == 2, (args, bad.output)
        assert bad.stderr.strip().startswith("error:") and "Traceback" not in bad.output


def test_lgx_diff_threads_and_checkpoints(dsn: str, recorded: Path) -> None:
    same = lgx(dsn, recorded, "diff", "t-1", "t-1", "--json")
    assert same.exit_code == 0 and json.loads(same.stdout)["same"] is True
    other = lgx(dsn, recorded, "diff", "t-1", "t-2", "--json")
    assert other.exit_code == 1
    d = json.loads(other.stdout)
    assert d["path"]["first_difference"] == 5 and d["state"]["changed"][0]["channel"] == "messages"
    text = lgx(dsn, recorded, "diff", "t-1", "t-2")
    assert text.exit_code == 1 and text.stdout.startswith("--- t-1\n+++ t-2\npath differs")
    cps = json.loads(
        lgx(dsn, recorded, "events", "t-1", "--kind", "checkpoint", "--json").stdout.splitlines()[2]
    )["checkpoint_id"]
    at = lgx(dsn, recorded, "diff", "t-1", "--checkpoint", cps, "--json")
    assert at.exit_code == 1
    assert json.loads(at.stdout)["a_checkpoint_id"] == cps
    assert lgx(dsn, recorded, "diff", "t-1", "nope").exit_code == 1
    bad = lgx(
        dsn, recorded, "diff", "t-1", "--checkpoint", "a", "--checkpoint", "b", "--checkpoint", "c"
    )
    assert bad.exit_code == 2 and "Traceback" not in bad.output
