"""An in-memory ledger: the same contract as Postgres, in a list (tests, doctests)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from langgraph_external.errors import PositionMovedError
from langgraph_external.record.capture import Capture
from langgraph_external.record.events import Event


class InMemoryLedger:
    """Holds every stored event in :attr:`events`, in commit order.

    Example:
        >>> ledger = InMemoryLedger()
        >>> ledger.append([Event.new("error", "t").replace(seq=1, hash="h")])
        >>> [e.seq for e in ledger.events], ledger.positions(["t"])
        ([1], {'t': (1, 'h')})
    """

    name = "memory"

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._by_thread: dict[str, list[Event]] = {}
        self._cursors: dict[tuple[str, str], tuple[int, str | None]] = {}
        self.captures: list[Capture] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._sealing = threading.Lock()  # one sealer at a time
        self._legacy: set[str] = set()  # threads keeping the folder names of the old rule

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Last ``(seq, hash)`` per thread."""
        with self._lock:
            held = {t: self._by_thread.get(t) for t in thread_ids}
            return {t: (evs[-1].seq or 0, evs[-1].hash or "") for t, evs in held.items() if evs}

    def append(self, events: Sequence[Event], *, legacy_names: Collection[str] = ()) -> None:
        """Store ``events`` all or nothing; a group not at its thread's head is refused
        (``legacy_names``: threads that keep their folder names of the old rule)."""
        with self._lock:
            self._legacy.update(legacy_names)
            heads: dict[str, tuple[int, str | None]] = {}
            for e in events:
                held = self._by_thread.get(e.thread_id, [])
                last = (held[-1].seq or 0, held[-1].hash) if held else (0, None)
                head, head_hash = heads.get(e.thread_id, last)
                if e.seq != head + 1 or (head and e.prev != head_hash):
                    raise PositionMovedError(
                        f"thread {e.thread_id!r} is at seq {head}, not {(e.seq or 1) - 1}"
                    )
                heads[e.thread_id] = (e.seq or 0, e.hash)
            for e in events:
                if e.kind == "thread_deleted":
                    self._by_thread[e.thread_id] = []
                self._by_thread.setdefault(e.thread_id, []).append(e)
                self.events.append(e)

    def recorded(self, thread_id: str, event_ids: Collection[str]) -> set[str]:
        """Which of ``event_ids`` are stored (or captured) for ``thread_id``."""
        wanted = set(event_ids)
        with self._lock:
            held = {e.event_id for e in self._by_thread.get(thread_id, [])}
            held |= {c.event_id for c in self.captures if c.thread_id == thread_id}
            return held & wanted

    def capture(self, captures: Sequence[Capture]) -> None:
        """Keep captures until a sealer takes them (in order)."""
        now = datetime.now(timezone.utc)
        with self._lock:
            self.captures.extend(replace(c, id=next(self._ids), captured_at=now) for c in captures)

    def pending(self) -> dict[str, Any]:
        """Captures waiting for a sealer."""
        with self._lock:
            oldest = min((c.captured_at for c in self.captures if c.captured_at), default=None)
            return {
                "captures": len(self.captures),
                "oldest": oldest,
                "threads": len({c.thread_id for c in self.captures}),
                "behind_running_transactions": 0,
            }

    def horizon(self) -> str:
        """Every capture stored so far is below it (kept in order here)."""
        return str(next(self._ids))

    def unsealed(self, thread_ids: Collection[str], horizon: str) -> int:
        """Captures of ``thread_ids`` stored before ``horizon`` not sealed yet."""
        wanted = set(thread_ids)
        with self._lock:
            return sum(
                1 for c in self.captures if c.thread_id in wanted and (c.id or 0) < int(horizon)
            )

    @contextmanager
    def sealing(self, max_threads: int = 64, max_captures: int = 1000) -> Iterator[Any]:
        """Claim captures for one sealer (see ``PostgresLedger.sealing``)."""
        with self._sealing:
            with self._lock:
                tids = list(dict.fromkeys(c.thread_id for c in self.captures))[:max_threads]
                caps = [c for c in self.captures if c.thread_id in tids][:max_captures]
            if not caps:
                yield None
                return
            yield _MemorySealTx(self, caps, self.positions(tids), legacy=self.legacy_named(tids))

    def read(self, thread_id: str, after: int = 0, limit: int = 2000) -> list[Event]:
        """Events with ``seq > after``."""
        with self._lock:
            return [e for e in self._by_thread.get(thread_id, []) if (e.seq or 0) > after][:limit]

    def lagging(self, projection: str, limit: int = 1000) -> list[tuple[str, int, int]]:
        """Threads ``projection`` is behind on."""
        with self._lock:
            out = []
            for t, evs in self._by_thread.items():
                seq, err = self._cursors.get((projection, t), (0, None))
                if evs and (evs[-1].seq or 0) > seq and err is None:
                    out.append((t, evs[-1].seq or 0, seq))
            return out[:limit]

    def set_cursor(self, projection: str, thread_id: str, seq: int, error: str | None) -> None:
        """Remember a projection's position."""
        with self._lock:
            self._cursors[(projection, thread_id)] = (seq, error)

    def legacy_named(self, thread_ids: Collection[str]) -> set[str]:
        """Which of ``thread_ids`` keep their folder names of the old rule (only those
        :meth:`append` was told of: see ``PostgresLedger``)."""
        with self._lock:
            return self._legacy & set(thread_ids)

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class _MemorySealTx:
    ledger: InMemoryLedger
    captures: list[Capture]
    heads: dict[str, tuple[int, str]]
    conn: Any = None
    legacy: set[str] = field(default_factory=set)

    def checkpoint_refs(self, thread_id: str, ns: str, checkpoint_id: str) -> dict[str, Any] | None:
        """The channel references of a sealed checkpoint (see ``SealTx.checkpoint_refs``)."""
        with self.ledger._lock:
            for e in reversed(self.ledger._by_thread.get(thread_id, [])):
                if (e.kind, e.checkpoint_ns, e.checkpoint_id) == ("checkpoint", ns, checkpoint_id):
                    return dict(e.payload.get("channels") or {})
        return None

    def store(
        self,
        events: Sequence[Event],
        captures: Mapping[str, Sequence[int]],
        copied: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.ledger.append(events)
        done = {i for ids in captures.values() for i in ids}
        with self.ledger._lock:
            self.ledger.captures = [c for c in self.ledger.captures if c.id not in done]
