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
import json
import logging
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ormsgpack
import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from langgraph_external import ledger
from langgraph_external._pools import check_idle
from langgraph_external.capture import Capture, unpack_inline, unpack_riders
from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.errors import LedgerUnavailableError, PositionMovedError
from langgraph_external.events import Event
from langgraph_external.workspace import encode_thread_id

logger = logging.getLogger("langgraph_external")

Statement = tuple[Any, Any]

_CONNECT_OPTIONS = (
    "-c timezone=UTC -c statement_timeout=30000 -c idle_in_transaction_session_timeout=60000"
)


def _identity_text(s: str) -> str:
    return s


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
        schema: str = ledger.DEFAULT_SCHEMA,
        *,
        connect_timeout: int = 10,
        cipher: WorkspaceCipher | None = None,
    ) -> None:
        self.dsn = dsn
        self.cipher = cipher  # tags each thread's head (see the v5 migration)
        self.schema = ledger.validate_schema(schema)
        self.connect_timeout = connect_timeout
        self._pool: ConnectionPool[Any] | None = None
        self._pool_lock = threading.Lock()
        self._sql = {
            key: ledger.q(text, self.schema)
            for key, text in {
                "seal": ledger.SEAL_THREAD,
                "capture": ledger.INSERT_CAPTURE,
                "claim": ledger.CLAIM_THREADS,
                "captures": ledger.SELECT_CAPTURES,
                "pending": ledger.PENDING_CAPTURES,
                "pending_of": ledger.PENDING_OF_THREADS,
                "event": ledger.INSERT_EVENT,
                "checkpoint": ledger.UPSERT_CHECKPOINT,
                "positions": ledger.SELECT_POSITIONS,
                "after": ledger.SELECT_EVENTS_AFTER,
                "lagging": ledger.SELECT_LAGGING,
                "quarantined": ledger.SELECT_QUARANTINED,
                "commit": ledger.COMMIT_EVENTS,
                "recorded": ledger.SELECT_RECORDED,
                "cursor": ledger.UPSERT_CURSOR,
                "cursors": ledger.UPSERT_CURSORS_UNLOCK,
                "clear": ledger.CLEAR_QUARANTINE,
                "del_cp": ledger.DELETE_CHECKPOINT_ROWS,
                "forget": ledger.FORGET_THREAD,
                "copy_cp": ledger.COPY_CHECKPOINT_ROWS,
            }.items()
        }

    # -- connection ------------------------------------------------------------------------
    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the ledger's small pool (the flusher, the projector, look-ups).

        A pool, not one connection per thread: look-ups also run on LangGraph's
        short-lived executor threads, and a connection per thread would outlive them.
        """
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ConnectionPool(
                        self.dsn,
                        min_size=0,
                        max_size=6,
                        kwargs={
                            "autocommit": True,
                            "connect_timeout": self.connect_timeout,
                            "options": _CONNECT_OPTIONS,
                        },
                        timeout=self.connect_timeout,
                        check=check_idle,  # died in a database restart: replaced
                        name="langgraph-external-ledger",
                        open=True,
                    )
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise LedgerUnavailableError(f"cannot connect to the ledger database: {exc}") from exc

    def identity(self) -> str:
        """A name for this ledger that equivalent DSNs share (server, database, schema).

        Local state kept for a ledger (the write-ahead log) is keyed by it, so writing
        the DSN differently never orphans it.
        """
        from langgraph_external._compat import IDENTITY_SQL

        try:
            with self._connection() as conn:
                row = conn.execute(IDENTITY_SQL).fetchone()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        assert row is not None
        raw = f"{row[0]}|{row[1]}|{self.schema}"
        return "ledger-" + hashlib.sha256(raw.encode()).hexdigest()[:16]

    # -- writing ---------------------------------------------------------------------------
    def statements(
        self, events: Sequence[Event], captures: Mapping[str, Sequence[int]] | None = None
    ) -> list[Statement]:
        """The statements that store ``events`` (sequenced, grouped by thread in order).

        The first statement of each thread advances its position from
        ``events[0].seq - 1`` and deletes the thread's ``captures`` (ids) the events were
        sealed from; it fails with ``LX001`` if another writer got there first.
        """
        captures = captures or {}
        out: list[Statement] = []
        i = 0
        while i < len(events):
            tid = events[i].thread_id
            j = i
            while j < len(events) and events[j].thread_id == tid:
                j += 1
            group = events[i:j]
            first, last = group[0], group[-1]
            assert first.seq is not None and last.seq is not None
            tag = head_tag(self.cipher, tid, last.seq, last.hash)
            head = (
                tid,
                first.seq - 1,
                first.prev,
                last.seq,
                last.hash,
                last.ts,
                tag,
                list(captures.get(tid, ())),
            )
            i = j
            if all(e.line and e.kind not in _THREAD_OPS for e in group):
                out.append((self._sql["commit"], (*head, *_commit_params(group))))
                continue
            out.append((self._sql["seal"], head))
            for e in group:
                out.append((self._sql["event"], _event_row(e)))
                out.extend(self._side_effects(e))
        return out

    def _side_effects(self, e: Event) -> Iterator[Statement]:
        if e.kind == "checkpoint":
            yield (self._sql["checkpoint"], checkpoint_row(e))
        elif e.kind == "thread_deleted":
            yield (self._sql["forget"], (e.thread_id, e.seq, e.ts))
        elif e.kind in ("thread_pruned", "runs_deleted"):
            for ns, ids in (e.payload.get("removed") or {}).items():
                if ids:
                    yield (self._sql["del_cp"], (e.thread_id, ns, list(ids)))
        elif e.kind == "thread_copied":
            src = e.payload["source_thread_id"]
            yield (
                self._sql["copy_cp"],
                {
                    "src": src,
                    "dst": e.thread_id,
                    "src_dir": f"threads/{encode_thread_id(src)}/",
                    "dst_dir": f"threads/{encode_thread_id(e.thread_id)}/",
                },
            )

    def _batched(
        self, events: Sequence[Event], captures: Mapping[str, Sequence[int]] | None = None
    ) -> Iterator[tuple[Any, list[Any]]]:
        """The statements, consecutive event inserts grouped for one ``executemany``."""
        group: list[Any] = []
        for query, params in self.statements(events, captures):
            if query is self._sql["event"]:
                group.append(params)
                continue
            if group:
                yield self._sql["event"], group
                group = []
            yield query, [params]
        if group:
            yield self._sql["event"], group

    def execute_in(
        self,
        cur: Any,
        events: Sequence[Event],
        captures: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        """Queue the statements on a cursor of a transaction (a sealer's, or prune's)."""
        for query, params in self._batched(events, captures):
            if len(params) == 1:
                cur.execute(query, params[0])
            else:
                cur.executemany(query, params)

    def append(self, events: Sequence[Event]) -> None:
        """Store sequenced ``events`` in one transaction of the ledger's own connection
        (writers that sequence events themselves: restore, import).

        Raises:
            PositionMovedError: a thread's position moved since ``events`` were sequenced.
            LedgerUnavailableError: the server cannot be reached.
        """
        if not events:
            return
        try:
            with (
                self._connection() as conn,
                conn.pipeline(),
                conn.transaction(),
                conn.cursor() as cur,
            ):
                self.execute_in(cur, events)
        except psycopg.Error as exc:
            raise translate(exc) from exc

    # -- capturing -------------------------------------------------------------------------
    def capture_in(self, cur: Any, capture: Capture) -> None:
        """Queue one capture on a cursor of the saver's transaction (it commits with it)."""
        cur.execute(self._sql["capture"], capture.row())

    async def acapture_in(self, cur: Any, capture: Capture) -> None:
        """Async twin of :meth:`capture_in`."""
        await cur.execute(self._sql["capture"], capture.row())

    def capture_row_in(self, cur: Any, row: Sequence[Any]) -> None:
        """:meth:`capture_in` of a capture's prepared row (:meth:`Capture.row`)."""
        cur.execute(self._sql["capture"], row)

    async def acapture_row_in(self, cur: Any, row: Sequence[Any]) -> None:
        """Async twin of :meth:`capture_row_in`."""
        await cur.execute(self._sql["capture"], row)

    def capture(self, captures: Sequence[Capture]) -> None:
        """Store captures in one transaction of the ledger's own connection.

        Raises:
            LedgerUnavailableError: the server cannot be reached.
        """
        if not captures:
            return
        try:
            with (
                self._connection() as conn,
                conn.pipeline(),
                conn.transaction(),
                conn.cursor() as cur,
            ):
                cur.executemany(self._sql["capture"], [c.row() for c in captures])
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def pending(self) -> dict[str, Any]:
        """Captures waiting for a sealer (``lgx db status``, ``health()``)."""
        try:
            with self._connection() as conn:
                row = conn.execute(self._sql["pending"]).fetchone()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        assert row is not None
        return {
            "captures": int(row[0]),
            "oldest": row[1],
            "threads": int(row[2]),
            "behind_running_transactions": int(row[3]),
        }

    def horizon(self) -> str:
        """A transaction id every transaction that committed so far is below."""
        try:
            with self._connection() as conn:
                row = conn.execute(ledger.CURRENT_XMAX).fetchone()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        assert row is not None
        return str(row[0])

    def unsealed(self, thread_ids: Collection[str], horizon: str) -> int:
        """Captures of ``thread_ids`` from transactions below ``horizon`` not sealed yet."""
        if not thread_ids:
            return 0
        try:
            with self._connection() as conn:
                rows = conn.execute(self._sql["pending_of"], (list(thread_ids), horizon)).fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return sum(int(r[1]) for r in rows)

    def notify(self, channel: str) -> None:
        """Announce captures on ``channel`` (``lgx worker`` processes listen there)."""
        try:
            with self._connection() as conn:
                conn.execute("select pg_notify(%s, '')", (channel,))
        except psycopg.Error as exc:
            raise translate(exc) from exc

    # -- sealing ---------------------------------------------------------------------------
    @contextmanager
    def sealing(self, max_threads: int = 64, max_captures: int = 1000) -> Iterator[SealTx | None]:
        """Claim sealable captures in a transaction of the ledger's own connection.

        Yields ``None`` when nothing is sealable, else a :class:`SealTx`: the captures of
        the claimed threads in commit order, their heads, and the connection (the saver's
        rows are read on it). The threads stay locked against other sealers until the
        transaction ends: it commits when the block exits normally.
        """
        try:
            with self._connection() as conn, conn.transaction():
                # a sealing transaction need not wait for its WAL flush (nor make the app's
                # commits wait behind it): if the server crashes before the flush, the
                # transaction is lost whole — events, head move and capture deletion — and
                # the captures, committed synchronously with the checkpoints, are sealed
                # again into the same events (ids, times and bytes come from the captures)
                conn.execute(ledger.ASYNC_COMMIT)
                tids = [
                    r[0]
                    for r in conn.execute(
                        self._sql["claim"], (max_threads, self.seal_class)
                    ).fetchall()
                ]
                if not tids:
                    yield None
                    return
                rows = conn.execute(self._sql["captures"], (tids, max_captures)).fetchall()
                heads = conn.execute(self._sql["positions"], (tids,)).fetchall()
                yield SealTx(
                    self,
                    conn,
                    [_capture_from_row(r) for r in rows],
                    {r[0]: (int(r[1]), r[2]) for r in heads},
                )
        except psycopg.Error as exc:
            raise translate(exc) from exc

    @property
    def seal_class(self) -> int:
        """The advisory-lock class of this ledger's per-thread sealing locks."""
        return _lock_class(f"lgx-seal|{self.schema}")

    # -- reading ---------------------------------------------------------------------------
    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Last ``(seq, hash)`` per thread that has events."""
        if not thread_ids:
            return {}
        try:
            with self._connection() as conn:
                rows = conn.execute(self._sql["positions"], (list(thread_ids),)).fetchall()
            return {r[0]: (int(r[1]), r[2]) for r in rows}
        except psycopg.Error as exc:
            raise translate(exc) from exc

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
        try:
            with self._connection() as conn:
                while len(out) < limit:
                    page = min(limit - len(out), page)
                    rows = conn.execute(self._sql["after"], (thread_id, after, page)).fetchall()
                    for row in rows:
                        e = self._with_saver_blobs(conn, _row_to_event(row))
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
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def _with_saver_blobs(self, conn: psycopg.Connection[Any], e: Event) -> Event:
        wanted = {
            address: row
            for address, row in ((e.detail or {}).get("saver_blobs") or {}).items()
            if f"checkpoints/blobs/{address}" not in e.attachments
        }
        if not wanted:
            return e
        from langgraph_external._compat import SAVER_BLOBS_SQL

        channels = [row[0] for row in wanted.values()]
        versions = [row[1] for row in wanted.values()]
        found = {
            (ch, ver): bytes(blob)
            for ch, ver, blob in conn.execute(
                SAVER_BLOBS_SQL, (e.thread_id, e.checkpoint_ns, channels, versions)
            ).fetchall()
            if blob is not None
        }
        files = dict(e.attachments)
        sealed = bool((e.detail or {}).get("enc"))
        if sealed and self.cipher is None:
            return e  # the copies are sealed and this process holds no key: left missing
        for address, (ch, ver) in wanted.items():
            if (ch, ver) in found:
                data = found[(ch, ver)]
                if sealed:  # sealed as the checkpointer sealed it: the same bytes again
                    assert self.cipher is not None
                    data = self.cipher.seal(data, address.encode())
                files[f"checkpoints/blobs/{address}"] = data
        return e.replace(attachments=files)

    def recorded(self, thread_id: str, event_ids: Collection[str]) -> set[str]:
        """Which of ``event_ids`` the ledger holds for ``thread_id``, sealed or captured
        (after a commit whose outcome the client could not see: the connection broke
        around its COMMIT)."""
        if not event_ids:
            return set()
        ids = list(event_ids)
        try:
            with self._connection() as conn:
                rows = conn.execute(
                    self._sql["recorded"], (thread_id, ids, thread_id, ids)
                ).fetchall()
            return {r[0] for r in rows}
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def lagging(self, projection: str, limit: int = 1000) -> list[tuple[str, int, int]]:
        """``(thread_id, ledger seq, projected seq)`` of threads a projection is behind on."""
        try:
            with self._connection() as conn:
                rows = conn.execute(self._sql["lagging"], (projection, limit)).fetchall()
            return [(r[0], int(r[1]), int(r[2])) for r in rows]
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def set_cursor(self, projection: str, thread_id: str, seq: int, error: str | None) -> None:
        """Record how far ``projection`` got on ``thread_id`` (``error``: quarantined)."""
        try:
            with self._connection() as conn:
                conn.execute(self._sql["cursor"], (projection, thread_id, seq, error))
        except psycopg.Error as exc:
            raise translate(exc) from exc

    @contextmanager
    def projection_lock(self, projection: str, thread_id: str) -> Iterator[bool]:
        """Hold the right to write ``thread_id`` of ``projection`` (one process at a time).

        Yields ``False`` without waiting when another process holds it.
        """
        key = f"lgx-projection|{projection}|{thread_id}"
        try:
            with self._connection() as conn:  # held for the whole projection of the thread
                row = conn.execute(ledger.TRY_PROJECTION_LOCK, (key,)).fetchone()
                held = bool(row and row[0])
                try:
                    yield held
                finally:
                    if held and not conn.closed and not conn.broken:
                        conn.execute(ledger.PROJECTION_UNLOCK, (key,))
        except psycopg.Error as exc:
            raise translate(exc) from exc

    @contextmanager
    def projection_locks(self, projection: str, thread_ids: Sequence[str]) -> Iterator[LockedPass]:
        """:meth:`projection_lock` for a pass over many threads, in two statements.

        Yields a :class:`LockedPass`: the threads whose lock was free (``threads``) and a
        ``positions`` map the caller fills; on exit the positions become the threads'
        cursors and the locks are released, in one statement.
        """
        keys = {f"lgx-projection|{projection}|{t}": t for t in thread_ids}
        try:
            with self._connection() as conn:
                rows = conn.execute(ledger.TRY_PROJECTION_LOCKS, (list(keys),)).fetchall()
                held = [k for k, ok in rows if ok]
                locked = LockedPass({keys[k] for k in held}, {})
                try:
                    yield locked
                finally:
                    if not conn.closed and not conn.broken:
                        tids = list(locked.positions)
                        seqs = [locked.positions[t] for t in tids]
                        conn.execute(self._sql["cursors"], (projection, tids, seqs, held))
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def quarantined(self, projection: str) -> list[dict[str, Any]]:
        """Threads a projection set aside because one of their events could not be applied."""
        with self._connection() as conn:
            rows = conn.execute(self._sql["quarantined"], (projection,)).fetchall()
        return [{"thread_id": r[0], "seq": r[1], "error": r[2], "at": r[3]} for r in rows]

    def clear_quarantine(self, projection: str) -> None:
        """Let a projection try its quarantined threads again (``lgx repair``)."""
        with self._connection() as conn:
            conn.execute(self._sql["clear"], (projection,))

    def close(self) -> None:
        """Close the pool."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


