"""Start LangGraph's Agent Server (``langgraph dev``) in a child process, as a user would:
shared by ``tests/test_agent_server.py`` and ``benchmarks/bench_agent_server.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LANGGRAPH = Path(sys.executable).parent / "langgraph"
DEV = [str(LANGGRAPH), "dev", "--host", "127.0.0.1", "--no-browser", "--no-reload"]
START_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0

GRAPHS = {
    "agent": "./agent.py:agent",
    "bare_agent": "./agent.py:bare_agent",
    "approval": "./agent.py:approval",
    "slow": "./agent.py:slow",
}

RECORDED = {
    "dependencies": ["."],
    "graphs": GRAPHS,
    "checkpointer": {"path": "langgraph_external.agent_server.checkpointer"},
    "store": {"path": "langgraph_external.agent_server.store"},
}
"""The documented ``langgraph.json``: the record's checkpointer and store."""

OFFLINE = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_API_KEY": "",
    "MEM0_TELEMETRY": "False",
}
"""Nothing phones home."""


@dataclass
class Running:
    url: str
    log: Path
    proc: subprocess.Popen[bytes]

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_app(app: Path, config: Mapping[str, Any]) -> Path:
    """``app`` holding the test graphs as ``agent.py`` and ``config`` as langgraph.json."""
    app.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "tests" / "agent_server_app.py", app / "agent.py")
    (app / "langgraph.json").write_text(json.dumps(config))
    return app


@contextmanager
def serve(app: Path, env: Mapping[str, str], log_name: str = "server.log") -> Iterator[Running]:
    """``langgraph dev`` in ``app`` on a free loopback port, this checkout of the package
    first on its path; stopped gracefully (the server closes its checkpointer), then by
    force if it hangs."""
    log = app / log_name
    port = free_port()
    full = {**os.environ, **OFFLINE, "PYTHONPATH": str(ROOT), **env}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*DEV, "--port", str(port)],
            cwd=app,
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Running(f"http://127.0.0.1:{port}", log, proc)
    try:
        _wait_up(running)
        yield running
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _wait_up(srv: Running) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if srv.proc.poll() is not None:
            raise AssertionError(f"langgraph dev exited {srv.proc.returncode}:\n{srv.tail()}")
        try:
            with urllib.request.urlopen(srv.url + "/ok", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"langgraph dev did not answer in {START_TIMEOUT} s:\n{srv.tail()}")
