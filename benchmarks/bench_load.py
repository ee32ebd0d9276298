#!/usr/bin/env python
"""What recording costs under load: bare saver vs External (checkpointer only / full audit).

One run, one PostgreSQL server (embedded in a temp dir, or ``--dsn``), three setups:

* **a  bare** — the official ``PostgresSaver`` on a ``ConnectionPool`` (autocommit,
  ``prepare_threshold=0``, ``dict_row``: the connections External gives its own saver);
* **b  ckpt** — ``External(...).checkpointer`` with a plain config (no audit handler):
  checkpoint events commit in the saver's transaction, ``put_writes`` events wait in
  the per-thread buffer, the workspace is projected from the ledger in the background;
* **c  audit** — the same + ``ext.config(thread)`` (the ``AuditCallbackHandler``);
* **w  worker** — ``External(sealing="worker")``, checkpointer only: the app captures, an
  ``lgx worker`` process started by the benchmark seals and mirrors (its drain — sealed
  *and* mirrored — counts wherever a drain counts).

b and c run as ``External()`` does by default: the app captures, a helper process it starts
seals, mirrors and exports. b, c and w are separate ``External`` instances (own pool,
schema and workspace) so one's background work is never charged to another. Every graph
uses ``durability="sync"``.

Workloads:

1. **latency**: the 10-node chain, a new thread per invoke; ``--n`` invokes per setup in
   rounds of ``--batch`` whose order rotates (drift hits all setups); each round ends
   with an untimed flush so no backlog leaks into the next setup. Median and p90.
2. **burst**: ``--burst`` invokes back to back, then ``ext.flush()``; the wall time
   includes the flush (all recording work is charged). ``--reps`` repetitions, order
   rotated; the median is reported.
3. **long thread**: one chat thread, ``--turns`` turns; each turn sends a HumanMessage
   and each of the 10 nodes appends one AIMessage (``add_messages``), so the thread holds
   11 messages per turn (1 100 at turn 100). Turns run in blocks of ``--block`` with the
   setup order rotating per block; each block ends with a *timed* flush that counts in
   the thread's total. Per-turn latency at turns 1, 10, 25, 50, 75, 100 (median of the 5
   turns around each), late/early ratio (median of the last tenth of turns / the first
   tenth), whole-thread time including the drain.
4. **concurrent**: ``--threads`` OS threads, each on its own thread id, ``--m`` chain
   invokes each; invokes/s with the final flush in the wall time.
5. **async**: ``--tasks`` concurrent ``ainvoke`` of the chain on one event loop (the
   official *async* saver bare, and ``async with External()`` with the audit handler),
   ``--am`` each; invokes/s incl. the drain, and the event loop's lag (how late a 5 ms
   timer fires, p50/p99) while they run.

Also: peak RSS of the long-thread run, measured per setup in a fresh subprocess (VmHWM;
``--no-rss`` skips it), and the largest ``health()["buffered"]`` and
``projection_lag_commits`` a sampler thread saw (every 25 ms) while b or c ran.

Run from the repository root::

    .venv/bin/python benchmarks/bench_load.py --quick          # smoke test (~1 min)
    .venv/bin/python benchmarks/bench_load.py                  # defaults (several minutes)
    .venv/bin/python benchmarks/bench_load.py --n 60 --turns 40 --json load.json
    .venv/bin/python benchmarks/bench_load.py --dsn postgresql://user@host/db
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import gc
import json
import logging
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _common import (
    NODES,
    SAVER_CONN_KWARGS,
    bare_saver,
    build_graph,
    chain_builder,
    client_connections,
    git_info,
    invoke_chain,
    ledger_counts,
    pct,
    postgres,
    run_in_threads,
    server_info,
    versions,
)
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph.message import add_messages

from langgraph_external.options import Options

KEYS = ("a", "b", "c", "w")
LABELS = {"a": "a bare", "b": "b ckpt-only", "c": "c full audit", "w": "w worker"}
CURVE = (1, 10, 25, 50, 75, 100)


# -- the chat graph ----------------------------------------------------------------------
class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _reply(i: int) -> Callable[[ChatState], dict[str, Any]]:
    def run(state: ChatState) -> dict[str, Any]:
        n = len(state["messages"])
        text = f"node n{i} answering message {n}: the order ships on Tuesday, tracking follows."
        return {"messages": [AIMessage(text)]}

    run.__name__ = f"n{i}"
    return run


def build_chat(checkpointer: Any) -> Any:
    return chain_builder(ChatState, _reply).compile(checkpointer=checkpointer)


def chat_turn(graph: Any, config: Any, turn: int) -> int:
    msg = HumanMessage(f"turn {turn}: where is my order A-{turn:04d}? It was due last week.")
    out = graph.invoke({"messages": [msg]}, config, durability="sync")
    return len(out["messages"])


# -- setups --------------------------------------------------------------------------------
@dataclass
class Setup:
    key: str
    chain: Any
    chat: Any
    ext: Any = None
    close: Callable[[], None] = lambda: None
    counters: dict[str, int] = field(default_factory=lambda: {"puts": 0, "commits": 0})
    mirrored: Callable[[], bool] | None = None  # w: the worker's mirror caught up

    def config(self, thread_id: str) -> Any:
        if self.key == "c":
            return self.ext.config(thread_id)
        return {"configurable": {"thread_id": thread_id}}

    def flush(self) -> float:
        """Drain the recording; returns the seconds it took (0 for the bare saver)."""
        if self.ext is None:
            return 0.0
        t0 = time.perf_counter()
        if not self.ext.flush(timeout=300):
            raise RuntimeError(f"setup {self.key}: ext.flush() timed out")
        while self.mirrored is not None and not self.mirrored():
            if time.perf_counter() - t0 > 300:
                raise RuntimeError(f"setup {self.key}: the worker's mirror did not catch up")
            time.sleep(0.005)
        return time.perf_counter() - t0


def _count_calls(obj: Any, name: str, counters: dict[str, int], key: str) -> None:
    """Shadow ``obj.name`` with a counting wrapper (instance attribute; no library edit)."""
    orig = getattr(obj, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        counters[key] += 1
        return orig(*args, **kwargs)

    setattr(obj, name, wrapped)


def make_setup(
    key: str, dsn: str, files: Path, pool_size: int, schema_prefix: str = "lgx_bench"
) -> Setup:
    if key == "a":
        saver, pool = bare_saver(dsn, pool_size)
        return Setup(key, build_graph(saver), build_chat(saver), close=pool.close)
    from langgraph_external import External

    worker = None
    if key == "w":
        worker = start_worker(dsn, files / f"workspace-{key}", f"{schema_prefix}_{key}")
    ext = External(
        dsn=dsn,
        workspace=None if key == "w" else files / f"workspace-{key}",
        sealing="worker" if key == "w" else None,
        options=Options(
            spool_dir=files / f"spool-{key}", schema=f"{schema_prefix}_{key}", pool_size=pool_size
        ),
    ).setup()
    setup = Setup(key, build_graph(ext.checkpointer), build_chat(ext.checkpointer), ext)

    def close() -> None:
        ext.close()
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)

    setup.close = close
    if worker is not None:
        setup.mirrored = mirror_caught_up(dsn, f"{schema_prefix}_{key}", files / f"workspace-{key}")
    # a put whose ledger position moved is retried whole (inner.put again); count them
    _count_calls(ext.checkpointer, "put", setup.counters, "puts")
    _count_calls(ext.pipeline, "open_commit", setup.counters, "commits")
    return setup


def start_worker(dsn: str, ws: Path, schema: str) -> subprocess.Popen[bytes]:
    """An ``lgx worker`` process (sealing, mirroring ``ws``) for setup w."""
    code = "from langgraph_external.cli import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", code, "--dsn", dsn, "--schema", schema, "-w", str(ws), "worker"],
        stderr=subprocess.DEVNULL,
    )


def mirror_caught_up(dsn: str, schema: str, ws: Path) -> Callable[[], bool]:
    """Whether the worker's workspace mirror holds every sealed event (setup w's drain)."""
    from langgraph_external.ledger.postgres import PostgresLedger
    from langgraph_external.workspace.files import Workspace
    from langgraph_external.workspace.projection import WorkspaceProjection

    store = PostgresLedger(dsn, schema)
    name = WorkspaceProjection(Workspace(ws)).name
    return lambda: not store.lagging(name, limit=1)


class Sampler:
    """Polls the active External's ``health()``; keeps the largest backlog per workload."""

    def __init__(self, interval: float = 0.025) -> None:
        self.interval = interval
        self.active: tuple[Setup, str] | None = None
        self.max: dict[tuple[str, str], dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def watch(self, setup: Setup, workload: str) -> Iterator[None]:
        self.active = (setup, workload) if setup.ext is not None else None
        before = setup.counters["commits"] - setup.counters["puts"]
        try:
            yield
        finally:
            self._sample()
            self.active = None
            if setup.ext is not None:
                slot = self.max.setdefault((setup.key, workload), {"buffered": 0, "lag": 0})
                after = setup.counters["commits"] - setup.counters["puts"]
                slot["put_retries"] = slot.get("put_retries", 0) + after - before

    def _sample(self) -> None:
        active = self.active
        if active is None:
            return
        setup, workload = active
        h = setup.ext.health()
        slot = self.max.setdefault((setup.key, workload), {"buffered": 0, "lag": 0})
        slot["buffered"] = max(slot["buffered"], int(h.get("buffered", 0)))
        slot["lag"] = max(slot["lag"], int(h.get("projection_lag_commits", 0)))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):
                self._sample()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def rotated(r: int) -> tuple[str, ...]:
    i = r % len(KEYS)
    return KEYS[i:] + KEYS[:i]


