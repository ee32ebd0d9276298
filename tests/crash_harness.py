"""Crash harness: a child records graphs until it is SIGKILLed at a random moment; after
each kill ``repair`` runs and the record is checked against what the saver committed.
At the end (and every ``check_every`` trials) the user's own commands run: ``lgx repair``,
then ``lgx verify --all``, which must pass on every thread.

Used by ``tests/test_crash.py`` (a short run in CI) and ``benchmarks/crash_long.py``
(>= 200 trials). The child runs new threads (a ReAct agent with two tools; a Send fan-out
into a subgraph) and one shared thread that grows across every child's life.

Run a child by hand: ``python -m tests.crash_harness child DSN WORKSPACE SPOOL STRICT SEED``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from langgraph_external.options import Options

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Findings:
    """What the checks found (every count must be 0 for the record to be trusted)."""

    trials: int = 0
    saver_checkpoints: int = 0
    saver_writes: int = 0
    checkpoints_without_event_before_repair: int = 0  # nor a capture
    writes_without_event_before_repair: int = 0  # nor a capture
    unsealed_before_repair: int = 0  # captures a killed process left for the sealer
    checkpoints_without_event: int = 0
    writes_without_event: int = 0
    threads: int = 0
    chain_problems: list[str] = field(default_factory=list)
    duplicate_events: int = 0
    duplicate_checkpoint_events: int = 0
    torn_lines: int = 0
    workspace_disagreements: list[str] = field(default_factory=list)
    restore_problems: list[str] = field(default_factory=list)
    recovered_writes: int = 0
    wal_replayed: int = 0
    verify_runs: int = 0  # `lgx repair` + `lgx verify --all` rounds
    verified_threads: int = 0  # threads the last `lgx verify --all` checked
    verify_failures: list[str] = field(default_factory=list)  # "thread: first problem"
    sealer_kills: int = 0

    def problems(self) -> list[str]:
        """Every violation of the guarantee, in words."""
        out = list(self.chain_problems) + self.workspace_disagreements + self.restore_problems
        out += [f"lgx verify: {p}" for p in self.verify_failures]
        for name in (
            "checkpoints_without_event_before_repair",
            "writes_without_event_before_repair",
            "checkpoints_without_event",
            "writes_without_event",
            "duplicate_events",
            "duplicate_checkpoint_events",
            "torn_lines",
        ):
            if getattr(self, name):
                out.append(f"{name} = {getattr(self, name)}")
        return out


# -- the child -------------------------------------------------------------------------------
def child(
    dsn: str, workspace: str, spool: str, strict: bool, seed: int, sealing: str, sqlite: str = ""
) -> None:
    """Record graphs forever (until killed); ``sqlite``: on a ``SqliteSaver`` in that file
    (a saver the record cannot join: captured by value) instead of the official saver."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    sys.path.insert(0, str(ROOT))
    from langchain_core.messages import HumanMessage

    from langgraph_external import External
    from tests.graphs import fanout_with_subgraph, react_agent

    rng = random.Random(seed)
    pid = os.getpid()
    ws = None if sealing == "worker" else workspace
    inner = None
    if sqlite:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(sqlite, check_same_thread=False, isolation_level=None)
        conn.execute("pragma journal_mode=wal")
        inner = SqliteSaver(conn)
    with External(
        dsn=dsn,
        workspace=ws,
        sealing=sealing,
        options=Options(spool_dir=spool, strict=strict, saver=inner),
    ) as ext:
        react = react_agent(ext.checkpointer)
        fan = fanout_with_subgraph(ext.checkpointer)
        helper = getattr(ext.pipeline.sealing, "pid", None) if ext.pipeline else None
        print("ready", helper or "", flush=True)
        i = 0
        while True:
            i += 1
            durability = rng.choice(["sync", "async"])
            ask = {"messages": [HumanMessage(f"weather and time in Oslo? ({pid}/{i})")]}
            react.invoke(ask, ext.config(f"new-{pid}-{i}"), durability=durability)
            react.invoke(ask, ext.config("shared"), durability=durability)
            fan.invoke(
                {"items": [], "total": 0}, ext.config(f"fan-{pid}-{i}"), durability=durability
            )


