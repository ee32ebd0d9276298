"""How fast ``lgx`` reads a big ledger: ``threads`` over 10 000 threads, ``show`` of a
5 000-event thread, ``restore`` of a 1 000-checkpoint thread.

The data has the real shape: one ReAct run is recorded through the real recording path
(``External`` on the official Postgres saver); its events (with the projection detail
the ledger keeps) are then re-sealed — new thread ids, fresh event ids, a valid hash
chain per thread — and stored through the ledger's own API (``PostgresLedger.append``),
once per thread for the 10 000 threads and back to back (unique checkpoint ids per copy)
for the 5 000-event thread, whose workspace mirror the projection then writes. The
1 000-checkpoint thread is a real run of a counting loop graph, recorded step by step.

Each command is timed through its real code path, in process (``typer``'s runner: option
parsing, connecting, the queries, rendering; the interpreter's start is not included),
as the median of ``--repeat`` runs; one run of each as a separate ``lgx`` process is
printed too (it adds the interpreter's start and the imports). Baselines in the same
run: the same SQL sent with psycopg directly, and for restore the plain official
``PostgresSaver.put`` of the same decoded checkpoints into an empty database.

Usage::

    python benchmarks/bench_cli.py                    # embedded PostgreSQL
    python benchmarks/bench_cli.py --dsn postgresql://... --threads 10000 --repeat 7
    python benchmarks/bench_cli.py --only-restore     # only the restore row
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

os.environ.setdefault("MEM0_TELEMETRY", "False")
warnings.simplefilter("ignore")

import psycopg  # noqa: E402
from _common import postgres, server_info, versions  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from langgraph_external import External  # noqa: E402
from langgraph_external.cli import app  # noqa: E402
from langgraph_external.ledger import schema as ledger  # noqa: E402
from langgraph_external.ledger.postgres import PostgresLedger  # noqa: E402
from langgraph_external.ledger.queries import (  # noqa: E402
    COUNT_THREADS,
    SELECT_LAST_EVENTS,
    SELECT_THREADS,
)
from langgraph_external.options import Options  # noqa: E402
from langgraph_external.record.events import Event, new_id  # noqa: E402
from langgraph_external.record.processors import Sequencer  # noqa: E402
from langgraph_external.record.thread_ids import REPLAY_PREFIX  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.graphs import react_agent  # noqa: E402


class Loop(TypedDict):
    n: int
    last: str


def loop_graph(checkpointer: Any, steps: int) -> Any:
    g = StateGraph(Loop)
    g.add_node("step", lambda s: {"n": s["n"] + 1, "last": f"step {s['n']}"})
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= steps else "step")
    return g.compile(checkpointer=checkpointer)


@contextlib.contextmanager
def fresh_database(server: str) -> Iterator[str]:
    name = f"lgx_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    params = conninfo_to_dict(server)
    params["dbname"] = name
    try:
        yield make_conninfo(**params)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


def copies(seed: list[Event], thread_id: str, times: int, seq: Sequencer) -> list[Event]:
    """``seed`` repeated ``times`` as ``thread_id``'s events, sealed after its head."""
    out = []
    for k in range(times):
        for e in seed:
            cid = f"{e.checkpoint_id}.{k}" if (e.checkpoint_id and times > 1) else e.checkpoint_id
            payload = dict(e.payload)
            if times > 1 and payload.get("parent_checkpoint_id"):
                payload["parent_checkpoint_id"] = f"{payload['parent_checkpoint_id']}.{k}"
            out.append(
                e.replace(
                    thread_id=thread_id,
                    event_id=new_id(),
                    checkpoint_id=cid,
                    payload=payload,
                    seq=None,
                    prev=None,
                    hash=None,
                    line=None,
                )
            )
    return seq.seal(out)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, list[float]]:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t) * 1000)
    return statistics.median(runs), runs


def lgx_in_process(*args: str) -> Callable[[], None]:
    runner = CliRunner(env={"COLUMNS": "200"})

    def run() -> None:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output

    return run


