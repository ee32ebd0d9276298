"""lgx replay and lgx diff: exit codes, parsed --json, no tracebacks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from replay_apps import MODEL_CALLS, helpful_react_app, react_app, terse_react_app, tool_runs
from typer.testing import CliRunner, Result

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.exporters import LangfuseExport
from langgraph_external.options import Options
from langgraph_external.read.inspection import REPLAY_PREFIX
from langgraph_external.replay import replay
from tests.otlp_receiver import OtlpReceiver


@pytest.fixture
def recorded(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    monkeypatch.setenv("LGX_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        msg = {"messages": [HumanMessage("Weather?")]}
        react_app(ext.checkpointer).invoke(msg, ext.config("t-1"))
        terse_react_app(ext.checkpointer).invoke(msg, ext.config("t-2"))
        helpful_react_app(ext.checkpointer).invoke(msg, ext.config("t-3"))
    (tmp_path / "tools.log").unlink()
    MODEL_CALLS[0] = 0
    yield ws


def lgx(dsn: str, ws: Path, *args: str) -> Result:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})
    return runner.invoke(app, ["--dsn", dsn, "--workspace", str(ws), *args])


def test_lgx_replay_of_a_recorded_thread_calls_no_model_or_tool(dsn: str, recorded: Path) -> None:
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
    assert lgx(dsn, recorded, "diff", "t-1", "nope").exit_code == 2  # cannot compare
    bad = lgx(
        dsn, recorded, "diff", "t-1", "--checkpoint", "a", "--checkpoint", "b", "--checkpoint", "c"
    )
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def thread_ids(dsn: str, ws: Path, *args: str) -> list[str]:
    listed = lgx(dsn, ws, "threads", "--json", *args)
    assert listed.exit_code == 0, listed.output
    return sorted(json.loads(line)["thread_id"] for line in listed.stdout.splitlines())


def test_lgx_diff_of_runs_that_differ_only_in_the_system_prompt(dsn: str, recorded: Path) -> None:
    """Same path, same state, another system prompt: exit 1 and the prompt's diff."""
    text = lgx(dsn, recorded, "diff", "t-1", "t-3")
    assert text.exit_code == 1, text.output
    lines = text.stdout.splitlines()
    assert "path differs" not in text.stdout and "channel" not in text.stdout
    at = lines.index("--- t-1 agent@1")
    assert lines[at + 1] == "+++ t-3 agent@1"
    assert "-You are a weather assistant." in lines[at:]
    assert "+You are a helpful weather assistant." in lines[at:]
    data = json.loads(lgx(dsn, recorded, "diff", "t-1", "t-3", "--json").stdout)
    assert data["same"] is False and data["path"]["same"] and data["state"]["changed"] == []
    assert [c["where_a"] for c in data["calls"]["changes"]] == ["agent@1", "agent@3", "agent@5"]


def test_lgx_replay_text_shows_the_prompt_before_and_after(dsn: str, recorded: Path) -> None:
    result = lgx(
        dsn,
        recorded,
        "replay",
        "t-1",
        "--app",
        "replay_apps:terse_react_app",
        "--mode",
        "regression",
    )
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("diverged:"))
    assert "the model got another prompt at step 1 in node 'agent'" in lines[first]
    assert lines[first + 1].startswith("  --- recorded t-1 agent@1")
    assert lines[first + 2].startswith(f"  +++ replay {REPLAY_PREFIX}t-1:")
    assert f"into {REPLAY_PREFIX}t-1:" in lines[0]
    assert "  -You are a weather assistant." in lines
    assert "  +You are a terse weather assistant." in lines
    # the live model's other answer, and the other path, with their before/after too
    assert any(line.startswith("diverged: the model answered differently") for line in lines)
    assert '  -  -> get_time({"city":"Oslo"})' in lines
    assert "    - tools@4" in lines and "    - agent@5" in lines


