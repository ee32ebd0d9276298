"""Sealing outside the app: the helper process an app starts with itself, and ``lgx worker``.

The app's threads share its GIL: sealing (hashing, encryption, canonical JSON), mirroring
the workspace and exporting traces would slow the app down even in a background thread.
So by default ``External(...)`` starts one helper process (:class:`HelperProcess`) that
runs a :class:`~langgraph_external.service.SealingService` — sealer, workspace mirror,
exporters — for the app's database, and stops it with itself; the app only captures. In
production, ``lgx worker`` processes (:func:`run_worker`) do the same for every app
process on a database: run any number of them, anywhere that reaches the database; they
share the work per thread (advisory locks) and wake on ``NOTIFY`` (polling as fallback).
With ``External(..., sealing="worker")`` an app captures only and starts nothing.

Example (a production layout)::

    $ lgx worker --dsn postgresql://lgx@db/app --workspace s3://audit/agent_workspace
    # in the app:
    External(dsn="postgresql://app@db/app", sealing="worker")
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import logging
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import psycopg

from langgraph_external.crypto import WorkspaceCipher

logger = logging.getLogger("langgraph_external")

__all__ = [
    "HelperProcess",
    "NotifyingBackend",
    "WorkerConfig",
    "notify_channel",
    "run_worker",
    "tune_gc",
]

_START_TIMEOUT = 60.0
_ZYGOTE_IDLE = 30.0  # seconds a zygote with no helper to serve waits before it exits
_WAKE_EVERY = 0.02  # seconds between two wake-ups of a helper (its batches linger as long)


def notify_channel(schema: str) -> str:
    """The ``LISTEN``/``NOTIFY`` channel captures of ``schema`` are announced on."""
    return f"lgx_capture_{schema}"


@dataclass
class WorkerConfig:
    """Everything a sealing process needs (picklable: it travels to a helper over a pipe).

    Args:
        dsn: the database with the saver's tables, the ledger and the captures.
        schema: the ledger schema.
        workspace: local path or fsspec URL of the workspace to mirror (``None``: none).
        storage_options, fsync: the workspace's fsspec options and fsync.
        cipher: the deployment key (``None``: ``$LGX_KEY`` or the key file).
        encrypt: encrypt exact copies.
        redactor: redaction of the readable views (checkpoint metadata and values).
        serde: the saver's serializer (``None``: LangGraph's default).
        exports: exporter configurations (``OtlpExport``, ``LangfuseExport``) to run beside
            the mirror.
        spool_dir: where refused captures are kept for a person.
        poll_interval, retry_interval: seconds between looks for work, and retries.
    """

    dsn: str
    schema: str = "langgraph_external"
    workspace: str | None = None
    storage_options: dict[str, Any] | None = None
    fsync: bool = False
    cipher: WorkspaceCipher | None = None
    encrypt: bool = True
    redactor: Any = None
    serde: Any = None
    exports: list[Any] = field(default_factory=list)
    spool_dir: str | None = None
    poll_interval: float = 1.0
    retry_interval: float = 1.0


class Running:
    """A started sealing service with what it owns (ledger, exporters, and with ``listen``
    a thread that wakes it on ``NOTIFY``)."""

    def __init__(self, config: WorkerConfig, *, listen: bool = False) -> None:
        from langgraph_external import ledger as ledger_sql
        from langgraph_external.keys import load_key
        from langgraph_external.pipeline import default_spool_dir
        from langgraph_external.processors import Offload, Redact, materialize, normalize
        from langgraph_external.service import SealingService
        from langgraph_external.sinks.postgres import PostgresLedger

        self.config = config
        cipher = config.cipher or load_key(None)
        with ledger_sql.connect(config.dsn, autocommit=True, connect_timeout=10) as conn:
            ledger_sql.setup(conn, config.schema)
        self.ledger = PostgresLedger(config.dsn, config.schema, cipher=cipher)
        projections: list[Any] = []
        if config.workspace is not None:
            from langgraph_external.sinks.workspace import WorkspaceProjection
            from langgraph_external.workspace import Workspace

            ws = Workspace(
                config.workspace, fsync=config.fsync, storage_options=config.storage_options
            )
            projections.append(
                WorkspaceProjection(ws, serde=config.serde, redactor=config.redactor, cipher=cipher)
            )
        spool = config.spool_dir or str(default_spool_dir())
        self.service = SealingService(
            self.ledger,
            projections=projections,
            cipher=cipher,
            encrypt=config.encrypt,
            serde=config.serde,
            processors=[materialize, Redact(config.redactor), Offload(), normalize],
            poll_interval=config.poll_interval,
            retry_interval=config.retry_interval,
            quarantine_dir=os.path.join(spool, "quarantine", self.ledger.identity()),
        ).start()
        self.exporters: list[Any] = []
        for export in config.exports:
            from langgraph_external.exporters.langfuse import LangfuseExporter
            from langgraph_external.exporters.otlp import OtlpExport, OtlpExporter

            otlp = export if isinstance(export, OtlpExport) else export.to_otlp()
            cls = LangfuseExporter if otlp.preset == "langfuse" else OtlpExporter
            exporter = cls(otlp, config.dsn, config.schema)
            exporter.attach(self.service)
            self.exporters.append(exporter)
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        if listen:
            self._listener = threading.Thread(
                target=self._listen, name="langgraph-external-listen", daemon=True
            )
            self._listener.start()

    def _listen(self) -> None:
        """Wake the sealer on ``NOTIFY`` (apps announce captures); reconnect on errors."""
        channel = notify_channel(self.config.schema)
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.config.dsn, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f'listen "{channel}"')
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self.service.wake()
            except psycopg.Error as exc:
                logger.debug("LISTEN connection lost (%s); polling until it is back", exc)
                self._stop.wait(self.config.retry_interval)

    def flush(
        self,
        threads: Collection[str],
        horizon: str,
        timeout: float | None,
        exports: bool = True,
    ) -> bool:
        start = time.monotonic()
        ok = self.service.flush(threads, horizon, timeout)
        for exporter in self.exporters if exports else ():
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
            ok = exporter.flush(left) and ok
        return ok

    def health(self) -> dict[str, Any]:
        out = self.service.health()
        if self.exporters:
            out["exports"] = {x.name: x.health() for x in self.exporters}
        return out

    def close(self, timeout: float = 30.0) -> bool:
        self._stop.set()
        start = time.monotonic()
        ok = self.service.close(timeout)
        for exporter in self.exporters:
            exporter.close()
        self.ledger.close()
        if self._listener is not None:
            self._listener.join(timeout=max(0.0, timeout - (time.monotonic() - start)))
        return ok


def run_worker(config: WorkerConfig, *, once: bool = False) -> int:
    """Seal, mirror and export for ``config`` until SIGTERM/SIGINT (``lgx worker``).

    ``once``: seal and project what is there, then return. Returns an exit code.
    """
    running = Running(config, listen=not once)
    stop = threading.Event()
    if once:
        ok = running.flush([], running.service.horizon(), None)
        return 0 if running.close() and ok else 1

    def _stop(*_: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.wait(1.0):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if running.close() else 1


# -- the helper process the app starts with itself ---------------------------------------
class HelperProcess:
    """The app's side of its sealing helper: a :class:`SealingBackend` over a pipe.

    Started at once, without waiting for the child to be ready (captures wait in the
    database meanwhile); a helper that died is started again by the next wake-up or
    flush. The child stops when the app closes it — or, if the app dies, when its end of
    the pipe closes: it seals what is sealable first.
    """

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self._payload = pickle.dumps(config)  # ConfigurationError below if it cannot be
        self._lock = threading.Lock()
        self._waiting: dict[int, _Answer] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._eof = False
        self._last_wake = 0.0
        self._conn: Connection | None = None
        self._wake_w: int | None = None
        self._ids = iter(range(1, 1 << 62))
        self.restarts = 0
        self._start()

    @staticmethod
    def picklable(config: WorkerConfig) -> str | None:
        """Why ``config`` cannot go to a helper process (``None``: it can)."""
        try:
            pickle.dumps(config)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def _start(self) -> None:
        parent, child = _pipe()
        wake_r, wake_w = os.pipe()
        fcntl.fcntl(wake_w, fcntl.F_SETFL, fcntl.fcntl(wake_w, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._proc = None
        self._pid = None
        self._eof = False
        zygote = _Zygote.get()
        if zygote is not None:
            self._pid = zygote.fork([child.fileno(), wake_r])
        if self._pid is None:  # no zygote here: a fresh interpreter (about a second)
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "langgraph_external.worker",
                    "--managed",
                    str(child.fileno()),
                    str(wake_r),
                ],
                pass_fds=(child.fileno(), wake_r),
                stdin=subprocess.DEVNULL,
                env=_child_env(),
                start_new_session=True,  # a Ctrl-C of the app's terminal is the app's
            )
            self._pid = self._proc.pid
        child.close()
        os.close(wake_r)
        self._conn = parent
        self._wake_w = wake_w
        parent.send_bytes(self._payload)
        threading.Thread(
            target=self._read, args=(parent,), name="langgraph-external-helper", daemon=True
        ).start()

    @property
    def pid(self) -> int | None:
        """The helper's process id (``None`` before it started)."""
        return self._pid

    def _alive(self) -> bool:
        if self._eof or self._pid is None:
            return False
        if self._proc is not None:
            return self._proc.poll() is None
        return _pid_alive(self._pid)

    def _revive(self) -> None:
        if self._alive():
            return
        logger.error(
            "langgraph-external: the sealing helper %s exited; starting it again", self._pid
        )
        self._close_pipes()
        self.restarts += 1
        self._start()

    def _close_pipes(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                os.close(self._wake_w)
            self._wake_w = None

    # -- SealingBackend ------------------------------------------------------------------
    def wake(self) -> None:
        """Captures were committed: one byte down the wake-up pipe (never blocks), at most
        every few milliseconds — a busy helper looks again soon after each batch anyway."""
        fd = self._wake_w
        now = time.monotonic()
        if fd is None or now - self._last_wake < _WAKE_EVERY:
            return
        self._last_wake = now
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(fd, b"w")

    def _ask(self, message: tuple[Any, ...], timeout: float | None) -> Any:
        """Send one request and wait for its answer (requests run concurrently: a health
        question is never stuck behind a flush)."""
        with self._lock:
            self._revive()
            conn = self._conn
            assert conn is not None
            rid = next(self._ids)
            waiter = _Answer()
            self._waiting[rid] = waiter
            try:
                conn.send((rid, *message))
            except (EOFError, OSError) as exc:
                self._waiting.pop(rid, None)
                raise ConnectionError(f"the sealing helper is gone: {exc}") from exc
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not waiter.done.wait(0.2):
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("the sealing helper did not answer in time")
                if not self._alive():
                    raise ConnectionError("the sealing helper exited")
            return waiter.value
        finally:
            self._waiting.pop(rid, None)

    def _read(self, conn: Connection) -> None:
        """Deliver the helper's answers to whoever waits for them, and its log records to
        this process's logging (a thread per helper)."""
        while True:
            try:
                rid, value = conn.recv()
            except (EOFError, OSError):
                if conn is self._conn:
                    self._eof = True  # the helper exited (or is exiting)
                return
            if rid == 0:  # a log record of the helper: the app's logging decides
                record = logging.makeLogRecord(value)
                target = logging.getLogger(record.name)
                if target.isEnabledFor(record.levelno):
                    target.handle(record)
                continue
            waiter = self._waiting.get(rid)
            if waiter is not None:
                waiter.value = value
                waiter.done.set()

    def flush(
        self,
        threads: Collection[str],
        horizon: str,
        timeout: float | None,
        *,
        exports: bool = True,
    ) -> bool:
        """Ask the helper to seal (and mirror, export) the app's captures so far."""
        try:
            return bool(
                self._ask(
                    ("flush", sorted(threads), horizon, timeout, exports),
                    None if timeout is None else timeout + _START_TIMEOUT,
                )
            )
        except (ConnectionError, TimeoutError) as exc:
            logger.warning("langgraph-external: flush could not finish: %s", exc)
            return False

    def health(self) -> dict[str, Any]:
        """The helper's health (``helper_down`` when it does not answer)."""
        try:
            out = dict(self._ask(("health",), 5.0))
        except (ConnectionError, TimeoutError) as exc:
            return {"helper_down": True, "error": str(exc), "restarts": self.restarts}
        out["helper_pid"] = self._proc.pid if self._proc is not None else None
        out["restarts"] = self.restarts
        return out

    def close(self, timeout: float = 30.0) -> bool:
        """Ask the helper to finish and exit; returns whether it sealed everything."""
        ok = False
        if self._alive():
            try:
                ok = bool(self._ask(("close", timeout), timeout + 10.0))
            except (ConnectionError, TimeoutError) as exc:
                logger.warning("langgraph-external: the sealing helper did not close: %s", exc)
        if self._proc is not None:
            self._close_pipes()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        elif self._pid is not None:
            # a zygote's child: gone when its end of the pipe closes (the zygote reaps it)
            deadline = time.monotonic() + 10
            while not self._eof and time.monotonic() < deadline:
                time.sleep(0.005)
            self._close_pipes()
            if not self._eof:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, signal.SIGKILL)
        return ok


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("MEM0_TELEMETRY", "False")
    return env


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Zygote:
    """A process that has imported what sealing needs and forks helpers on request.

    A fresh interpreter takes about a second to import the sealer, the workspace mirror
    and their dependencies; a fork of a process that already did takes milliseconds, and
    forking is safe because this process runs one thread only. One per app process,
    started with its first helper; it exits when the app does (its socket closes).
    """

    _lock = threading.Lock()
    _current: _Zygote | None = None

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "langgraph_external.worker", "--zygote", str(child.fileno())],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
            env=_child_env(),
            start_new_session=True,
        )
        child.close()
        self.sock = parent
        self._lock = threading.Lock()
        self.ready = False

    def _is_ready(self) -> bool:
        """Whether the zygote finished importing (it says so with one byte)."""
        if not self.ready:
            ready, _, _ = select.select([self.sock], [], [], 0)
            if ready and self.sock.recv(1) == b"r":
                self.ready = True
        return self.ready

    @classmethod
    def get(cls) -> _Zygote | None:
        """The running zygote (started now if needed); ``None`` where there is none."""
        if not hasattr(os, "fork") or os.environ.get("LGX_NO_ZYGOTE"):
            return None
        with cls._lock:
            z = cls._current
            if z is None or z.proc.poll() is not None:
                try:
                    z = cls._current = _Zygote()
                except OSError as exc:
                    logger.debug("no sealing zygote: %s", exc)
                    return None
            # still importing: this helper starts on its own, later ones from the zygote
            return z if z._is_ready() else None

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


