"""Shared pieces of the benchmarks: the 10-node chain graph, the bare official saver,
the Postgres server, percentiles, and what a result records about its environment.

Scripts under ``benchmarks/`` import it as ``_common`` (their own directory is first on
``sys.path`` when run as ``python benchmarks/<script>.py``).
"""

from __future__ import annotations

import contextlib
import operator
import platform
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

NODES = 10
# what External gives its own saver's connections (langgraph_external/external.py)
SAVER_CONN_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


# -- the chain graph -------------------------------------------------------------------
class ChainState(TypedDict):
    counter: int
    items: Annotated[list[str], operator.add]


def _node(i: int) -> Callable[[ChainState], dict[str, Any]]:
    def run(state: ChainState) -> dict[str, Any]:
        return {"counter": state["counter"] + 1, "items": [f"n{i}"]}

    run.__name__ = f"n{i}"
    return run


def chain_builder(state: Any, node: Callable[[int], Any], nodes: int = NODES) -> StateGraph:
    """``n0 → … → n{nodes-1}`` over ``state``; ``node(i)`` makes the i-th node."""
    builder = StateGraph(state)
    for i in range(nodes):
        builder.add_node(f"n{i}", node(i))
    builder.add_edge(START, "n0")
    for i in range(nodes - 1):
        builder.add_edge(f"n{i}", f"n{i + 1}")
    builder.add_edge(f"n{nodes - 1}", END)
    return builder


def build_graph(checkpointer: Any) -> Any:
    """The 10-node chain: a counter and a small list with an ``operator.add`` reducer."""
    return chain_builder(ChainState, _node).compile(checkpointer=checkpointer)


def invoke_chain(graph: Any, config: Any) -> None:
    """One ``durability="sync"`` invoke of the chain on ``config``'s thread."""
    out = graph.invoke({"counter": 0, "items": []}, config, durability="sync")
    if out["counter"] != NODES:  # pragma: no cover - sanity
        raise RuntimeError(f"unexpected graph output: {out!r}")


def record_chain(dsn: str, workspace: Path, n: int) -> None:
    """Record ``n`` invokes of the chain with the audit callbacks, a new thread each
    (``t0`` … ``t<n-1>``), sealed in threads of this process, and wait until all is sealed."""
    from langgraph_external import External

    with External(dsn=dsn, workspace=workspace, sealing="thread") as ext:
        graph = build_graph(ext.checkpointer)
        for i in range(n):
            invoke_chain(graph, ext.config(f"t{i}"))
        assert ext.flush()


def invoke_once(graph: Any, prefix: str) -> None:
    """One invoke of the chain on a new thread."""
    invoke_chain(graph, {"configurable": {"thread_id": f"{prefix}-{uuid.uuid4().hex}"}})


# -- savers and server -----------------------------------------------------------------
def bare_saver(dsn: str, pool_size: int) -> tuple[Any, ConnectionPool[Any]]:
    """The official ``PostgresSaver`` on its own pool, connections set up as External's."""
    from langgraph.checkpoint.postgres import PostgresSaver

    pool: ConnectionPool[Any] = ConnectionPool(
        dsn, kwargs=dict(SAVER_CONN_KWARGS), min_size=1, max_size=pool_size, open=True
    )
    saver = PostgresSaver(pool)
    saver.setup()
    return saver, pool


@contextlib.contextmanager
def postgres(
    dsn: str | None, tmp: Path, *, max_connections: int | None = None
) -> Iterator[tuple[str, str]]:
    """``dsn`` if given, else an embedded PostgreSQL in ``tmp/pgdata``: ``(dsn, kind)``.

    ``max_connections`` (embedded server only) raises the server's limit (default 100)
    with ``ALTER SYSTEM`` and a ``pg_ctl restart``.
    """
    if dsn:
        yield dsn, "external (--dsn / LGX_BENCH_DSN)"
        return
    from langgraph_external.upstream import embedded_postgres

    server = embedded_postgres.get_server(tmp / "pgdata", stop_on_last_release=True)
    try:
        uri = server.get_uri()
        if max_connections:
            with psycopg.connect(uri, autocommit=True) as conn:
                conn.execute(f"alter system set max_connections = {int(max_connections)}")
            embedded_postgres.pg_ctl_restart(server, timeout=60)
        yield uri, "embedded-postgres"
    finally:
        server.cleanup()


