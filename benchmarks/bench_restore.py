#!/usr/bin/env python
"""Restore a long thread from the workspace into ``InMemorySaver`` and ``SqliteSaver``.

Records one chat thread of ``--turns`` turns of the 10-node chat graph (11 checkpoints a
turn, each holding the whole, growing message list: the saver's bytes grow with the
square of the thread) with ``External``, then restores it from the workspace alone,
``--repeat`` times into each saver, and prints the seconds of each restore (verify,
decode, write) next to the checkpoints restored. Each restored thread must resume
identically: the same state as the original, and one more turn on it gives the same
messages as that turn on the original.

    .venv/bin/python benchmarks/bench_restore.py --turns 100 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import postgres
from bench_load import build_chat, chat_turn
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_external.options import Options


def _messages(graph: Any, thread: str) -> list[tuple[str, str]]:
    state = graph.get_state({"configurable": {"thread_id": thread}})
    return [(m.type, m.content) for m in state.values["messages"]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100, help="turns of the recorded thread")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dsn")
    a = ap.parse_args()
    from langgraph_external import External
    from langgraph_external.ops.restore import restore_thread

    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        ext = External(
            dsn=dsn, workspace=Path(tmp) / "ws", options=Options(schema="lgx_restore")
        ).setup()
        original = build_chat(ext.checkpointer)
        conf = {"configurable": {"thread_id": "long"}}
        for t in range(a.turns):
            chat_turn(original, conf, t)
        if not ext.flush(300):
            sys.exit("the record did not drain")
        expected = _messages(original, "long")
        resumed: list[tuple[str, list[tuple[str, str]]]] = []
        ws = ext.workspace
        assert ws is not None
        times: dict[str, list[float]] = {"InMemorySaver": [], "SqliteSaver": []}
        count = 0
        for r in range(a.repeat):
            for name in times:
                db = Path(tmp) / f"restore-{r}.sqlite"
                saver: Any
                with SqliteSaver.from_conn_string(str(db)) as sqlite:
                    saver = InMemorySaver() if name == "InMemorySaver" else sqlite
                    t0 = time.perf_counter()
                    count = restore_thread(ws, "long", saver, cipher=ext.cipher)
                    times[name].append(time.perf_counter() - t0)
                    restored = build_chat(saver)
                    if _messages(restored, "long") != expected:
                        sys.exit(f"{name}: the restored state differs from the original")
                    chat_turn(restored, conf, a.turns)
                    resumed.append((name, _messages(restored, "long")))
        # the original's next turn last: the workspace mirrors it too
        chat_turn(original, conf, a.turns)
        expected_next = _messages(original, "long")
        for name, got in resumed:
            if got != expected_next:
                sys.exit(f"{name}: the restored thread resumed differently")
        ext.close()
    print(f"restore of a {a.turns}-turn thread: {count} checkpoints (resumed identically)")
    for name, ts in times.items():
        runs = ", ".join(f"{t:.3f}" for t in ts)
        per = statistics.median(ts) / count * 1000
        print(
            f"  {name:14} median {statistics.median(ts):.3f} s ({per:.2f} ms a checkpoint); "
            f"runs {runs}"
        )


if __name__ == "__main__":
    main()
