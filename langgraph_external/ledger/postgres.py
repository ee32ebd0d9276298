"""The Postgres ledger: the system of record.

Sequenced events are stored with one rule: a thread's position advances only from the
position the writer saw (``advance_thread`` in the v4 migration raises ``LX001``
otherwise), in the same transaction as the events. So a thread's events have no gaps,
two writers never interleave, and commit order is ``seq`` order. The statements run
either inside the official saver's transaction (the checkpointer's outbox: the record
commits with the checkpoint it describes) or in a transaction of their own.

Projections (the workspace, exporters) read the record back with :meth:`read` and keep
their cursor here (:meth:`lagging`, :meth:`set_cursor`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from langgraph_external.errors import LedgerUnavailableError, PositionMovedError
from langgraph_external.ledger import statements as stmt
from langgraph_external.ledger.pools import ledger_pool
from langgraph_external.ledger.rows import (
    capture_from_row,
    checkpoint_row,
    event_from_row,
    pack_detail,
    unpack_detail,
)
from langgraph_external.ledger.schema import DEFAULT_SCHEMA, legacy_named, validate_schema
from langgraph_external.ledger.writes import execute_in, head_tag
from langgraph_external.record.capture import Capture
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.escapes import unmark
from langgraph_external.record.events import Event
from langgraph_external.upstream.saver_ops import SAVER_BLOBS_SQL

logger = logging.getLogger("langgraph_external")

# what one read() of a thread's events holds at most (then the caller reads on): a
# fresh workspace catching up on a 100-turn chat held ~270 MB at once without it
READ_BUDGET = 2 * 1024 * 1024
_READ_PAGE = (32, 512)  # rows of the first page, most rows of a page


class PostgresLedger:
    """Stores sequenced events in the ledger schema and serves them to projections.

    Args:
        dsn: libpq connection string.
        schema: ledger schema (validated).
        connect_timeout: seconds to wait for a connection (every network call is bounded:
            statements time out after 30 s, idle transactions after 60 s).
        cipher: the deployment key; every head move stores its keyed tag
            (:func:`head_tag`), which ``lgx verify`` checks.

    Example:
        >>> PostgresLedger("postgresql:///nowhere").name
        'ledger'
    """

    name = "ledger"

    def __init__(
        self,
        dsn: str,
        schema: str = DEFAULT_SCHEMA,
        *,
        connect_timeout: int = 10,
        cipher: WorkspaceCipher | None = None,
    ) -> None:
        self.dsn = dsn
        self.cipher = cipher  # tags each thread's head (see the v5 migration)
        self.schema = validate_schema(schema)
        self.connect_timeout = connect_timeout
        self._pool: ConnectionPool[Any] | None = None
        self._pool_lock = threading.Lock()
        self.sql = stmt.LedgerStatements(self.schema)

    # -- connection ------------------------------------------------------------------------
    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the ledger's small pool (:func:`ledger_pool`).

        A pool, not one connection per thread: look-ups also run on LangGraph's
        short-lived executor threads, and a connection per thread would outlive them.
        """
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ledger_pool(self.dsn, self.connect_timeout)
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise LedgerUnavailableError(f"cannot connect to the ledger database: {exc}") from exc

    @contextmanager
    def _session(self) -> Iterator[psycopg.Connection[Any]]:
        """:meth:`_connection`, its database errors :func:`translate`-d."""
        try:
            with self._connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def _rows(self, query: Any, params: Any = None) -> list[Any]:
        """The rows ``query`` returns, on a connection of the pool (errors translated)."""
        with self._session() as conn:
            return conn.execute(query, params).fetchall()

    def identity(self) -> str:
        """A name for this ledger that equivalent DSNs share (server, database, schema).

        Local state kept for a ledger (the write-ahead log) is keyed by it, so writing
        the DSN differently never orphans it.
        """
        # the saver's statements come with langgraph, which a ledger's users (``lgx``
        # commands, exporters) otherwise never import
        from langgraph_external.upstream.langgraph import IDENTITY_SQL  # lazy: start-up time

        row = self._rows(IDENTITY_SQL)[0]
        raw = f"{row[0]}|{row[1]}|{self.schema}"
        return "ledger-" + hashlib.sha256(raw.encode()).hexdigest()[:16]

    # -- writing ---------------------------------------------------------------------------
    def execute_in(
        self,
        cur: Any,
        events: Sequence[Event],
        captures: Mapping[str, Sequence[int]] | None = None,
        copied: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """Queue the statements on a cursor of a transaction (a sealer's, or prune's)."""
        execute_in(cur, self.sql, self.cipher, events, captures, copied)

    def append(self, events: Sequence[Event], *, legacy_names: Collection[str] = ()) -> None:
        """Store sequenced ``events`` in one transaction of the ledger's own connection
        (writers that sequence events themselves: restore, import). ``legacy_names``:
        threads whose record names folders of the old rule (a record put back as it was):
        they keep them (see :mod:`~langgraph_external.record.locations`).

        Raises:
            PositionMovedError: a thread's position moved since ``events`` were sequenced.
            LedgerUnavailableError: the server cannot be reached.
        """
        if not events:
            return
        with self._session() as conn, conn.pipeline(), conn.transaction(), conn.cursor() as cur:
            self.execute_in(cur, events)
            for tid in legacy_names:
                cur.execute(self.sql.mark_legacy_named, (tid,))

    # -- capturing -------------------------------------------------------------------------
    def capture_in(self, cur: Any, row: Sequence[Any]) -> None:
        """Queue one capture's row (:meth:`Capture.row
        <langgraph_external.record.capture.Capture.row>`) on a cursor of the saver's
        transaction: it commits with it."""
        cur.execute(self.sql.capture, row)

    async def acapture_in(self, cur: Any, row: Sequence[Any]) -> None:
        """Async twin of :meth:`capture_in`."""
        await cur.execute(self.sql.capture, row)

    def capture(self, captures: Sequence[Capture]) -> None:
        """Store captures in one transaction of the ledger's own connection.

        Raises:
            LedgerUnavailableError: the server cannot be reached.
        """
        if not captures:
            return
        with self._session() as conn:
            if len(captures) == 1:  # one autocommit statement: atomic, one round trip
                conn.execute(self.sql.capture, captures[0].row())
                return
            with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                cur.executemany(self.sql.capture, [c.row() for c in captures])

    def pending(self) -> dict[str, Any]:
        """Captures waiting for a sealer (``lgx db status``, ``health()``)."""
        row = self._rows(self.sql.pending)[0]
        return {
            "captures": int(row[0]),
            "oldest": row[1],
            "threads": int(row[2]),
            "behind_running_transactions": int(row[3]),
        }

    def horizon(self) -> str:
        """A transaction id every transaction that committed so far is below."""
        return str(self._rows(stmt.CURRENT_XMAX)[0][0])

    def unsealed(self, thread_ids: Collection[str], horizon: str) -> int:
        """Captures of ``thread_ids`` from transactions below ``horizon`` not sealed yet."""
        if not thread_ids:
            return 0
        rows = self._rows(self.sql.pending_of, (list(thread_ids), horizon))
        return sum(int(r[1]) for r in rows)

    def notify(self, channel: str) -> None:
        """Announce captures on ``channel`` (``lgx worker`` processes listen there)."""
        self._rows("select pg_notify(%s, '')", (channel,))

    # -- sealing ---------------------------------------------------------------------------
    @contextmanager
    def sealing(self, max_threads: int = 64, max_captures: int = 1000) -> Iterator[SealTx | None]:
        """Claim sealable captures in a transaction of the ledger's own connection.

        Yields ``None`` when nothing is sealable, else a :class:`SealTx`: the captures of
        the claimed threads in commit order, their heads, and the connection (the saver's
        rows are read on it). The threads stay locked against other sealers until the
        transaction ends: it commits when the block exits normally.
        """
        with self._session() as conn, conn.transaction():
            # a sealing transaction need not wait for its WAL flush (nor make the app's
            # commits wait behind it): if the server crashes before the flush, the
            # transaction is lost whole — events, head move and capture deletion — and
            # the captures, committed synchronously with the checkpoints, are sealed
            # again into the same events (ids, times and bytes come from the captures)
            conn.execute(stmt.ASYNC_COMMIT)
            claimed = conn.execute(self.sql.claim, (max_threads, self.seal_class)).fetchall()
            tids = [r[0] for r in claimed]
            if not tids:
                yield None
                return
            rows = conn.execute(self.sql.captures, (tids, max_captures)).fetchall()
            heads = conn.execute(self.sql.seal_heads, (tids,)).fetchall()
            yield SealTx(
                self,
                conn,
                [capture_from_row(r, self.cipher) for r in rows],
                {r[0]: (int(r[1]), r[2]) for r in heads if int(r[1]) > 0},
                {r[0] for r in heads if r[3]},
            )

    @property
    def seal_class(self) -> int:
        """The advisory-lock class of this ledger's per-thread sealing locks."""
        return _lock_class(f"lgx-seal|{self.schema}")

    # -- reading ---------------------------------------------------------------------------
    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Last ``(seq, hash)`` per thread that has events."""
        if not thread_ids:
            return {}
        rows = self._rows(self.sql.positions, (list(thread_ids),))
        return {r[0]: (int(r[1]), r[2]) for r in rows}

    def legacy_named(self, thread_ids: Collection[str]) -> set[str]:
        """Which of ``thread_ids`` keep the folder names of the old rule (recorded before
        the v11 migration; see :mod:`~langgraph_external.record.locations`)."""
        with self._session() as conn:
            return legacy_named(conn, thread_ids, self.schema)

    def read(
        self, thread_id: str, after: int = 0, limit: int = 2000, *, max_bytes: int = READ_BUDGET
    ) -> list[Event]:
        """Events of ``thread_id`` with ``seq > after``, in order, with their detail.

        Large channel values a checkpoint event names by the saver's row
        (``detail["saver_blobs"]``) are read from the saver's table into its attachments;
        a row the saver no longer holds (a pruned or deleted checkpoint) stays missing.

        At most ``limit`` events, and no more once their bytes (stored detail,
        attachments, raw) reach ``max_bytes``: the first event always comes, the rest of
        the thread is read again after the last one returned. A long chat's checkpoints
        each name the whole conversation, so reading a whole thread at once would hold
        every version of it in memory.
        """
        out: list[Event] = []
        size = 0
        page = _READ_PAGE[0]
        with self._session() as conn:
            while len(out) < limit:
                page = min(limit - len(out), page)
                rows = conn.execute(self.sql.after, (thread_id, after, page)).fetchall()
                for row in rows:
                    e = _with_saver_blobs(conn, event_from_row(row), self.cipher)
                    out.append(e)
                    after = e.seq or after
                    size += len(row[-1] or b"") + len(e.raw or b"")
                    size += sum(len(data) for data in e.attachments.values())
                    if size >= max_bytes:
                        return out
                if len(rows) < page:
                    break
                page = min(page * 2, _READ_PAGE[1])  # small pages first: rows past
                # the budget are read for nothing
        return out

    def recorded(self, thread_id: str, event_ids: Collection[str]) -> set[str]:
        """Which of ``event_ids`` the ledger holds for ``thread_id``, sealed or captured
        (after a commit whose outcome the client could not see: the connection broke
        around its COMMIT)."""
        if not event_ids:
            return set()
        ids = list(event_ids)
        return {r[0] for r in self._rows(self.sql.recorded, (thread_id, ids, thread_id, ids))}

    def lagging(self, projection: str, limit: int = 1000) -> list[tuple[str, int, int]]:
        """``(thread_id, ledger seq, projected seq)`` of threads a projection is behind on."""
        rows = self._rows(self.sql.lagging, (projection, limit))
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def set_cursor(self, projection: str, thread_id: str, seq: int, error: str | None) -> None:
        """Record how far ``projection`` got on ``thread_id`` (``error``: quarantined)."""
        with self._session() as conn:
            conn.execute(self.sql.cursor, (projection, thread_id, seq, error))

    @contextmanager
    def projection_lock(self, projection: str, thread_id: str) -> Iterator[bool]:
        """Hold the right to write ``thread_id`` of ``projection`` (one process at a time).

        Yields ``False`` without waiting when another process holds it.
        """
        key = f"lgx-projection|{projection}|{thread_id}"
        with self._session() as conn:  # held for the whole projection of the thread
            row = conn.execute(stmt.TRY_PROJECTION_LOCK, (key,)).fetchone()
            held = bool(row and row[0])
            try:
                yield held
            finally:
                if held and not conn.closed and not conn.broken:
                    conn.execute(stmt.PROJECTION_UNLOCK, (key,))

    @contextmanager
    def projection_locks(self, projection: str, thread_ids: Sequence[str]) -> Iterator[LockedPass]:
        """:meth:`projection_lock` for a pass over many threads, in two statements.

        Yields a :class:`LockedPass`: the threads whose lock was free (``threads``) and a
        ``positions`` map the caller fills; on exit the positions become the threads'
        cursors and the locks are released, in one statement.
        """
        keys = {f"lgx-projection|{projection}|{t}": t for t in thread_ids}
        with self._session() as conn:
            rows = conn.execute(stmt.TRY_PROJECTION_LOCKS, (list(keys),)).fetchall()
            held = [k for k, ok in rows if ok]
            locked = LockedPass({keys[k] for k in held}, {})
            try:
                yield locked
            finally:
                if not conn.closed and not conn.broken:
                    tids, seqs = list(locked.positions), list(locked.positions.values())
                    conn.execute(self.sql.cursors, (projection, tids, seqs, held))

    def connections(self) -> dict[str, int]:
        """The ledger pool's connections: ``open`` (to the server), ``idle`` of those, and
        its ``max`` (all 0 before the first use)."""
        pool = self._pool
        if pool is None:
            return {"open": 0, "idle": 0, "max": 0}
        stats = pool.get_stats()
        return {
            "open": int(stats.get("pool_size", 0)),
            "idle": int(stats.get("pool_available", 0)),
            "max": pool.max_size,
        }

    def quarantined(self, projection: str) -> list[dict[str, Any]]:
        """Threads a projection set aside because one of their events could not be applied."""
        rows = self._rows(self.sql.quarantined, (projection,))
        return [{"thread_id": r[0], "seq": r[1], "error": r[2], "at": r[3]} for r in rows]

    def clear_quarantine(self, projection: str) -> None:
        """Let a projection try its quarantined threads again (``lgx repair``)."""
        with self._session() as conn:
            conn.execute(self.sql.clear, (projection,))

    def close(self) -> None:
        """Close the pool."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def _with_saver_blobs(
    conn: psycopg.Connection[Any], e: Event, cipher: WorkspaceCipher | None
) -> Event:
    """``e`` with the large values it names by the saver's row read into its attachments."""
    wanted = {
        address: row
        for address, row in ((e.detail or {}).get("saver_blobs") or {}).items()
        if f"checkpoints/blobs/{address}" not in e.attachments
    }
    sealed = bool((e.detail or {}).get("enc"))
    if not wanted or (sealed and cipher is None):
        return e  # the copies are sealed and this process holds no key: left missing
    channels, versions = zip(*wanted.values(), strict=True)
    rows = conn.execute(
        SAVER_BLOBS_SQL, (e.thread_id, e.checkpoint_ns, list(channels), list(versions))
    ).fetchall()
    found = {(ch, ver): bytes(blob) for ch, ver, blob in rows if blob is not None}
    files = dict(e.attachments)
    for address, (ch, ver) in wanted.items():
        if (ch, ver) in found:
            data = found[(ch, ver)]
            if sealed:  # sealed as the checkpointer sealed it: the same bytes again
                assert cipher is not None
                data = cipher.seal(data, address.encode())
            files[f"checkpoints/blobs/{address}"] = data
    return e.replace(attachments=files)