def server_info(dsn: str) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        out: dict[str, Any] = {}
        names = ("server_version", "fsync", "synchronous_commit", "wal_sync_method")
        for name in (*names, "max_connections"):
            out[name] = conn.execute(f"show {name}").fetchone()[0]  # type: ignore[index]
        return out


def ledger_counts(dsn: str, schema: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ev = conn.execute(f'select count(*) from "{schema}".events').fetchone()[0]  # type: ignore[index]
        th = conn.execute(f'select count(*) from "{schema}".threads').fetchone()[0]  # type: ignore[index]
    return {"events": int(ev), "threads": int(th)}


# -- interleaved setups ------------------------------------------------------------------
Setup = tuple[Any, Callable[[], Any], Callable[[], Any]]
"""``(graph, make_config, flush)`` of one setup compared in :func:`interleaved`."""


def interleaved(
    setups: dict[str, Setup], inputs: Any, n: int, batch: int, warmup: int = 10
) -> tuple[dict[str, list[float]], dict[str, float], int]:
    """Invoke every setup in rounds of ``batch`` (order reversed every other round), each
    round ending with the setup's ``flush()``, which counts in its wall time.

    Returns per-invoke latencies (s), wall time per setup (s) and invokes per setup.
    """
    lat: dict[str, list[float]] = {k: [] for k in setups}
    wall: dict[str, float] = dict.fromkeys(setups, 0.0)
    for graph, cfg, flush in setups.values():  # warm up
        for _ in range(warmup):
            graph.invoke(inputs, cfg(), durability="sync")
        flush()
    order = list(setups)
    rounds = max(1, n // batch)
    for r in range(rounds):
        for key in order if r % 2 == 0 else list(reversed(order)):
            graph, cfg, flush = setups[key]
            start = time.perf_counter()
            for _ in range(batch):
                t = time.perf_counter()
                graph.invoke(inputs, cfg(), durability="sync")
                lat[key].append(time.perf_counter() - t)
            flush()
            wall[key] += time.perf_counter() - start
    return lat, wall, rounds * batch


# -- statistics and environment --------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    idx = q * (len(s) - 1)
    lo = int(idx)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (idx - lo)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres",
        "psycopg",
        "psycopg-pool",
        "embedded-postgres",
        "langgraph-external",
    ):
        with contextlib.suppress(importlib_metadata.PackageNotFoundError):
            out[dist] = importlib_metadata.version(dist)
    return out


def git_info() -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.split("\n")
        return {"head": head or None, "modified": [ln[3:] for ln in dirty if ln.strip()]}
    except (OSError, subprocess.SubprocessError):
        return {"head": None, "modified": []}


def client_connections(dsn: str) -> int:
    """Client connections the server has open now (this probe's own not counted)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select count(*) from pg_stat_activity "
            "where backend_type = 'client backend' and pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0])  # type: ignore[index]


def run_in_threads(
    threads: int, body: Callable[[int], object], after: Callable[[], object] | None = None
) -> tuple[float, float]:
    """Run ``body(i)`` on ``threads`` OS threads started together, then ``after()``.

    Returns ``(wall, after_s)``: seconds from the common start until every thread
    returned and ``after`` (e.g. a flush) finished, and the part ``after`` took.
    Raises if any thread failed.
    """
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        barrier.wait()
        try:
            body(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [
        threading.Thread(target=worker, args=(i,), name=f"bench-{i}") for i in range(threads)
    ]
    for w in workers:
        w.start()
    barrier.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    f0 = time.perf_counter()
    if after is not None:
        after()
    end = time.perf_counter()
    if errors:
        raise RuntimeError(f"{len(errors)} of {threads} threads failed") from errors[0]
    return end - t0, end - f0
