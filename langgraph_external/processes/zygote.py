"""The sealing zygote, as the app sees it: a process that imported what sealing needs
once and forks helper processes on request (its own side is
:func:`~langgraph_external.processes.helper_main.serve_zygote`).

Example:
    >>> "PATH" in child_env()
    True
"""

from __future__ import annotations

import logging
import os
import select
import socket
import struct
import subprocess
import sys
import threading

logger = logging.getLogger("langgraph_external")

__all__ = ["Zygote", "child_env", "start_helper_main"]


def child_env() -> dict[str, str]:
    """The environment of a sealing process the app starts."""
    env = dict(os.environ)
    env.setdefault("MEM0_TELEMETRY", "False")
    return env


def start_helper_main(*args: str | int, fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    """``python -m langgraph_external.processes.helper_main *args``, handed ``fds``."""
    return subprocess.Popen(
        [sys.executable, "-m", "langgraph_external.processes.helper_main", *map(str, args)],
        pass_fds=fds,
        stdin=subprocess.DEVNULL,
        env=child_env(),
        start_new_session=True,  # a Ctrl-C of the app's terminal is the app's
    )


class Zygote:
    """A process that has imported what sealing needs and forks helpers on request.

    A fresh interpreter takes about a second to import the sealer, the workspace mirror
    and their dependencies; a fork of a process that already did takes milliseconds, and
    forking is safe because this process runs one thread only. One per app process,
    started with its first helper; it exits when the app does (its socket closes).
    """

    _lock = threading.Lock()
    _current: Zygote | None = None

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = start_helper_main("--zygote", child.fileno(), fds=(child.fileno(),))
        child.close()
        self.sock = parent
        self._lock = threading.Lock()
        self.ready = False

    def is_ready(self) -> bool:
        """Whether the zygote finished importing (it says so with one byte)."""
        if not self.ready:
            ready, _, _ = select.select([self.sock], [], [], 0)
            if ready and self.sock.recv(1) == b"r":
                self.ready = True
        return self.ready

    @classmethod
    def get(cls) -> Zygote | None:
        """The running zygote (started now if needed); ``None`` where there is none."""
        if not hasattr(os, "fork") or os.environ.get("LGX_NO_ZYGOTE"):
            return None
        with cls._lock:
            z = cls._current
            if z is None or z.proc.poll() is not None:
                try:
                    z = cls._current = Zygote()
                except OSError as exc:
                    logger.debug("no sealing zygote: %s", exc)
                    return None
            # still importing: this helper starts on its own, later ones from the zygote
            return z if z.is_ready() else None

    def fork(self, fds: list[int]) -> int | None:
        """A new helper process on ``fds`` (its pipe and wake-up pipe); its pid."""
        try:
            with self._lock:
                socket.send_fds(self.sock, [b"f"], fds)
                data = b""
                while len(data) < 8:
                    chunk = self.sock.recv(8 - len(data))
                    if not chunk:
                        return None
                    data += chunk
            return int(struct.unpack("!q", data)[0])
        except OSError as exc:
            logger.debug("the sealing zygote did not fork: %s", exc)
            return None
