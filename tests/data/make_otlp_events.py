"""Regenerate ``otlp_events.json``: the recorded events of the OTLP test apps.

The file is a fixed input for the pure mapping tests (``tests/test_otlp.py``): what the
mapper makes of it must not change unless the mapping is meant to change. Run from the
repository root: ``MEM0_TELEMETRY=False .venv/bin/python tests/data/make_otlp_events.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from langgraph_external.options import Options

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from langgraph.types import Command

    from langgraph_external import External
    from tests.guard_agents import QUESTION
    from tests.langfuse_app import build_app
    from tests.otlp_apps import SECRET, guarded_app, memory_app, memory_store

    tmp = Path(tempfile.mkdtemp(prefix="lgx-otlp-events-"))
    out: dict[str, list[dict[str, object]]] = {}
    with External(
        workspace=tmp / "ws", key=b"k" * 32, options=Options(embedded_dir=tmp / "pg")
    ) as ext:
        trip = build_app(ext.checkpointer)
        cfg = ext.config("trip-1", user_id="user-7", tags=["beta"])
        trip.invoke({"messages": [("user", "weather in Oslo?")]}, cfg)
        trip.invoke(Command(resume="approved"), ext.config("trip-1", user_id="user-7"))
        guarded_app(ext.checkpointer).invoke(QUESTION, ext.config("guarded-1"))
        mem = memory_app(ext.checkpointer, ext.store(memory_store()))
        mem.invoke(
            {"messages": [("user", f"book my usual seat, my key is {SECRET}")]},
            ext.config("memory-1", user_id="user-7"),
        )
        ext.flush()
        for tid in ("trip-1", "guarded-1", "memory-1"):
            events = ext.events(tid)
            for e in events:
                if e["kind"] in ("checkpoint", "writes"):
                    e["payload"] = {}  # what the exporter reads (SELECT_EVENTS_LEAN)
            out[tid] = events
    text = json.dumps(out, indent=1, ensure_ascii=False, default=str)
    assert SECRET not in text
    (Path(__file__).parent / "otlp_events.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
