"""Rough edges of ``lgx`` (issue 33), over threads recorded by real graphs on a real ledger:
what ``--kind`` and ``--since`` accept, ``lgx diff``'s exit codes, help printed as written,
``lgx verify`` under another key, and ``lgx db status`` agreeing with ``lgx verify``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from typer.main import get_command
from typer.testing import CliRunner, Result

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.ledger import schema as ledger
from langgraph_external.options import Options
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.keys import load_key
from tests.graphs import react_agent


@dataclass
class Recorded:
    dsn: str
    ws: Path


@pytest.fixture
def recorded(dsn: str, tmp_path: Path, spool_dir: Path) -> Recorded:
    """Two runs of a ReAct agent (model and tool calls): threads ``agent`` and ``agent-2``."""
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        for tid in ("agent", "agent-2"):
            react_agent(ext.checkpointer).invoke(
                {"messages": [HumanMessage("weather in Oslo?")]}, ext.config(tid)
            )
        ext.flush()
    return Recorded(dsn, ws)


def lgx(rec: Recorded, *args: str, env: dict[str, str | None] | None = None) -> Result:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "250", **(env or {})})
    return runner.invoke(app, ["--dsn", rec.dsn, "--workspace", str(rec.ws), *args])


def ledger_events(dsn: str, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        return ledger.fetch_events(conn, thread_id)


def json_lines(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def assert_usage_error(result: Result, *needles: str) -> None:
    """Exit 2 with a message on stderr, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    text = " ".join(result.stderr.split())
    for needle in needles:
        assert needle in text, result.stderr


# -- --kind ------------------------------------------------------------------------------
def test_kind_takes_the_kinds_the_kind_column_prints_and_families_of_them(
    recorded: Recorded,
) -> None:
    events = ledger_events(recorded.dsn, "agent")
    kinds = {e["kind"] for e in events}
    assert {"llm_start", "llm_end", "tool_start", "tool_end"} <= kinds
    # every kind the table prints is a kind --kind finds
    for kind in sorted(kinds):
        found = json_lines(lgx(recorded, "events", "agent", "--kind", kind, "--json"))
        assert found == [e for e in events if e["kind"] == kind], kind
    # a family: the kinds it starts (llm: llm_start and llm_end)
    llm = json_lines(lgx(recorded, "events", "agent", "--kind", "llm", "--json"))
    assert llm == [e for e in events if e["kind"] in ("llm_start", "llm_end")]
    assert len(llm) == 6  # three model calls
    mixed = json_lines(lgx(recorded, "events", "agent", "-k", "tool", "-k", "checkpoint", "--json"))
    assert mixed == [
        e for e in events if e["kind"].startswith("tool_") or e["kind"] == "checkpoint"
    ]
    table = lgx(recorded, "events", "agent", "--kind", "llm")
    assert table.exit_code == 0 and "llm_start" in table.stdout and "llm_end" in table.stdout


def test_an_unknown_kind_is_a_usage_error_listing_the_kinds(recorded: Recorded) -> None:
    for args in (["--kind", "lm"], ["--kind", "checkpoint", "--kind", "llm_begin", "--json"]):
        result = lgx(recorded, "events", "agent", *args)
        assert_usage_error(result, "--kind", "is not an event kind", "llm_start", "checkpoint")
        assert "Families" in result.stderr and "llm" in result.stderr
        assert result.stdout == ""


# -- --since -----------------------------------------------------------------------------
def test_since_and_until_take_durations_as_well_as_iso_times(recorded: Recorded) -> None:
    events = ledger_events(recorded.dsn, "agent")
    for ago in ("5m", "2h", "1d", "30s", "1h30m", "1h 30m"):
        found = json_lines(lgx(recorded, "events", "agent", "--since", ago, "--json"))
        assert found == events, ago  # recorded just now
        assert json_lines(lgx(recorded, "events", "agent", "--until", ago, "--json")) == []
    future = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    assert json_lines(lgx(recorded, "events", "agent", "--since", future, "--json")) == []
    # lgx export takes the same forms (a bad one stops it before anything is sent)
    for preset in ("otlp", "langfuse"):
        bad = lgx(recorded, "export", preset, "--since", "5 minutes")
        assert_usage_error(bad, "--since", "'5 minutes'", "duration", "1h30m", "ISO 8601")