@dataclass
class LockedPass:
    """The threads of a projection pass this process may write, and where they ended."""

    threads: set[str]
    positions: dict[str, int]


@dataclass
class SealTx:
    """One sealing transaction: claimed captures (commit order), heads, the connection."""

    ledger: PostgresLedger
    conn: psycopg.Connection[Any]
    captures: list[Capture]
    heads: dict[str, tuple[int, str]]

    def store(self, events: Sequence[Event], captures: Mapping[str, Sequence[int]]) -> None:
        """Store sealed ``events`` and delete the ``captures`` they came from (by thread)."""
        with self.conn.pipeline(), self.conn.cursor() as cur:
            self.ledger.execute_in(cur, events, captures)


def _lock_class(name: str) -> int:
    """A signed 32-bit advisory-lock class for ``name``."""
    value = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")
    return value - (1 << 32) if value >= 1 << 31 else value


def _capture_from_row(r: Sequence[Any]) -> Capture:
    return Capture(
        id=int(r[0]),
        event_id=r[1],
        thread_id=r[2],
        kind=r[3],
        checkpoint_ns=r[4] or "",
        checkpoint_id=r[5],
        parent_id=r[6],
        task_id=r[7],
        task_path=r[8],
        node=r[9],
        changed=list(r[10]) if r[10] is not None else None,
        idx=list(r[11]) if r[11] is not None else None,
        riders=unpack_riders(r[12], r[2]),
        captured_at=r[13],
        recovered=bool(r[14]),
        inline=unpack_inline(r[15]),
    )


