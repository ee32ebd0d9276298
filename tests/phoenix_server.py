"""A real Arize Phoenix server for the OTLP export's integration tests.

``phoenix serve`` (the ``arize-phoenix`` package, the ``phoenix`` test extra) on a free
127.0.0.1 port, with its own working directory (SQLite), its gRPC port moved off 4317 and
telemetry off; :class:`PhoenixServer` reads spans back through Phoenix's REST API
(``GET /v1/projects/{project}/spans``). Ingestion is asynchronous: poll.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

INSTALL_HINT = "pip install -e '.[phoenix]' (scripts/test.sh installs it)"


def phoenix_missing() -> str | None:
    """Why Phoenix cannot run here, or ``None`` when it can."""
    try:  # without importing it (seconds): the server runs in its own process
        found = importlib.util.find_spec("phoenix.server.main") is not None
    except ImportError:
        found = False
    return None if found else f"Arize Phoenix is not installed; {INSTALL_HINT}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PhoenixServer:
    """``phoenix serve`` in a child process, and a small REST client for it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "phoenix.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180.0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
        env.update(
            PHOENIX_WORKING_DIR=str(self.workdir),
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(self.port),
            PHOENIX_GRPC_PORT=str(free_port()),
            PHOENIX_TELEMETRY_ENABLED="false",
        )
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "phoenix.server.main", "serve"],
                env=env,
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"phoenix serve exited {self.proc.returncode}: {self.tail()}")
            try:
                if requests.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"phoenix serve did not answer /healthz in {timeout}s: {self.tail()}")

    def stop(self) -> None:
        """Stop the server by its pid (SIGTERM, then SIGKILL)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    # -- REST ------------------------------------------------------------------------------
    def get(self, path: str, **params: Any) -> Any:
        resp = requests.get(self.url + path, params=params, timeout=30)
        resp.raise_for_status()
        return resp.json()

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of ``project`` (``[]`` while the project does not exist)."""
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if cursor:
                params["cursor"] = cursor
            resp = requests.get(
                f"{self.url}/v1/projects/{project}/spans", params=params, timeout=30
            )
            if resp.status_code == 404:
                return []
            resp.raise_for_status()
            body = resp.json()
            out.extend(body["data"])
            cursor = body.get("next_cursor")
            if not cursor:
                return out

    def wait_for(
        self,
        project: str,
        predicate: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 60.0,
    ) -> list[dict[str, Any]]:
        """Poll ``project``'s spans until ``predicate`` holds; the spans then."""
        deadline = time.monotonic() + timeout
        spans = self.spans(project)
        while not predicate(spans):
            if time.monotonic() > deadline:
                raise AssertionError(f"Phoenix did not show the spans in {timeout}s: {spans}")
            time.sleep(0.1)
            spans = self.spans(project)
        return spans
