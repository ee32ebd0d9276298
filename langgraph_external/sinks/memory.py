"""An in-memory sink: keeps every event in a list (tests and ``langgraph_external.testing``)."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence

from langgraph_external.events import Event


class InMemorySink:
    """Collects events in :attr:`events`, in the order the pipeline delivered them.

    Example:
        >>> sink = InMemorySink()
        >>> sink.write([Event.new("error", "t").replace(seq=1, hash="h")])
        >>> [e.seq for e in sink.events]
        [1]
    """

    name = "memory"

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def write(self, events: Sequence[Event]) -> None:
        """Append ``events``; an event already held (same thread and seq) is skipped."""
        with self._lock:
            held = {(e.thread_id, e.seq) for e in self.events[-len(events) * 2 :]}
            self.events.extend(e for e in events if (e.thread_id, e.seq) not in held)

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Last sequence position per thread."""
        wanted = set(thread_ids)
        out: dict[str, tuple[int, str]] = {}
        with self._lock:
            for e in self.events:
                if e.thread_id in wanted and e.seq is not None and e.hash is not None:
                    out[e.thread_id] = (e.seq, e.hash)
        return out

    def close(self) -> None:
        """Nothing to release."""
