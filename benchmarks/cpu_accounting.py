#!/usr/bin/env python
"""What the whole record costs in CPU: the app, its sealing processes and the server.

Runs the 10-node chain (a new thread per invoke, ``durability="sync"``) in a fresh app
process per setup — ``bare`` (the official ``PostgresSaver``), ``floor`` (the same saver
with one small ``insert`` queued in each of its transactions, as in ``bench_floor.py``),
``ckpt`` (``External(dsn=..., workspace=...)``'s checkpointer, the README's default) and
``full`` (the same with ``ext.config(...)``: the audit callbacks) — and samples, from
*this* process (a sampler inside the app would inflate the app's own CPU), every ~20 ms
with psutil: the app process (all its threads), its descendants (the sealing helper and
its zygote) and every process of the embedded server (its postmaster and children; with
``--dsn``, every ``postgres`` process on the machine). The window starts after a
warm-up and ends once the app's ``flush()`` returned: the drain is included. Rounds
alternate the setups; the table shows each round and the median per invoke, and the
record's extra CPU as a multiple of the bare invoke's total (app + server).

    .venv/bin/python benchmarks/cpu_accounting.py --n 80 --rounds 3
    .venv/bin/python benchmarks/cpu_accounting.py --setups bare,full --n 120
    .venv/bin/python benchmarks/cpu_accounting.py --setups mem,mem_ckpt --n 100

``mem`` / ``mem_ckpt``: ``InMemorySaver`` bare, and wrapped by ``External(..., inner=...)``
(captured by value in the ledger); their ratios are to ``mem``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

from langgraph_external.options import Options

HERE = Path(__file__).resolve().parent
SETUPS = ("bare", "floor", "ckpt", "full")


# -- the app side (a child process per setup and round) --------------------------------
def child(setup: str, dsn: str, n: int, tmp: str) -> None:
    sys.path.insert(0, str(HERE))
    from _common import bare_saver, build_graph, invoke_chain

    ext: Any = None
    closers: list[Any] = []
    if setup == "bare":
        saver, pool = bare_saver(dsn, 8)
        closers.append(pool.close)
    elif setup == "floor":
        import psycopg
        from bench_floor import RECORD_TABLE, saver_in, with_one_statement

        saver, pool = saver_in(dsn, "floor_p", 8)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("drop table if exists floor_p.rec")
            conn.execute(RECORD_TABLE.format(s="floor_p"))
        with_one_statement(saver, "floor_p")
        closers.append(pool.close)
    elif setup == "mem":
        from langgraph.checkpoint.memory import InMemorySaver

        saver = InMemorySaver()
    elif setup == "mem_ckpt":  # a saver the record cannot join: captured by value
        from langgraph.checkpoint.memory import InMemorySaver

        from langgraph_external import External

        ext = External(
            dsn=dsn, workspace=Path(tmp) / "ws", options=Options(saver=InMemorySaver())
        ).setup()
        saver = ext.checkpointer
        closers.append(ext.close)
    else:
        from langgraph_external import External

        ext = External(dsn=dsn, workspace=Path(tmp) / "ws").setup()
        saver = ext.checkpointer
        closers.append(ext.close)
    graph = build_graph(saver)

    def cfg() -> Any:
        tid = uuid.uuid4().hex
        if setup == "full":
            return ext.config(tid)
        return {"configurable": {"thread_id": tid}}

    def drain() -> None:
        if ext is not None and not ext.flush(120):
            raise SystemExit("flush() did not drain the record in 120 s")

    for _ in range(15):
        invoke_chain(graph, cfg())
    drain()
    time.sleep(0.5)
    print("READY", flush=True)
    sys.stdin.readline()
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        invoke_chain(graph, cfg())
        lat.append(time.perf_counter() - t)
    t1 = time.perf_counter()
    drain()
    t2 = time.perf_counter()
    print(
        "DONE " + json.dumps({"median": statistics.median(lat), "run": t1 - t0, "drain": t2 - t1}),
        flush=True,
    )
    sys.stdin.readline()
    for close in closers:
        close()


# -- the sampler (this process) ---------------------------------------------------------
def _cpu(p: psutil.Process) -> float | None:
    try:
        t = p.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return t.user + t.system


class Sampler:
    """CPU seconds per (pid, create time) between :meth:`start` and :meth:`stop`, by role."""

    def __init__(self, app: psutil.Process, postmaster: psutil.Process | None) -> None:
        self.app = app
        self.postmaster = postmaster
        self.first: dict[tuple[int, float], float] = {}
        self.last: dict[tuple[int, float], float] = {}
        self.role: dict[tuple[int, float], str] = {}

    def _procs(self) -> list[tuple[psutil.Process, str]]:
        out: list[tuple[psutil.Process, str]] = [(self.app, "app")]
        with contextlib.suppress(psutil.NoSuchProcess):
            out += [(c, "sealing") for c in self.app.children(recursive=True)]
        if self.postmaster is not None:  # our server: its postmaster and every child
            out.append((self.postmaster, "server"))
            with contextlib.suppress(psutil.NoSuchProcess):
                out += [(c, "server") for c in self.postmaster.children()]
            return out
        for p in psutil.process_iter(["name"]):  # a server given by --dsn: every postgres
            if p.info["name"] == "postgres":
                out.append((p, "server"))
        return out

    def sample(self, *, initial: bool = False) -> None:
        for p, role in self._procs():
            try:
                key = (p.pid, p.create_time())
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            cpu = _cpu(p)
            if cpu is None:
                continue
            if key not in self.first:
                # a process born inside the window counts from zero
                self.first[key] = cpu if initial else 0.0
                self.role[key] = role
            self.last[key] = cpu

    def totals(self) -> dict[str, float]:
        out = {"app": 0.0, "sealing": 0.0, "server": 0.0}
        for key, cpu in self.last.items():
            out[self.role[key]] += cpu - self.first[key]
        return out


def run_setup(setup: str, dsn: str, n: int, postmaster: psutil.Process | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", setup, "--dsn", dsn, "--n", str(n), "--tmp", tmp],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin and proc.stdout
        line = proc.stdout.readline()
        if line.strip() != "READY":
            raise SystemExit(f"{setup}: the app did not start: {line!r}")
        sampler = Sampler(psutil.Process(proc.pid), postmaster)
        sampler.sample(initial=True)
        proc.stdin.write("\n")
        proc.stdin.flush()
        # sample until the app says it is done (its stdout line arrives)
        os.set_blocking(proc.stdout.fileno(), False)
        buf = ""
        while "\n" not in buf:
            time.sleep(0.02)
            sampler.sample()
            try:
                chunk = proc.stdout.read()
            except (BlockingIOError, TypeError):
                chunk = None
            if chunk:
                buf += chunk
            if proc.poll() is not None and "\n" not in buf:
                raise SystemExit(f"{setup}: the app exited with {proc.returncode}")
        sampler.sample()
        os.set_blocking(proc.stdout.fileno(), True)
        done = json.loads(buf.split("DONE ", 1)[1].splitlines()[0])
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(120)
    tot = sampler.totals()
    per = {k: v / n * 1000 for k, v in tot.items()}
    per["median_ms"] = done["median"] * 1000
    per["wall_ms"] = (done["run"] + done["drain"]) / n * 1000
    per["drain_s"] = done["drain"]
    return per


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=80, help="invokes per setup and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--setups", default=",".join(SETUPS))
    ap.add_argument("--dsn")
    ap.add_argument("--json", help="write every round's numbers here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.dsn, a.n, a.tmp)
        return
    sys.path.insert(0, str(HERE))
    from _common import postgres

    setups = [s for s in a.setups.split(",") if s]
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        pid_file = Path(tmp) / "pgdata" / "postmaster.pid"
        postmaster = (
            psutil.Process(int(pid_file.read_text().split()[0])) if pid_file.exists() else None
        )
        for r in range(a.rounds):
            got: dict[str, dict[str, float]] = {}
            for s in setups:
                time.sleep(1.0)
                got[s] = run_setup(s, dsn, a.n, postmaster)
            rounds.append(got)
            _print_round(f"round {r + 1}", got)
    med = {
        s: {k: statistics.median(rd[s][k] for rd in rounds) for k in rounds[0][s]} for s in setups
    }
    _print_round(f"median of {a.rounds} rounds", med)
    if a.json:
        Path(a.json).write_text(json.dumps({"rounds": rounds, "median": med}, indent=1))


def _print_round(title: str, got: dict[str, dict[str, float]]) -> None:
    print(f"\n{title} (CPU ms per invoke; drain included)")
    print(
        f"{'setup':8} {'app':>7} {'sealing':>8} {'server':>7} {'total':>7}  {'extra':>7} "
        f"{'x bare':>7} {'app x':>6}  {'median':>7} {'wall':>6}"
    )
    for s, v in got.items():
        # InMemorySaver setups against the bare InMemorySaver, the rest against bare Postgres
        bare = got.get("mem") if s.startswith("mem") else got.get("bare")
        bare_total = bare["app"] + bare["server"] if bare else None
        total = v["app"] + v["sealing"] + v["server"]
        extra = total - bare_total if bare_total is not None else float("nan")
        ratio = extra / bare_total if bare_total else float("nan")
        app_x = (v["app"] - bare["app"]) / bare_total if bare and bare_total else float("nan")
        print(
            f"{s:8} {v['app']:7.2f} {v['sealing']:8.2f} {v['server']:7.2f} {total:7.2f}  "
            f"{extra:+7.2f} {ratio:7.3f} {app_x:6.3f}  {v['median_ms']:7.2f} {v['wall_ms']:6.2f}"
        )


if __name__ == "__main__":
    main()
