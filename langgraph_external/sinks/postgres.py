"""The Postgres ledger sink: batched, pipelined inserts in one transaction per batch."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Sequence
from typing import Any

import psycopg

from langgraph_external import ledger
from langgraph_external.errors import ChainConflictError
from langgraph_external.events import Event
from langgraph_external.workspace import encode_thread_id

logger = logging.getLogger("langgraph_external")


class LedgerSink:
    """Writes events, thread positions and the checkpoint index to the ledger schema.

    One dedicated connection, opened lazily and reopened after a failure. Each batch
    is one transaction: events (``executemany`` in pipeline mode), thread positions and
    checkpoint-index rows commit together or not at all.

    Args:
        dsn: libpq connection string.
        schema: ledger schema (validated).
    """

    def __init__(self, dsn: str, schema: str = ledger.DEFAULT_SCHEMA) -> None:
        self.dsn = dsn
        self.schema = ledger.validate_schema(schema)
        digest = hashlib.sha256(f"{dsn}|{schema}".encode()).hexdigest()[:12]
        self.name = f"ledger-{digest}"
        self._conn: psycopg.Connection[Any] | None = None
        self._sql = {
            key: ledger.q(text, self.schema)
            for key, text in {
                "event": ledger.INSERT_EVENT,
                "thread": ledger.UPSERT_THREAD,
                "checkpoint": ledger.UPSERT_CHECKPOINT,
                "positions": ledger.SELECT_POSITIONS,
                "hashes": ledger.SELECT_HASHES,
                "del_cp": ledger.DELETE_CHECKPOINT_ROWS,
                "mark_deleted": ledger.MARK_THREAD_DELETED,
                "copy_cp": ledger.COPY_CHECKPOINT_ROWS,
                "copy_events": ledger.COPY_EVENTS,
                "copy_checkpoints": ledger.COPY_CHECKPOINTS,
                "late": ledger.ADD_LATE_WRITER,
            }.items()
        }
        self._del_thread = [ledger.q(t, self.schema) for t in ledger.DELETE_THREAD_ROWS]

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = ledger.connect(self.dsn, options="-c timezone=UTC")
        return self._conn

    def write(self, events: Sequence[Event]) -> None:
        """Insert ``events``; replays of rows already stored are verified, not duplicated."""
        conn = self._connection()
        try:
            with conn.transaction():
                self._write(conn, events)
        except psycopg.Error:
            if conn.broken:
                self._conn = None
            raise

    def _write(self, conn: psycopg.Connection[Any], events: Sequence[Event]) -> None:
        rows: list[tuple[Any, ...]] = []
        threads: dict[str, tuple[Any, Any, int, str]] = {}
        checkpoints: list[tuple[Any, ...]] = []
        late: list[dict[str, Any]] = []
        with conn.cursor() as cur:
            for e in events:
                if e.kind == "thread_deleted":
                    self._flush_rows(cur, rows, threads, checkpoints)
                    rows, threads, checkpoints = [], {}, []
                    cur.execute(self._del_thread[0], (e.thread_id, e.seq))
                    cur.execute(self._del_thread[1], (e.thread_id,))
                    cur.execute(self._sql["mark_deleted"], (e.ts, e.thread_id))
                elif e.kind in ("thread_pruned", "runs_deleted"):
                    for ns, ids in (e.payload.get("removed") or {}).items():
                        checkpoints_removed = list(ids)
                        if checkpoints_removed:
                            cur.execute(self._sql["del_cp"], (e.thread_id, ns, checkpoints_removed))
                elif e.kind == "thread_copied":
                    src = e.payload["source_thread_id"]
                    cur.execute(
                        self._sql["copy_cp"],
                        {
                            "src": src,
                            "dst": e.thread_id,
                            "src_dir": f"threads/{encode_thread_id(src)}/",
                            "dst_dir": f"threads/{encode_thread_id(e.thread_id)}/",
                        },
                    )
                rows.append(_event_row(e))
                if e.kind == "writes" and e.payload.get("late_for"):
                    late.append(
                        {
                            "task_id": e.task_id,
                            "node": e.node,
                            "thread_id": e.thread_id,
                            "ns": e.checkpoint_ns,
                            "child": e.payload["late_for"],
                        }
                    )
                first = threads.get(e.thread_id)
                threads[e.thread_id] = (first[0] if first else e.ts, e.ts, e.seq or 0, e.hash or "")
                if e.kind == "checkpoint":
                    checkpoints.append(_checkpoint_row(e))
            self._flush_rows(cur, rows, threads, checkpoints)
            if late:
                cur.executemany(self._sql["late"], late)

    def _flush_rows(
        self,
        cur: psycopg.Cursor[Any],
        rows: list[tuple[Any, ...]],
        threads: dict[str, tuple[Any, Any, int, str]],
        checkpoints: list[tuple[Any, ...]],
    ) -> None:
        if not rows:
            return
        if not self._copy(cur, "copy_events", rows):
            # a replay of rows already stored: insert what is missing, verify the rest
            cur.executemany(self._sql["event"], rows, returning=False)
            if cur.rowcount != len(rows):
                self._verify_existing(cur, rows)
        cur.executemany(
            self._sql["thread"],
            [(tid, a, b, seq, h) for tid, (a, b, seq, h) in threads.items()],
        )
        if checkpoints and not self._copy(cur, "copy_checkpoints", checkpoints):
            cur.executemany(self._sql["checkpoint"], checkpoints)

    def _copy(self, cur: psycopg.Cursor[Any], which: str, rows: list[tuple[Any, ...]]) -> bool:
        """COPY ``rows`` (the fast path); ``False`` if some already exist (nothing copied)."""
        try:
            with cur.connection.transaction(), cur.copy(self._sql[which]) as copy:
                for row in rows:
                    copy.write_row(row)
        except psycopg.errors.UniqueViolation:
            return False
        return True

    def _verify_existing(self, cur: psycopg.Cursor[Any], rows: list[tuple[Any, ...]]) -> None:
        by_thread: dict[str, dict[int, str]] = {}
        for r in rows:
            by_thread.setdefault(r[0], {})[r[1]] = r[-1]
        for tid, wanted in by_thread.items():
            cur.execute(self._sql["hashes"], (tid, list(wanted)))
            for _, seq, stored in cur.fetchall():
                if wanted.get(seq) not in (None, stored):
                    raise ChainConflictError(
                        f"thread {tid!r} seq {seq}: the ledger holds a different event "
                        "(another writer recorded this thread concurrently)"
                    )

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Last ``(seq, hash)`` per thread from the ``threads`` table."""
        conn = self._connection()
        with conn.transaction():
            rows = conn.execute(self._sql["positions"], (list(thread_ids),)).fetchall()
        return {r[0]: (int(r[1]), r[2]) for r in rows}

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _event_row(e: Event) -> tuple[Any, ...]:
    return (
        e.thread_id,
        e.seq,
        e.event_id,
        e.v,
        e.ts,
        e.kind,
        e.name,
        e.status,
        e.checkpoint_ns,
        e.checkpoint_id,
        e.run_id,
        e.parent_run_id,
        e.root_run_id,
        e.node,
        e.step,
        e.task_id,
        e.duration_ms,
        json.dumps(e.payload, ensure_ascii=False, default=str),
        e.raw,
        e.artifact,
        e.redactions,
        e.prev,
        e.hash,
    )


def _checkpoint_row(e: Event) -> tuple[Any, ...]:
    p = e.payload
    return (
        e.thread_id,
        e.checkpoint_ns,
        e.checkpoint_id,
        p.get("parent_checkpoint_id"),
        e.step,
        p.get("source"),
        e.run_id,
        [w.get("task_id") for w in p.get("writers", [])],
        sorted({w["node"] for w in p.get("writers", []) if w.get("node")}),
        sorted(p.get("channels", {})),
        e.ts,
        int(p.get("size", 0)),
        p.get("path"),
        e.seq,
    )
