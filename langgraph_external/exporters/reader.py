"""What an exporter reads from the ledger, on a connection of its own: lean events (no
bulk), its cursors, the markers a mapper is rebuilt from, the threads to visit, the spans
waiting.

Example:
    >>> r = ExportReader("postgresql://db/app", "langgraph_external", "otlp")
    >>> r.name, sorted(r.sql)[:2]
    ('otlp', ['cursor', 'events'])
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg

from langgraph_external.errors import LedgerUnavailableError
from langgraph_external.exporters._langfuse_map import END_KINDS, POINT_KINDS
from langgraph_external.ledger import queries, statements
from langgraph_external.ledger import schema as ledger_sql
from langgraph_external.ledger.postgres import unpack_detail
from langgraph_external.record.events import Event
from langgraph_external.record.thread_ids import REPLAY_PREFIX

__all__ = ["ExportReader"]


class ExportReader:
    """Reads of the ledger for the export whose cursor is ``name`` (connection kept open;
    reopened after a failure, which raises :class:`LedgerUnavailableError`)."""

    def __init__(self, dsn: str, schema: str, name: str) -> None:
        self.dsn = dsn
        self.name = name
        self.sql = {
            k: ledger_sql.q(v, schema)
            for k, v in {
                "cursor": queries.SELECT_CURSOR,
                "markers": queries.SELECT_RUN_MARKERS,
                "threads": queries.SELECT_EXPORT_THREADS,
                "reset": statements.RESET_CURSORS,
                "open_chain": queries.OPEN_CHAIN,
                "events": queries.SELECT_EVENTS_LEAN,
                "waiting": queries.COUNT_WAITING,
            }.items()
        }
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The exporter's own connection (kept open; reopened after a failure)."""
        with self._lock:
            try:
                if self._conn is None or self._conn.closed or self._conn.broken:
                    self._conn = ledger_sql.connect(
                        self.dsn,
                        autocommit=True,
                        connect_timeout=10,
                        options="-c timezone=UTC -c statement_timeout=30000",
                    )
                yield self._conn
            except psycopg.Error as exc:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                raise LedgerUnavailableError(f"cannot read the ledger: {exc}") from exc

    def events(self, thread_id: str, after: int, limit: int) -> list[Event]:
        """Events after ``after``; checkpoint and writes events without their bulk."""
        with self.connection() as conn:
            rows = conn.execute(self.sql["events"], (thread_id, after, limit)).fetchall()
        return [
            Event.from_envelope(ledger_sql.row_to_envelope(row[:-1])).replace(
                attachments=unpack_detail(row[-1])[1]
            )
            for row in rows
        ]

    def cursor(self, thread_id: str) -> int:
        """This export's recorded cursor of ``thread_id`` (0: none)."""
        with self.connection() as conn:
            row = conn.execute(self.sql["cursor"], (self.name, thread_id)).fetchone()
        return int(row[0]) if row else 0

    def markers(self, thread_id: str, upto: int) -> list[tuple[int, str, Mapping[str, Any]]]:
        """``(seq, kind, payload)`` of the runs' starts and interrupts up to ``upto``."""
        with self.connection() as conn:
            rows = conn.execute(self.sql["markers"], (thread_id, upto)).fetchall()
        return [(int(r[0]), r[1], r[2] or {}) for r in rows]

    def open_chain(self, thread_id: str) -> list[tuple[Any, ...]]:
        """``(seq, kind, run_id, payload)`` of the thread's latest runs (trace context)."""
        with self.connection() as conn:
            return [tuple(r) for r in conn.execute(self.sql["open_chain"], (thread_id,))]

    def threads(
        self, thread_ids: Sequence[str], since: datetime | None, all_threads: bool
    ) -> list[tuple[str, int, int]]:
        """``(thread_id, ledger seq, exported seq)`` of the threads an export would visit."""
        with self.connection() as conn:
            rows = conn.execute(
                self.sql["threads"],
                {
                    "projection": self.name,
                    "all": bool(all_threads),
                    "threads": list(thread_ids),
                    "since": since,
                    "replays": REPLAY_PREFIX,
                },
            ).fetchall()
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def reset(self, thread_ids: Sequence[str]) -> None:
        """Set the cursors of ``thread_ids`` back to the start."""
        with self.connection() as conn:
            conn.execute(self.sql["reset"], {"projection": self.name, "threads": list(thread_ids)})

    def count_waiting(self, thread_ids: Sequence[str] = ()) -> dict[str, int]:
        """Spans not accepted yet, per thread: the events after the cursor that complete one."""
        with self.connection() as conn:
            rows = conn.execute(
                self.sql["waiting"],
                {
                    "projection": self.name,
                    "threads": list(thread_ids),
                    "ends": list(END_KINDS),
                    "points": list(POINT_KINDS),
                },
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows if r[1]}

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