def turns(
    dsn: str, workspace: str, spool: str, strict: bool, thread_id: str, n: int, sealing: str
) -> None:
    """Run ``n`` ReAct turns on one thread, say so once the last one is mirrored (with the
    sealing helper's pid, if any), then wait to be killed (no flush).

    Every turn but the last is flushed: ``state.json`` shows it, so the last turn's
    ``state.json`` is deferred (it is rewritten at most every 5 s) whatever the timing.
    """
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    sys.path.insert(0, str(ROOT))
    from langchain_core.messages import HumanMessage

    from langgraph_external import External
    from tests.graphs import react_agent

    ext = External(
        dsn=dsn,
        workspace=workspace,
        sealing=sealing,
        options=Options(spool_dir=spool, strict=strict),
    )
    ext.__enter__()
    assert ext.pipeline is not None
    graph = react_agent(ext.checkpointer)
    config = ext.config(thread_id)
    for i in range(n):
        graph.invoke({"messages": [HumanMessage(f"turn {i}")]}, config)
        if i < n - 1:
            assert ext.flush()
    # the last turn mirrored (its checkpoint line written), nothing flushed: what is left
    # is the workspace's deferred state.json
    latest = graph.get_state(config).config["configurable"]["checkpoint_id"]
    log = Path(ext.workspace.checkpoint_log_path(thread_id, ""))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and latest not in (log.read_text() if log.exists() else ""):
        time.sleep(0.05)
    helper = getattr(ext.pipeline.sealing, "pid", None)
    print("done", helper or "", flush=True)
    time.sleep(600)


def kill_after_turns(
    dsn: str,
    ws: Path,
    spool: Path,
    *,
    strict: bool,
    thread_id: str,
    turns: int,
    wait: float,
    sealing: str = "thread",
) -> None:
    """Start :func:`turns` in a child, let it idle ``wait`` seconds, SIGKILL it — its
    sealing helper first, if it has one (else the orphan would settle what was deferred)."""
    args = [str(ws), str(spool), "1" if strict else "0", thread_id, str(turns), sealing]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.crash_harness", "turns", dsn, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if not line or line[0] != "done":
        proc.kill()
        raise RuntimeError(f"the child did not finish its turns ({line!r})")
    time.sleep(wait)
    if len(line) > 1:
        _kill(int(line[1]))
    proc.send_signal(signal.SIGKILL)
    proc.wait()


# -- the parent ------------------------------------------------------------------------------
def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


LGX = [sys.executable, "-c", "from langgraph_external.cli import main; main()"]