def _zygote(sock_fd: int) -> int:
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
                code = _managed(fds[0], fds[1])
            finally:
                os._exit(code)
        children.add(pid)
        for fd in fds:
            os.close(fd)
        sock.sendall(struct.pack("!q", pid))


HELPER_NICENESS = 10
"""How much lower the helper's CPU priority is than the app's: sealing is never urgent (it
catches up in the app's idle moments), the app's latency is."""


def _yield_to_the_app() -> None:
    with contextlib.suppress(OSError, AttributeError):
        os.nice(HELPER_NICENESS)


GC_THRESHOLDS = (10_000, 20, 20)
"""The cyclic garbage collector's thresholds in a sealing process (Python's default is
``(700, 10, 10)``). Sealing allocates many short-lived objects and creates almost no
cycles, so a young generation of 700 objects sends the collector through the caches of
recent checkpoints over and over: a quarter of the sealer's CPU in ``cpu_accounting``."""


def tune_gc() -> None:
    """In a process of ours that seals (a helper, ``lgx worker``; never the app's own):
    what is imported so far is kept out of every collection (``gc.freeze``) and the
    collector runs less often (:data:`GC_THRESHOLDS`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _preload() -> None:
    """Import what a helper needs, once, in the zygote (forked helpers inherit it)."""
    import langgraph_external.service
    import langgraph_external.sinks.postgres
    import langgraph_external.sinks.workspace
    from langgraph_external import keys, pipeline  # noqa: F401

    with contextlib.suppress(ImportError):
        import langgraph_external.exporters.otlp  # noqa: F401
    with contextlib.suppress(ImportError):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: F401


class _Answer:
    __slots__ = ("done", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None


def _pipe() -> tuple[Connection, Connection]:
    from multiprocessing import Pipe

    return Pipe(duplex=True)


class NotifyingBackend:
    """``sealing="worker"``: the app seals nothing; ``lgx worker`` processes do.

    Captures are announced with ``NOTIFY`` (at most every ``interval`` seconds, from a
    background thread); :meth:`flush` waits until the workers sealed the app's captures.
    """

    def __init__(self, ledger: Any, schema: str, interval: float = 0.05) -> None:
        self.ledger = ledger
        self.channel = notify_channel(schema)
        self.interval = interval
        self._pending = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="langgraph-external-notify", daemon=True
        )
        self._thread.start()

    def wake(self) -> None:
        self._pending.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self._pending.wait(0.5):
                continue
            self._pending.clear()
            try:
                self.ledger.notify(self.channel)
            except Exception as exc:  # the workers poll too: a lost NOTIFY only delays
                logger.debug("NOTIFY failed: %s", exc)
            self._stop.wait(self.interval)

    def flush(
        self,
        threads: Collection[str],
        horizon: str,
        timeout: float | None,
        *,
        exports: bool = True,
    ) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wake()
        while True:
            try:
                if not self.ledger.unsealed(threads, horizon):
                    return True
            except Exception as exc:
                logger.debug("could not ask for unsealed captures: %s", exc)
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def health(self) -> dict[str, Any]:
        try:
            info = self.ledger.pending()
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        oldest = info.get("oldest")
        return {
            "unsealed_captures": info["captures"],
            "unsealed_threads": info["threads"],
            "sealer_lag_seconds": (
                round(time.time() - oldest.timestamp(), 3) if oldest is not None else 0.0
            ),
        }

    def close(self, timeout: float = 30.0) -> bool:
        self._stop.set()
        self._thread.join(timeout=5)
        return True


# -- the child's side --------------------------------------------------------------------
def _managed(conn_fd: int, wake_fd: int) -> int:
    """The helper's main loop: config first, then requests (each in a thread of its own)
    until close or EOF (the app is gone: seal what is sealable, then exit)."""
    conn = Connection(conn_fd)
    config: WorkerConfig = pickle.loads(conn.recv_bytes())
    send_lock = threading.Lock()
    _forward_logs(conn, send_lock)
    running = Running(config)
    closing = threading.Event()
    os.set_blocking(wake_fd, False)

    def answer(rid: int, what: str, args: list[Any]) -> None:
        if what == "flush":
            value: Any = running.flush(*args)
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


def _main(argv: Sequence[str]) -> int:
    if len(argv) == 3 and argv[0] == "--managed":
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the app decides when it stops
        _yield_to_the_app()
        tune_gc()
        return _managed(int(argv[1]), int(argv[2]))
    if len(argv) == 2 and argv[0] == "--zygote":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _yield_to_the_app()  # its helpers inherit it
        _preload()
        tune_gc()  # its helpers inherit it
        return _zygote(int(argv[1]))
    raise SystemExit("usage: lgx worker (this module is started by External)")


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
