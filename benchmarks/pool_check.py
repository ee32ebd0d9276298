#!/usr/bin/env python
"""Cost of checking pooled connections before use (a connection that died idle in a
database restart must not reach the app).

Three official ``PostgresSaver`` setups on their own pools, same server, same run, rounds
interleaved: **bare** (no check, as before), **idle** (``_pools.check_idle``: a ``poll()``
of the socket, a round trip only when the server has sent something — what the package
uses) and **library** (psycopg_pool's ``check_connection``: a round trip on every
checkout). Prints the median of a 10-node chain invoke (``durability="sync"``, a new thread
each) as a ratio to bare, and the cost of one checkout/return of a pooled connection.

    .venv/bin/python benchmarks/pool_check.py [--n 300] [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import SAVER_CONN_KWARGS, build_graph, invoke_once, postgres
from psycopg_pool import ConnectionPool

from langgraph_external._pools import check_idle

CHECKS: dict[str, Any] = {
    "bare": None,
    "idle": check_idle,
    "library": ConnectionPool.check_connection,
}


def _pool(dsn: str, check: Any, size: int) -> ConnectionPool[Any]:
    return ConnectionPool(
        dsn, kwargs=dict(SAVER_CONN_KWARGS), min_size=1, max_size=size, check=check, open=True
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=300, help="invokes per setup")
    ap.add_argument("--checkouts", type=int, default=2000, help="per round, 7 rounds")
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    from langgraph.checkpoint.postgres import PostgresSaver

    with postgres(args.dsn, Path(tempfile.mkdtemp(prefix="lgx-pool-"))) as (dsn, kind):
        pools = {name: _pool(dsn, check, 4) for name, check in CHECKS.items()}
        graphs = {}
        for name, pool in pools.items():
            saver = PostgresSaver(pool)  # type: ignore[arg-type]
            saver.setup()
            graphs[name] = build_graph(saver)
            for _ in range(20):  # warm-up
                invoke_once(graphs[name], "warm")
        times: dict[str, list[float]] = {name: [] for name in graphs}
        names = list(graphs)
        for r in range(args.n):
            for name in names if r % 2 == 0 else reversed(names):
                t0 = time.perf_counter()
                invoke_once(graphs[name], "x")
                times[name].append(time.perf_counter() - t0)
        checkout: dict[str, list[float]] = {name: [] for name in pools}
        for _ in range(7):
            for name, pool in pools.items():
                t0 = time.perf_counter()
                for _ in range(args.checkouts):
                    with pool.connection():
                        pass
                checkout[name].append((time.perf_counter() - t0) / args.checkouts * 1e6)
        for pool in pools.values():
            pool.close()
    bare = statistics.median(times["bare"])
    print(f"server: {kind}; {args.n} invokes per setup (10-node chain, sync durability)")
    for name in names:
        med = statistics.median(times[name])
        print(
            f"{name:8s} median invoke {med * 1000:6.2f} ms  ratio {med / bare:5.3f}   "
            f"checkout+return {statistics.median(checkout[name]):5.1f} µs"
        )


if __name__ == "__main__":
    main()
