"""The app's side of its sealing helper process (:class:`HelperProcess`): started with the
app (forked from the zygote, or a fresh interpreter), woken through a pipe each time the
app captures, asked to flush, report health and close; started again if it died. The
helper's own side is :mod:`~langgraph_external.processes.helper_main`.

Example:
    >>> from langgraph_external.settings import Settings
    >>> HelperProcess.picklable(Settings("postgresql://db/app")) is None
    True
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import pickle
import signal
import subprocess
import threading
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any

from langgraph_external.pipeline.backend import FlushRequest
from langgraph_external.pipeline.background import BackgroundThread, Deadline
from langgraph_external.processes.zygote import Zygote, start_helper_main
from langgraph_external.settings import Settings

logger = logging.getLogger("langgraph_external")

__all__ = ["HelperProcess"]

_START_TIMEOUT = 60.0
_WAKE_EVERY = 0.02  # seconds between two wake-ups of a helper (its batches linger as long)


class HelperProcess:
    """The app's side of its sealing helper: a :class:`SealingBackend` over a pipe.

    Started at once, without waiting for the child to be ready (captures wait in the
    database meanwhile); a helper that died is started again by the next wake-up or
    flush. The child stops when the app closes it — or, if the app dies, when its end of
    the pipe closes: it seals what is sealable first.
    """

    def __init__(self, config: Settings) -> None:
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
        self._closed = False
        self._start()

    @staticmethod
    def picklable(config: Settings) -> str | None:
        """Why ``config`` cannot go to a helper process (``None``: it can).

        Besides what cannot be pickled at all, a function or class of the app's own
        ``__main__`` (a redactor defined in the script the app runs) pickles by a name
        the helper cannot import — its ``__main__`` is the helper's: it would fail to
        start, again and again, and nothing would be sealed.
        """
        try:
            refs = _MainRefs(io.BytesIO())
            refs.dump(config)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        if refs.found:
            return f"{refs.found[0]} is defined in the app's __main__ (the helper cannot import it)"
        return None

    def _start(self) -> None:
        parent, child = Pipe(duplex=True)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        self._proc = None
        self._pid = None
        self._eof = False
        fds = (child.fileno(), wake_r)
        zygote = Zygote.get()
        if zygote is not None:
            self._pid = zygote.fork(list(fds))
        if self._pid is None:  # no zygote here: a fresh interpreter (about a second)
            self._proc = start_helper_main("--managed", *fds, fds=fds)
            self._pid = self._proc.pid
        child.close()
        os.close(wake_r)
        self._conn = parent
        self._wake_w = wake_w
        parent.send_bytes(self._payload)
        BackgroundThread("helper", functools.partial(self._read, parent)).start()

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
        every few milliseconds — a busy helper looks again soon after each batch anyway.
        A helper that died (its pipe closed) is started again here, so an app that never
        asks for ``flush()`` or ``health()`` keeps being sealed."""
        now = time.monotonic()
        if now - self._last_wake < _WAKE_EVERY:
            return
        self._last_wake = now
        if self._eof and not self._closed:
            try:
                with self._lock:
                    if not self._closed:
                        self._revive()
            except Exception as exc:  # the app's capture goes on; the next wake-up retries
                logger.warning("langgraph-external: the sealing helper did not start: %s", exc)
        fd = self._wake_w
        if fd is None:
            return
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(fd, b"w")

    def _ask(
        self, message: tuple[Any, ...], timeout: float | None, *, closing: bool = False
    ) -> Any:
        """Send one request and wait for its answer (concurrently: health never waits for a
        flush). A helper found dead — before the request went out or while it was waited
        for — is restarted and asked again, once, unless closing (every request is one a
        new helper can answer as well: flush, health)."""
        deadline = Deadline(timeout)
        for retry in (False, True):
            rid, waiter = self._send(message, closing)
            try:
                while not waiter.done.wait(0.2):
                    if deadline.passed():
                        raise TimeoutError("the sealing helper did not answer in time")
                    if not self._alive():
                        break
                else:
                    return waiter.value
            finally:
                self._waiting.pop(rid, None)
            if closing or retry:
                raise ConnectionError("the sealing helper exited")
            # it died after the request went out (or just before: a zygote's child that was
            # killed looks alive until the zygote reaps it): a new one is asked
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(self, message: tuple[Any, ...], closing: bool) -> tuple[int, _Answer]:
        """Send one request to a live helper (restarted if it is found dead, unless closing)."""
        with self._lock:
            if self._closed and not closing:
                raise ConnectionError("the sealing helper was closed")
            rid, waiter = next(self._ids), _Answer()
            for retry in (False, True):
                if not closing:
                    self._revive()
                conn = self._conn
                if conn is None:
                    raise ConnectionError("the sealing helper is gone")
                self._waiting[rid] = waiter
                try:
                    conn.send((rid, *message))
                    return rid, waiter
                except (EOFError, OSError) as exc:
                    self._waiting.pop(rid, None)
                    if closing or retry:
                        raise ConnectionError(f"the sealing helper is gone: {exc}") from exc
                    self._eof = True  # it died before its reader saw the pipe close
        raise AssertionError("unreachable")  # pragma: no cover

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

    def flush(self, request: FlushRequest) -> bool:
        """Ask the helper to seal (and mirror, export) the app's captures so far."""
        timeout = None if request.timeout is None else request.timeout + _START_TIMEOUT
        try:
            return bool(self._ask(("flush", request), timeout))
        except (ConnectionError, TimeoutError) as exc:
            logger.warning("langgraph-external: flush could not finish: %s", exc)
            return False

    def health(self) -> dict[str, Any]:
        """The helper's health (``helper_down`` when it does not answer; ``closed`` once
        it was closed: asking starts nothing)."""
        if self._closed:
            return {"closed": True, "restarts": self.restarts}
        try:
            out = dict(self._ask(("health",), 5.0))
        except (ConnectionError, TimeoutError) as exc:
            return {"helper_down": True, "error": str(exc), "restarts": self.restarts}
        out["helper_pid"] = self._proc.pid if self._proc is not None else None
        out["restarts"] = self.restarts
        return out

    def close(self, timeout: float = 30.0) -> bool:
        """Ask the helper to finish and exit; returns whether it sealed everything.
        Afterwards nothing starts it again (a later flush returns ``False``)."""
        with self._lock:
            was_closed, self._closed = self._closed, True
        if was_closed:
            return False
        ok = False
        if self._alive():
            try:
                ok = bool(self._ask(("close", timeout), timeout + 10.0, closing=True))
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
            deadline = Deadline(10)
            while not self._eof and not deadline.passed():
                time.sleep(0.005)
            self._close_pipes()
            if not self._eof:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, signal.SIGKILL)
        return ok


class _MainRefs(pickle.Pickler):
    """A pickler that notes what of ``__main__`` the pickle refers to by name."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self.found: list[str] = []

    def reducer_override(self, obj: Any) -> Any:
        for target in (obj, type(obj)):
            if getattr(target, "__module__", None) in ("__main__", "__mp_main__"):
                self.found.append(f"{getattr(target, '__qualname__', target)!s}")
                break
        return NotImplemented


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, it just belongs to someone else
    return True


class _Answer:
    __slots__ = ("done", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
