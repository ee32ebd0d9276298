#!/usr/bin/env python
"""Where the CPU of one invoke goes: per Python thread, the server, commits and WAL.

Runs the 10-node chain (new thread per invoke, ``durability="sync"``) on the bare
official saver, on the floor (the same saver with one small ``insert`` queued in each of
its transactions, as in ``bench_floor.py``) and on ``External``'s checkpointer, one after
the other on one embedded server, and prints per invoke: the median wall time, this
process's CPU split by thread (the app's thread, the flusher; the rest is LangGraph's
short-lived executor threads, where the saver's calls run), the CPU of External's
sealing helper process (sealing, the workspace mirror), the server's CPU (every
``postgres`` process), commits, WAL bytes and WAL fsyncs. On a machine with few cores the
sum of the app's Python CPU is what the app waits for: it all runs under one GIL. CPU
times move far less with the machine's load than wall times.

    .venv/bin/python benchmarks/cpu_accounting.py --n 80
    .venv/bin/python benchmarks/cpu_accounting.py --n 80 --sealing thread --no-encrypt
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from _common import bare_saver, build_graph, invoke_chain, postgres

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(stat_path: str) -> float:
    try:
        with open(stat_path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def _threads() -> dict[str, float]:
    return {
        t.name: _cpu_of(f"/proc/self/task/{t.native_id}/stat")
        for t in threading.enumerate()
        if t.native_id is not None
    }


def _server_pids() -> list[int]:
    out = subprocess.run(["pgrep", "-x", "postgres"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _server(dsn: str) -> tuple[int, int, int]:
    """(commits, WAL bytes inserted, WAL fsyncs) so far."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        commits = conn.execute(
            "select xact_commit from pg_stat_database where datname = current_database()"
        ).fetchone()
        lsn = conn.execute("select pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
        syncs = conn.execute(
            "select coalesce(sum(fsyncs), 0) from pg_stat_io where object = 'wal'"
        ).fetchone()
    assert commits and lsn and syncs
    return int(commits[0]), int(lsn[0]), int(syncs[0])


def measure(name: str, graph: Any, n: int, dsn: str, flush: Any, helper: int | None) -> None:
    pids = _server_pids()
    threads0, server0 = _threads(), sum(_cpu_of(f"/proc/{p}/stat") for p in pids)
    helper0 = _cpu_of(f"/proc/{helper}/stat") if helper else 0.0
    c0, w0, s0 = _server(dsn)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        invoke_chain(graph, {"configurable": {"thread_id": uuid.uuid4().hex}})
        lat.append(time.perf_counter() - t)
    flush()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    threads1, server1 = _threads(), sum(_cpu_of(f"/proc/{p}/stat") for p in pids)
    helper1 = _cpu_of(f"/proc/{helper}/stat") if helper else 0.0
    c1, w1, s1 = _server(dsn)
    total = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n * 1000
    per = {k: (v - threads0.get(k, 0.0)) / n * 1000 for k, v in threads1.items()}
    named = {k.replace("langgraph-external-", ""): v for k, v in per.items() if v > 0.05}
    rest = total - sum(named.values())
    print(f"{name}: median {statistics.median(lat) * 1000:.2f} ms per invoke")
    print(f"  Python CPU {total:.2f} ms: " + ", ".join(f"{k} {v:.2f}" for k, v in named.items()))
    print(f"    LangGraph's executor threads (the saver's calls) {rest:.2f} ms")
    if helper:
        print(f"  sealing helper process CPU {(helper1 - helper0) / n * 1000:.2f} ms")
    print(
        f"  server CPU {(server1 - server0) / n * 1000:.2f} ms, commits {(c1 - c0 - 1) / n:.1f},"
        f" WAL {(w1 - w0) / n / 1024:.1f} KiB, WAL fsyncs {(s1 - s0) / n:.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=80, help="invokes per setup")
    ap.add_argument("--sealing", choices=["process", "thread"], default="process")
    ap.add_argument("--no-encrypt", action="store_true", help="External(encrypt=False)")
    ap.add_argument("--dsn")
    a = ap.parse_args()
    from bench_floor import RECORD_TABLE, saver_in, with_one_statement

    from langgraph_external import External

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        ext = External(
            dsn=dsn,
            workspace=Path(tmp) / "ws",
            spool_dir=Path(tmp) / "spool",
            schema="lgx_cpu",
            encrypt=not a.no_encrypt,
            sealing=a.sealing,
        ).setup()
        saver, pool = bare_saver(dsn, 8)
        floor, fpool = saver_in(dsn, "floor_p", 8)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(RECORD_TABLE.format(s="floor_p"))
        with_one_statement(floor, "floor_p")
        setups = {
            "bare": build_graph(saver),
            "floor (one statement)": build_graph(floor),
            "External": build_graph(ext.checkpointer),
        }
        for g in setups.values():
            for _ in range(15):
                invoke_chain(g, {"configurable": {"thread_id": uuid.uuid4().hex}})
        ext.flush()
        helper = getattr(ext.pipeline.sealing, "pid", None) if ext.pipeline else None
        for name, graph in setups.items():
            time.sleep(1)
            ours = name == "External"
            measure(
                name,
                graph,
                a.n,
                dsn,
                ext.flush if ours else (lambda: None),
                helper if ours else None,
            )
        ext.close()
        pool.close()
        fpool.close()


if __name__ == "__main__":
    main()