# -- workloads -----------------------------------------------------------------------------
def w_latency(setups: dict[str, Setup], sampler: Sampler, n: int, batch: int) -> dict[str, Any]:
    lat: dict[str, list[float]] = {k: [] for k in KEYS}
    r = 0
    while len(lat["a"]) < n:
        k_n = min(batch, n - len(lat["a"]))
        for key in rotated(r):
            s = setups[key]
            with sampler.watch(s, "latency"):
                for _ in range(k_n):
                    cfg = s.config(f"lat-{key}-{uuid.uuid4().hex}")
                    t0 = time.perf_counter()
                    invoke_chain(s.chain, cfg)
                    lat[key].append((time.perf_counter() - t0) * 1e3)
                s.flush()  # untimed: keep this round's backlog out of the next setup's
        r += 1
    return {
        k: {"invokes": len(v), "median_ms": statistics.median(v), "p90_ms": pct(v, 0.9)}
        for k, v in lat.items()
    }


def w_burst(setups: dict[str, Setup], sampler: Sampler, burst: int, reps: int) -> dict[str, Any]:
    total: dict[str, list[float]] = {k: [] for k in KEYS}
    drain: dict[str, list[float]] = {k: [] for k in KEYS}
    for r in range(reps):
        for key in rotated(r):
            s = setups[key]
            gc.collect()
            with sampler.watch(s, "burst"):
                t0 = time.perf_counter()
                for _ in range(burst):
                    invoke_chain(s.chain, s.config(f"burst-{key}-{uuid.uuid4().hex}"))
                d = s.flush()
                total[key].append(time.perf_counter() - t0)
                drain[key].append(d)
    return {
        k: {
            "invokes": burst,
            "total_s": statistics.median(total[k]),
            "total_s_reps": total[k],
            "drain_s": statistics.median(drain[k]),
        }
        for k in KEYS
    }


