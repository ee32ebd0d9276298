"""The object-store workspace against a real S3 API: moto's server, started by the tests.

Apps capture only (``External(..., workspace=None, sealing="worker")``) in their own
processes; ``lgx worker`` seals and mirrors into ``s3://…``; ``lgx verify --all`` checks the
ledger against the bucket. A worker SIGKILLed mid-batch loses nothing: the next one goes on
from the ledger's cursors, and every object in the bucket is whole (an object store replaces
whole objects, so an append is a read and a rewrite of the log).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from langgraph_external import Workspace, verify_chain
from langgraph_external.ledger import schema as ledger
from tests.crash_harness import _missing

ROOT = Path(__file__).resolve().parent.parent
LGX = [sys.executable, "-c", "from langgraph_external.cli import main; main()"]

APP = """
import os, sys, time
from langchain_core.messages import HumanMessage
from langgraph_external import External
from tests.graphs import fanout_with_subgraph, react_agent

dsn, spool, prefix, stop = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
n, pause = int(sys.argv[5]), float(sys.argv[6])
with External(dsn=dsn, workspace=None, spool_dir=spool, sealing="worker") as ext:
    react, fan = react_agent(ext.checkpointer), fanout_with_subgraph(ext.checkpointer)
    for i in range(n):
        if os.path.exists(stop):
            break
        ask = {"messages": [HumanMessage(f"weather and time in Oslo? ({prefix}/{i})")]}
        react.invoke(ask, ext.config(f"{prefix}-react-{i}"))
        react.invoke(ask, ext.config("shared"))  # one thread both apps write to
        if i % 2 == 0:
            fan.invoke({"items": [], "total": 0}, ext.config(f"{prefix}-fan-{i}"))
        print(i, flush=True)
        time.sleep(pause)
