"""The sealing helper's own side (and the zygote's): ``python -m
langgraph_external.processes.helper_main --managed <pipe> <wake>`` serves one app
(:func:`serve_helper`): it reads the app's
:class:`~langgraph_external.settings.Settings`, runs the sealing service, answers
requests, forwards its log records to the app, and exits when the app closes it or
dies. ``--zygote <socket>`` imports all that once and forks helpers on request
(:func:`serve_zygote`).

Example:
    >>> main(["--help"])
    Traceback (most recent call last):
    SystemExit: usage: lgx worker (this module is started by External)
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from langgraph_external.processes.gc_tuning import tune_gc, yield_to_the_app
from langgraph_external.processes.running import Running
from langgraph_external.settings import Settings

__all__ = ["main", "serve_helper", "serve_zygote"]

_ZYGOTE_IDLE = 30.0  # seconds a zygote with no helper to serve waits before it exits


def serve_helper(conn_fd: int, wake_fd: int) -> int:
    """The helper's main loop: config first, then requests (each in a thread of its own)
    until close or EOF (the app is gone: seal what is sealable, then exit)."""
    conn = Connection(conn_fd)
    config: Settings = pickle.loads(conn.recv_bytes())
    send_lock = threading.Lock()
    _forward_logs(conn, send_lock)
    running = Running(config)
    closing = threading.Event()
    os.set_blocking(wake_fd, False)

    def answer(rid: int, what: str, args: list[Any]) -> None:
        if what == "flush":
            value: Any = running.flush(args[0])
        elif what == "health":
            value = running.health()
        else:  # close
            value = running.close(args[0])
            closing.set()
        with send_lock, contextlib.suppress(OSError):
            conn.send((rid, value))

    try:
        while not closing.is_set():
            ready, _, _ = select.select([conn.fileno(), wake_fd], [], [], 1.0)
            if wake_fd in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_fd, 4096):
                        pass
                running.service.wake()
            if conn.fileno() not in ready:
                continue
            try:
                rid, what, *args = conn.recv()
            except (EOFError, OSError):
                running.close()
                return 0
            worker = threading.Thread(target=answer, args=(rid, what, args), daemon=True)
            worker.start()
            if what == "close":
                worker.join()
        return 0
    finally:
        with contextlib.suppress(OSError):
            conn.close()


class _ToParent(logging.Handler):
    """Sends the helper's log records to the app, which logs them as its own."""

    def __init__(self, conn: Connection, lock: threading.Lock) -> None:
        super().__init__(logging.INFO)
        self.conn = conn
        self.send_lock = lock

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = {
                "name": record.name,
                "levelno": record.levelno,
                "levelname": record.levelname,
                "msg": record.getMessage(),
                "args": None,
                "exc_text": self.format(record).partition("\n")[2] if record.exc_info else None,
                "created": record.created,
                "process": record.process,
                "processName": "langgraph-external sealing helper",
                "threadName": record.threadName,
            }
            with self.send_lock:
                self.conn.send((0, data))
        except Exception:  # the app is gone: the stderr it left us is all there is
            if logging.lastResort is not None:  # the message, not a "Logging error" trace
                logging.lastResort.handle(record)


def _forward_logs(conn: Connection, lock: threading.Lock) -> None:
    handler = _ToParent(conn, lock)
    ours = logging.getLogger("langgraph_external")
    ours.addHandler(handler)
    ours.propagate = False
    if ours.level == logging.NOTSET or ours.level > logging.INFO:
        ours.setLevel(logging.INFO)
    # the database driver's own retries are ours to report (as "sealing deferred"): they
    # stay out of the app's log, as they would in a sealer thread that logs nothing else
    for name in ("psycopg", "psycopg.pool"):
        logging.getLogger(name).setLevel(logging.ERROR)


def serve_zygote(sock_fd: int) -> int:
    """The zygote's loop: fork a helper per request, reap them; exit with the app."""
    sock = socket.socket(fileno=sock_fd)
    sock.sendall(b"r")  # imported: ready to fork
    children: set[int] = set()
    idle_since = time.monotonic()
    while True:
        with contextlib.suppress(ChildProcessError):
            while (done := os.waitpid(-1, os.WNOHANG)[0]) != 0:
                children.discard(done)
        if children:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > _ZYGOTE_IDLE:
            return 0  # no helper for a while: the app's next one starts a zygote again
        ready, _, _ = select.select([sock], [], [], 0.5)
        if not ready:
            continue
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 4)
        except OSError:
            return 0
        if not msg:
            return 0  # the app is gone
        pid = os.fork()
        if pid == 0:  # the helper
            code = 1
            try:
                sock.close()
                os.setsid()
                code = serve_helper(fds[0], fds[1])
            finally:
                os._exit(code)
        children.add(pid)
        for fd in fds:
            os.close(fd)
        sock.sendall(struct.pack("!q", pid))


def _preload() -> None:
    """Import what a helper needs, once, in the zygote (forked helpers inherit it)."""
    with contextlib.suppress(ImportError):
        import langgraph_external.exporters.otlp  # noqa: F401  # lazy: the optional SDK
    with contextlib.suppress(ImportError):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: F401


def main(argv: Sequence[str]) -> int:
    """The entry point of a helper (``--managed``) or a zygote (``--zygote``)."""
    managed = len(argv) == 3 and argv[0] == "--managed"
    if not managed and not (len(argv) == 2 and argv[0] == "--zygote"):
        raise SystemExit("usage: lgx worker (this module is started by External)")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the app decides when it stops
    yield_to_the_app()  # a zygote's helpers inherit it, and its tuning below
    if managed:
        tune_gc()
        return serve_helper(int(argv[1]), int(argv[2]))
    _preload()
    tune_gc()
    return serve_zygote(int(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