@dataclass
class LockedPass:
    """The threads of a projection pass this process may write, and where they ended."""

    threads: set[str]
    positions: dict[str, int]


@dataclass
class SealTx:
    """One sealing transaction: claimed captures (commit order), heads, the threads that
    keep their folders of the old rule (``legacy``), the connection."""

    ledger: PostgresLedger
    conn: psycopg.Connection[Any]
    captures: list[Capture]
    heads: dict[str, tuple[int, str]]
    legacy: set[str] = field(default_factory=set)

    def store(
        self,
        events: Sequence[Event],
        captures: Mapping[str, Sequence[int]],
        copied: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """Store sealed ``events`` and delete the ``captures`` they came from (by thread);
        ``copied``: the checkpoint log path of each namespace of a copy (see
        :func:`~langgraph_external.ledger.writes.write_statements`)."""
        with self.conn.pipeline(), self.conn.cursor() as cur:
            self.ledger.execute_in(cur, events, captures, copied)

    def checkpoint_refs(self, thread_id: str, ns: str, checkpoint_id: str) -> dict[str, Any] | None:
        """The channel references of a sealed checkpoint (its event's ``channels``), or
        ``None`` when the ledger holds no record of it."""
        row = self.conn.execute(
            self.ledger.sql.checkpoint_refs, (thread_id, ns, checkpoint_id)
        ).fetchone()
        if row is None or row[0] is None:
            return None
        refs = unmark(row[0])
        return dict(refs) if isinstance(refs, dict) else None


def _lock_class(name: str) -> int:
    """A signed 32-bit advisory-lock class for ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big", signed=True)


def translate(exc: psycopg.Error) -> Exception:
    """A typed error for the failures callers act on; other errors unchanged."""
    if getattr(exc, "sqlstate", None) == stmt.POSITION_MOVED:
        return PositionMovedError(str(exc).strip())
    if isinstance(exc, psycopg.OperationalError):
        return LedgerUnavailableError(f"the ledger database is unavailable: {exc}")
    return exc


__all__ = [
    "READ_BUDGET",
    "LockedPass",
    "PostgresLedger",
    "SealTx",
    "checkpoint_row",
    "head_tag",
    "pack_detail",
    "translate",
    "unpack_detail",
]
