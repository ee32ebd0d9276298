"""The child of ``tests/test_crash_other_savers.py``: graphs on a ``SqliteSaver`` recorded
into the ledger, until SIGKILL.

    python -m tests.crash_other_savers DSN WORKSPACE SPOOL SQLITE_FILE SEED
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(dsn: str, workspace: str, spool: str, sqlite_file: str, seed: int) -> None:
    """Record graphs forever: a ReAct agent on new threads and one shared thread, a
    ``Send`` fan-out into a subgraph, ``durability`` drawn from sync/async."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    sys.path.insert(0, str(ROOT))
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    from langgraph_external import External
    from tests.graphs import fanout_with_subgraph, react_agent

    rng = random.Random(seed)
    pid = os.getpid()
    conn = sqlite3.connect(sqlite_file, check_same_thread=False, isolation_level=None)
    conn.execute("pragma journal_mode=wal")
    saver = SqliteSaver(conn)
    with External(dsn=dsn, workspace=workspace, spool_dir=spool, inner=saver) as ext:
        react = react_agent(ext.checkpointer)
        fan = fanout_with_subgraph(ext.checkpointer)
        helper = getattr(ext.pipeline.sealing, "pid", None) if ext.pipeline else None
        print("ready", helper or "", flush=True)
        i = 0
        while True:
            i += 1
            durability = rng.choice(["sync", "async"])
            ask = {"messages": [HumanMessage(f"weather and time in Oslo? ({pid}/{i})")]}
            react.invoke(ask, ext.config(f"new-{pid}-{i}"), durability=durability)
            react.invoke(ask, ext.config("shared"), durability=durability)
            fan.invoke(
                {"items": [], "total": 0}, ext.config(f"fan-{pid}-{i}"), durability=durability
            )


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
