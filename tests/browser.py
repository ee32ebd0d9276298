"""Headless Chromium driven over the DevTools protocol (for the timeline page's tests).

Debian's ``chromium`` package (``scripts/test.sh`` installs it). The browser runs with no
network services of its own, in a fresh profile, and is stopped when the context exits.
:class:`Page` loads a URL, collects console errors and uncaught exceptions, evaluates
JavaScript, clicks and takes screenshots.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # nothing but this machine: a page's requests elsewhere (a web app's CDN, a "star on
    # GitHub" badge) fail at once, without a DNS query
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
]


def chromium_path() -> str | None:
    """The Chromium binary, or ``None`` when it is not installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Page:
    """One browser tab over a DevTools websocket."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.errors: list[str] = []
        self.loaded = False

    def _handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        params = msg.get("params") or {}
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(
                "console: "
                + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails") or {}
            self.errors.append(
                "exception: " + str((d.get("exception") or {}).get("description") or d.get("text"))
            )
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append("log: " + str(params["entry"].get("text")))
        elif method == "Page.loadEventFired":
            self.loaded = True

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})
            self._handle(msg)

    def pump(self, seconds: float) -> None:
        """Read events for ``seconds`` (console messages arrive asynchronously)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                self._handle(json.loads(self.ws.recv(timeout=left)))
            except TimeoutError:
                return

    def goto(self, url: str, *, width: int = 1400, height: int = 900) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.loaded = False
        self.send("Page.navigate", url=url)
        end = time.monotonic() + 60
        while not self.loaded and time.monotonic() < end:
            self.pump(0.2)
        self.pump(0.3)

    def eval(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(str(res["exceptionDetails"]))
        return res["result"].get("value")

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))


@contextmanager
def browser() -> Iterator[Page]:
    """A headless Chromium tab; the browser and its profile are gone afterwards."""
    exe = chromium_path()
    if exe is None:
        raise FileNotFoundError("chromium is not installed")
    profile = tempfile.mkdtemp(prefix="lgx-chromium-")
    proc = subprocess.Popen(
        [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        end = time.monotonic() + 60
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("chromium did not start")
            time.sleep(0.05)
        port = port_file.read_text().splitlines()[0]
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = json.loads(r.read())
        target = next(t for t in targets if t.get("type") == "page")
        with connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as ws:
            page = Page(ws)
            for domain in ("Page", "Runtime", "Log"):
                page.send(f"{domain}.enable")
            yield page
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