def head_tag(
    cipher: WorkspaceCipher | None, thread_id: str, seq: int, hash_: str | None
) -> str | None:
    """The keyed tag of a thread's head ``(seq, hash)``; ``None`` without a key.

    Example:
        >>> from langgraph_external.crypto import WorkspaceCipher
        >>> len(head_tag(WorkspaceCipher(bytes(32)), "t", 3, "ab")), head_tag(None, "t", 3, "ab")
        (64, None)
    """
    return None if cipher is None else cipher.tag("head", thread_id, seq, hash_ or "")


def translate(exc: psycopg.Error) -> Exception:
    """A typed error for the failures callers act on; other errors unchanged."""
    if getattr(exc, "sqlstate", None) == ledger.POSITION_MOVED:
        return PositionMovedError(str(exc).strip())
    if isinstance(exc, psycopg.OperationalError):
        return LedgerUnavailableError(f"the ledger database is unavailable: {exc}")
    return exc


def pack_detail(e: Event) -> bytes | None:
    """What a projection needs beyond the envelope: exact bytes, skeletons, artifacts."""
    if not e.detail and not e.attachments:
        return None
    files = dict(e.attachments)
    for address in (e.detail or {}).get("saver_blobs") or {}:
        files.pop(f"checkpoints/blobs/{address}", None)  # the saver's row holds them
    return ormsgpack.packb({"detail": e.detail or {}, "files": files})