def _start_worker(dsn: str, ws: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*LGX, "--dsn", dsn, "-w", str(ws), "worker"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def run_trials(
    dsn: str,
    root: Path,
    *,
    trials: int,
    strict: bool,
    seed: int = 0,
    min_life: float = 0.2,
    max_life: float = 2.5,
    check_every: int = 0,
    sealing: str = "process",
) -> Findings:
    """Start, SIGKILL and repair ``trials`` children, then check the record once more.

    The sealer is killed too, at random moments: the app's helper process (``sealing=
    "process"``) while the app runs or right after the app died (mid-drain), or the
    ``lgx worker`` beside the app (``sealing="worker"``).
    """
    from langgraph_external.ops.repair import repair

    rng = random.Random(seed)
    ws, spool = root / "ws", root / "spool"
    findings = Findings()
    worker = _start_worker(dsn, ws) if sealing == "worker" else None
    try:
        for trial in range(trials):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.crash_harness",
                    "child",
                    dsn,
                    str(ws),
                    str(spool),
                    "1" if strict else "0",
                    str(seed * 100_000 + trial),
                    sealing,
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert proc.stdout is not None
            line = proc.stdout.readline().split()  # set up and about to record
            if not line or line[0] != "ready":
                proc.kill()
                raise RuntimeError(f"trial {trial}: the child did not start ({line!r})")
            helper = int(line[1]) if len(line) > 1 else None
            life = rng.uniform(min_life, max_life)
            if rng.random() < 0.5:  # the sealer dies while the app records
                at = rng.uniform(0, life)
                time.sleep(at)
                if helper is not None and _kill(helper):
                    findings.sealer_kills += 1
                if worker is not None:
                    worker.kill()
                    worker.wait()
                    findings.sealer_kills += 1
                    worker = _start_worker(dsn, ws)
                time.sleep(life - at)
            else:
                time.sleep(life)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if helper is not None and rng.random() < 0.5:
                time.sleep(rng.uniform(0, 0.3))  # the orphaned helper is sealing what it can
                if _kill(helper):
                    findings.sealer_kills += 1
            elif helper is not None:
                _wait_gone(helper, 30.0)
            # what commits with a checkpoint is its capture: every committed checkpoint and
            # task write has its event or a capture the sealer turns into it
            before = _missing(dsn, captured=True)
            findings.checkpoints_without_event_before_repair += before[0]
            findings.writes_without_event_before_repair += before[1]
            findings.unsealed_before_repair += _unsealed(dsn)
            report = repair(dsn=dsn, workspace=ws, spool_dir=spool)
            findings.recovered_writes += report.writes_recovered
            findings.wal_replayed += report.wal_events_replayed
            findings.trials += 1
            if check_every and (trial + 1) % check_every == 0:
                _check(dsn, ws, findings, restore=False)
                _lgx_repair_verify(dsn, ws, findings)
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
    _check(dsn, ws, findings, restore=True)
    _lgx_repair_verify(dsn, ws, findings)
    return findings


def lgx(dsn: str, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``lgx`` command installed next to this interpreter, as a user would."""
    lgx = Path(sys.executable).parent / "lgx"
    return subprocess.run(
        [str(lgx), "--dsn", dsn, "--workspace", str(ws), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=1800,
    )


def _lgx_repair_verify(dsn: str, ws: Path, findings: Findings) -> None:
    """``lgx repair`` (exit 0), then ``lgx verify --all``: every thread must pass."""
    findings.verify_runs += 1
    done = lgx(dsn, ws, "repair")
    if done.returncode != 0:
        findings.verify_failures.append(
            f"lgx repair exited {done.returncode}: {(done.stdout + done.stderr)[-500:]}"
        )
    done = lgx(dsn, ws, "verify", "--all", "--json")
    results = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    findings.verified_threads = len(results)
    failed = [r for r in results if not r["ok"]]
    findings.verify_failures += [f"{r['thread_id']}: {r['problems'][0]}" for r in failed]
    if done.returncode != (1 if failed else 0) or not results:
        findings.verify_failures.append(
            f"lgx verify --all exited {done.returncode} with {len(failed)} failed of "
            f"{len(results)}: {done.stderr[-500:]}"
        )


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    _kill(pid)


def _missing(dsn: str, *, captured: bool = False) -> tuple[int, int]:
    """Saver checkpoints and task writes without their event (``captured``: without their
    event and without a capture waiting to be sealed into it)."""
    cp_capture = (
        """ and not exists (select 1 from langgraph_external.captures k
               where k.thread_id = c.thread_id and k.kind = 'checkpoint'
                 and k.checkpoint_ns = c.checkpoint_ns and k.checkpoint_id = c.checkpoint_id)"""
        if captured
        else ""
    )
    w_capture = (
        """ and not exists (select 1 from langgraph_external.captures k
               where k.thread_id = w.thread_id and k.kind = 'writes'
                 and k.checkpoint_ns = w.checkpoint_ns and k.checkpoint_id = w.checkpoint_id
                 and k.task_id = w.task_id)"""
        if captured
        else ""
    )
    with psycopg.connect(dsn) as conn:
        cps = conn.execute(
            """select count(*) from public.checkpoints c where not exists (
                 select 1 from langgraph_external.events e
                 where e.thread_id = c.thread_id and e.kind = 'checkpoint'
                   and e.checkpoint_ns = c.checkpoint_ns and e.checkpoint_id = c.checkpoint_id)"""
            + cp_capture
        ).fetchone()
        writes = conn.execute(
            """select count(*) from (select distinct thread_id, checkpoint_ns, checkpoint_id,
                   task_id from public.checkpoint_writes) w where not exists (
                 select 1 from langgraph_external.events e
                 where e.thread_id = w.thread_id and e.kind = 'writes'
                   and e.checkpoint_ns = w.checkpoint_ns and e.checkpoint_id = w.checkpoint_id
                   and e.task_id = w.task_id)"""
            + w_capture
        ).fetchone()
    assert cps is not None and writes is not None
    return int(cps[0]), int(writes[0])


def _unsealed(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from langgraph_external.captures").fetchone()
    assert row is not None
    return int(row[0])


def _check(dsn: str, ws_root: Path, findings: Findings, *, restore: bool) -> None:
    from langgraph_external import Workspace, verify_chain
    from langgraph_external.ledger import schema as ledger

    cps, writes = _missing(dsn)
    findings.checkpoints_without_event = cps
    findings.writes_without_event = writes
    ws = Workspace(ws_root)
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        findings.saver_checkpoints = int(
            conn.execute("select count(*) from public.checkpoints").fetchone()[0]  # type: ignore[index]
        )
        findings.saver_writes = int(
            conn.execute("select count(*) from public.checkpoint_writes").fetchone()[0]  # type: ignore[index]
        )
        findings.duplicate_events = int(
            conn.execute(
                """select count(*) from (select event_id from langgraph_external.events
                   group by event_id having count(*) > 1) d"""
            ).fetchone()[0]  # type: ignore[index]
        )
        findings.duplicate_checkpoint_events = int(
            conn.execute(
                """select count(*) from (select 1 from langgraph_external.events
                   where kind = 'checkpoint'
                   group by thread_id, checkpoint_ns, checkpoint_id having count(*) > 1) d"""
            ).fetchone()[0]  # type: ignore[index]
        )
        tids = [r[0] for r in conn.execute("select thread_id from langgraph_external.threads")]
        findings.threads = len(tids)
        findings.chain_problems = []
        findings.workspace_disagreements = []
        findings.torn_lines = 0
        for tid in tids:
            envs = ledger.fetch_events(conn, tid)
            try:
                verify_chain(envs)
                if envs and (envs[0]["seq"] != 1 or envs[0]["prev"] is not None):
                    raise ValueError(f"starts at seq {envs[0]['seq']}")
            except ValueError as exc:
                findings.chain_problems.append(f"ledger {tid}: {exc}")
            findings.torn_lines += _torn(ws, tid)
            try:
                files = list(ws.iter_events(tid))
            except ValueError as exc:
                findings.workspace_disagreements.append(f"{tid}: {exc}")
                continue
            if [(e["seq"], e["hash"]) for e in files] != [(e["seq"], e["hash"]) for e in envs]:
                findings.workspace_disagreements.append(
                    f"{tid}: workspace {len(files)} events, ledger {len(envs)}"
                )
    if restore:
        findings.restore_problems = _restores(dsn, ws, ["shared", *sorted(tids)[:5]])


def _torn(ws: Any, tid: str) -> int:
    bad = 0
    for path in Path(ws.thread_dir(tid)).rglob("*.jsonl"):
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            bad += 1
        for line in data.splitlines():
            try:
                json.loads(line)
            except ValueError:
                bad += 1
    return bad


def _restores(dsn: str, ws: Any, tids: list[str]) -> list[str]:
    """Every checkpoint the saver holds, rebuilt from the workspace, equals the saver's."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from langgraph_external.ops.restore import CheckpointLog, load_checkpoint

    problems = []
    logs: dict[tuple[str, str], CheckpointLog] = {}
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as c:
        saver = PostgresSaver(c)  # type: ignore[arg-type]
        for tid in tids:
            for tup in saver.list({"configurable": {"thread_id": tid}}):
                conf = tup.config["configurable"]
                ns, cid = conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
                try:
                    log = logs.get((tid, ns)) or logs.setdefault(
                        (tid, ns), CheckpointLog(ws, tid, ns)
                    )
                    cp = load_checkpoint(ws, tid, ns, cid, serde=saver.serde, log=log)
                except Exception as exc:
                    problems.append(f"{tid}/{ns}/{cid}: {type(exc).__name__}: {exc}")
                    continue
                if cp.checkpoint["channel_values"] != tup.checkpoint["channel_values"]:
                    problems.append(f"{tid}/{ns}/{cid}: restored values differ")
    return problems


def report_json(findings: Findings) -> str:
    """The findings as JSON (for the benchmark's output)."""
    return json.dumps(asdict(findings), indent=2)


if __name__ == "__main__":
    if sys.argv[1] == "child":
        a = sys.argv
        child(a[2], a[3], a[4], a[5] == "1", int(a[6]), a[7], a[8] if len(a) > 8 else "")
    elif sys.argv[1] == "turns":
        a = sys.argv
        turns(a[2], a[3], a[4], a[5] == "1", a[6], int(a[7]), a[8])
