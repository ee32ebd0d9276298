"""The one background-thread primitive under every loop we run beside the app (the
flusher, the sealing service, the projection runner, the ``NOTIFY`` announcer, a sealing
process's ``LISTEN`` thread), and :class:`Deadline`, the time left of a ``flush``.

A :class:`BackgroundThread` runs its loop on a daemon thread until asked to stop; each
loop keeps its own wake-up condition (what it waits for differs) and reads
:attr:`~BackgroundThread.stopping`. Every loop retries its errors, so a thread that died
is never expected — but a recording must not wait on a dead thread: :meth:`revive`
starts it again, with a log line, which also covers a child process after ``fork`` (only
the forking thread survives one).

Example:
    >>> import threading
    >>> stop = threading.Event()
    >>> t = BackgroundThread("doc", lambda: stop.wait(), wake=stop.set).start()
    >>> t.alive, t.stop(timeout=5), t.alive
    (True, True, False)
    >>> Deadline(None).left() is None, Deadline(0).passed()
    (True, True)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("langgraph_external")

__all__ = ["BackgroundThread", "Deadline"]


class BackgroundThread:
    """A daemon thread named ``langgraph-external-<name>`` running ``loop``.

    Args:
        name: what the thread does (its name, and the log line if it dies).
        loop: runs until :attr:`stopping` (it reads it) or until it returns.
        wake: makes a waiting ``loop`` look at :attr:`stopping` now (notifies its
            condition); called by :meth:`stop`.
    """

    __slots__ = ("loop", "name", "stopping", "thread", "wake")

    def __init__(
        self, name: str, loop: Callable[[], None], *, wake: Callable[[], None] | None = None
    ) -> None:
        self.name = name
        self.loop = loop
        self.wake = wake
        self.stopping = False
        self.thread: threading.Thread | None = None  # None before start()

    def start(self) -> BackgroundThread:
        """Start the thread (once; :meth:`revive` starts it again)."""
        if self.thread is None:
            self.thread = threading.Thread(
                target=self.loop, name=f"langgraph-external-{self.name}", daemon=True
            )
            self.thread.start()
        return self

    @property
    def started(self) -> bool:
        """Whether the thread was started (it may have died since)."""
        return self.thread is not None

    @property
    def alive(self) -> bool:
        """Whether the thread is running."""
        return self.thread is not None and self.thread.is_alive()

    def revive(self) -> bool:
        """Start the thread again if it was started, died and is not stopping; ``True``
        when it did."""
        if self.thread is None or self.thread.is_alive() or self.stopping:
            return False
        logger.error("langgraph-external: the %s thread died; starting it again", self.name)
        self.thread = None
        self.start()
        return True

    def stop(self, timeout: float | None = 60.0) -> bool:
        """Ask the loop to stop, wake it, and wait for it; ``False`` if it is still
        running after ``timeout`` seconds."""
        self.stopping = True
        if self.wake is not None:
            self.wake()
        thread = self.thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout=timeout)
        return not thread.is_alive()


class Deadline:
    """The time left of a wait of ``timeout`` seconds (``None``: no limit).

    Example:
        >>> d = Deadline(30)
        >>> 0 < d.left() <= 30, d.passed()
        (True, False)
    """

    __slots__ = ("at",)

    def __init__(self, timeout: float | None) -> None:
        self.at = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float | None:
        """Seconds left (at least 0), ``None`` without a limit."""
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        """Whether the time is up."""
        return self.at is not None and time.monotonic() >= self.at