def unpack_detail(data: bytes | None) -> tuple[dict[str, Any] | None, dict[str, bytes]]:
    """Inverse of :func:`pack_detail`."""
    if not data:
        return None, {}
    obj = ormsgpack.unpackb(bytes(data))
    return (obj.get("detail") or None), dict(obj.get("files") or {})


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
        Jsonb(e.payload_json(), dumps=_identity_text),
        e.raw,
        e.artifact,
        e.redactions,
        e.prev,
        e.hash,
        pack_detail(e),
    )


_THREAD_OPS = frozenset({"thread_deleted", "thread_pruned", "runs_deleted", "thread_copied"})


def _commit_params(group: Sequence[Event]) -> tuple[str, list[bytes | None], str]:
    """The events of :data:`ledger.COMMIT_EVENTS`: their lines, details, index rows."""
    rows = "[" + ",".join(e.line for e in group if e.line) + "]"
    details = [pack_detail(e) for e in group]
    index = [
        dict(zip(ledger.CHECKPOINT_INDEX_COLUMNS, checkpoint_row(e), strict=True))
        for e in group
        if e.kind == "checkpoint"
    ]
    return rows, details, json.dumps(index, default=_iso)


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def checkpoint_row(e: Event) -> tuple[Any, ...]:
    """The checkpoint index row a ``checkpoint`` event stores (``lgx verify`` re-derives it)."""
    p = e.payload
    writers = p.get("writers") or []
    return (
        e.thread_id,
        e.checkpoint_ns,
        e.checkpoint_id,
        p.get("parent_checkpoint_id"),
        e.step,
        p.get("source"),
        e.run_id,
        [w.get("task_id") for w in writers if w.get("task_id")],
        sorted({w["node"] for w in writers if w.get("node")}),
        sorted(p.get("changed") or p.get("channels") or {}),
        e.ts,
        int(p.get("size", 0)),
        p.get("path"),
        e.seq,
    )


def _row_to_event(row: Sequence[Any]) -> Event:
    env = ledger.row_to_envelope(row[:-1])
    detail, files = unpack_detail(row[-1])
    return Event.from_envelope(env).replace(detail=detail, attachments=files)


__all__ = [
    "PostgresLedger",
    "checkpoint_row",
    "head_tag",
    "pack_detail",
    "translate",
    "unpack_detail",
]
