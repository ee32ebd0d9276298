"""SIGKILL at random moments: nothing the saver committed is without its record, nothing
is recorded twice, torn or out of chain, and the user's first ``lgx repair`` + ``lgx verify
--all`` after the incident is green (the long run: benchmarks/crash_long.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from langgraph_external import External
from langgraph_external.options import Options
from tests.crash_harness import kill_after_turns, lgx, run_trials
from tests.graphs import cpu_burner


@pytest.mark.parametrize(("strict", "trials"), [(False, 8), (True, 4)])
def test_sigkill_at_random_moments_loses_nothing_committed(
    strict: bool, trials: int, dsn: str, tmp_path: Path
) -> None:
    with cpu_burner():  # both cores busy: the kills land in other windows
        findings = run_trials(dsn, tmp_path, trials=trials, strict=strict, seed=7 + strict)
    assert findings.trials == trials
    assert findings.saver_checkpoints > 0 and findings.threads > 1
    # a checkpoint's (and a task write's) capture commits in its transaction: never
    # missing, even before repair; the sealer turns captures into events
    assert findings.checkpoints_without_event_before_repair == 0
    assert findings.writes_without_event_before_repair == 0
    # `lgx repair` then `lgx verify --all`: every thread passes (state.json included)
    assert findings.verify_runs == 1 and findings.verified_threads >= findings.threads
    assert findings.problems() == []


@pytest.mark.parametrize(
    ("strict", "sealing"), [(False, "thread"), (True, "thread"), (False, "process")]
)
def test_repair_after_a_kill_leaves_verify_green(
    strict: bool, sealing: str, dsn: str, tmp_path: Path
) -> None:
    # two turns, then the app idles with state.json deferred (no flush); the app and its
    # sealer (the projector's process) are killed
    ws, spool = tmp_path / "ws", tmp_path / "spool"
    kill_after_turns(
        dsn, ws, spool, strict=strict, thread_id="t", turns=2, wait=1.5, sealing=sealing
    )
    for _ in range(2):  # and a second repair changes nothing
        repaired = lgx(dsn, ws, "repair")
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        verified = lgx(dsn, ws, "verify", "t")
        assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("sealing", ["thread", "process"])
def test_a_restart_settles_what_a_killed_process_left(
    sealing: str, dsn: str, tmp_path: Path
) -> None:
    ws, spool = tmp_path / "ws", tmp_path / "spool"
    kill_after_turns(
        dsn, ws, spool, strict=False, thread_id="t", turns=2, wait=1.5, sealing=sealing
    )
    # the app starts again and closes without touching the thread: no `lgx repair`
    with External(dsn=dsn, workspace=ws, sealing=sealing, options=Options(spool_dir=spool)) as ext:
        assert ext.flush()
    verified = lgx(dsn, ws, "verify", "--all")
    assert verified.returncode == 0, verified.stdout + verified.stderr
