"""Request latency of LangGraph's Agent Server with and without the record (issue 36).

``langgraph dev`` (from ``langgraph-cli[inmem]``) serves the ReAct agent of
``tests/agent_server_app.py`` (a scripted chat model, one tool call, 7 checkpoints per run)
and a client streams one run (``runs.stream``, ``stream_mode="values"``) on a new thread
per request through ``langgraph_sdk``, sequentially, for each setup. Two times per request:
``total`` (request to end of stream) and ``run`` (the server's first event of the run, sent
as it starts executing, to the end of the stream). ``total`` is quantized by the in-memory
runtime's queue, which looks for new runs every 0.5 s (``Runs.next`` in
langgraph-runtime-inmem 0.36.7): ``run`` is where the record's cost shows.

- ``inmem``: the server's own persistence (no custom checkpointer);
- ``official``: the official ``AsyncPostgresSaver`` as the custom checkpointer (the bare
  Postgres saver, the baseline the record is compared with);
- ``record``: ``langgraph_external.agent_server.checkpointer`` (sealing in its helper
  process, workspace mirrored);
- ``worker``: the same with ``LGX_SEALING=worker`` and one ``lgx worker`` beside it.

Each round starts every setup's server on a fresh database in turn (a few warm-up
requests first); ``--rounds`` rounds (default 3). Prints per-round medians and p90 and the
ratio to ``official`` of the same round. Run::

    PYTHONPATH=. python benchmarks/bench_agent_server.py [--requests 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from _common import pct, postgres
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.agent_server_run import GRAPHS, RECORDED, serve, write_app  # noqa: E402

SETUPS = ("inmem", "official", "record", "worker")
OFFICIAL = """import contextlib, os
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

@contextlib.asynccontextmanager
async def checkpointer():
    async with AsyncPostgresSaver.from_conn_string(os.environ["LGX_DSN"]) as saver:
        await saver.setup()
        yield saver
"""
ASK = {"messages": [{"role": "user", "content": "weather in Oslo?"}]}


@contextmanager
def fresh_db(server: str) -> Iterator[str]:
    name = f"lgx_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    try:
        params = conninfo_to_dict(server)
        params["dbname"] = name
        yield make_conninfo(**params)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


def app_for(setup: str, root: Path) -> Path:
    app = root / setup
    if setup == "inmem":
        return write_app(app, {"dependencies": ["."], "graphs": GRAPHS})
    if setup == "official":
        write_app(app, {**RECORDED, "checkpointer": {"path": "./official.py:checkpointer"}})
        (app / "official.py").write_text(OFFICIAL)
        return app
    config = {k: v for k, v in RECORDED.items() if k != "store"}
    return write_app(app, config)


async def time_requests(url: str, n: int, warmup: int) -> tuple[list[float], list[float]]:
    """``(total, run)`` milliseconds of ``n`` requests after ``warmup`` ones."""
    from langgraph_sdk import get_client

    client = get_client(url=url)
    total, run = [], []
    for i in range(warmup + n):
        tid = (await client.threads.create())["thread_id"]
        t0 = time.perf_counter()
        started, last = t0, None
        async for part in client.runs.stream(tid, "agent", input=ASK, stream_mode="values"):
            if part.event == "metadata":
                started = time.perf_counter()
            elif part.event == "values":
                last = part.data
        end = time.perf_counter()
        assert last is not None and last["messages"][-1]["content"].startswith("It is")
        if i >= warmup:
            total.append((end - t0) * 1000.0)
            run.append((end - started) * 1000.0)
    return total, run


def measure(
    setup: str, server: str, root: Path, n: int, warmup: int
) -> tuple[list[float], list[float]]:
    app = app_for(setup, root)
    with fresh_db(server) as dsn:
        env = {"LGX_DSN": dsn, "LGX_WORKSPACE": str(app / "ws")}
        worker = None
        if setup == "worker":
            env["LGX_SEALING"] = "worker"
            lgx = Path(sys.executable).parent / "lgx"
            worker = subprocess.Popen(
                [str(lgx), "--dsn", dsn, "-w", str(app / "worker-ws"), "worker"],
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stderr=subprocess.DEVNULL,
            )
        try:
            with serve(app, env, log_name=f"server-{uuid.uuid4().hex[:6]}.log") as running:
                return asyncio.run(time_requests(running.url, n, warmup))
        finally:
            if worker is not None:
                worker.terminate()
                worker.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dsn", default=os.environ.get("LGX_BENCH_DSN"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, postgres(args.dsn, Path(tmp)) as (server, kind):
        os.environ.setdefault("LGX_KEY_FILE", str(Path(tmp) / "key"))
        print(f"postgres: {kind}; {args.requests} streamed runs per setup per round")
        for r in range(1, args.rounds + 1):
            medians: dict[str, float] = {}
            for setup in SETUPS:
                where = Path(tmp) / f"r{r}"
                total, run = measure(setup, server, where, args.requests, args.warmup)
                medians[setup] = pct(run, 0.5)
                row = {
                    "round": r,
                    "setup": setup,
                    "run_median_ms": pct(run, 0.5),
                    "run_p90_ms": pct(run, 0.9),
                    "total_median_ms": pct(total, 0.5),
                    "total_p90_ms": pct(total, 0.9),
                }
                results.append(row)
                print(
                    f"  r{r} {setup:9s} run median {row['run_median_ms']:6.1f} ms"
                    f" p90 {row['run_p90_ms']:6.1f} ms | total median"
                    f" {row['total_median_ms']:7.1f} ms p90 {row['total_p90_ms']:7.1f} ms",
                    flush=True,
                )
            base = medians["official"]
            ratios = "  ".join(f"{s} {medians[s] / base:.2f}x" for s in SETUPS)
            print(f"round {r}, run median vs official: {ratios}", flush=True)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