def curve_points(turns: int) -> list[int]:
    pts = [t for t in CURVE if t <= turns]
    if turns not in pts:
        pts.append(turns)
    return pts


def around(lat: list[float], turn: int, half: int = 2) -> float:
    """Median of the turns ``turn-half .. turn+half`` (1-based, clipped)."""
    lo, hi = max(0, turn - 1 - half), min(len(lat), turn + half)
    return statistics.median(lat[lo:hi])


def long_thread_stats(lat: list[float], flushes: float) -> dict[str, Any]:
    tenth = max(1, len(lat) // 10)
    early, late = statistics.median(lat[:tenth]), statistics.median(lat[-tenth:])
    return {
        "turn_ms": lat,
        "curve_ms": {t: around(lat, t) for t in curve_points(len(lat))},
        "early_ms": early,
        "late_ms": late,
        "late_over_early": late / early,
        "total_s": sum(lat) / 1e3 + flushes,
        "drain_s": flushes,
    }


def w_long_thread(
    setups: dict[str, Setup], sampler: Sampler, turns: int, block: int
) -> dict[str, Any]:
    tids = {k: f"chat-{k}-{uuid.uuid4().hex}" for k in KEYS}
    lat: dict[str, list[float]] = {k: [] for k in KEYS}
    flushes = dict.fromkeys(KEYS, 0.0)
    sizes = dict.fromkeys(KEYS, 0)
    for r, start in enumerate(range(0, turns, block)):
        for key in rotated(r):
            s = setups[key]
            with sampler.watch(s, "long_thread"):
                for turn in range(start + 1, min(turns, start + block) + 1):
                    cfg = s.config(tids[key])
                    t0 = time.perf_counter()
                    sizes[key] = chat_turn(s.chat, cfg, turn)
                    lat[key].append((time.perf_counter() - t0) * 1e3)
                flushes[key] += s.flush()  # timed: the thread's total includes the drain
    out = {k: long_thread_stats(lat[k], flushes[k]) for k in KEYS}
    for k in KEYS:
        out[k]["messages"] = sizes[k]
        if sizes[k] != (NODES + 1) * turns:  # pragma: no cover - sanity
            raise RuntimeError(f"setup {k}: {sizes[k]} messages after {turns} turns")
    return out


def run_concurrent(s: Setup, sampler: Sampler, threads: int, m: int, tag: str) -> float:
    """``threads`` OS threads, each on its own thread id; wall seconds incl. the drain."""
    tids = [f"conc-{s.key}-{tag}-{i}-{uuid.uuid4().hex}" for i in range(threads)]

    def body(i: int) -> None:
        for _ in range(m):
            invoke_chain(s.chain, s.config(tids[i]))

    with sampler.watch(s, "concurrent"):
        wall, _ = run_in_threads(threads, body, s.flush)
    return wall


def w_concurrent(
    setups: dict[str, Setup], sampler: Sampler, threads: int, m: int, rounds: int
) -> dict[str, Any]:
    rates: dict[str, list[float]] = {k: [] for k in KEYS}
    for r in range(rounds):
        for key in rotated(r):
            wall = run_concurrent(setups[key], sampler, threads, m, str(r))
            rates[key].append(threads * m / wall)
    return {
        k: {"threads": threads, "invokes_per_thread": m, "per_s": statistics.median(v), "rounds": v}
        for k, v in rates.items()
    }


def w_async(
    dsn: str, files: Path, tasks: int, m: int, rounds: int, pool_size: int
) -> dict[str, Any]:
    """Workload 5: ``tasks`` concurrent ``ainvoke`` on one loop, bare async saver vs
    ``async with External()`` (full audit); throughput incl. drain and the loop's lag."""
    import asyncio

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg_pool import AsyncConnectionPool

    from langgraph_external import External

    async def ticker(stop: asyncio.Event, lags: list[float]) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            t0 = loop.time()
            await asyncio.sleep(0.005)
            lags.append((loop.time() - t0 - 0.005) * 1e3)

    async def measure(graph: Any, config: Callable[[str], Any], flush: Any, tag: str) -> Any:
        lags: list[float] = []
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop, lags))

        async def one(i: int) -> None:
            for j in range(m):
                out = await graph.ainvoke(
                    {"counter": 0, "items": []}, config(f"{tag}-{i}-{j}"), durability="sync"
                )
                assert out["counter"] == NODES

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(tasks)))
        await flush()
        wall = time.perf_counter() - t0
        stop.set()
        await tick
        return tasks * m / wall, lags

    async def main() -> dict[str, Any]:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn, kwargs=dict(SAVER_CONN_KWARGS), min_size=1, max_size=pool_size, open=False
        )
        await pool.open()
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        out: dict[str, Any] = {"tasks": tasks, "invokes_per_task": m}
        rates: dict[str, list[float]] = {"a": [], "c": []}
        lags: dict[str, list[float]] = {"a": [], "c": []}
        try:
            async with External(
                dsn=dsn,
                workspace=files / "workspace-async",
                options=Options(
                    spool_dir=files / "spool-async", schema="lgx_bench_async", pool_size=pool_size
                ),
            ) as ext:
                graphs = {"a": build_graph(saver), "c": build_graph(ext.checkpointer)}
                configs: dict[str, Callable[[str], Any]] = {
                    "a": lambda t: {"configurable": {"thread_id": f"{t}-{uuid.uuid4().hex}"}},
                    "c": lambda t: ext.config(f"{t}-{uuid.uuid4().hex}"),
                }

                async def no_flush() -> None:
                    return None

                async def ext_flush() -> None:
                    assert await asyncio.to_thread(ext.flush, 300)

                flushes = {"a": no_flush, "c": ext_flush}
                for key in ("a", "c"):  # warm up
                    await measure(graphs[key], configs[key], flushes[key], f"warm-{key}")
                for r in range(rounds):
                    for key in ("a", "c") if r % 2 == 0 else ("c", "a"):
                        rate, lag = await measure(
                            graphs[key], configs[key], flushes[key], f"async-{key}-{r}"
                        )
                        rates[key].append(rate)
                        lags[key].extend(lag)
        finally:
            await pool.close()
        for key in ("a", "c"):
            out[key] = {
                "per_s": statistics.median(rates[key]),
                "rounds": rates[key],
                "lag_p50_ms": pct(lags[key], 0.5),
                "lag_p99_ms": pct(lags[key], 0.99),
            }
        return out

    return asyncio.run(main())


