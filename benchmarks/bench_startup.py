"""How long ``External()`` takes to start on the embedded default, in a new process.

The embedded PostgreSQL server stays up between processes: the first process starts it
(and, on a fresh workspace, creates the database), later ones reuse it. This script runs
the same small app several times, each in a new Python process on the same (fresh)
workspace, with no DSN, and prints for each process:

* ``setup``: ``External(workspace=...).setup()`` — server start or reuse, migrations
  check, pools, pipeline (the goal for a second and later process: at most 0.5 s);
* ``run``: one invoke of a 3-node graph;
* ``close``: ``close()`` (flush; the server is left running);
* ``imports``: importing ``langgraph_external`` and LangGraph (not part of the start);
* ``process``: the whole process, as the shell sees it.

Then the same for ``lgx threads`` (a new process each time), and ``lgx db stop`` stops
the server at the end. Numbers are wall-clock seconds on this machine; compare runs of
one invocation only.

Usage::

    python benchmarks/bench_startup.py                  # 3 app processes, 3 lgx processes
    python benchmarks/bench_startup.py --processes 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

APP = r"""
import json, os, sys, time
t0 = time.perf_counter()
import operator
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph_external import External
t1 = time.perf_counter()

class S(TypedDict):
    n: int
    items: Annotated[list[str], operator.add]

g = StateGraph(S)
for i in range(3):
    g.add_node(f"n{i}", lambda s, i=i: {"n": s["n"] + 1, "items": [f"n{i}"]})
g.add_edge(START, "n0")
g.add_edge("n0", "n1")
g.add_edge("n1", "n2")
g.add_edge("n2", END)
ext = External(workspace=sys.argv[1])
t2 = time.perf_counter()
ext.setup()
t3 = time.perf_counter()
graph = g.compile(checkpointer=ext.checkpointer)
graph.invoke({"n": 0, "items": []}, ext.config(sys.argv[2]))
t4 = time.perf_counter()
ext.close()
t5 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "setup": t3 - t2, "run": t4 - t3, "close": t5 - t4}))
"""


def _lgx() -> str:
    return shutil.which("lgx") or str(Path(sys.executable).with_name("lgx"))


def _server_running(ws: Path) -> bool:
    done = subprocess.run(
        [_lgx(), "--workspace", str(ws), "db", "status", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    return bool(json.loads(done.stdout or "{}").get("running"))


def run_app(ws: Path, thread: str) -> dict[str, Any]:
    env = {**os.environ, "MEM0_TELEMETRY": "False", "PYTHONWARNINGS": "ignore"}
    env.pop("LGX_DSN", None)
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", APP, str(ws), thread],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"the app process failed:\n{done.stderr}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    out["process"] = elapsed
    out["server_after"] = _server_running(ws)
    return out


def run_lgx(ws: Path) -> float:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("LGX_DSN", None)
    t = time.perf_counter()
    subprocess.run(
        [_lgx(), "--workspace", str(ws), "threads"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=3, help="app processes (and lgx ones)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lgx-bench-startup-"))
    ws = tmp / "ws"
    results: dict[str, Any] = {"apps": [], "lgx_threads": []}
    try:
        for i in range(args.processes):
            results["apps"].append(run_app(ws, f"t-{i}"))
        for _ in range(args.processes):
            results["lgx_threads"].append(run_lgx(ws))
    finally:
        stop = subprocess.run(
            [_lgx(), "--workspace", str(ws), "db", "stop", "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        results["db_stop"] = json.loads(stop.stdout or "{}").get("stopped")
        results["server_after_stop"] = _server_running(ws)
        shutil.rmtree(tmp, ignore_errors=True)
    later = [a["setup"] for a in results["apps"][1:]]
    results["second_and_later_setup_median"] = statistics.median(later) if later else None
    if args.json:
        print(json.dumps(results))
        return
    print("External(workspace=...).setup() on the embedded default, one new process each:")
    print(
        f"{'process':>8} {'setup s':>8} {'run s':>7} {'close s':>8} {'imports s':>10}"
        f" {'process s':>10}  server after exit"
    )
    for i, a in enumerate(results["apps"]):
        what = "first (starts the server)" if i == 0 else "reuses the server"
        print(
            f"{i + 1:>8} {a['setup']:>8.3f} {a['run']:>7.3f} {a['close']:>8.3f}"
            f" {a['imports']:>10.3f} {a['process']:>10.3f}  "
            f"{'running' if a['server_after'] else 'stopped'} ({what})"
        )
    print(
        "lgx threads, one new process each (s): "
        + ", ".join(f"{t:.3f}" for t in results["lgx_threads"])
    )
    med = results["second_and_later_setup_median"]
    if med is not None:
        verdict = "meets" if med <= 0.5 else "MISSES"
        print(f"second and later setup, median: {med:.3f} s ({verdict} the 0.5 s goal)")
    print(
        f"lgx db stop: {'stopped' if results['db_stop'] else 'nothing to stop'}; "
        f"server afterwards: {'RUNNING' if results['server_after_stop'] else 'none'}"
    )


if __name__ == "__main__":
    main()
