#!/usr/bin/env python
"""Overhead of ``ExternalCheckpointer`` over the bare official ``PostgresSaver``.

What it measures (same process, same Postgres server, same run):

* **Sequential**: a 10-node chain graph, every invoke on a new ``thread_id``,
  ``durability="sync"``. Setup A is the bare ``PostgresSaver`` over its own pool; setup B
  is ``External(...).checkpointer`` (``ExternalCheckpointer`` over its own
  ``PostgresSaver`` pool; each checkpoint's event commits in the saver's own
  transaction, the other events are committed by a background flusher and the
  workspace is fed from the ledger by a background projector). Measurements are
  interleaved in rounds (A,B then B,A ...) so drift on a noisy machine hits both. Each
  B batch ends with ``ext.flush()`` and that drain time is part of B's batch wall time,
  so the "incl. flush" ratio charges B for *all* of the recording work, not just what
  the app thread waited for.
* **Concurrent**: 8 OS threads each run M invokes (new thread ids) on the same compiled
  graph. The official saver serializes every query on one lock per instance;
  ``External`` owns its pool and swaps that lock for a no-op. B's wall time includes the
  final flush.

Run from the repository root::

    .venv/bin/python benchmarks/bench_checkpointer.py            # embedded Postgres
    .venv/bin/python benchmarks/bench_checkpointer.py --n 600 --json out.json
    LGX_BENCH_DSN=postgresql://... .venv/bin/python benchmarks/bench_checkpointer.py

Exit status is 0 whatever the ratio (``--check`` makes it 1 when the per-invoke median
ratio is above ``--target``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    NODES,
    bare_saver,
    build_graph,
    git_info,
    invoke_once,
    ledger_counts,
    pct,
    postgres,
    run_in_threads,
    server_info,
    versions,
)

from langgraph_external.options import Options


# -- the two setups --------------------------------------------------------------------
@dataclass
class Setup:
    name: str
    label: str
    graph: Any
    flush: Callable[[], None] | None = None
    close: Callable[[], None] = lambda: None
    seq_ms: list[float] = field(default_factory=list)  # per-invoke latencies
    batch_s: list[float] = field(default_factory=list)  # batch wall time (B: incl. flush)
    flush_s: list[float] = field(default_factory=list)  # B: flush part of each batch
    conc_s: list[float] = field(default_factory=list)  # concurrent wall times
    conc_flush_s: list[float] = field(default_factory=list)


def make_baseline(dsn: str, pool_size: int) -> Setup:
    saver, pool = bare_saver(dsn, pool_size)
    return Setup("A", "PostgresSaver (bare)", build_graph(saver), close=pool.close)


def make_external(dsn: str, files: Path, pool_size: int) -> tuple[Setup, Any]:
    from langgraph_external import External

    ext = External(
        dsn=dsn,
        workspace=files / "workspace",
        options=Options(spool_dir=files / "spool", pool_size=pool_size),
    ).setup()

    def flush() -> None:
        if not ext.flush(timeout=300):
            raise RuntimeError("ext.flush() timed out")

    setup = Setup(
        "B", "ExternalCheckpointer", build_graph(ext.checkpointer), flush=flush, close=ext.close
    )
    return setup, ext


# -- measurement -----------------------------------------------------------------------
def run_batch(setup: Setup, k: int, *, record: bool = True) -> None:
    times: list[float] = []
    t0 = time.perf_counter()
    for _ in range(k):
        s = time.perf_counter()
        invoke_once(setup.graph, f"seq{setup.name}")
        times.append((time.perf_counter() - s) * 1e3)
    f0 = time.perf_counter()
    if setup.flush is not None:
        setup.flush()
    end = time.perf_counter()
    if record:
        setup.seq_ms.extend(times)
        setup.batch_s.append(end - t0)
        setup.flush_s.append(end - f0)


def run_concurrent(setup: Setup, threads: int, m: int) -> None:
    def body(_: int) -> None:
        for _ in range(m):
            invoke_once(setup.graph, f"conc{setup.name}")

    wall, flush = run_in_threads(threads, body, setup.flush)
    setup.conc_s.append(wall)
    setup.conc_flush_s.append(flush)


# -- output ----------------------------------------------------------------------------
def seq_stats(s: Setup) -> dict[str, float]:
    n = len(s.seq_ms)
    total = sum(s.batch_s)
    return {
        "invokes": n,
        "median_ms": statistics.median(s.seq_ms),
        "p90_ms": pct(s.seq_ms, 0.9),
        "mean_ms": statistics.fmean(s.seq_ms),
        "min_ms": min(s.seq_ms),
        "total_incl_flush_s": total,
        "per_invoke_incl_flush_ms": total / n * 1e3,
        "flush_total_s": sum(s.flush_s),
    }


def conc_stats(s: Setup, threads: int, m: int) -> dict[str, Any]:
    total = threads * m
    rates = [total / w for w in s.conc_s]
    return {
        "threads": threads,
        "invokes_per_thread": m,
        "rounds_wall_s": s.conc_s,
        "rounds_flush_s": s.conc_flush_s,
        "invokes_per_s_median": statistics.median(rates),
        "invokes_per_s_rounds": rates,
    }


def render(result: dict[str, Any]) -> None:
    a, b = result["sequential"]["A"], result["sequential"]["B"]
    r = result["sequential"]["ratio"]
    ca, cb = result["concurrent"]["A"], result["concurrent"]["B"]
    target = result["target"]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is a dependency
        Console = None  # type: ignore[assignment,misc]

    head = (
        f"{NODES}-node chain, new thread per invoke, durability='sync'; "
        f"server: {result['server']['kind']} PostgreSQL {result['server']['server_version']} "
        f"(fsync={result['server']['fsync']}); cpus={os.cpu_count()}; "
        f"loadavg before {result['machine']['loadavg_before'][0]:.2f}; "
        f"B's workspace: {result['workspace']}"
    )
    seq_rows = [
        ("invokes", f"{a['invokes']}", f"{b['invokes']}", ""),
        (
            "median ms / invoke",
            f"{a['median_ms']:.2f}",
            f"{b['median_ms']:.2f}",
            f"{r['median']:.3f}",
        ),
        ("p90 ms / invoke", f"{a['p90_ms']:.2f}", f"{b['p90_ms']:.2f}", f"{r['p90']:.3f}"),
        ("mean ms / invoke", f"{a['mean_ms']:.2f}", f"{b['mean_ms']:.2f}", f"{r['mean']:.3f}"),
        (
            "N invokes incl. flush, s",
            f"{a['total_incl_flush_s']:.2f}",
            f"{b['total_incl_flush_s']:.2f}",
            f"{r['total_incl_flush']:.3f}",
        ),
        (
            "  = ms / invoke",
            f"{a['per_invoke_incl_flush_ms']:.2f}",
            f"{b['per_invoke_incl_flush_ms']:.2f}",
            "",
        ),
        ("  of which flush waits, s", "-", f"{b['flush_total_s']:.3f}", ""),
    ]
    conc_rows = [
        (
            "threads x invokes",
            f"{ca['threads']} x {ca['invokes_per_thread']}",
            f"{cb['threads']} x {cb['invokes_per_thread']}",
            "",
        ),
        (
            "invokes/s (median of rounds)",
            f"{ca['invokes_per_s_median']:.1f}",
            f"{cb['invokes_per_s_median']:.1f}",
            f"{result['concurrent']['ratio']:.2f}",
        ),
        (
            "rounds invokes/s",
            ", ".join(f"{x:.1f}" for x in ca["invokes_per_s_rounds"]),
            ", ".join(f"{x:.1f}" for x in cb["invokes_per_s_rounds"]),
            "",
        ),
        (
            "sequential invokes/s (incl. flush)",
            f"{1e3 / a['per_invoke_incl_flush_ms']:.1f}",
            f"{1e3 / b['per_invoke_incl_flush_ms']:.1f}",
            "",
        ),
        (
            "concurrent / sequential",
            f"{result['concurrent']['speedup_A']:.2f}x",
            f"{result['concurrent']['speedup_B']:.2f}x",
            "",
        ),
    ]
    verdict = (
        f"per-invoke median ratio B/A = {r['median']:.3f} (target <= {target:.2f}: "
        f"{'PASS' if r['median'] <= target else 'FAIL'}); "
        f"incl. flush ratio = {r['total_incl_flush']:.3f}; "
        f"8-thread throughput B/A = {result['concurrent']['ratio']:.2f}x"
    )
    rec = result["recorded"]
    recline = (
        f"recorded by B: {rec['delivered']} events delivered, ledger holds {rec['ledger_events']} "
        f"events over {rec['ledger_threads']} threads; failures={rec['failures']}, "
        f"position conflicts (retried commits)={rec['position_conflicts']}"
    )
    if Console is not None:
        console = Console(width=None if sys.stdout.isatty() else 110)
        console.print(head)
        for title, rows, ratio_hdr in (
            ("Sequential (interleaved rounds)", seq_rows, "B/A"),
            ("Concurrent (8 OS threads, one compiled graph)", conc_rows, "B/A"),
        ):
            t = Table(title=title)
            t.add_column("")
            t.add_column("A: PostgresSaver", justify="right")
            t.add_column("B: ExternalCheckpointer", justify="right")
            t.add_column(ratio_hdr, justify="right")
            for row in rows:
                t.add_row(*row)
            console.print(t)
        console.print(recline)
        console.print(verdict, style="bold")
    else:  # pragma: no cover
        print(head)
        for row in seq_rows + conc_rows:
            print(f"{row[0]:<36}{row[1]:>18}{row[2]:>18}{row[3]:>10}")
        print(recline)
        print(verdict)


# -- profiling (setup B only; optional) --------------------------------------------------
def _profiled(prof: cProfile.Profile, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with ``prof`` enabled while it runs (re-entrant: ``_store`` recurses)."""
    depth = [0]

    def run(*args: Any, **kwargs: Any) -> Any:
        if depth[0] == 0:
            prof.enable()
        depth[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                prof.disable()

    return run


def profile_b(setup: Setup, ext: Any, n: int, out: Path) -> None:
    """cProfile B's app thread, the flusher's ``_store`` and the projector's ``project_thread``.

    The checkpoint's own event is built and sealed on the app thread (it commits in the
    saver's transaction); the flusher commits what did not ride a checkpoint; the
    projector feeds the workspace from the ledger. Each has its own profiler.
    """
    pipeline = ext.pipeline
    hooks = {"_store": cProfile.Profile(), "project_thread": cProfile.Profile()}
    for name, prof in hooks.items():
        # instance attributes shadow the methods; the package code is untouched
        setattr(pipeline, name, _profiled(prof, getattr(pipeline, name)))
    app_prof = cProfile.Profile()
    t0 = time.perf_counter()
    app_prof.enable()
    for _ in range(n):
        invoke_once(setup.graph, "profB")
    app_prof.disable()
    t1 = time.perf_counter()
    setup.flush()  # type: ignore[misc]
    t2 = time.perf_counter()
    for name in hooks:
        delattr(pipeline, name)
    out.mkdir(parents=True, exist_ok=True)
    files = {"app thread": app_prof, "flusher (_store)": hooks["_store"]}
    files["projector (project_thread)"] = hooks["project_thread"]
    names = ["app_thread.prof", "flusher_thread.prof", "projector_thread.prof"]
    for fname, prof in zip(names, files.values(), strict=True):
        prof.dump_stats(out / fname)
    print(
        f"\nprofile of B: {n} invokes {t1 - t0:.2f}s (profiled), flush {t2 - t1:.2f}s; "
        f"stats in {out}/{{{','.join(names)}}}"
    )
    for title, prof in files.items():
        print(f"\n== {title}: top by cumulative time ==")
        try:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        except TypeError:  # nothing was recorded on that thread
            print("(no calls)")


# -- main ------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=300, help="sequential invokes per setup")
    p.add_argument("--batch", type=int, default=25, help="invokes per setup per round")
    p.add_argument("--warmup", type=int, default=20, help="warm-up invokes per setup")
    p.add_argument("--threads", type=int, default=8, help="concurrent OS threads")
    p.add_argument("--m", type=int, default=25, help="invokes per concurrent thread")
    p.add_argument("--conc-rounds", type=int, default=3, help="concurrent rounds per setup")
    p.add_argument("--pool-size", type=int, default=8, help="max pool size of both savers")
    p.add_argument(
        "--dsn",
        default=os.environ.get("LGX_BENCH_DSN"),
        help="use this server instead of an embedded one (env LGX_BENCH_DSN)",
    )
    p.add_argument(
        "--files-dir",
        type=Path,
        metavar="DIR",
        help="parent of B's workspace and spool (default: the run's temp dir, "
        "next to the embedded server's data); e.g. /dev/shm to take the "
        "filesystem out of the picture",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=1000,
        help="embedded server's max_connections (its default 100 can run out: see README)",
    )
    p.add_argument("--json", type=Path, help="also write the numbers to this file")
    p.add_argument("--target", type=float, default=1.10, help="target median ratio B/A")
    p.add_argument("--check", action="store_true", help="exit 1 if the median ratio > target")
    p.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="after the benchmark, cProfile --profile-n invokes of B into DIR",
    )
    p.add_argument("--profile-n", type=int, default=200)
    args = p.parse_args(argv)
    rounds = max(1, -(-args.n // args.batch))

    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        tmpname = stack.enter_context(tempfile.TemporaryDirectory(prefix="lgx-bench-"))
        tmp = Path(tmpname)
        with postgres(args.dsn, tmp, max_connections=args.max_connections) as (dsn, kind):
            info = server_info(dsn)
            info["kind"] = kind
            files_ctx = (
                tempfile.TemporaryDirectory(prefix="lgx-bench-files-", dir=args.files_dir)
                if args.files_dir
                else contextlib.nullcontext(tmpname)
            )
            files = Path(stack.enter_context(files_ctx))
            a = make_baseline(dsn, args.pool_size)
            b, ext = make_external(dsn, files, args.pool_size)
            try:
                t_start = time.perf_counter()
                for s in (a, b):
                    run_batch(s, args.warmup, record=False)
                gc.collect()
                # sequential, interleaved: A,B / B,A / ...
                for r in range(rounds):
                    k = min(args.batch, args.n - r * args.batch)
                    for s in (a, b) if r % 2 == 0 else (b, a):
                        run_batch(s, k)
                # concurrent, interleaved
                for r in range(args.conc_rounds):
                    for s in (a, b) if r % 2 == 0 else (b, a):
                        run_concurrent(s, args.threads, args.m)
                elapsed = time.perf_counter() - t_start

                sa, sb = seq_stats(a), seq_stats(b)
                ca = conc_stats(a, args.threads, args.m)
                cb = conc_stats(b, args.threads, args.m)
                health = ext.health()
                counts = ledger_counts(dsn, ext.schema)
                result: dict[str, Any] = {
                    "benchmark": "checkpointer overhead, 10-node chain, durability=sync",
                    "args": {
                        k: (str(v) if isinstance(v, Path) else v)
                        for k, v in vars(args).items()
                        if k != "dsn"
                    },
                    "rounds": rounds,
                    "server": info,
                    "versions": versions(),
                    "machine": {
                        "cpus": os.cpu_count(),
                        "platform": platform.platform(),
                        "loadavg_before": load_before,
                        "loadavg_after": os.getloadavg(),
                    },
                    "workspace": str(files / "workspace"),
                    "git": git_info(),
                    "elapsed_s": elapsed,
                    "target": args.target,
                    "sequential": {
                        "A": sa,
                        "B": sb,
                        "ratio": {
                            "median": sb["median_ms"] / sa["median_ms"],
                            "p90": sb["p90_ms"] / sa["p90_ms"],
                            "mean": sb["mean_ms"] / sa["mean_ms"],
                            "total_incl_flush": sb["total_incl_flush_s"] / sa["total_incl_flush_s"],
                        },
                    },
                    "concurrent": {
                        "A": ca,
                        "B": cb,
                        "ratio": cb["invokes_per_s_median"] / ca["invokes_per_s_median"],
                        "speedup_A": ca["invokes_per_s_median"]
                        * sa["per_invoke_incl_flush_ms"]
                        / 1e3,
                        "speedup_B": cb["invokes_per_s_median"]
                        * sb["per_invoke_incl_flush_ms"]
                        / 1e3,
                    },
                    "recorded": {
                        "delivered": health.get("delivered"),
                        "failures": len(health.get("failures", [])),
                        "wal_files": health.get("wal_files"),
                        "position_conflicts": health.get("position_conflicts"),
                        "ledger_events": counts["events"],
                        "ledger_threads": counts["threads"],
                    },
                }
                render(result)
                if args.json:
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
                    print(f"numbers written to {args.json}")
                if args.profile:
                    profile_b(b, ext, args.profile_n, args.profile)
            finally:
                b.close()
                a.close()
    if args.check and result["sequential"]["ratio"]["median"] > args.target:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
