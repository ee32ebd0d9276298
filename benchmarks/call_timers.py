#!/usr/bin/env python
"""Per-call wall times of the saver inside graph runs: bare saver vs External's.

Wraps ``put``/``put_writes``/``get_tuple`` of the official ``PostgresSaver`` (bare) and
of ``External``'s checkpointer and of the saver it wraps (``inner``), runs the 10-node
chain on new threads for both setups, interleaved, and prints medians. ``inner`` minus
bare is what the saver's own calls cost more inside an External-recorded run; ``ext``
minus ``inner`` is the wrapper's own work outside the transaction.

    .venv/bin/python benchmarks/call_timers.py --n 60
    .venv/bin/python benchmarks/call_timers.py --no-outbox --no-projection
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import bare_saver, build_graph, invoke_chain, postgres

from langgraph_external.options import Options

TIMES: dict[str, list[float]] = {}


def _timed(obj: Any, name: str, key: str) -> None:
    original: Callable[..., Any] = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            TIMES.setdefault(key, []).append(time.perf_counter() - t)

    setattr(obj, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=60, help="invokes per setup")
    ap.add_argument("--no-outbox", action="store_true", help="record through the WAL instead")
    ap.add_argument("--no-projection", action="store_true", help="stop the workspace mirror")
    ap.add_argument("--dsn")
    a = ap.parse_args()
    from langgraph_external import External

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        ext = External(
            dsn=dsn,
            workspace=Path(tmp) / "ws",
            options=Options(spool_dir=Path(tmp) / "spool", schema="lgx_timers"),
        ).setup()
        cp = ext.checkpointer
        saver, pool = bare_saver(dsn, 8)
        graphs = {"ext": build_graph(cp), "bare": build_graph(saver)}
        for _ in range(10):
            for g in graphs.values():
                invoke_chain(g, {"configurable": {"thread_id": uuid.uuid4().hex}})
        ext.flush()
        if a.no_outbox:
            cp.outbox = False
        if a.no_projection:
            ext.pipeline.projections = []
        for name in ("put", "put_writes", "get_tuple"):
            _timed(cp, name, f"ext.{name}")
            _timed(cp.inner, name, f"inner.{name}")
            _timed(saver, name, f"bare.{name}")
        invokes: dict[str, list[float]] = {"ext": [], "bare": []}
        for i in range(a.n):
            for key, g in graphs.items():
                t = time.perf_counter()
                invoke_chain(g, {"configurable": {"thread_id": uuid.uuid4().hex}})
                invokes[key].append(time.perf_counter() - t)
            if i % 10 == 9:
                ext.flush()
        for key, values in sorted(TIMES.items()):
            print(f"{key:18} n={len(values):5}  median {statistics.median(values) * 1000:7.3f} ms")
        for key, values in invokes.items():
            print(f"{key} invoke median {statistics.median(values) * 1000:.2f} ms")
        ext.close()
        pool.close()


if __name__ == "__main__":
    main()
