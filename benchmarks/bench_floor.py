#!/usr/bin/env python
"""The floor: what any record committed with the checkpoint costs, however it is made.

A record "exactly as durable as the checkpoint" commits in the saver's own transaction,
so each of the saver's transactions carries at least one more row. This script measures
that floor on the 10-node chain (new thread per invoke, ``durability="sync"``) in one run
on one server, setups interleaved in rotating rounds:

* **a  bare** — the official ``PostgresSaver`` on a pool (as in ``bench_load.py``);
* **t  trigger** — the same saver in its own schema, with ``AFTER INSERT OR UPDATE``
  triggers on ``checkpoints`` and ``checkpoint_writes`` that insert one small row each
  (thread, checkpoint id, kind, sha256 of the row's bytes): a record made entirely by the
  server, no Python at all;
* **p  one statement** — the same saver in its own schema, its pipelined transactions
  carrying one more small ``insert`` queued from Python (what a Python-side record costs
  at the least: one statement per saver transaction, nothing computed);
* **b  External** — ``External(...).checkpointer`` for comparison (``--no-external``
  leaves it out).
* **w  capture only** — ``External(sealing="worker", workspace=None).checkpointer``: what
  the app pays when an ``lgx worker`` on another host seals and mirrors. The worker runs
  here too, but is held (SIGSTOP) while the app's invokes are timed and let go (SIGCONT)
  between rounds, so it does not share the two cores with the timed invokes; its drain is
  timed after the burst and added to w's burst (as if the two ran one after the other).

Workloads: median invoke (``--n`` per setup, rounds of ``--batch``) and ``--burst``
invokes back to back (b's time includes ``ext.flush()``).

    .venv/bin/python benchmarks/bench_floor.py
    .venv/bin/python benchmarks/bench_floor.py --n 300 --no-external
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
from _common import SAVER_CONN_KWARGS, build_graph, invoke_chain, postgres
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg_pool import ConnectionPool

from langgraph_external.options import Options

RECORD_TABLE = """
create table {s}.rec (
    id bigserial primary key, thread_id text not null, checkpoint_id text,
    kind text not null, h bytea, at timestamptz not null default now()
)
"""

TRIGGERS = """
create function {s}.rec_checkpoint() returns trigger language plpgsql as $$
begin
    insert into {s}.rec (thread_id, checkpoint_id, kind, h)
    values (new.thread_id, new.checkpoint_id, 'checkpoint',
            sha256(convert_to(new.checkpoint::text, 'UTF8')));
    return null;
end $$;
create function {s}.rec_writes() returns trigger language plpgsql as $$
begin
    insert into {s}.rec (thread_id, checkpoint_id, kind, h)
    values (new.thread_id, new.checkpoint_id, 'writes', sha256(coalesce(new.blob, ''::bytea)));
    return null;
end $$;
create trigger rec_checkpoint after insert or update on {s}.checkpoints
    for each row execute function {s}.rec_checkpoint();
create trigger rec_writes after insert or update on {s}.checkpoint_writes
    for each row execute function {s}.rec_writes();
"""

ONE_ROW = "insert into {s}.rec (thread_id, checkpoint_id, kind, h) values (%s, %s, %s, %s)"


def saver_in(dsn: str, schema: str, pool_size: int) -> tuple[PostgresSaver, ConnectionPool[Any]]:
    """The official saver with its tables in ``schema`` (through ``search_path``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"create schema if not exists {schema}")
    kwargs = dict(SAVER_CONN_KWARGS, options=f"-c search_path={schema}")
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn, kwargs=kwargs, min_size=1, max_size=pool_size, open=True
    )
    saver = PostgresSaver(pool)
    saver.setup()
    return saver, pool


