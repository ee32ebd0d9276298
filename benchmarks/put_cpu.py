#!/usr/bin/env python
"""CPU of one ``put``: the bare official saver vs External's checkpointer, in isolation.

One thread calls ``put`` in a loop (a two-channel checkpoint, each put's parent the one
before) and measures the thread's CPU time (``time.thread_time``) around each call: no
graph, no executors, no other thread competing for the GIL, so the difference is what the
record costs a ``put`` itself (building, hashing, sealing its event and the statement in
the saver's transaction). Rounds alternate bare and External; medians are printed.

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

from _common import bare_saver, postgres
from langgraph.checkpoint.base import empty_checkpoint


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="puts per setup")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--dsn")
    a = ap.parse_args()
    from langgraph_external import External

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        ext = External(
            dsn=dsn, workspace=Path(tmp) / "ws", spool_dir=Path(tmp) / "spool", schema="lgx_put"
        ).setup()
        saver, pool = bare_saver(dsn, 8)
        put_loop(saver, 50), put_loop(ext.checkpointer, 50)  # warm up
        bare, ours = [], []
        for _ in range(a.rounds):
            bare.append(put_loop(saver, a.n // a.rounds))
            ours.append(put_loop(ext.checkpointer, a.n // a.rounds))
            ext.flush()  # the mirror's work stays out of the next round
        b, e = statistics.median(bare), statistics.median(ours)
        print(f"CPU per put: bare {b:.1f} µs, External {e:.1f} µs, the record +{e - b:.1f} µs")
        ext.close()
        pool.close()


if __name__ == "__main__":
    main()
