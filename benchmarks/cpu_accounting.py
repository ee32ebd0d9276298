#!/usr/bin/env python
"""Where the CPU of one invoke goes: per Python thread, the server, commits and WAL.

Runs the 10-node chain (new thread per invoke, ``durability="sync"``) on the bare
official saver and then on ``External``'s checkpointer, one after the other on one
embedded server, and prints per invoke: the median wall time, this process's CPU split
by thread (the app's thread, the flusher, the projector; the rest is LangGraph's
short-lived executor threads, where the saver's calls run), the server's CPU (every
``postgres`` process), commits, WAL bytes and WAL fsyncs. On a machine with few cores
the sum of the Python CPU is what the app waits for: it all runs under one GIL.

    .venv/bin/python benchmarks/cpu_accounting.py --n 80
    .venv/bin/python benchmarks/cpu_accounting.py --n 80 --no-projection --no-encrypt
    .venv/bin/python benchmarks/cpu_accounting.py --n 80 --no-projection --no-encrypt --floor
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


def measure(name: str, graph: Any, n: int, dsn: str, flush: Any) -> None:
    pids = _server_pids()
    threads0, server0 = _threads(), sum(_cpu_of(f"/proc/{p}/stat") for p in pids)
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
    c1, w1, s1 = _server(dsn)
    total = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n * 1000
    per = {k: (v - threads0.get(k, 0.0)) / n * 1000 for k, v in threads1.items()}
    named = {k.replace("langgraph-external-", ""): v for k, v in per.items() if v > 0.05}
    rest = total - sum(named.values())
    print(f"{name}: median {statistics.median(lat) * 1000:.2f} ms per invoke")
    print(f"  Python CPU {total:.2f} ms: " + ", ".join(f"{k} {v:.2f}" for k, v in named.items()))
    print(f"    LangGraph's executor threads (the saver's calls) {rest:.2f} ms")
    print(
        f"  server CPU {(server1 - server0) / n * 1000:.2f} ms, commits {(c1 - c0 - 1) / n:.1f},"
        f" WAL {(w1 - w0) / n / 1024:.1f} KiB, WAL fsyncs {(s1 - s0) / n:.1f}"
    )


def _strip_events() -> None:
    """``--floor``: checkpoint events that name no channel, and no writes events."""
    from langgraph_external.checkpointers import ExternalCheckpointer
    from langgraph_external.events import Event

    def bare_event(self: Any, rec: Any, cap: Any) -> Event:
        return Event(
            kind="checkpoint",
            thread_id=rec.tid,
            checkpoint_ns=rec.ns,
            checkpoint_id=rec.checkpoint["id"],
            payload={"parent_checkpoint_id": rec.parent, "writers": rec.writers, "size": 0},
        )

    ExternalCheckpointer._build_checkpoint = bare_event  # type: ignore[method-assign]
    ExternalCheckpointer._writes_event = lambda self, *a: None  # type: ignore[method-assign]
    ExternalCheckpointer._record_writes = lambda self, e: None  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=80, help="invokes per setup")
    ap.add_argument("--no-projection", action="store_true", help="stop the workspace mirror")
    ap.add_argument("--no-encrypt", action="store_true", help="External(encrypt=False)")
    ap.add_argument(
        "--floor",
        action="store_true",
        help="not a usable record: checkpoint events without channel references and no "
        "writes events, to measure what the machinery alone (events, chain, statement) costs",
    )
    ap.add_argument("--dsn")
    a = ap.parse_args()
    from langgraph_external import External

    if a.floor:
        _strip_events()

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        ext = External(
            dsn=dsn,
            workspace=Path(tmp) / "ws",
            spool_dir=Path(tmp) / "spool",
            schema="lgx_cpu",
            encrypt=not a.no_encrypt,
        ).setup()
        if a.no_projection:  # what the record costs without its mirror (a lower bound)
            assert ext.pipeline is not None
            ext.pipeline.projections = []
        saver, pool = bare_saver(dsn, 8)
        setups = {"bare": build_graph(saver), "External": build_graph(ext.checkpointer)}
        for g in setups.values():
            for _ in range(15):
                invoke_chain(g, {"configurable": {"thread_id": uuid.uuid4().hex}})
        ext.flush()
        time.sleep(1)
        measure("bare", setups["bare"], a.n, dsn, lambda: None)
        time.sleep(1)
        measure("External", setups["External"], a.n, dsn, ext.flush)
        ext.close()
        pool.close()


if __name__ == "__main__":
    main()