def open_ledger_connections(ext: Any) -> int | None:
    """Connections the ledger holds open (private attribute: one per thread that used it)."""
    conns = getattr(getattr(ext.pipeline, "ledger", None), "_all", None)
    return None if conns is None else sum(1 for c in conns if not c.closed)


# -- memory, in a fresh process per setup -------------------------------------------------
def _status_kb(field_name: str, pid: int | None = None) -> int | None:
    path = f"/proc/{pid}/status" if pid else "/proc/self/status"
    with contextlib.suppress(OSError), open(path) as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return None


def rss_child(key: str, dsn: str, turns: int, pool_size: int) -> dict[str, Any]:
    """Run only ``key``'s long thread in this (fresh) process; report its memory."""
    with tempfile.TemporaryDirectory(prefix="lgx-bench-rss-") as tmp:
        # its own ledger schema: a fresh process on the main run's schema starts much larger
        s = make_setup(key, dsn, Path(tmp), pool_size, schema_prefix="lgx_rss")
        try:
            warm = f"rsswarm-{key}-{uuid.uuid4().hex}"
            for t in range(1, 3):
                chat_turn(s.chat, s.config(warm), t)
            s.flush()
            gc.collect()
            before = _status_kb("VmRSS")
            tid = f"rss-{key}-{uuid.uuid4().hex}"
            t0 = time.perf_counter()
            for t in range(1, turns + 1):
                chat_turn(s.chat, s.config(tid), t)
            s.flush()
            elapsed = time.perf_counter() - t0
            hwm = _status_kb("VmHWM")
            helper = getattr(s.ext.pipeline.sealing, "pid", None) if s.ext is not None else None
            helper_hwm = _status_kb("VmHWM", helper) if helper else None
            if hwm is None:  # not Linux: ru_maxrss is in KiB on Linux, bytes on macOS
                scale = 1024 if sys.platform == "darwin" else 1
                hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // scale
            return {
                "rss_before_mb": (before or 0) / 1024,
                "peak_mb": hwm / 1024,
                "rss_after_mb": (_status_kb("VmRSS") or 0) / 1024,
                "growth_mb": (hwm - (before or 0)) / 1024,
                "helper_peak_mb": helper_hwm / 1024 if helper_hwm else None,
                "elapsed_s": elapsed,
            }
        finally:
            s.close()


