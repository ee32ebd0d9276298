"""``lgx`` starts without importing what only some of its commands need.

Every ``lgx`` command is a new process, so what the CLI imports on start is paid by each
(``benchmarks/bench_startup.py`` times ``lgx threads``). LangGraph's runtime (through the
recording stack, restore, replay and guards), the web app and the exporters are loaded by
the commands that use them (``# lazy:`` imports in ``langgraph_external/cli/``).
"""

from __future__ import annotations

import json
import subprocess
import sys

LOADED_ON_DEMAND = (
    "langgraph_external.assembly",
    "langgraph_external.external",
    "langgraph_external.pipeline.pipeline",
    "langgraph_external.processes.worker",
    "langgraph_external.ops.repair",
    "langgraph_external.ops.restore",
    "langgraph_external.guards",
    "langgraph_external.replay",
    "langgraph_external.ui",
    # the ui extra's packages (tests/test_ui_extra.py: lgx runs without them)
    "starlette",
    "uvicorn",
    "jinja2",
    "markupsafe",
    "langgraph_external.exporters.otlp",
    "langgraph_external.exporters.langfuse",
    "langchain_core.runnables.base",
    "fastapi",
    "opentelemetry",
)


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_lgx_starts_without_langgraph_runtime_web_app_or_exporters() -> None:
    loaded = _modules_after("import langgraph_external.cli")
    assert "langgraph_external.cli.threads" in loaded  # every command group is registered
    assert sorted(loaded.intersection(LOADED_ON_DEMAND)) == []
