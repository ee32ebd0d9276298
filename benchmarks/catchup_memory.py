#!/usr/bin/env python
"""Memory of a workspace catching up on a long thread (a fresh, moved or rebuilt mirror).

One process records a chat thread of ``--turns`` turns (``bench_load``'s chat: 11
messages a turn, each checkpoint naming the whole conversation); a second, fresh process
opens ``External`` on the same ledger with an empty workspace and ``flush()``es, which
mirrors the whole thread from the ledger. Each process prints its RSS after ``setup()``
and after the flush, and its peak (VmHWM), and the flush's time.

    .venv/bin/python benchmarks/catchup_memory.py --turns 100
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import postgres

from langgraph_external.options import Options


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(dsn: str, phase: str, turns: int) -> None:
    from bench_load import build_chat, chat_turn

    from langgraph_external import External

    with tempfile.TemporaryDirectory() as tmp:
        ext = External(
            dsn=dsn,
            workspace=Path(tmp) / "ws",
            options=Options(spool_dir=Path(tmp) / "spool", schema="lgx_cu"),
        )
        ext.setup()
        after_setup = _status_mb("VmRSS")
        if phase == "record":
            chat = build_chat(ext.checkpointer)
            for t in range(1, turns + 1):
                chat_turn(chat, {"configurable": {"thread_id": "long"}}, t)
        t0 = time.perf_counter()
        ok = ext.flush(600)
        took = time.perf_counter() - t0
        files = sum(1 for p in (Path(tmp) / "ws").rglob("*") if p.is_file())
        print(
            f"{phase:8} after setup {after_setup:6.1f} MB   after flush {_status_mb('VmRSS'):6.1f}"
            f" MB   peak {_status_mb('VmHWM'):6.1f} MB   flush {took:5.2f} s (ok={ok})"
            f"   workspace files {files}"
        )
        ext.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--dsn")
    ap.add_argument("--child", nargs=2, metavar=("DSN", "PHASE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], a.turns)
        return
    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        for phase in ("record", "catch-up"):
            cmd = [sys.executable, __file__, "--turns", str(a.turns), "--child", dsn, phase]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
            print(proc.stdout.strip() or proc.stderr[-2000:])


if __name__ == "__main__":
    main()