def measure_rss(dsn: str, turns: int, pool_size: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in KEYS:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--rss-child", key]
        cmd += ["--dsn", dsn, "--turns", str(turns), "--pool-size", str(pool_size)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            out[key] = {"error": proc.stderr or proc.stdout}
        else:
            out[key] = json.loads(lines[-1])
    return out


# -- output ----------------------------------------------------------------------------------
class _CountAborts(logging.Filter):
    """psycopg logs 'error ignored terminating <pipeline>: …' each time External's put fails
    inside the saver's pipeline (then retried); counted here instead of cluttering stderr."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("error ignored terminating"):
            self.count += 1
            return False
        return True


def render(res: dict[str, Any]) -> None:
    def row(label: str, vals: dict[str, float | None], fmt: str, ratio: bool = True) -> None:
        cells = [("-" if vals.get(k) is None else format(vals[k], fmt)) for k in KEYS]
        base = vals.get("a")
        rat = []
        for k in ("b", "c", "w"):
            v = vals.get(k)
            ok = ratio and base and v is not None
            rat.append(f"{v / base:.2f}" if ok else "")  # type: ignore[operator]
        print(f"{label:<38}" + "".join(f"{c:>13}" for c in cells) + "".join(f"{x:>7}" for x in rat))

    srv = res["server"]
    print(
        f"{NODES}-node graphs, durability='sync'; {srv['kind']} PostgreSQL "
        f"{srv['server_version']} (fsync={srv['fsync']}); cpus={os.cpu_count()}; "
        f"loadavg {res['machine']['loadavg_before'][0]:.2f} -> "
        f"{res['machine']['loadavg_after'][0]:.2f}; {res['elapsed_s']:.0f} s"
    )
    print(
        f"{'':<38}" + "".join(f"{LABELS[k]:>13}" for k in KEYS) + f"{'b/a':>7}{'c/a':>7}{'w/a':>7}"
    )
    lat, bur, lt, co = res["latency"], res["burst"], res["long_thread"], res["concurrent"]
    n = lat["a"]["invokes"]
    print(f"1. chain, new thread per invoke ({n} invokes each, interleaved)")
    row("   median ms", {k: lat[k]["median_ms"] for k in KEYS}, ".2f")
    row("   p90 ms", {k: lat[k]["p90_ms"] for k in KEYS}, ".2f")
    print(
        f"2. {bur['a']['invokes']} invokes back to back + drain (median of {res['args']['reps']})"
    )
    row("   total s incl. drain", {k: bur[k]["total_s"] for k in KEYS}, ".2f")
    row("   of which drain s", {k: bur[k]["drain_s"] for k in KEYS}, ".3f", ratio=False)
    turns = len(lt["a"]["turn_ms"])
    print(f"3. one chat thread, {turns} turns ({lt['a']['messages']} messages at the end)")
    for t in curve_points(turns):
        row(f"   turn {t} ms (median of +-2)", {k: lt[k]["curve_ms"][t] for k in KEYS}, ".1f")
    print("   the recording's own cost per turn (b-a, c-a, w-a ms; flat = O(change)):")
    for t in curve_points(turns):
        a = lt["a"]["curve_ms"][t]
        own = {k: lt[k]["curve_ms"][t] - a for k in ("b", "c", "w")}
        print(
            f"{'     at turn ' + str(t):<38}{'':>13}"
            + "".join(f"{own[k]:>13.1f}" for k in ("b", "c", "w"))
        )
    tenth = max(1, turns // 10)
    row(f"   late ms (last {tenth} turns, median)", {k: lt[k]["late_ms"] for k in KEYS}, ".1f")
    row("   late / early", {k: lt[k]["late_over_early"] for k in KEYS}, ".2f", ratio=False)
    row("   whole thread s incl. drain", {k: lt[k]["total_s"] for k in KEYS}, ".2f")
    row("   of which drain s", {k: lt[k]["drain_s"] for k in KEYS}, ".3f", ratio=False)
    c0 = co["a"]
    print(f"4. {c0['threads']} OS threads x {c0['invokes_per_thread']} invokes, own thread id each")
    row("   invokes/s incl. drain", {k: co[k]["per_s"] for k in KEYS}, ".1f")
    asy = res.get("async")
    if asy:
        print(
            f"5. {asy['tasks']} concurrent ainvoke x {asy['invokes_per_task']}, one event loop "
            "(a: official async saver, c: async External, full audit)"
        )
        for label, field_name in (
            ("   invokes/s incl. drain", "per_s"),
            ("   loop lag p50 ms (5 ms timer)", "lag_p50_ms"),
            ("   loop lag p99 ms (5 ms timer)", "lag_p99_ms"),
        ):
            row(label, {k: asy[k][field_name] for k in ("a", "c")}, ".2f")
    rss = res.get("rss")
    if rss:
        print(f"   memory of the {turns}-turn thread alone, fresh process per setup")
        row("   peak RSS MB (VmHWM), the app", {k: rss[k].get("peak_mb") for k in KEYS}, ".0f")
        helper = {k: rss[k].get("helper_peak_mb") for k in KEYS}
        row("   peak RSS MB of its sealing helper", helper, ".0f", ratio=False)
        grow = {k: rss[k].get("growth_mb") for k in KEYS}
        row("   growth over the run MB", grow, ".1f", ratio=False)
    rec = res["recording"]
    print("recording (b, c, w):")
    for k in ("b", "c", "w"):
        r = rec[k]
        mx = "; ".join(
            f"{w} {v['buffered']}/{v['lag']}/{v.get('put_retries', 0)}"
            for w, v in r["max_seen"].items()
        )
        print(
            f"  {k}: {r['delivered']} events delivered, {r['ledger_events']} in the ledger; "
            f"failures {r['failures']}; puts retried (ledger position moved) "
            f"{r['put_retries']}; ledger connections open {r['ledger_connections_open']}"
            f"\n     per workload, max buffered / max projection lag (commits) "
            f"/ puts retried: {mx}"
        )
    print(
        f"  psycopg 'error ignored terminating' warnings suppressed: {res['pipeline_aborted_logs']}"
    )
    conns = ", ".join(f"{w} {n}" for w, n in res["server_connections_after"].items())
    srv_max = res["server"].get("max_connections")
    print(f"  server client connections after each workload: {conns} (max_connections {srv_max})")
    if rss:
        for k in KEYS:
            if "error" in rss[k]:
                print(f"  RSS child {k} failed: {rss[k]['error'][-300:]}")


def progress(text: str) -> None:
    print(f"[bench_load {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=150, help="workload 1: invokes per setup")
    p.add_argument("--batch", type=int, default=25, help="workload 1: invokes per round")
    p.add_argument("--burst", type=int, default=120, help="workload 2: invokes back to back")
    p.add_argument("--reps", type=int, default=2, help="workload 2: repetitions")
    p.add_argument("--turns", type=int, default=100, help="workload 3: turns of the thread")
    p.add_argument("--block", type=int, default=10, help="workload 3: turns per block")
    p.add_argument("--threads", type=int, default=8, help="workload 4: OS threads")
    p.add_argument("--m", type=int, default=15, help="workload 4: invokes per OS thread")
    p.add_argument("--conc-rounds", type=int, default=2, help="workloads 4, 5: rounds")
    p.add_argument("--tasks", type=int, default=16, help="workload 5: concurrent ainvoke")
    p.add_argument("--am", type=int, default=8, help="workload 5: invokes per task")
    p.add_argument("--warmup", type=int, default=10, help="warm-up invokes per setup")
    p.add_argument("--pool-size", type=int, default=8, help="max pool size of every saver")
    p.add_argument(
        "--max-connections",
        type=int,
        default=1000,
        help="embedded server's max_connections (headroom for every setup's pools)",
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    p.add_argument("--no-rss", action="store_true", help="skip the memory subprocesses")
    p.add_argument(
        "--dsn",
        default=os.environ.get("LGX_BENCH_DSN"),
        help="use this server instead of an embedded one (env LGX_BENCH_DSN)",
    )
    p.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="write the results (- = stdout)"
    )
    p.add_argument("--rss-child", choices=KEYS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rss_child:
        # never hang silently: dump every thread's stack to stderr and exit instead
        faulthandler.dump_traceback_later(
            float(os.environ.get("LGX_BENCH_CHILD_TIMEOUT", 500)), exit=True
        )
        print(json.dumps(rss_child(args.rss_child, args.dsn, args.turns, args.pool_size)))
        return 0
    if args.quick:
        args.n, args.batch, args.burst, args.reps = 12, 4, 15, 1
        args.turns, args.block, args.m, args.conc_rounds, args.warmup = 12, 4, 3, 1, 3
        args.tasks, args.am = 4, 2

    aborts = _CountAborts()
    logging.getLogger("psycopg").addFilter(aborts)
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        # a server still writing its last files while the directory goes must not cost
        # the results (they are printed after this block)
        scratch = tempfile.TemporaryDirectory(prefix="lgx-bench-load-", ignore_cleanup_errors=True)
        tmp = Path(stack.enter_context(scratch))
        pg = postgres(args.dsn, tmp, max_connections=args.max_connections)
        dsn, kind = stack.enter_context(pg)
        info = {**server_info(dsn), "kind": kind}
        setups: dict[str, Setup] = {}
        for key in KEYS:
            setups[key] = make_setup(key, dsn, tmp, args.pool_size)
            stack.callback(setups[key].close)
        sampler = Sampler()
        stack.callback(sampler.close)
        t_start = time.perf_counter()
        for s in setups.values():  # warm up both graphs of every setup
            for _ in range(args.warmup):
                invoke_chain(s.chain, s.config(f"warm-{s.key}-{uuid.uuid4().hex}"))
            warm = s.config(f"warmchat-{s.key}-{uuid.uuid4().hex}")
            for t in range(1, 3):
                chat_turn(s.chat, warm, t)
            s.flush()
        gc.collect()
        progress(f"setups ready and warm in {time.perf_counter() - t_start:.1f} s")
        res: dict[str, Any] = {"benchmark": "load: bare saver vs External ckpt-only vs audit"}
        conns = {"start": client_connections(dsn)}
        workloads: dict[str, Callable[[], dict[str, Any]]] = {
            "latency": lambda: w_latency(setups, sampler, args.n, args.batch),
            "burst": lambda: w_burst(setups, sampler, args.burst, args.reps),
            "long_thread": lambda: w_long_thread(setups, sampler, args.turns, args.block),
            "concurrent": lambda: w_concurrent(
                setups, sampler, args.threads, args.m, args.conc_rounds
            ),
            "async": lambda: w_async(
                dsn, tmp, args.tasks, args.am, args.conc_rounds, args.pool_size
            ),
        }
        for name, run in workloads.items():
            t0 = time.perf_counter()
            res[name] = run()
            conns[name] = client_connections(dsn)
            progress(f"{name} done in {time.perf_counter() - t0:.1f} s")
        res["elapsed_s"] = time.perf_counter() - t_start
        res["server_connections_after"] = conns
        rec: dict[str, Any] = {}
        for k in ("b", "c", "w"):
            h = setups[k].ext.health()
            cnt = setups[k].counters
            rec[k] = {
                "delivered": h.get("delivered"),
                "ledger_events": ledger_counts(dsn, setups[k].ext.schema)["events"],
                "failures": len(h.get("failures", [])),
                "put_retries": cnt["commits"] - cnt["puts"],
                "position_conflicts_health": h.get("position_conflicts"),
                "max_seen": {w: v for (key, w), v in sampler.max.items() if key == k},
                "ledger_connections_open": open_ledger_connections(setups[k].ext),
            }
        res["recording"] = rec
        res["pipeline_aborted_logs"] = aborts.count
        if not args.no_rss:
            t0 = time.perf_counter()
            res["rss"] = measure_rss(dsn, args.turns, args.pool_size)
            progress(f"memory subprocesses done in {time.perf_counter() - t0:.1f} s")
        res.update(
            args={k: v for k, v in vars(args).items() if k not in ("dsn", "rss_child")},
            server=info,
            versions=versions(),
            git=git_info(),
            machine={
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "loadavg_before": load_before,
                "loadavg_after": os.getloadavg(),
            },
        )
    # with --json - the table goes to stderr so stdout is only JSON
    with contextlib.redirect_stdout(sys.stderr if args.json == "-" else sys.stdout):
        render(res)
    if args.json:
        text = json.dumps(res, indent=2, default=str) + "\n"
        if args.json == "-":
            print(text, end="")
        else:
            Path(args.json).write_text(text)
            print(f"numbers written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