"""
"""An app process: ``n`` rounds (a new ReAct thread, a turn on the shared thread, every
other round a ``Send`` fan-out into a subgraph) ``pause`` seconds apart, or fewer once the
``stop`` file exists."""


@pytest.fixture
def s3_workspace(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A workspace URL in a bucket of a local S3 server (moto), reachable from this test and
    its subprocesses through the usual AWS environment variables."""
    try:
        import boto3
        import s3fs  # what fsspec opens s3:// with
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        pytest.skip(f"needs moto[server] and s3fs (the test extra): {exc}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    # fsspec reuses a file system per set of arguments: not one that knows an earlier port
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        for key, value in {
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        }.items():
            monkeypatch.setenv(key, value)
        bucket = f"audit-{uuid.uuid4().hex[:12]}"
        boto3.client("s3").create_bucket(Bucket=bucket)
        yield f"s3://{bucket}/ws"
    finally:
        # the server keeps its buckets in this process, not in the thread that serves them
        with contextlib.suppress(OSError):
            urllib.request.urlopen(
                urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/reset", method="POST"),
                timeout=10,
            ).close()
        server.stop()
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def processes() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start processes that are SIGKILLed at the end of the test if still running."""
    started: list[subprocess.Popen[str]] = []

    def start(args: list[str], log: Path | None = None, **kw: Any) -> subprocess.Popen[str]:
        out = open(log, "a") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True, **kw
            )
        finally:
            if log is not None:
                out.close()  # type: ignore[union-attr]
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _lgx(dsn: str, ws: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LGX, "--dsn", dsn, "--workspace", ws, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def _worker_args(dsn: str, ws: str) -> list[str]:
    return [*LGX, "--dsn", dsn, "--workspace", ws, "worker", "--poll", "0.2"]


def _app_args(
    dsn: str, spool: Path, prefix: str, rounds: int, *, stop: Path, pause: float = 0.0
) -> list[str]:
    return [sys.executable, "-c", APP, dsn, str(spool), prefix, str(stop), str(rounds), str(pause)]


def _behind(dsn: str, ws: str) -> dict[str, Any]:
    """``lgx worker --status`` as the library computes it (without a process per poll)."""
    from langgraph_external.cli.worker import sealing_status

    return sealing_status(dsn, "langgraph_external", Workspace(ws))


def _wait_caught_up(dsn: str, ws: str, worker: subprocess.Popen[str], log: Path) -> None:
    """Wait until nothing is left to seal or mirror. A bound on stalling, not a pace: the
    backlog after the kills can take minutes to mirror on a busy machine (an append to an
    object is a read and a rewrite of the whole log), so waiting goes on while the backlog
    shrinks and fails when it has not shrunk for 90 s (or after 10 minutes in all)."""
    start = time.monotonic()
    stalled_since, least = start, None
    while True:
        info = _behind(dsn, ws)
        left = info["captures"] + info["workspace_behind_threads"]
        if left == 0:
            return
        now = time.monotonic()
        if least is None or left < least:
            least, stalled_since = left, now
        assert worker.poll() is None, f"the worker exited: {log.read_text()[-3000:]}"
        assert now - stalled_since < 90, f"the worker made no progress in 90 s: {info}"
        assert now - start < 600, f"the worker did not catch up in 10 minutes: {info}"
        time.sleep(0.2)


def _wait_apps(apps: list[subprocess.Popen[str]], logs: list[Path], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for app, log in zip(apps, logs, strict=True):
        rc = app.wait(timeout=max(1.0, deadline - time.monotonic()))
        assert rc == 0, log.read_text()[-3000:]


def _mirrored_threads(ws: str) -> int:
    """How many threads' ``events.jsonl`` the bucket holds (asked of S3 itself, uncached)."""
    import boto3

    bucket = ws.removeprefix("s3://").split("/", 1)[0]
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return sum(
        1
        for page in pages
        for obj in page.get("Contents", [])
        if obj["Key"].endswith("/events.jsonl")
    )


def _ledger_threads(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return sorted(
            r[0] for r in conn.execute("select thread_id from langgraph_external.threads")
        )


def _check_bucket_mirrors_ledger(dsn: str, ws_url: str) -> list[str]:
    """Every thread: a complete chain (seq 1..n), the bucket's ``events.jsonl`` equal to
    the ledger's events, every log object whole. Returns the thread ids."""
    ws = Workspace(ws_url)
    ws.fs.invalidate_cache()
    tids = _ledger_threads(dsn)
    assert ws.list_threads() == tids
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        for tid in tids:
            events = ledger.fetch_events(conn, tid)
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), tid
            verify_chain(list(events))
            assert list(ws.iter_events(tid)) == events, tid
    logs = [p for p in ws.fs.find(ws.path("threads")) if p.endswith(".jsonl")]
    assert len(logs) > len(tids)  # events.jsonl and the checkpoint logs
    for path in logs:
        data = ws.fs.cat_file(path)
        assert data.endswith(b"\n"), f"{path}: a torn last line"
        for line in data.splitlines():
            json.loads(line)
    return tids


def _verify_all(dsn: str, ws_url: str, threads: int) -> None:
    done = _lgx(dsn, ws_url, "verify", "--all", "--json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    assert len(results) == threads and all(r["ok"] for r in results)


def test_two_apps_capture_and_lgx_worker_seals_into_s3_and_verify_is_green(
    dsn: str, tmp_path: Path, s3_workspace: str, processes: Callable[..., Any]
) -> None:
    ws = s3_workspace
    worker_log = tmp_path / "worker.log"
    worker = processes(_worker_args(dsn, ws), worker_log)
    logs = [tmp_path / f"app-{n}.log" for n in range(2)]
    apps = [
        processes(_app_args(dsn, tmp_path / f"spool-{n}", f"app{n}", 4, stop=tmp_path / "no"), log)
        for n, log in enumerate(logs)
    ]
    _wait_apps(apps, logs, timeout=180)
    _wait_caught_up(dsn, ws, worker, worker_log)
    status = _lgx(dsn, ws, "worker", "--status", "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert (info["captures"], info["threads"], info["workspace_behind_threads"]) == (0, 0, 0)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker_log.read_text()[-3000:]

    tids = _check_bucket_mirrors_ledger(dsn, ws)
    # 2 apps x (4 ReAct + 2 fan-out threads) + the shared thread
    assert len(tids) == 13 and "shared" in tids
    assert _missing(dsn) == (0, 0)  # every committed checkpoint and write has its event
    _verify_all(dsn, ws, len(tids))


KILLS = 5


def test_a_worker_sigkilled_mid_batch_loses_nothing_in_s3(
    dsn: str, tmp_path: Path, s3_workspace: str, processes: Callable[..., Any]
) -> None:
    """While two apps capture, the worker is SIGKILLed five times, each time soon after it
    mirrored one more thread into the bucket (a little later each time, so at different
    points of its pass) while captures or threads were still waiting for it, and a new one
    is started."""
    ws = s3_workspace
    stop = tmp_path / "stop"
    worker_log = tmp_path / "worker.log"
    logs = [tmp_path / f"app-{n}.log" for n in range(2)]
    apps = [
        # rounds enough to outlast the kills on a slow machine: the stop file ends them
        processes(
            _app_args(dsn, tmp_path / f"spool-{n}", f"app{n}", 400, stop=stop, pause=0.4), log
        )
        for n, log in enumerate(logs)
    ]
    worker = processes(_worker_args(dsn, ws), worker_log)
    kills, outstanding, seen = 0, 0, 0
    # a bound, not a pace: each kill waits for the restarted worker to mirror one more
    # thread, which on a machine busy with other suites takes a while (120 s was too short,
    # and 60 app rounds could end before the fifth kill)
    deadline = time.monotonic() + 400
    try:
        while kills < KILLS and time.monotonic() < deadline:
            mirrored = _mirrored_threads(ws)
            if mirrored <= seen:
                time.sleep(0.05)
                continue
            time.sleep(0.1 * kills)
            worker.send_signal(signal.SIGKILL)  # it has work in hand: the apps go on
            worker.wait(timeout=30)
            kills += 1
            seen = mirrored
            info = _behind(dsn, ws)
            outstanding += bool(info["captures"] or info["workspace_behind_threads"])
            worker = processes(_worker_args(dsn, ws), worker_log)
    finally:
        stop.touch()
    assert kills == KILLS, f"only {kills} kills in 400 s ({seen} threads mirrored)"
    assert outstanding, "every kill came when the worker had nothing left to do"
    _wait_apps(apps, logs, timeout=120)
    _wait_caught_up(dsn, ws, worker, worker_log)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker_log.read_text()[-3000:]

    tids = _check_bucket_mirrors_ledger(dsn, ws)
    # every checkpoint the saver committed has its event, per thread, once
    with psycopg.connect(dsn) as conn:
        saver = conn.execute(
            "select thread_id, checkpoint_ns, checkpoint_id from checkpoints"
        ).fetchall()
        recorded = conn.execute(
            """select thread_id, checkpoint_ns, checkpoint_id from langgraph_external.events
               where kind = 'checkpoint'"""
        ).fetchall()
    assert sorted(recorded) == sorted(saver)
    assert _missing(dsn) == (0, 0)  # and every task write
    _verify_all(dsn, ws, len(tids))
