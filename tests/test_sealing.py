"""Capture in the checkpoint's transaction, seal after commit: where sealing runs (a helper
process, a thread, ``lgx worker``), that it seals the same record whoever does it, that two
sealers never seal a thread twice, and what a user sees while captures wait."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from langgraph_external import External, verify_chain
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.options import Options
from langgraph_external.pipeline.backend import FlushRequest
from langgraph_external.pipeline.seal import Sealer
from langgraph_external.record.capture import Capture
from langgraph_external.record.events import Event
from langgraph_external.record.keys import load_key
from tests.graphs import cpu_burner, fanout_with_subgraph, react_agent

ROOT = Path(__file__).resolve().parent.parent
ASK = {"messages": [HumanMessage("weather and time in Oslo?")]}


def _count(dsn: str, sql: str, *args: Any) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql, args).fetchone()
    assert row is not None
    return int(row[0])


LGX = [sys.executable, "-c", "from langgraph_external.cli import main; main()"]


def _lgx(dsn: str, ws: Path | None, *args: str, timeout: float = 120) -> Any:
    cmd = [*LGX, "--dsn", dsn]
    if ws is not None:
        cmd += ["-w", str(ws)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _comparable(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a record says, without the ids, times and hashes that differ between runs."""
    out = []
    for e in events:
        p = dict(e["payload"])
        for k in ("path",):
            p.pop(k, None)
        if e["kind"] == "checkpoint":
            p = {
                "nodes": p["nodes"],
                "writers": p["writers"],
                "changed": p["changed"],
                # sizes differ with the random message ids inside the values
                "channels": {ch: r["type"] for ch, r in p["channels"].items()},
            }
        elif e["kind"] == "writes":
            p = {"writes": [(w["channel"], w["type"]) for w in p["writes"]]}
        else:
            p = {}
        out.append((e["kind"], e["node"], e["step"], e["checkpoint_ns"] != "", json.dumps(p)))
    return out