def test_a_replay_copy_is_deleted_after_the_report_unless_kept(dsn: str, recorded: Path) -> None:
    before = thread_ids(dsn, recorded)
    assert before == ["t-1", "t-2", "t-3"]
    done = lgx(dsn, recorded, "replay", "t-1", "--app", "replay_apps:react_app", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    copy = report["thread_id"]
    assert copy.startswith(f"{REPLAY_PREFIX}t-1:") and report["kept"] is False
    assert thread_ids(dsn, recorded) == before  # nothing left to list
    with psycopg.connect(dsn) as conn:  # deleted like delete_thread deletes a thread
        assert conn.execute(
            "select count(*) from checkpoints where thread_id = %s", (copy,)
        ).fetchone() == (0,)
        kinds = conn.execute(
            "select kind from langgraph_external.events where thread_id = %s", (copy,)
        ).fetchall()
        assert kinds == [("thread_deleted",)]
    listed = lgx(dsn, recorded, "threads")
    assert "1 replay copy not listed (--replays lists them)" in listed.stdout
    assert thread_ids(dsn, recorded, "--replays") == sorted([*before, copy])

    kept = lgx(dsn, recorded, "replay", "t-1", "--app", "replay_apps:react_app", "--keep", "--json")
    assert kept.exit_code == 0, kept.output
    copy = json.loads(kept.stdout)["thread_id"]
    assert json.loads(kept.stdout)["kept"] is True
    assert thread_ids(dsn, recorded) == before  # kept, but not listed by default
    assert copy in thread_ids(dsn, recorded, "--replays")
    same = lgx(dsn, recorded, "diff", "t-1", copy)
    assert same.exit_code == 0, same.output  # the kept copy is there to compare

    named = lgx(dsn, recorded, "replay", "t-1", "--app", "replay_apps:react_app", "--into", "mine")
    assert named.exit_code == 0, named.output
    assert "mine" in thread_ids(dsn, recorded)  # a thread you name is yours: kept, listed


def test_replay_copies_are_never_sent_to_langfuse(
    dsn: str, recorded: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = ("pk-lf-replay-copies", "sk-lf-replay-copies")
    with OtlpReceiver({keys[0]: keys[1]}) as rx:
        config = LangfuseExport(public_key=keys[0], secret_key=keys[1], base_url=rx.base_url)
        with External(
            dsn=dsn,
            workspace=recorded,
            export=config,
            options=Options(spool_dir=spool_dir),
        ) as ext:
            report = replay(react_app(ext.checkpointer), "t-1", ext=ext, keep=True)
            assert not report.diverged and report.kept
            assert ext.flush(60)  # the live export caught up ...
        sessions = {s.attributes.get("session.id") for s in rx.by_key(keys[0])}
        assert report.thread_id not in sessions  # ... without the copy
        env = {
            "LANGFUSE_PUBLIC_KEY": keys[0],
            "LANGFUSE_SECRET_KEY": keys[1],
            "LANGFUSE_BASE_URL": rx.base_url,
        }
        result = CliRunner(env=env).invoke(
            app,
            ["--dsn", dsn, "--workspace", str(recorded), "export", "langfuse", "--all", "--json"],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["threads"] == 3  # t-1, t-2, t-3: not the copy
        sessions = {s.attributes.get("session.id") for s in rx.by_key(keys[0])}
        assert {"t-1", "t-2", "t-3"} <= sessions and report.thread_id not in sessions


def test_thread_ids_are_printed_as_text_never_as_emoji(dsn: str, recorded: Path) -> None:
    """``lgx-replay:a:1f2e`` holds ``:a:``, which rich would print as an emoji."""
    missing = lgx(dsn, recorded, "diff", "lgx-replay:a:1f2e", "t-1")
    assert missing.exit_code == 2  # not recorded: nothing to compare
    assert "lgx-replay:a:1f2e" in missing.stderr


def test_a_deleted_replay_copy_leaves_no_folder_and_the_mirror_stays_whole(
    dsn: str, recorded: Path
) -> None:
    result = lgx(dsn, recorded, "replay", "t-1", "--app", "replay_apps:react_app", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    copy = report["thread_id"]
    assert copy.startswith(REPLAY_PREFIX) and report["kept"] is False
    # its tombstone stays in the ledger; the workspace holds nothing of it
    with psycopg.connect(dsn) as conn:
        kinds = conn.execute(
            "select kind from langgraph_external.events where thread_id = %s", (copy,)
        ).fetchall()
    assert kinds == [("thread_deleted",)]
    assert sorted(p.name for p in (recorded / "threads").iterdir()) == ["t-1", "t-2", "t-3"]
    # the mirror is not behind on it (its cursor is recorded), a rebuild writes nothing,
    # and verify is green
    repair = lgx(dsn, recorded, "repair", "--json")
    assert repair.exit_code == 0, repair.output
    assert json.loads(repair.stdout)["threads_projected"] == 0
    rebuilt = lgx(dsn, recorded, "repair", "--rebuild", copy, "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert sorted(p.name for p in (recorded / "threads").iterdir()) == ["t-1", "t-2", "t-3"]
    verified = lgx(dsn, recorded, "verify", "--all")
    assert verified.exit_code == 0, verified.output
