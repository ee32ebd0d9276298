"""Who hears about recording: flush hooks (sources emit what they still hold) and
listeners of recorded events fed by read-back (when no sealing service runs here).

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> from langgraph_external.pipeline.buffer import EventBuffer
    >>> hooks = FlushHooks(); seen = []
    >>> hooks.add(lambda: seen.append(1)); hooks.run(); seen
    [1]
    >>> ReadBackListeners(EventBuffer(1.0), InMemoryLedger()).feed()
"""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from langgraph_external.pipeline.buffer import EventBuffer
from langgraph_external.pipeline.recovery import read_all
from langgraph_external.record.events import Event

logger = logging.getLogger("langgraph_external")

__all__ = ["FlushHooks", "Listener", "ReadBackListeners"]

Listener = Callable[[Sequence[Event]], None]


class FlushHooks:
    """Callables run at the start of every flush; bound methods are held weakly, so a
    source that is gone is not kept alive."""

    def __init__(self) -> None:
        self._hooks: list[Callable[[], Callable[[], None] | None]] = []

    def add(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` at the start of every flush."""
        self._hooks.append(weakref.WeakMethod(fn) if inspect.ismethod(fn) else (lambda: fn))

    def run(self) -> None:
        """Run the hooks whose owner is alive (forget the others)."""
        alive = []
        for ref in self._hooks:
            hook = ref()
            if hook is not None:
                hook()
                alive.append(ref)
        self._hooks = alive


class ReadBackListeners:
    """Listeners called at the end of each flush with the events captured since, read back
    from the ledger (the buffer notes their ids while listeners are registered)."""

    def __init__(self, buffer: EventBuffer, ledger: Any) -> None:
        self.buffer = buffer
        self.ledger = ledger
        self._listeners: list[Listener] = []

    def add(self, fn: Listener) -> None:
        """Call ``fn`` after each flush."""
        with self.buffer.cv:
            self._listeners.append(fn)
            if self.buffer.watched is None:
                self.buffer.watched = {}

    def remove(self, fn: Listener) -> None:
        """Stop calling ``fn``."""
        with self.buffer.cv:
            if fn in self._listeners:
                self._listeners.remove(fn)
            if not self._listeners:
                self.buffer.watched = None

    def feed(self) -> None:
        """Call the listeners with what was captured since the last time."""
        with self.buffer.cv:
            watched, listeners = self.buffer.watched, list(self._listeners)
            if watched is not None:
                self.buffer.watched = {}
        if not watched or not listeners:
            return
        for tid, ids in watched.items():
            events = [e for e in read_all(self.ledger, tid) if e.event_id in ids]
            for fn in listeners:
                try:
                    fn(events)
                except Exception:
                    logger.exception("event listener failed")