def test_a_checkpoint_commits_with_its_capture_and_is_sealed_after(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        assert ext.pipeline is not None and getattr(ext.pipeline.sealing, "pid", None)
        react_agent(ext.checkpointer).invoke(ASK, ext.config("t"))
        # every committed checkpoint has its event or its capture, at any moment
        missing = _count(
            dsn,
            """select count(*) from checkpoints c where c.thread_id = 't' and not exists (
                 select 1 from langgraph_external.events e where e.thread_id = 't'
                   and e.kind = 'checkpoint' and e.checkpoint_id = c.checkpoint_id)
               and not exists (select 1 from langgraph_external.captures k
                 where k.thread_id = 't' and k.checkpoint_id = c.checkpoint_id)""",
        )
        assert missing == 0
        assert ext.flush()
        assert _count(dsn, "select count(*) from langgraph_external.captures") == 0
        events = ext.events("t")
        verify_chain(events)
        assert list(ext.workspace.iter_events("t")) == events  # type: ignore[union-attr]
        cps = [e for e in events if e["kind"] == "checkpoint"]
        assert len(cps) == _count(dsn, "select count(*) from checkpoints where thread_id = 't'")
    assert _lgx(dsn, tmp_path / "ws", "verify", "t").returncode == 0


@pytest.mark.parametrize("sealing", ["thread", "worker"])
def test_the_record_is_the_same_whoever_seals_it(
    sealing: str, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """The helper process (default), a thread of the app, or an ``lgx worker``: the
    sealer builds each event from the saver's rows and the captured events alone."""
    records = {}
    for mode in ("process", sealing):
        ws = tmp_path / f"ws-{mode}"
        tid = f"same-{mode}"
        worker = None
        if mode == "worker":
            worker = subprocess.Popen(
                [*LGX, "--dsn", dsn, "-w", str(ws), "worker", "--poll", "0.2"],
                cwd=ROOT,
            )
        try:
            with External(
                dsn=dsn,
                workspace=None if mode == "worker" else ws,
                sealing=mode,
                options=Options(spool_dir=spool_dir),
            ) as ext:
                react_agent(ext.checkpointer).invoke(ASK, ext.config(tid), durability="sync")
                fanout_with_subgraph(ext.checkpointer).invoke(
                    {"items": [], "total": 0}, ext.config(tid), durability="sync"
                )
                assert ext.flush(timeout=60)
                records[mode] = ext.events(tid)
        finally:
            if worker is not None:
                worker.send_signal(signal.SIGTERM)
                assert worker.wait(timeout=60) == 0
        verify_chain(records[mode])
        mirrored = [
            json.loads(line)
            for line in (ws / "threads" / tid / "events.jsonl").read_text().splitlines()
        ]
        assert mirrored == records[mode]  # the worker mirrors too
    # the same events with the same content (their interleaving follows the app's timing)
    assert sorted(map(repr, _comparable(records["process"]))) == sorted(
        map(repr, _comparable(records[sealing]))
    )
    cps = [c for c in _comparable(records["process"]) if c[0] == "checkpoint"]
    assert cps == [c for c in _comparable(records[sealing]) if c[0] == "checkpoint"]


def test_two_sealers_never_seal_one_thread_twice(dsn: str, tmp_path: Path) -> None:
    """Four sealers race over the same captures while both cores are busy, five times."""
    from langgraph_external.ledger import schema as ledger_sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger_sql.setup(conn)
    cipher = load_key(None)
    for rnd in range(5):
        store = PostgresLedger(dsn, cipher=cipher)
        expected: dict[str, int] = {}
        for i in range(60):
            tid = f"race-{rnd}-{i % 7}"
            riders = [Event.new("node_end", tid, payload={"i": i, "k": k}) for k in range(3)]
            store.capture([Capture("events", tid, riders=riders, event_id=riders[0].event_id)])
            expected[tid] = expected.get(tid, 0) + 3
        sealers = [Sealer(PostgresLedger(dsn, cipher=cipher), cipher=cipher) for _ in range(4)]
        errors: list[BaseException] = []

        def run(s: Sealer, errors: list[BaseException] = errors) -> None:
            try:
                for _ in range(50):
                    s.seal_batch()
            except BaseException as exc:  # reported below
                errors.append(exc)

        with cpu_burner():
            threads = [threading.Thread(target=run, args=(s,)) for s in sealers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert not [e for e in errors if "another writer" not in str(e)]
        Sealer(store, cipher=cipher).drain()
        with psycopg.connect(dsn) as conn:
            for tid, n in expected.items():
                events = ledger_sql.fetch_events(conn, tid)
                assert [e["seq"] for e in events] == list(range(1, n + 1))
                assert [e["payload"]["i"] for e in events] == sorted(
                    e["payload"]["i"] for e in events
                )
                verify_chain(events)
        assert sum(s.sealed_captures for s in sealers) <= 60  # none sealed twice
        store.close()


def test_a_batch_that_dies_before_its_commit_is_sealed_by_the_next_sealer(dsn: str) -> None:
    from langgraph_external.ledger import postgres
    from langgraph_external.ledger import schema as ledger_sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger_sql.setup(conn)
    cipher = load_key(None)
    store = PostgresLedger(dsn, cipher=cipher)
    riders = [Event.new("tool_end", "t", payload={"n": n}) for n in range(4)]
    store.capture([Capture("events", "t", riders=riders, event_id=riders[0].event_id)])

    original = postgres.SealTx.store

    def store_then_die(self: Any, events: Any, captures: Any) -> None:
        original(self, events, captures)
        raise KeyboardInterrupt("the sealer died before COMMIT")

    postgres.SealTx.store = store_then_die  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            Sealer(store, cipher=cipher).seal_batch()
    finally:
        postgres.SealTx.store = original  # type: ignore[method-assign]
    assert _count(dsn, "select count(*) from langgraph_external.events") == 0
    assert Sealer(store, cipher=cipher).drain()
    with psycopg.connect(dsn) as conn:
        events = ledger_sql.fetch_events(conn, "t")
    assert [e["payload"]["n"] for e in events] == [0, 1, 2, 3]
    assert _count(dsn, "select count(*) from langgraph_external.captures") == 0
    store.close()


def test_worker_mode_the_app_captures_and_lgx_worker_seals_and_mirrors(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws = tmp_path / "ws"
    with External(
        dsn=dsn, workspace=None, sealing="worker", options=Options(spool_dir=spool_dir)
    ) as ext:
        react_agent(ext.checkpointer).invoke(ASK, ext.config("w"))
        assert not ext.flush(timeout=1.0)  # no worker yet: captured, not sealed
        assert ext.health()["sealing"]["unsealed_captures"] > 0
        status = _lgx(dsn, ws, "worker", "--status", "--json")
        assert status.returncode == 0 and json.loads(status.stdout)["captures"] > 0
        # pending, not a failure: they committed with the saver's rows
        verified = _lgx(dsn, ws, "verify", "w")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "pending" in verified.stdout
        worker = subprocess.Popen(
            [*LGX, "--dsn", dsn, "-w", str(ws), "worker", "--poll", "5"],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert ext.flush(timeout=60)  # NOTIFY woke the worker (it polls every 5 s)
            react_agent(ext.checkpointer).invoke(ASK, ext.config("w2"))
            assert ext.flush(timeout=60)
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0
        for tid in ("w", "w2"):
            events = ext.events(tid)
            verify_chain(events)
            assert list(Workspace_(ws).iter_events(tid)) == events
    status = json.loads(_lgx(dsn, ws, "worker", "--status", "--json").stdout)
    assert status["captures"] == 0 and status["workspace_behind_threads"] == 0
    assert _lgx(dsn, ws, "verify", "--all").returncode == 0


def test_closing_an_app_in_worker_mode_leaves_its_captures_to_the_workers_without_waiting(
    dsn: str, tmp_path: Path, spool_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The captures are durable when the app closes: closing must not wait on sealing it
    does not do (it waited for a worker up to 30 s, then gave up)."""
    ws = tmp_path / "ws"
    caplog.set_level(logging.INFO, logger="langgraph_external")
    ext = External(
        dsn=dsn, workspace=None, sealing="worker", options=Options(spool_dir=spool_dir)
    ).setup()
    react_agent(ext.checkpointer).invoke(ASK, ext.config("left"))
    backend = ext.pipeline.sealing
    ext.close()
    # closed without a worker: nothing sealed, every capture committed and counted
    assert backend.waiting["captures"] > 0
    assert "wait for an lgx worker" in caplog.text
    with External(
        dsn=dsn, workspace=None, sealing="worker", options=Options(spool_dir=spool_dir)
    ) as reader:
        assert reader.events("left") == []
        assert _lgx(dsn, ws, "worker", "--once").returncode == 0
        events = reader.events("left")
    verify_chain(events)
    assert {"checkpoint", "tool_start", "llm_end"} <= {e["kind"] for e in events}
    assert _lgx(dsn, ws, "verify", "left").returncode == 0


def test_lgx_worker_writes_a_quiet_threads_deferred_state_without_being_stopped(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """A busy thread's ``state.json`` is rewritten at most every few seconds; a worker that
    runs for days must still write the last one once the thread goes quiet (it is never
    flushed or stopped): the workspace then shows the thread's latest checkpoint."""
    from langgraph_external.workspace.projection import WorkspaceProjection

    ws = tmp_path / "ws"
    with External(
        dsn=dsn, workspace=None, sealing="worker", options=Options(spool_dir=spool_dir)
    ) as ext:
        worker = subprocess.Popen(
            [*LGX, "--dsn", dsn, "-w", str(ws), "worker", "--poll", "0.5"],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            graph = react_agent(ext.checkpointer)
            ledger = PostgresLedger(dsn)
            name = WorkspaceProjection(Workspace_(ws)).name

            def mirrored(settled: bool) -> bool:
                # settled: the cursor is at the head (state.json written); else the
                # thread's events.jsonl holds the head (state.json may be deferred)
                head = len(ext.events("quiet"))
                if settled:
                    return head > 0 and not ledger.lagging(name)
                return head > 0 and len(list(Workspace_(ws).iter_events("quiet"))) == head

            def wait(settled: bool, seconds: float = 30) -> bool:
                deadline = time.monotonic() + seconds
                while not mirrored(settled) and time.monotonic() < deadline:
                    time.sleep(0.1)
                return mirrored(settled)

            graph.invoke(ASK, ext.config("quiet"))
            assert ext.flush(timeout=60) and wait(settled=True)  # turn 1: state.json written
            graph.invoke(ASK, ext.config("quiet"))  # turn 2 within seconds: state deferred
            assert ext.flush(timeout=60) and wait(settled=False)
            assert wait(settled=True), "the worker never wrote the quiet thread's state"
            verified = _lgx(dsn, ws, "verify", "quiet")
            assert verified.returncode == 0, verified.stdout + verified.stderr
            assert worker.poll() is None  # still running: nothing was stopped or flushed
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0


def Workspace_(path: Path) -> Any:
    from langgraph_external import Workspace

    return Workspace(path)


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    """Until process ``pid`` has exited (a zombie until its parent reaps it, or gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} is still running")


def test_a_helper_that_dies_is_started_again_and_nothing_is_lost(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """A helper that died (OOM killer, an operator) is started again by the app's next
    capture — an app that never calls ``flush()`` or ``health()`` keeps being sealed
    while it runs, not only at its next start — or by a ``flush()``."""
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        assert ext.pipeline is not None
        helper = ext.pipeline.sealing
        app = react_agent(ext.checkpointer)
        app.invoke(ASK, ext.config("h1"))
        pid = getattr(helper, "pid", None)
        assert pid
        os.kill(pid, signal.SIGKILL)
        sql = "select count(*) from langgraph_external.events where thread_id like 'later-%%'"
        deadline, n = time.monotonic() + 60, 0
        while _count(dsn, sql) == 0 and time.monotonic() < deadline:  # the app goes on
            app.invoke(ASK, ext.config(f"later-{n}"))
            n += 1
            time.sleep(0.2)
        assert _count(dsn, sql) > 0, f"nothing of {n} later threads was sealed in 60 s"
        assert getattr(helper, "pid", None) != pid and getattr(helper, "restarts", 0) == 1
        app.invoke(ASK, ext.config("h2"))
        pid = getattr(helper, "pid", 0)
        os.kill(pid, signal.SIGKILL)  # and again, with nothing captured after it
        _wait_gone(pid)
        assert ext.flush(timeout=60)  # started again, asked again: not False
        assert getattr(helper, "restarts", 0) == 2
        for tid in ("h1", "h2", *(f"later-{i}" for i in range(n))):
            verify_chain(ext.events(tid))
    assert _lgx(dsn, tmp_path / "ws", "verify", "--all").returncode == 0


def test_a_flush_right_after_the_helper_is_killed_restarts_it_and_is_answered(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """A flush asked the moment the helper died (before this process saw its pipe close, or
    while the killed helper still looked alive) is answered by a new helper — not ``False``
    because the request went to the dead one. Repeated while other threads burn CPU."""
    rounds = 8
    with (
        External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext,
        cpu_burner(),
    ):
        assert ext.pipeline is not None
        helper = ext.pipeline.sealing
        app = react_agent(ext.checkpointer)
        for n in range(rounds):
            app.invoke(ASK, ext.config(f"k{n}"))
            pid = getattr(helper, "pid", None)
            assert pid
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.08 * n)  # asked at once, then later: sooner and later than a reap
            assert ext.flush(timeout=60), f"round {n}: the flush was not answered"
            assert getattr(helper, "restarts", 0) == n + 1
        for n in range(rounds):
            verify_chain(ext.events(f"k{n}"))
            assert ext.events(f"k{n}"), f"thread k{n} was not sealed"


def test_a_helper_killed_while_a_flush_waits_for_it_is_replaced_and_asked_again(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """The helper dies after a flush's request went out (stopped first, so it cannot answer
    before): the flush is answered by a new helper, not ``False``."""
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        assert ext.pipeline is not None
        helper = ext.pipeline.sealing
        app = react_agent(ext.checkpointer)
        app.invoke(ASK, ext.config("w1"))
        pid = getattr(helper, "pid", None)
        assert pid
        os.kill(pid, signal.SIGSTOP)
        answer: list[bool] = []
        asking = threading.Thread(target=lambda: answer.append(ext.flush(timeout=60)))
        asking.start()
        deadline = time.monotonic() + 30
        while not helper._waiting and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)  # white-box: the request is out, its answer awaited
        assert helper._waiting, "the flush never sent its request"  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGKILL)
        asking.join(90)
        assert answer == [True]
        assert getattr(helper, "restarts", 0) == 1
        assert ext.events("w1")


def test_health_and_flush_after_close_start_no_helper_again(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """Asking a closed pipeline how it is (as a test fixture or a shutdown hook does)
    must not start a sealing helper that nothing closes: it lived until the app exited
    (22 of them after tests/test_graph_equivalence.py), then retried a database that
    was gone."""
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        pipeline = ext.pipeline
        assert pipeline is not None
        helper = pipeline.sealing
        assert helper is not None
        react_agent(ext.checkpointer).invoke(ASK, ext.config("c1"))
        pid = getattr(helper, "pid", None)
        assert pid
    for _ in range(3):
        health = pipeline.health()
        assert health["sealing"]["closed"] is True
        assert "sealer" not in health["failing"] and health["failures"] == []
        assert helper.flush(FlushRequest(("c1",), "0", 1.0)) is False
    assert getattr(helper, "pid", None) == pid and getattr(helper, "restarts", None) == 0
    _wait_gone(pid)  # the closed helper exits


def test_health_asked_while_the_app_closes_never_starts_a_helper(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """A monitoring thread that asks ``health()`` while the app closes and for a second
    after (6 closes, both cores busy): the helper that answered ``close`` and exited is
    not started again, also once its zygote has reaped it."""
    with cpu_burner():
        for n in range(6):
            ext = External(
                dsn=dsn,
                workspace=tmp_path / "ws",
                options=Options(spool_dir=spool_dir),
            ).setup()
            pipeline = ext.pipeline
            assert pipeline is not None and pipeline.sealing is not None
            helper = pipeline.sealing
            react_agent(ext.checkpointer).invoke(ASK, ext.config(f"m{n}"))
            pid = getattr(helper, "pid", None)
            stop = threading.Event()

            def monitor(p: Any = pipeline, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    p.health()

            watcher = threading.Thread(target=monitor)
            watcher.start()
            try:
                ext.close()
                time.sleep(1.0)  # the zygote reaps its exited helper within 0.5 s
            finally:
                stop.set()
                watcher.join()
            assert getattr(helper, "pid", None) == pid
            assert getattr(helper, "restarts", None) == 0, n


def test_the_helper_seals_what_an_app_killed_left_then_exits(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws, spool = str(tmp_path / "ws"), str(spool_dir)
    script = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from langgraph_external import External\n"
        "from tests.graphs import react_agent\n"
        "from langchain_core.messages import HumanMessage\n"
        f"ext = External(dsn={dsn!r}, workspace={ws!r}, spool_dir={spool!r}).setup()\n"
        "react_agent(ext.checkpointer).invoke({'messages': [HumanMessage('hi')]},"
        " ext.config('orphan'))\n"
        "print(ext.pipeline.sealing.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    helper = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(helper, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the orphaned helper did not exit")
    assert _count(dsn, "select count(*) from langgraph_external.captures") == 0
    assert _count(
        dsn, "select count(*) from langgraph_external.events where kind = 'checkpoint'"
    ) == (_count(dsn, "select count(*) from checkpoints"))


def test_an_orphaned_helper_logs_plain_lines_to_the_stderr_the_app_left_it(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """The app is SIGKILLed; its helper drains and closes its export (the receiver is
    down), and the warning it logs then reaches the app's stderr as a line, not as a
    "--- Logging error ---" traceback about the app's closed pipe."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: the receiver is down
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    ws, spool = str(tmp_path / "ws"), str(spool_dir)
    script = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from langgraph_external import External\n"
        "from langgraph_external.exporters import LangfuseExport\n"
        "from tests.graphs import react_agent\n"
        "from langchain_core.messages import HumanMessage\n"
        f"lf = LangfuseExport(public_key='pk-orphan', secret_key='sk', base_url={down!r})\n"
        f"ext = External(dsn={dsn!r}, workspace={ws!r}, spool_dir={spool!r}, langfuse=lf)\n"
        "ext.setup()\n"
        "react_agent(ext.checkpointer).invoke({'messages': [HumanMessage('hi')]},"
        " ext.config('orphan-logs'))\n"
        "os.kill(os.getpid(), 9)\n"
    )
    # the helper inherits the app's stderr: run() returns once the helper closed it too
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=ROOT
    )
    assert proc.returncode == -signal.SIGKILL
    assert "not sent at close" in proc.stderr, proc.stderr[-3000:]
    assert "Logging error" not in proc.stderr, proc.stderr[-3000:]


def test_a_long_transaction_holds_sealing_back_and_health_says_so(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        sealing="thread",
        options=Options(spool_dir=spool_dir),
    ) as ext:
        blocker = psycopg.connect(dsn)
        try:
            blocker.execute("create table if not exists held (x int)")
            blocker.commit()
            blocker.execute("insert into held values (1)")  # an open transaction with an xid
            react_agent(ext.checkpointer).invoke(ASK, ext.config("held"))
            assert not ext.flush(timeout=2.0)  # its captures are younger than that transaction
            health = ext.pipeline.service.health(ask_ledger=True)  # type: ignore[union-attr]
            assert health["unsealed_captures"] > 0
            blocker.commit()
        finally:
            blocker.close()
        assert ext.flush(timeout=30)
        verify_chain(ext.events("held"))


def test_causal_order_holds_for_async_graphs_with_subgraphs(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """A subgraph's checkpoint and its parent's can be in flight together: the events
    they carry keep the order they were taken in, on an event loop too (20 runs)."""
    import asyncio

    from tests.test_faithful_record import _check_causal_order

    async def main() -> None:
        async with External(
            dsn=dsn,
            workspace=tmp_path / "ws",
            options=Options(spool_dir=spool_dir),
        ) as ext:
            app = fanout_with_subgraph(ext.checkpointer)
            with cpu_burner():
                for i in range(20):
                    await app.ainvoke(
                        {"items": [], "total": 0}, ext.config(f"async-{i}"), durability="async"
                    )
            assert await asyncio.to_thread(ext.flush, 60)
            for i in range(20):
                events = ext.events(f"async-{i}")
                verify_chain(events)
                _check_causal_order(events)

    asyncio.run(main())


_PRIORITY_PROBE = """
import os, sys
from langgraph_external.ledger.postgres import PostgresLedger
os.nice(int(sys.argv[2]))
ledger = PostgresLedger(sys.argv[1])
with ledger._connection() as conn:  # noqa: SLF001 - the pool a sealer's sessions come from
    pid = conn.info.backend_pid
    print(pid, os.getpriority(os.PRIO_PROCESS, pid), conn.info.host.startswith("/"))
ledger.close()
"""


@pytest.mark.parametrize("niceness", [0, 10])
def test_a_sealing_processs_server_sessions_run_at_its_lower_priority(
    dsn: str, niceness: int
) -> None:
    """The helper and ``lgx worker`` run niced; their sessions' server processes (the seal
    transactions, the saver reads) must yield to the app's sessions too, not only their
    Python. The app's own sessions (niceness 0) keep the server's priority."""
    out = subprocess.run(
        [sys.executable, "-c", _PRIORITY_PROBE, dsn, str(niceness)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    _, priority, local = int(out[0]), int(out[1]), out[2] == "True"
    if not local:
        pytest.skip("the server is reached over TCP: its processes are not ours to renice")
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert priority == base + niceness if niceness else priority <= base


def test_health_shows_the_sealing_helpers_connections(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """Where a deployment's connections go: the helper's pools are in ``health()`` beside
    the app's, open ones never above their maximum."""
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        react_agent(ext.checkpointer).invoke(ASK, ext.config("pools"))
        assert ext.flush(timeout=60)
        pools = ext.health()["sealing"]["connections"]
    assert set(pools) == {"ledger"}
    assert 1 <= pools["ledger"]["open"] <= pools["ledger"]["max"]
    assert 0 <= pools["ledger"]["idle"] <= pools["ledger"]["open"]


APP_WITH_A_MAIN_REDACTOR = """
import logging, sys
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph_external import External

def my_redactor(value):  # the app's own redactor, defined in the script it runs
    return value, 0

class S(TypedDict):
    n: int

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
g = StateGraph(S)
g.add_node("inc", lambda s: {"n": s["n"] + 1})
g.add_edge(START, "inc")
g.add_edge("inc", END)
with External(dsn=sys.argv[1], workspace=sys.argv[2], redactor=my_redactor) as ext:
    g.compile(checkpointer=ext.checkpointer).invoke({"n": 0}, ext.config("main-red"))
    print("flushed", ext.flush(60), len(ext.events("main-red")))
"""


def test_a_redactor_defined_in_the_apps_main_script_still_gets_everything_sealed(
    dsn: str, tmp_path: Path
) -> None:
    """It pickles by a name only the app can resolve (``__main__.my_redactor``): sent to a
    helper, the helper failed at start, again and again, and nothing was sealed."""
    script = tmp_path / "app.py"
    script.write_text(APP_WITH_A_MAIN_REDACTOR)
    done = subprocess.run(
        [sys.executable, str(script), dsn, str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    _, flushed, count = done.stdout.split()[-3:]
    assert flushed == "True" and int(count) > 0, done.stdout + done.stderr[-3000:]
    assert "my_redactor is defined in the app's __main__" in done.stderr
