"""Guarded runs seen from outside the process: resumed elsewhere, and what they print."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def app(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEM0_TELEMETRY": "False"}
    return subprocess.run(
        [sys.executable, "-m", "tests.guard_apps", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def outcome(*args: str) -> dict[str, Any]:
    done = app(*args)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_resumed_in_a_new_process_counts_the_visits_of_both(
    tmp_path: Path, mode: str
) -> None:
    db = str(tmp_path / "checkpoints.sqlite")
    first = outcome("visits", db, "thread-1", "start", mode)
    assert first == {"interrupted": True, "n": 2}  # work ran twice, then a human paused it
    second = outcome("visits", db, "thread-1", "resume", mode)
    # limit 3 per run: one more visit in the new process is allowed, the next one is not
    assert second["violation"] == "visit_limit"
    assert second["message"] == "work entered 4 times in this run (limit 3)"
    assert second["n"] == 3


def test_a_new_run_on_the_same_thread_starts_counting_again(tmp_path: Path) -> None:
    db = str(tmp_path / "checkpoints.sqlite")
    outcome("visits", db, "thread-1", "start", "sync")
    outcome("visits", db, "thread-1", "resume", "sync")
    again = outcome("visits", db, "thread-1", "start", "sync")  # new input: a new run
    assert again == {"interrupted": True, "n": 2}


@pytest.mark.parametrize("action", ["raise", "route"])
def test_stderr_of_a_run_with_a_blocked_tool_is_only_the_warning_record(action: str) -> None:
    done = app("stderr", action)
    assert done.returncode == 0
    assert done.stdout == ""
    outcome_word = {"raise": "raised", "route": "routed"}[action]
    assert done.stderr.splitlines() == [
        "WARNING:langgraph_external.guards:policy violation tool_tier at tools: tools may "
        f"not call tool 'remote_write' (tier remote_write) ({outcome_word})"
    ]
