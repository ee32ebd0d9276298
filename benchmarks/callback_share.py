#!/usr/bin/env python
"""The audit callbacks' CPU: what stays on the app's thread, and what the sealer takes.

Three measurements on the 10-node chain (``_common.build_graph``), each alternating its
variants in blocks so a host that slows down slows every variant alike:

* **app** — a graph without a checkpointer, invoked with no callback handler, with a
  handler that does nothing (LangChain's own dispatch), and with ``External``'s audit
  handler, its events left to the sealer (the default) or processed on the app's thread
  (as with ``sealing="worker"``): the app process's CPU per invoke.
* **process** — ``Pipeline.process`` over the 22 events one full-audit invoke emits:
  snapshot only (deferred) against redact + normalize + offload on the caller's thread.
* **sealer** — full-audit invokes captured with ``sealing="worker"`` (nothing sealed
  meanwhile), then sealed by one ``Sealer`` in this process: its CPU per invoke, for
  deferred captures and for captures processed by the app.

    .venv/bin/python benchmarks/callback_share.py --blocks 10 --per 100
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

from _common import build_graph, invoke_chain, postgres
from langgraph.callbacks import GraphCallbackHandler

from langgraph_external import Event, External
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.pipeline.seal import Sealer
from langgraph_external.record.processors import Offload, Redact, materialize, normalize
from langgraph_external.record.redaction import Redactor


class NoOp(GraphCallbackHandler):
    """A handler that records nothing: what LangChain's callback dispatch costs."""

    run_inline = True


def _defer(ext: External, on: bool) -> None:
    assert ext.pipeline is not None
    ext.pipeline.processing.deferred = on
    ext.pipeline.buffer.riders_key = ext.pipeline.cipher if on else None


def _blocks(variants: dict[str, Callable[[], None]], blocks: int, per: int) -> dict[str, float]:
    out: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for b in range(blocks):
        for name in names if b % 2 == 0 else names[::-1]:
            t = time.process_time()
            for _ in range(per):
                variants[name]()
            out[name].append((time.process_time() - t) / per * 1000)
    return {k: statistics.median(v) for k, v in out.items()}


def app_share(dsn: str, tmp: Path, blocks: int, per: int) -> dict[str, float]:
    graphs = {k: External(dsn=dsn, workspace=tmp / f"ws-{k}").setup() for k in ("def", "app")}
    _defer(graphs["app"], False)
    chain = build_graph(None)
    state: dict[str, Any] = {"counter": 0, "items": []}

    def run(config: Callable[[], Any]) -> Callable[[], None]:
        return lambda: chain.invoke(state, config())

    def tid() -> dict[str, Any]:
        return {"configurable": {"thread_id": uuid.uuid4().hex}}

    variants = {
        "no handler": run(tid),
        "no-op handler": run(lambda: {**tid(), "callbacks": [NoOp()]}),
        "audit, deferred": run(lambda: graphs["def"].config(uuid.uuid4().hex)),
        "audit, on the app's thread": run(lambda: graphs["app"].config(uuid.uuid4().hex)),
    }
    for fn in variants.values():
        for _ in range(20):
            fn()
    got = _blocks(variants, blocks, per)
    for ext in graphs.values():
        ext.close()
    return got


def process_share(dsn: str, tmp: Path, blocks: int) -> dict[str, float]:
    ext = External(dsn=dsn, workspace=tmp / "ws-p").setup()
    assert ext.pipeline is not None
    pipeline = ext.pipeline
    seen: list[Event] = []
    emit = pipeline.emit_many
    graph = build_graph(ext.checkpointer)
    invoke_chain(graph, ext.config("warm"))
    pipeline.emit_many = lambda events, durable=False: (  # type: ignore[method-assign]
        seen.extend(events := list(events)),
        emit(events, durable=durable),
    )[-1]
    invoke_chain(graph, ext.config(uuid.uuid4().hex))
    pipeline.emit_many = emit  # type: ignore[method-assign]
    events = list(seen)

    def run(on: bool) -> Callable[[], None]:
        def go() -> None:
            pipeline.processing.deferred = on
            for e in events:
                pipeline.process(e)

        return go

    got = _blocks({"deferred": run(True), "on the app's thread": run(False)}, blocks, 100)
    pipeline.processing.deferred = True
    ext.close()
    print(f"  ({len(events)} events per invoke)")
    return got


def sealer_share(dsn: str, n: int, rounds: int) -> dict[str, float]:
    out: dict[str, list[float]] = {"deferred": [], "processed by the app": []}
    for r in range(rounds):
        for name in out if r % 2 == 0 else list(out)[::-1]:
            ext = External(dsn=dsn, sealing="worker").setup()
            _defer(ext, name == "deferred")
            assert ext.pipeline is not None
            key = ext.pipeline.cipher
            graph = build_graph(ext.checkpointer)
            for _ in range(n):
                invoke_chain(graph, ext.config(uuid.uuid4().hex))
            ext.close()
            processors = [materialize, Redact(Redactor()), normalize, Offload()]
            sealer = Sealer(PostgresLedger(dsn, cipher=key), cipher=key, processors=processors)
            t = time.process_time()
            if not sealer.drain(600):
                raise SystemExit("the sealer did not drain in 600 s")
            out[name].append((time.process_time() - t) / n * 1000)
    print("  rounds:", {k: [round(x, 2) for x in v] for k, v in out.items()})
    return {k: statistics.median(v) for k, v in out.items()}


def _show(title: str, got: dict[str, float]) -> None:
    print(f"\n{title} (ms, median)")
    for k, v in got.items():
        print(f"  {k:28} {v:7.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--per", type=int, default=100, help="invokes per block")
    ap.add_argument("--sealed", type=int, default=150, help="invokes per sealer round")
    ap.add_argument("--rounds", type=int, default=4, help="sealer rounds")
    ap.add_argument("--dsn")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, postgres(a.dsn, Path(tmp)) as (dsn, _):
        root = Path(tmp)
        _show(
            "app process CPU per invoke, graph without a checkpointer",
            app_share(dsn, root, a.blocks, a.per),
        )
        _show("Pipeline.process over one invoke's events", process_share(dsn, root, a.blocks))
        _show(
            "sealer CPU per invoke (sealing only: no mirror, no server)",
            sealer_share(dsn, a.sealed, a.rounds),
        )


if __name__ == "__main__":
    main()
