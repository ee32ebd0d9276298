"""SIGKILL at random moments: nothing the saver committed is without its record, and
nothing is recorded twice, torn or out of chain (the long run: benchmarks/crash_long.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash_harness import run_trials


@pytest.mark.parametrize(("strict", "trials"), [(False, 8), (True, 4)])
def test_sigkill_at_random_moments_loses_nothing_committed(
    strict: bool, trials: int, dsn: str, tmp_path: Path
) -> None:
    findings = run_trials(dsn, tmp_path, trials=trials, strict=strict, seed=7 + strict)
    assert findings.trials == trials
    assert findings.saver_checkpoints > 0 and findings.threads > 1
    # a checkpoint's (and a task write's) capture commits in its transaction: never
    # missing, even before repair; the sealer turns captures into events
    assert findings.checkpoints_without_event_before_repair == 0
    assert findings.writes_without_event_before_repair == 0
    assert findings.problems() == []
