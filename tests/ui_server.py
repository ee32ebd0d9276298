"""``lgx ui`` in a child process on a free port of 127.0.0.1, for the tests of the web UI
(and of what the Agent Server records): one way to start it and to read its pages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LGX = str(Path(sys.executable).parent / "lgx")


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[str]

    def get(self, path: str, **headers: str) -> tuple[int, str, Any]:
        req = urllib.request.Request(self.url.rstrip("/") + path, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode(), r.headers
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), exc.headers


@contextmanager
def lgx_ui(dsn: str, ws: Path, env: Mapping[str, str] | None = None) -> Iterator[Server]:
    """``lgx ui`` on the record in ``dsn`` and ``ws``; stopped when the block ends."""
    proc = subprocess.Popen(
        [LGX, "--workspace", str(ws), "ui", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LGX_DSN": dsn, **(env or {})},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"serving (http://\S+/)", line)
        assert match, line + (proc.stderr.read() if proc.poll() is not None else "")
        yield Server(match.group(1), proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
