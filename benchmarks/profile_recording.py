#!/usr/bin/env python
"""Where the recording's CPU goes, per thread (yappi, CPU clock), for one workload.

Runs the 10-node chain (new thread per invoke) and/or the chat thread (``--turns``)
against ``External`` (``--audit`` adds the callback handler), then prints, per OS thread
(the app's, the flusher, the projector), its CPU seconds and the functions of this
package (and psycopg) with the most own time.

    .venv/bin/python benchmarks/profile_recording.py --n 100
    .venv/bin/python benchmarks/profile_recording.py --turns 100 --audit
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yappi
from _common import bare_saver, build_graph, invoke_chain, postgres
from bench_load import build_chat, chat_turn

from langgraph_external.options import Options


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=0, help="chain invokes, a new thread each")
    ap.add_argument("--turns", type=int, default=0, help="turns of one chat thread")
    ap.add_argument("--audit", action="store_true", help="attach the callback handler")
    ap.add_argument("--bare", action="store_true", help="the official saver alone (baseline)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--dsn")
    a = ap.parse_args()
    from langgraph_external import External

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        if a.bare:
            saver, pool = bare_saver(dsn, 8)
            ext = None
        else:
            ext = External(
                dsn=dsn,
                workspace=Path(tmp) / "ws",
                options=Options(spool_dir=Path(tmp) / "spool", schema="lgx_prof"),
            ).setup()
            saver = ext.checkpointer
        chain, chat = build_graph(saver), build_chat(saver)

        def cfg(tid: str) -> dict:
            if ext is not None and a.audit:
                return ext.config(tid)
            return {"configurable": {"thread_id": tid}}

        def flush() -> None:
            if ext is not None:
                ext.flush(120)

        for _ in range(5):  # warm up
            invoke_chain(chain, cfg(uuid.uuid4().hex))
        flush()
        yappi.set_clock_type("cpu")
        yappi.start()
        t0 = time.perf_counter()
        for _ in range(a.n):
            invoke_chain(chain, cfg(uuid.uuid4().hex))
        tid = uuid.uuid4().hex
        for t in range(a.turns):
            chat_turn(chat, cfg(tid), t)
        t1 = time.perf_counter()
        flush()
        t2 = time.perf_counter()
        yappi.stop()
        print(f"wall: invokes {t1 - t0:.2f}s, drain {t2 - t1:.2f}s")
        threads = sorted(yappi.get_thread_stats(), key=lambda t: -t.ttot)
        big = [t for t in threads if t.ttot >= 0.2]
        small = [t for t in threads if t.ttot < 0.2]
        print(
            f"{len(small)} short-lived threads (LangGraph's executors): "
            f"{sum(t.ttot for t in small):.2f}s CPU"
        )
        for th in big:
            print(f"thread {th.name} ({th.id}): {th.ttot:.2f}s CPU")
        groups = [(f"thread {t.id}", [t.id]) for t in big] + [
            ("executor threads", [t.id for t in small])
        ]
        for label, ids in groups:
            print(f"\n== {label}")
            merged: dict = {}
            for i in ids:
                for st in yappi.get_func_stats(filter={"ctx_id": i}):
                    if "langgraph_external" not in st.module and "psycopg" not in st.module:
                        continue
                    key = (st.name, st.module, st.lineno)
                    m = merged.setdefault(key, [0.0, 0.0, 0])
                    m[0] += st.tsub
                    m[1] += st.ttot
                    m[2] += st.ncall
            for title, idx in (("own", 0), ("total", 1)):
                print(f"  -- by {title} --")
                for key, m in sorted(merged.items(), key=lambda kv: -kv[1][idx])[: a.top]:
                    mod = key[1].split("site-packages/")[-1].split("wt-perf/")[-1]
                    print(f"  {m[0]:7.3f} sub {m[1]:7.3f} tot {m[2]:7d}  {key[0]}  {mod}:{key[2]}")
        if ext is not None:
            ext.close()
        else:
            pool.close()


if __name__ == "__main__":
    sys.exit(main())
