"""Erasure of a subject's memories: everywhere their text is kept, with a sealed receipt.

:class:`Eraser` removes a subject's vectors, entity links, stored messages and the text
of its audit and retrieval rows in one transaction, writes one ``ERASE`` audit row per
memory and a content-free :class:`ErasureReceipt` (``memory_erasures``), and re-checks a
receipt later (:meth:`Eraser.verify`). Hashes in the receipt are keyed with the
deployment key, so a receipt does not let anyone confirm a guess of erased text.

Example:
    >>> r = ErasureReceipt("e", "c", "t0", "t1", None, None, "user_id", "h", [], [], {})
    >>> r.sealed().body() == r.body(), len(r.sealed().receipt_hash)
    (True, 64)
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from langgraph_external.memory_adapters.mem0 import sql as S
from langgraph_external.memory_adapters.mem0.errors import (
    ErasureVerificationError,
    MemoryScopeError,
)
from langgraph_external.memory_adapters.mem0.store import SCOPE_KEYS, text_hash
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import canonical_json, new_id

Scope = tuple[str | None, str | None, str | None]
"""``(user_id, agent_id, run_id)`` of a memory."""


@dataclass(frozen=True)
class ErasureReceipt:
    """Content-free proof of an erasure (a row of ``memory_erasures``).

    ``receipt_hash`` is the sha256 of the canonical JSON of every other field; it lets
    anyone holding the receipt check that the stored row was not altered.
    """

    erasure_id: str
    collection: str
    requested_at: str
    completed_at: str
    erased_by: str | None
    reason: str | None
    subject_kind: str
    subject_hash: str
    memory_ids: list[str]
    content_hashes: list[str]
    row_counts: dict[str, int]
    receipt_hash: str = ""

    def body(self) -> dict[str, Any]:
        """Every field but ``receipt_hash`` (what the hash covers)."""
        d = asdict(self)
        d.pop("receipt_hash")
        return d

    def sealed(self) -> ErasureReceipt:
        """This receipt with its ``receipt_hash`` computed.

        Example:
            >>> r = ErasureReceipt("e", "c", "t0", "t1", None, None, "user_id", "h", [], [], {})
            >>> len(r.sealed().receipt_hash)
            64
        """
        digest = hashlib.sha256(canonical_json(self.body()).encode()).hexdigest()
        return ErasureReceipt(**{**self.body(), "receipt_hash": digest})


def erasure_subject(user_id: str | None, memory_ids: Sequence[str] | None) -> list[str]:
    """Check what ``erase`` was asked to erase; the memory ids (none for a user).

    Raises:
        MemoryScopeError: not exactly one of the two, an empty user id, no ids, or an id
            that is not a UUID.

    Example:
        >>> erasure_subject(None, ["00000000-0000-0000-0000-000000000001"])
        ['00000000-0000-0000-0000-000000000001']
    """
    if (user_id is None) == (memory_ids is None):
        raise MemoryScopeError("erase needs exactly one of user_id=... or memory_ids=[...]")
    if user_id is not None and not (isinstance(user_id, str) and user_id.strip()):
        raise MemoryScopeError("erase(user_id=...) needs a non-empty user id")
    ids: list[str] = []
    if memory_ids is not None:
        try:
            ids = sorted({str(uuid.UUID(str(m))) for m in memory_ids})
        except ValueError as exc:
            raise MemoryScopeError(f"memory_ids must be UUIDs: {exc}") from exc
        if not ids:
            raise MemoryScopeError("erase(memory_ids=...) needs at least one id")
    return ids


class Eraser:
    """Erases from one collection's tables (vectors, entities, audit, messages, reads).

    Args:
        schema: the ledger schema holding the adapter's tables.
        collection: Mem0's vector table; its entity table is ``<collection>_entities``.
        key: the deployment key every recorded hash is keyed with.
    """

    def __init__(self, schema: str, collection: str, key: WorkspaceCipher) -> None:
        self.schema = schema
        self.collection = collection
        self.key = key

    def _sql(self, text: str, collection: str | None = None) -> Any:
        c = collection or self.collection  # and its entity table
        return S.compose(text, self.schema, collection=c, entities=f"{c}_entities")

    def erase_in(
        self,
        conn: psycopg.Connection[Any],
        requested: datetime,
        user_id: str | None,
        ids: list[str],
        erased_by: str | None,
        reason: str | None,
    ) -> ErasureReceipt:
        """Erase inside the caller's transaction on ``conn``; the sealed receipt.

        ``user_id`` erases every memory the user ever had (``ids`` is ignored), else the
        memories ``ids`` name.
        """
        c = self.collection
        if user_id is not None:
            rows = conn.execute(self._sql(S.USER_MEMORY_IDS), {"u": user_id, "c": c}).fetchall()
            ids = sorted({r[0] for r in rows})
            subject = "user_id"
            subject_hash = text_hash(f"user_id:{user_id}", self.key)
        else:
            subject = "memory_ids"
            subject_hash = text_hash("memory_ids:" + ",".join(ids), self.key)
        assert subject_hash is not None
        vec_rows = conn.execute(self._sql(S.LOCK_VECTORS), (ids,)).fetchall()
        texts: set[str] = set()
        scopes: set[Scope] = set()
        for _, payload in vec_rows:
            payload = payload or {}
            if isinstance(payload.get("data"), str):
                texts.add(payload["data"])
            scopes.add(tuple(payload.get(k) for k in SCOPE_KEYS))  # type: ignore[arg-type]
        for old_t, new_t, u, a, r in conn.execute(
            self._sql(S.EVENT_TEXTS_AND_SCOPES), (c, ids)
        ).fetchall():
            texts.update(t for t in (old_t, new_t) if t is not None)
            scopes.add((u, a, r))
        erasure_id = new_id()
        counts: dict[str, int] = {}
        counts["vectors"] = conn.execute(self._sql(S.DELETE_VECTORS), (ids,)).rowcount
        counts["entities"] = self._erase_entities(conn, user_id, ids)
        counts["audit_rows"] = conn.execute(
            self._sql(S.ERASE_EVENT_TEXT), (erasure_id, c, ids)
        ).rowcount
        counts["messages"] = self._erase_messages(conn, user_id, scopes)
        counts["retrievals"] = conn.execute(
            self._sql(S.ERASE_RETRIEVAL_TEXT), {"c": c, "u": user_id, "ids": ids}
        ).rowcount
        self._write_erase_events(conn, erasure_id, ids, erased_by)
        receipt = ErasureReceipt(
            erasure_id=erasure_id,
            collection=c,
            requested_at=requested.isoformat(),
            completed_at=datetime.now(timezone.utc).isoformat(),
            erased_by=erased_by,
            reason=reason,
            subject_kind=subject,
            subject_hash=subject_hash,
            memory_ids=ids,
            content_hashes=sorted(h for h in (text_hash(t, self.key) for t in texts) if h),
            row_counts=counts,
        ).sealed()
        # the columns are the receipt's fields, in order
        *fields, row_counts = receipt.body().values()
        conn.execute(
            self._sql(S.INSERT_ERASURE), (*fields, Jsonb(row_counts), receipt.receipt_hash)
        )
        return receipt

    def _write_erase_events(
        self,
        conn: psycopg.Connection[Any],
        erasure_id: str,
        ids: list[str],
        erased_by: str | None,
    ) -> None:
        """One ``ERASE`` audit row per memory, naming the hash it was last known by."""
        c = self.collection
        last = {
            str(r[0]): r[1] for r in conn.execute(self._sql(S.LAST_HASHES), (c, ids)).fetchall()
        }
        rows = []
        for m in ids:
            row: list[Any] = [None] * 26  # the columns of INSERT_EVENT, in order
            row[0:4] = [new_id(), c, m, "ERASE"]
            row[6] = last.get(m)  # old_hash
            row[11] = erased_by  # actor
            rows.append(tuple(row))
        with conn.cursor() as cur:
            cur.executemany(self._sql(S.INSERT_EVENT), rows)
            cur.execute(self._sql(S.MARK_ERASE_EVENTS), (erasure_id, c, ids))

    def _erase_entities(
        self, conn: psycopg.Connection[Any], user_id: str | None, ids: list[str]
    ) -> int:
        n = 0
        if user_id is not None:
            n += conn.execute(self._sql(S.DELETE_USER_ENTITIES), (user_id,)).rowcount
        n += conn.execute(self._sql(S.DELETE_ENTITIES_LINKED_ONLY_TO), (ids, ids)).rowcount
        n += conn.execute(self._sql(S.UNLINK_ENTITIES), (ids, ids)).rowcount
        return n

    def _erase_messages(
        self, conn: psycopg.Connection[Any], user_id: str | None, scopes: set[Scope]
    ) -> int:
        n = 0
        if user_id is not None:
            stmt = self._sql(S.DELETE_USER_MESSAGES)
            n += conn.execute(stmt, (self.collection, user_id)).rowcount
        stmt = self._sql(S.DELETE_SCOPE_MESSAGES)
        for scope in scopes - {(None, None, None)}:
            n += conn.execute(stmt, (self.collection, *scope)).rowcount
        return n

    def vacuum(self, dsn: str) -> None:
        """Vacuum every table an erasure touches, so no dead tuple keeps the text on disk."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            for text in S.VACUUM_ERASED:
                conn.execute(self._sql(text))

    def verify(self, conn: psycopg.Connection[Any], erasure_id: str) -> ErasureReceipt:
        """Re-check a receipt: its hash, and that no erased content is left anywhere.

        Raises:
            ErasureVerificationError: naming every check that failed.
        """
        problems: list[str] = []
        row = conn.execute(self._sql(S.SELECT_ERASURE), (erasure_id,)).fetchone()
        if row is None:
            raise ErasureVerificationError(f"no erasure receipt {erasure_id}")
        stored = ErasureReceipt(
            erasure_id=row[0],
            collection=row[1],
            requested_at=row[2].astimezone(timezone.utc).isoformat(),
            completed_at=row[3].astimezone(timezone.utc).isoformat(),
            erased_by=row[4],
            reason=row[5],
            subject_kind=row[6],
            subject_hash=row[7],
            memory_ids=list(row[8]),
            content_hashes=list(row[9]),
            row_counts=dict(row[10]),
        )
        if stored.sealed().receipt_hash != row[11]:
            problems.append("receipt_hash does not match the receipt's content")
        ids = stored.memory_ids
        c = stored.collection  # the receipt's, whichever adapter asks
        checks = {
            "vectors remain": S.COUNT_VECTORS_LEFT,
            "audit rows still hold text": S.COUNT_EVENTS_WITH_TEXT,
            "entity rows still link the memories": S.COUNT_ENTITIES_LINKED,
        }
        for label, text in checks.items():
            n = conn.execute(self._sql(text, c), (ids,)).fetchone()
            if n is not None and n[0]:
                problems.append(f"{label}: {n[0]}")
        erase_rows = conn.execute(self._sql(S.COUNT_ERASE_EVENTS, c), (erasure_id,)).fetchone()
        if erase_rows is None or erase_rows[0] != len(ids):
            problems.append("missing ERASE audit rows")
        hashes = stored.content_hashes
        stmt = self._sql(S.COUNT_EVENTS_AFTER_ERASURE, c)
        present = conn.execute(stmt, (ids, hashes, hashes)).fetchone()
        if present is not None and present[0]:
            problems.append(f"events written after the erasure: {present[0]}")
        if problems:
            raise ErasureVerificationError(f"erasure {erasure_id}: " + "; ".join(problems))
        return stored.sealed()