def lgx_process(*args: str) -> float:
    exe = shutil.which("lgx") or str(Path(sys.executable).with_name("lgx"))
    t = time.perf_counter()
    subprocess.run([exe, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("LGX_BENCH_DSN"))
    ap.add_argument("--threads", type=int, default=10_000)
    ap.add_argument("--events", type=int, default=5_000)
    ap.add_argument("--checkpoints", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument(
        "--only-restore",
        action="store_true",
        help="record only the loop thread and time only the restore row",
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lgx-bench-cli-"))
    results: dict[str, Any] = {"versions": versions(), "args": vars(args) | {"dsn": bool(args.dsn)}}
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    try:
        with postgres(args.dsn, tmp) as (server, kind), fresh_database(server) as dsn:
            results["server"] = {"kind": kind, **server_info(dsn)}
            ws = tmp / "ws"
            base = ["--dsn", dsn, "--workspace", str(ws)]
            # -- populate -------------------------------------------------------------
            t0 = time.perf_counter()
            with External(dsn=dsn, workspace=ws, options=Options(spool_dir=tmp / "spool")) as ext:
                react_agent(ext.checkpointer).invoke(
                    {"messages": [HumanMessage("weather in Oslo?")]}, ext.config("seed")
                )
                graph = loop_graph(ext.checkpointer, args.checkpoints - 2)
                graph.invoke({"n": 0, "last": ""}, ext.config("loop") | {"recursion_limit": 10**6})
            sink = PostgresLedger(dsn)
            seed = sink.read("seed", 0, 100_000)
            big: list[Event] = []
            if not args.only_restore:
                big_seq = Sequencer(lambda ids: {})
                big = copies(seed, "big", -(-args.events // len(seed)), big_seq)
                for i in range(0, len(big), 1000):
                    sink.append(big[i : i + 1000])
                with External(
                    dsn=dsn, workspace=ws, options=Options(spool_dir=tmp / "spool")
                ) as ext:
                    ext.pipeline.catch_up()  # the workspace mirror of "big"
            t1 = time.perf_counter()
            batch: list[Event] = []
            for i in range(0 if args.only_restore else args.threads - 2):
                batch.extend(copies(seed, f"thread-{i:05d}", 1, Sequencer(lambda ids: {})))
                if len(batch) >= 4000:
                    sink.append(batch)
                    batch = []
            sink.append(batch)
            sink.close()
            with psycopg.connect(dsn) as conn:
                n_threads = conn.execute(
                    "select count(*) from langgraph_external.threads"
                ).fetchone()[0]  # type: ignore[index]
                n_events = conn.execute(
                    "select count(*) from langgraph_external.events"
                ).fetchone()[0]  # type: ignore[index]
                n_loop = conn.execute(
                    "select count(*) from checkpoints where thread_id = 'loop'"
                ).fetchone()[0]  # type: ignore[index]
                conn.execute("analyze")
            results["data"] = {
                "threads": n_threads,
                "events": n_events,
                "big_thread_events": len(big),
                "loop_checkpoints": n_loop,
                "seed_events": len(seed),
                "populate_s": {
                    "recorded_and_big": round(t1 - t0, 1),
                    "threads": round(time.perf_counter() - t1, 1),
                },
            }
            log(
                f"populated: {n_threads} threads, {n_events} events "
                f"(a {len(big)}-event thread, a {n_loop}-checkpoint thread) "
                f"in {time.perf_counter() - t0:.0f} s"
            )

            # -- lgx threads -----------------------------------------------------------
            def sql_threads(limit: int | None) -> Callable[[], None]:
                def run() -> None:
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        conn.execute(
                            ledger.q(SELECT_THREADS, "langgraph_external"),
                            {"replays": False, "prefix": REPLAY_PREFIX, "limit": limit},
                        ).fetchall()
                        conn.execute(
                            ledger.q(COUNT_THREADS, "langgraph_external"), {"prefix": REPLAY_PREFIX}
                        ).fetchone()

                return run

            def show_sql(limit: int | None) -> Callable[[], None]:
                def run() -> None:
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        query = ledger.q(SELECT_LAST_EVENTS, "langgraph_external")
                        conn.execute(query, ("big", limit)).fetchall()

                return run

            rows: list[tuple[str, float, float | None, str]] = []
            for label, cmd, sql, target in (
                ()
                if args.only_restore
                else (
                    ("lgx threads (latest 50)", ["threads"], sql_threads(50), "< 200 ms"),
                    (
                        "lgx threads --limit 0 --json (all)",
                        ["threads", "--limit", "0", "--json"],
                        sql_threads(None),
                        "",
                    ),
                    ("lgx show big (summary, last 20)", ["show", "big"], None, ""),
                    (
                        "lgx show big --json -n 0 (all events)",
                        ["show", "big", "--json", "-n", "0"],
                        None,
                        "",
                    ),
                )
            ):
                med, _ = timed(lgx_in_process(*base, *cmd), args.repeat)
                sql_med = timed(sql, args.repeat)[0] if sql else None
                if cmd[0] == "show":
                    sql_med = timed(show_sql(None if "-n" in cmd else 20), args.repeat)[0]
                rows.append((label, med, sql_med, target))
            # -- restore (each run into a fresh database, created outside the timing) ------
            from langgraph.checkpoint.postgres import PostgresSaver

            from langgraph_external.ops.decode import decode_all, put_all
            from langgraph_external.workspace.checkpoint_log import verify_thread
            from langgraph_external.workspace.files import Workspace

            restore_runs, bare_runs = [], []
            for _ in range(args.repeat):
                with fresh_database(server) as fresh:
                    t = time.perf_counter()
                    lgx_in_process("--dsn", fresh, "--workspace", str(ws), "restore", "loop")()
                    restore_runs.append((time.perf_counter() - t) * 1000)
                with fresh_database(server) as fresh:
                    wsp = Workspace(ws)
                    with psycopg.connect(fresh, autocommit=True, prepare_threshold=0) as conn:
                        saver = PostgresSaver(conn)  # type: ignore[arg-type]
                        saver.setup()
                        plan = decode_all(wsp, "loop", verify_thread(wsp, "loop"), saver.serde)
                        t = time.perf_counter()
                        put_all(plan, saver, "loop")  # the saver's own put, one by one
                        bare_runs.append((time.perf_counter() - t) * 1000)
            restore_ms, bare_ms = statistics.median(restore_runs), statistics.median(bare_runs)
            results["restore_runs_ms"] = [round(r) for r in restore_runs]
            rows.append(
                (f"lgx restore loop ({n_loop} checkpoints, fresh db)", restore_ms, bare_ms, "< 1 s")
            )
            proc = (
                {}
                if args.only_restore
                else {
                    "lgx threads": lgx_process(*base, "threads"),
                    "lgx show big": lgx_process(*base, "show", "big"),
                    "lgx --help": lgx_process("--help"),
                }
            )
            results["timings_ms"] = [
                {
                    "command": r[0],
                    "median_ms": round(r[1], 1),
                    "baseline_ms": None if r[2] is None else round(r[2], 1),
                    "ratio": None if not r[2] else round(r[1] / r[2], 2),
                    "target": r[3],
                }
                for r in rows
            ]
            results["process_ms"] = {k: round(v) for k, v in proc.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"\n{'command':52} {'median':>10} {'baseline':>10} {'ratio':>6}  target")
    for r in results["timings_ms"]:
        base_ms = "" if r["baseline_ms"] is None else f"{r['baseline_ms']:.1f} ms"
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.1f}"
        print(
            f"{r['command']:52} {r['median_ms']:>7.1f} ms {base_ms:>10} {ratio:>6}  {r['target']}"
        )
    if results["process_ms"]:
        print("\nas separate processes (interpreter start and imports included), one run each:")
    for k, v in results["process_ms"].items():
        print(f"  {k:20} {v} ms")
    print(f"restore runs: {results['restore_runs_ms']} ms")
    print(
        "baselines: threads/show: the same SQL with psycopg; restore: the official "
        "PostgresSaver.put/put_writes of the same decoded checkpoints, one call at a time"
    )


if __name__ == "__main__":
    main()
