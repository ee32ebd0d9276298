#!/usr/bin/env python
"""How long leaving ``with External(...)`` takes, with nothing pending.

For the default setup (``sealing="process"``: a helper process seals) and for
``sealing="worker"`` with no ``lgx worker`` running, ``--repeat`` times each: the seconds
``External(...).setup()`` takes, and the seconds ``close()`` takes when the app did
nothing, and after one 10-node invoke (the default mode flushed first, so nothing is
pending; the worker mode cannot flush: its captures wait for a worker, and the line says
how many). Closing must not wait on sealing it does not do.

    .venv/bin/python benchmarks/bench_close.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from _common import build_graph, invoke_chain, postgres


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dsn")
    a = ap.parse_args()
    from langgraph_external import External

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        External(dsn=dsn, workspace=Path(tmp) / "ws").setup().close()  # schema, key, zygote
        for mode in ("process", "worker"):
            ws = Path(tmp) / "ws" if mode == "process" else None
            times: dict[str, list[float]] = {"enter": [], "close idle": [], "close after": []}
            waiting = 0
            for _ in range(a.repeat):
                for invoke in (False, True):
                    t0 = time.perf_counter()
                    ext = External(dsn=dsn, workspace=ws, sealing=mode).setup()
                    times["enter"].append(time.perf_counter() - t0)
                    if invoke:
                        graph = build_graph(ext.checkpointer)
                        invoke_chain(graph, {"configurable": {"thread_id": uuid.uuid4().hex}})
                        if mode == "process":
                            assert ext.flush(60)
                    backend = ext.pipeline.sealing if ext.pipeline else None
                    t1 = time.perf_counter()
                    ext.close()
                    times["close after" if invoke else "close idle"].append(
                        time.perf_counter() - t1
                    )
                    if invoke and mode == "worker":
                        waiting = getattr(backend, "waiting", {}).get("captures", 0)
            line = ", ".join(
                f"{k} median {statistics.median(v):.3f} s (max {max(v):.3f})"
                for k, v in times.items()
            )
            print(f"sealing={mode}: {line}")
            if mode == "worker":
                print(f"  captures waiting for a worker when the last app closed: {waiting}")


if __name__ == "__main__":
    main()