def with_one_statement(saver: PostgresSaver, schema: str) -> None:
    """Queue one small insert at the end of each of the saver's pipelined transactions."""
    original = saver._cursor
    sql = ONE_ROW.format(s=schema)

    @contextlib.contextmanager
    def cursor(*, pipeline: bool = False) -> Iterator[Any]:
        with original(pipeline=pipeline) as cur:
            yield cur
            if pipeline:
                row = ("t", str(uuid.uuid4()), "row", hashlib.sha256(b"x").digest())
                cur.execute(sql, row)

    saver._cursor = cursor  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="invokes per setup (median)")
    ap.add_argument("--batch", type=int, default=25, help="invokes per round")
    ap.add_argument("--burst", type=int, default=120, help="invokes back to back")
    ap.add_argument("--no-external", action="store_true", help="leave setup b out")
    ap.add_argument("--capture-only", action="store_true", help="add setup w (an lgx worker seals)")
    ap.add_argument("--pool-size", type=int, default=8)
    ap.add_argument("--dsn")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, kind):
        closers: list[Callable[[], Any]] = []
        graphs: dict[str, Any] = {}
        flushes: dict[str, Callable[[], Any]] = {}
        for key in ("a", "t", "p"):
            schema = f"floor_{key}"
            saver, pool = saver_in(dsn, schema, a.pool_size)
            closers.append(pool.close)
            if key != "a":
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(RECORD_TABLE.format(s=schema))
                    if key == "t":
                        conn.execute(TRIGGERS.format(s=schema))
                    else:
                        with_one_statement(saver, schema)
            graphs[key] = build_graph(saver)
        if not a.no_external:
            from langgraph_external import External

            ext = External(
                dsn=dsn,
                workspace=Path(tmp) / "workspace",
                options=Options(
                    spool_dir=Path(tmp) / "spool", schema="floor_b", pool_size=a.pool_size
                ),
            ).setup()
            graphs["b"] = build_graph(ext.checkpointer)
            flushes["b"] = ext.flush
            closers.insert(0, ext.close)
        worker: subprocess.Popen[bytes] | None = None
        if a.capture_only:
            from bench_load import mirror_caught_up, start_worker

            from langgraph_external import External

            ws_w = Path(tmp) / "workspace-w"
            worker = start_worker(dsn, ws_w, "floor_w")
            extw = External(
                dsn=dsn,
                workspace=None,
                sealing="worker",
                options=Options(
                    spool_dir=Path(tmp) / "spool-w", schema="floor_w", pool_size=a.pool_size
                ),
            ).setup()
            graphs["w"] = build_graph(extw.checkpointer)
            mirrored = mirror_caught_up(dsn, "floor_w", ws_w)
            held = worker

            def drain_w() -> None:
                """Let the held worker go, wait until it sealed and mirrored everything,
                hold it again."""
                os.kill(held.pid, signal.SIGCONT)
                if not extw.flush(timeout=300):
                    raise RuntimeError("the worker did not seal the captures")
                t0 = time.perf_counter()
                while not mirrored():
                    if time.perf_counter() - t0 > 300:
                        raise RuntimeError("the worker's mirror did not catch up")
                    time.sleep(0.005)
                os.kill(held.pid, signal.SIGSTOP)

            flushes["w"] = drain_w

            def stop_worker() -> None:
                os.kill(held.pid, signal.SIGCONT)
                held.terminate()
                held.wait(timeout=60)

            closers.insert(0, stop_worker)
            closers.insert(0, extw.close)
        keys = list(graphs)

        def run(key: str) -> float:
            t0 = time.perf_counter()
            invoke_chain(graphs[key], {"configurable": {"thread_id": uuid.uuid4().hex}})
            return (time.perf_counter() - t0) * 1e3

        for key in keys:
            for _ in range(10):
                run(key)
            flushes.get(key, lambda: None)()
        lat: dict[str, list[float]] = {k: [] for k in keys}
        r = 0
        while len(lat["a"]) < a.n:
            for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
                lat[key].extend(run(key) for _ in range(min(a.batch, a.n - len(lat[key]))))
                flushes.get(key, lambda: None)()  # untimed: no backlog in the next round
            r += 1
        burst: dict[str, float] = {}
        drained: dict[str, float] = {}
        for key in keys:
            t0 = time.perf_counter()
            for _ in range(a.burst):
                run(key)
            t1 = time.perf_counter()
            flushes.get(key, lambda: None)()
            burst[key] = time.perf_counter() - t0
            drained[key] = time.perf_counter() - t1
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = {
                s: conn.execute(f"select count(*) from floor_{s}.rec").fetchone()[0]  # type: ignore[index]
                for s in ("t", "p")
            }
        for close in closers:
            close()

    names = {
        "a": "bare saver",
        "t": "+ trigger row",
        "p": "+ one statement",
        "b": "External",
        "w": "capture only (w)",
    }
    med = {k: statistics.median(v) for k, v in lat.items()}
    print(f"server: {kind}; {a.n} invokes per setup, burst {a.burst}")
    print(f"{'setup':18} {'median ms':>10} {'ratio':>7} {'burst s':>9} {'ratio':>7}")
    for k in keys:
        print(
            f"{names[k]:18} {med[k]:10.2f} {med[k] / med['a']:7.3f}"
            f" {burst[k]:9.2f} {burst[k] / burst['a']:7.3f}"
        )
    print(f"rows recorded: trigger {rows['t']}, one statement {rows['p']}")
    print("of each burst, the drain: " + ", ".join(f"{k} {drained[k]:.2f} s" for k in keys))


if __name__ == "__main__":
    main()
