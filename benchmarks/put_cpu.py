#!/usr/bin/env python
"""CPU of one ``put``: the bare official saver vs External's checkpointer, in isolation.

One thread calls ``put`` in a loop (a two-channel checkpoint, each put's parent the one
before) and measures the thread's CPU time (``time.thread_time``) around each call: no
graph, no executors, no other thread competing for the GIL, so the difference is what the
record costs a ``put`` itself (building, hashing, sealing its event and the statement in
the saver's transaction). Rounds alternate bare, the floor (the bare saver with one small
``insert`` queued in each of its transactions: what any record committed with the
checkpoint costs at the least, as in ``bench_floor.py``) and External; medians are printed,
for ``put`` and for ``put_writes`` (a task's two writes).

    .venv/bin/python benchmarks/put_cpu.py --n 2000
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from _common import bare_saver, postgres
from bench_floor import RECORD_TABLE, saver_in, with_one_statement
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_external.options import Options


def put_loop(saver: Any, n: int) -> float:
    """µs of this thread's CPU per ``put`` over ``n`` puts on a new thread id."""
    cfg: Any = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
    saver.get_tuple(cfg)
    ck = empty_checkpoint()
    cpu = 0.0
    for i in range(n):
        ck = copy.deepcopy(ck)
        ck["id"] = str(uuid.uuid4())
        ck["channel_values"] = {"counter": i, "items": ["x"] * 3}
        versions = {"counter": f"{i + 1:032}.0.1", "items": f"{i + 1:032}.0.2"}
        ck["channel_versions"] = dict(versions)
        ck["versions_seen"] = {"n0": {"counter": f"{i:032}.0.1"}}
        meta: Any = {"source": "loop", "step": i, "parents": {}}
        t0 = time.thread_time()
        cfg = saver.put(cfg, ck, meta, versions)
        cpu += time.thread_time() - t0
    return cpu / n * 1e6


def writes_loop(saver: Any, n: int) -> float:
    """µs of this thread's CPU per ``put_writes`` (two writes) on one checkpoint."""
    cfg: Any = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
    ck = empty_checkpoint()
    cfg = saver.put(cfg, ck, {"source": "loop", "step": 0, "parents": {}}, {})
    cpu = 0.0
    for i in range(n):
        writes = [("items", ["x", i]), ("counter", i)]
        t0 = time.thread_time()
        saver.put_writes(cfg, writes, str(uuid.uuid4()), f"~__pregel_pull, n{i % 10}")
        cpu += time.thread_time() - t0
    return cpu / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="puts per setup")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--dsn")
    a = ap.parse_args()
    from langgraph_external import External

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        ext = External(
            dsn=dsn,
            workspace=Path(tmp) / "ws",
            options=Options(spool_dir=Path(tmp) / "spool", schema="lgx_put"),
        ).setup()
        saver, pool = bare_saver(dsn, 8)
        floor, fpool = saver_in(dsn, "floor_p", 8)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(RECORD_TABLE.format(s="floor_p"))
        with_one_statement(floor, "floor_p")
        setups = {"bare": saver, "floor": floor, "External": ext.checkpointer}
        for loop in (put_loop, writes_loop):
            for s in setups.values():
                loop(s, 50)  # warm up
        cpu: dict[str, dict[str, list[float]]] = {"put": {}, "put_writes": {}}
        for _ in range(a.rounds):
            for name, loop in (("put", put_loop), ("put_writes", writes_loop)):
                for key, s in setups.items():
                    cpu[name].setdefault(key, []).append(loop(s, a.n // a.rounds))
            ext.flush()  # the sealer's work stays out of the next round
        for name, by in cpu.items():
            b, f, e = (statistics.median(by[k]) for k in ("bare", "floor", "External"))
            print(
                f"CPU per {name}: bare {b:.1f} µs, floor {f:.1f} µs (+{f - b:.1f}), "
                f"External {e:.1f} µs (+{e - b:.1f}; +{e - f:.1f} over the floor)"
            )
        ext.close()
        pool.close()
        fpool.close()


if __name__ == "__main__":
    main()