def test_a_bad_since_names_both_forms(recorded: Recorded) -> None:
    for value in ("yesterday", "5x", "m5", "-5m", ""):
        result = lgx(recorded, "events", "agent", "--since", value)
        assert_usage_error(result, "--since", "duration", "30s", "1h30m", "ISO 8601")


# -- lgx diff ----------------------------------------------------------------------------
def test_diff_exits_0_same_1_differs_2_cannot_compare(recorded: Recorded) -> None:
    assert lgx(recorded, "diff", "agent", "agent-2").exit_code == 0  # the same run twice
    first = next(e for e in ledger_events(recorded.dsn, "agent") if e["kind"] == "checkpoint")
    differs = lgx(recorded, "diff", "agent", "--checkpoint", first["checkpoint_id"])
    assert differs.exit_code == 1, differs.output
    for args in (
        ["agent", "nosuch"],  # a thread that is not recorded
        ["nosuch", "agent"],
        ["run:00000000-0000-0000-0000-000000000000", "agent"],  # a run that is not
        ["agent@ffffffff", "agent"],  # a checkpoint that is not
        ["agent", "--checkpoint", "a", "--checkpoint", "b", "--checkpoint", "c"],  # bad usage
        ["", "agent"],
    ):
        result = lgx(recorded, "diff", *args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output and result.stderr.startswith("error:"), args
    helped = lgx(recorded, "diff", "--help")
    text = " ".join(helped.stdout.replace("│", " ").split())
    assert "0 the same; 1 they differ; 2 they cannot be compared" in text, helped.stdout


# -- help as written ---------------------------------------------------------------------
def _help_pages(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """``(command path, help texts its --help page shows)`` of every command and group."""
    texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    yield path, [t for t in texts if t]
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _help_pages(sub, [*path, name])


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").replace("\b", " ").split())


def test_every_help_text_prints_as_written() -> None:
    """The CLI library reads help as rich markup: ``:thread:`` printed as an emoji (the id
    template of ``lgx replay --into``), ``[tool.langgraph-external.prices]`` vanished."""
    runner = CliRunner(env={"COLUMNS": "2000", "LGX_DSN": None})
    pages = list(_help_pages(get_command(app), []))
    assert len(pages) > 20
    written = [t for _, texts in pages for t in texts]
    assert any(":THREAD:" in t for t in written) and any("[tool." in t for t in written)
    for path, texts in pages:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        shown = _flat(result.stdout)
        for text in texts:
            assert _flat(text.split("\f")[0]) in shown, (path, text, result.stdout)
    replay = runner.invoke(app, ["replay", "--help"]).stdout
    assert "lgx-replay:THREAD:RANDOM" in replay and "🧵" not in replay


# -- verify under another key --------------------------------------------------------------
def _other_key_file(tmp_path: Path) -> Path:
    path = tmp_path / "other-key"
    load_key(key_file=path)  # a new key, as on a machine that never held the deployment's
    return path


def test_verify_with_another_key_says_the_key_is_different_not_that_the_record_was_edited(
    recorded: Recorded, tmp_path: Path
) -> None:
    other = {"LGX_KEY_FILE": str(_other_key_file(tmp_path))}
    assert lgx(recorded, "verify", "--all").exit_code == 0  # the key that wrote it
    for args, env in (
        (["verify", "--all"], other),
        (["verify", "agent"], other),
        (["verify", "agent", "--key", WorkspaceCipher.generate_key()], {}),
        (["verify", "--all"], {"LGX_KEY": WorkspaceCipher.generate_key()}),
    ):
        result = lgx(recorded, *args, env=env)
        text = " ".join(result.output.split())
        assert result.exit_code == 1, (args, result.output)
        assert "deployment key is missing or different" in text, (args, result.output)
        for way in ("--key", "$LGX_KEY", "key file"):
            assert way in text, (way, result.output)
        for tampering in ("edited", "re-hashed", "decrypt", "altered", "FAIL agent:"):
            assert tampering not in text, (args, tampering, result.output)
    as_json = [
        json.loads(x)
        for x in lgx(recorded, "verify", "--all", "--json", env=other).stdout.splitlines()
    ]
    assert [r["ok"] for r in as_json if r["thread_id"] in ("agent", "agent-2")] == [True, True]
    assert any(not r["ok"] and "missing or different" in r["problems"][0] for r in as_json)


def test_verify_with_another_key_still_finds_what_the_chain_shows(
    recorded: Recorded, tmp_path: Path
) -> None:
    """Tampering the unkeyed checks see is reported under any key, besides the key's note."""
    events = recorded.ws / "threads" / "agent" / "events.jsonl"
    lines = events.read_text().splitlines()
    env = json.loads(lines[3])
    env["name"] = "forged"  # not re-hashed
    lines[3] = json.dumps(env)
    events.write_text("\n".join(lines) + "\n")
    result = lgx(recorded, "verify", "--all", env={"LGX_KEY_FILE": str(_other_key_file(tmp_path))})
    assert result.exit_code == 1
    assert "FAIL agent:" in result.output and "FAIL agent-2" not in result.output
    assert "deployment key is missing or different" in " ".join(result.output.split())


def test_verify_without_any_key_says_how_to_give_it(recorded: Recorded, tmp_path: Path) -> None:
    result = lgx(recorded, "verify", "--all", env={"LGX_KEY_FILE": str(tmp_path / "none")})
    text = " ".join(result.output.split())
    assert "no deployment key" in text and "keyed checks are skipped" in text, result.output
    assert result.exit_code == 0 and "FAIL" not in text and "pass cipher" not in text, text
    for way in ("--key", "$LGX_KEY", "key file"):
        assert way in text, (way, result.output)


def test_the_earlier_key_variable_still_gives_the_key_and_says_to_use_lgx_key(
    recorded: Recorded, tmp_path: Path
) -> None:
    deployment = Path(os.environ["LGX_KEY_FILE"]).read_text().strip()  # what recorded it
    no_file = str(tmp_path / "none")
    ok = lgx(
        recorded,
        "verify",
        "--all",
        env={"LGX_WORKSPACE_KEY": deployment, "LGX_KEY_FILE": no_file},
    )
    assert ok.exit_code == 0, ok.output
    note = " ".join(ok.stderr.split())
    assert "note: $LGX_WORKSPACE_KEY is deprecated" in note and "set $LGX_KEY" in note, note
    assert "keyed checks are skipped" not in note
    other = lgx(
        recorded,
        "verify",
        "--all",
        env={"LGX_WORKSPACE_KEY": WorkspaceCipher.generate_key(), "LGX_KEY_FILE": no_file},
    )
    assert other.exit_code == 1
    assert "$LGX_WORKSPACE_KEY (deprecated: set $LGX_KEY)" in " ".join(other.output.split())
    # $LGX_KEY set: the earlier name is not read, and nothing is said about it
    both = lgx(
        recorded,
        "verify",
        "--all",
        env={"LGX_KEY": deployment, "LGX_WORKSPACE_KEY": WorkspaceCipher.generate_key()},
    )
    assert both.exit_code == 0 and "LGX_WORKSPACE_KEY" not in both.stderr, both.output


# -- db status / worker --status agree with verify ----------------------------------------
def test_the_mirror_lag_does_not_depend_on_how_the_workspace_is_spelled(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app was given an absolute path; ``lgx -w ws/`` from its parent is the same
    workspace, and ``lgx verify --all`` finds nothing behind: neither may the status."""
    assert lgx(recorded, "verify", "--all").exit_code == 0
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(recorded.ws)
    monkeypatch.chdir(tmp_path)
    for spelling in (str(recorded.ws), "ws", "./ws/", "sub/../ws", "link"):
        runner = CliRunner(env={"LGX_DSN": None})
        args = ["--dsn", recorded.dsn, "-w", spelling]
        status = runner.invoke(app, [*args, "worker", "--status", "--json"])
        assert status.exit_code == 0, status.output
        assert json.loads(status.stdout)["workspace_behind_threads"] == 0, spelling
        text = runner.invoke(app, [*args, "worker", "--status"]).stdout
        assert "workspace mirror behind on 0 threads" in text, (spelling, text)
        assert runner.invoke(app, [*args, "verify", "--all"]).exit_code == 0, spelling
