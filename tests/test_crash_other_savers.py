"""SIGKILL at random moments, on a saver the record cannot join (``SqliteSaver``): every
checkpoint and task write the saver committed has its record. Such a saver is captured
*by value* in a ledger transaction that commits before the saver stores (one recording
path for every saver, issue 32), so no kill can fall between the saver's commit and the
record's. Killed with it: the app's sealing helper; ``lgx repair`` seals what they left
and ``lgx verify --all`` passes every thread."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from tests.crash_harness import ROOT, _kill, lgx
from tests.graphs import cpu_burner

TRIALS = 6


def _one_trial(dsn: str, ws: Path, spool: Path, db: Path, seed: int, rng: random.Random) -> None:
    args = [dsn, str(ws), str(spool), "0", str(seed), "process", str(db)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.crash_harness", "child", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line and line[0] == "ready", f"the child did not start ({line!r})"
    time.sleep(rng.uniform(0.3, 2.0))
    proc.send_signal(signal.SIGKILL)
    if len(line) > 1:
        _kill(int(line[1]))  # its sealing helper, wherever it was
    proc.wait()


def _saver_rows(db: Path) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str, str]]]:
    with sqlite3.connect(db) as conn:
        cps = {
            tuple(r)
            for r in conn.execute("select thread_id, checkpoint_ns, checkpoint_id from checkpoints")
        }
        ws = {
            tuple(r)
            for r in conn.execute(
                "select distinct thread_id, checkpoint_ns, checkpoint_id, task_id from writes"
            )
        }
    return cps, ws  # type: ignore[return-value]


def _recorded(
    dsn: str, *, captures: bool
) -> tuple[list[tuple[str, str, str]], set[tuple[str, ...]]]:
    with psycopg.connect(dsn) as conn:
        cps = [
            tuple(r)
            for r in conn.execute(
                "select thread_id, checkpoint_ns, checkpoint_id from langgraph_external.events "
                "where kind = 'checkpoint'"
            )
        ]
        ws = {
            tuple(r)
            for r in conn.execute(
                "select thread_id, checkpoint_ns, checkpoint_id, task_id "
                "from langgraph_external.events where kind = 'writes'"
            )
        }
        if captures:
            cps += [
                tuple(r)
                for r in conn.execute(
                    "select thread_id, checkpoint_ns, checkpoint_id "
                    "from langgraph_external.captures where kind = 'checkpoint'"
                )
            ]
            ws |= {
                tuple(r)
                for r in conn.execute(
                    "select thread_id, checkpoint_ns, checkpoint_id, task_id "
                    "from langgraph_external.captures where kind = 'writes'"
                )
            }
    return cps, ws  # type: ignore[return-value]


def test_sigkill_of_an_app_on_sqlite_and_its_sealer_loses_nothing(dsn: str, tmp_path: Path) -> None:
    ws, spool, db = tmp_path / "ws", tmp_path / "spool", tmp_path / "app.sqlite"
    rng = random.Random(11)
    with cpu_burner():  # both cores busy: the kills land in other windows
        for trial in range(TRIALS):
            _one_trial(dsn, ws, spool, db, 100 + trial, rng)
    saver_cps, saver_writes = _saver_rows(db)
    assert len(saver_cps) > 20 and len(saver_writes) > 20  # the kills came mid-work
    # before anything is repaired: every committed row has its capture or its event
    cps, writes = _recorded(dsn, captures=True)
    assert saver_cps - set(cps) == set()
    assert saver_writes - writes == set()
    # `lgx repair` seals what the killed processes left; nothing is recorded twice
    repaired = lgx(dsn, ws, "repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    cps, writes = _recorded(dsn, captures=False)
    assert saver_cps - set(cps) == set()
    assert saver_writes - writes == set()
    assert len(cps) == len(set(cps)), "a checkpoint recorded twice"
    # recorded, then killed before the saver committed: at most the puts in flight
    assert len(set(cps) - saver_cps) <= 3 * TRIALS
    verified = lgx(dsn, ws, "verify", "--all", "--json")
    results = [json.loads(x) for x in verified.stdout.splitlines() if x.startswith("{")]
    assert results and all(r["ok"] for r in results), [r for r in results if not r["ok"]][:3]
    assert verified.returncode == 0, verified.stderr[-500:]
