"""The sealer: captured rows become sequenced, hash-chained, keyed events after commit.

What commits with a checkpoint is only a capture (:mod:`langgraph_external.record.capture`).
A :class:`Sealer` takes captures in commit order per thread — only rows below every
running transaction, so none can still appear before them — reads what they reference
from the saver's own rows, builds the events (:class:`~langgraph_external.sources.checkpointer.
_records.RecordBuilder`), numbers and chains them from the thread's head, tags the head
with the deployment key, and stores a whole batch of threads in one transaction, deleting
the captures in it. Per-thread advisory locks keep two sealers (threads of one app, helper
processes, ``lgx worker`` processes) from sealing one thread at once; the head's
compare-and-set stays as a second guard. A crash mid-batch rolls the batch back: its
captures are sealed again by the next pass (idempotent, restartable).

Example:
    >>> from langgraph_external.record.capture import Capture
    >>> from langgraph_external.record.events import Event
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> ledger = InMemoryLedger()
    >>> ledger.capture([Capture("events", "t", riders=[Event.new("error", "t")])])
    >>> Sealer(ledger).seal_batch(), [(e.kind, e.seq) for e in ledger.events]
    (1, [('error', 1)])
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_external.errors import LedgerUnavailableError, PositionMovedError
from langgraph_external.pipeline.saver_reader import SaverReader
from langgraph_external.pipeline.wal import keep_aside
from langgraph_external.record.by_value import material_of
from langgraph_external.record.capture import Capture
from langgraph_external.record.checkpoints import (
    CheckpointMaterial,
    RecordBuilder,
    WritesMaterial,
    is_push_task_path,
    refiled,
)
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event
from langgraph_external.record.locations import checkpoints_relpath, sha256_hex
from langgraph_external.record.processors import Processor, Sequencer, run_all

logger = logging.getLogger("langgraph_external")

__all__ = ["SaverReader", "SealResult", "Sealer", "is_poison", "refusal"]

_DEFER_AT_MOST = 5.0  # seconds a Send task's writes wait for the checkpoint naming its node


class _Defer(Exception):
    """A capture cannot be sealed yet (what it needs is not committed): its thread waits."""


@dataclass
class SealResult:
    """What one :meth:`Sealer.seal_batch` stored."""

    captures: int = 0
    events: list[Event] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)


def is_poison(exc: BaseException) -> bool:
    """Whether the ledger refused the *values* (retrying cannot help), not the service.

    Values that cannot be encoded, or that PostgreSQL rejects as data (class 22) or as
    violating a constraint (class 23), are poison; anything else is retried.
    """
    if isinstance(exc, (LedgerUnavailableError, PositionMovedError, ConnectionError, TimeoutError)):
        return False
    if isinstance(exc, (UnicodeError, ValueError, TypeError)):
        return True
    state = getattr(exc, "sqlstate", None) or ""
    return state.startswith(("22", "23"))


class Sealer:
    """Seals captures into the ledger, one batch of threads per transaction.

    Args:
        ledger: the ledger holding the captures (:meth:`sealing` and the saver's rows).
        cipher: the deployment key: keyed addresses of exact bytes, chain-head tags, and
            (with ``encrypt``) the sealing of exact copies.
        encrypt: encrypt the exact copies with ``cipher``.
        serde: the saver's serializer (inline values, ``Send`` packets).
        processors: what runs on the events built here (checkpoint metadata is redacted
            like any payload); the pipeline's list without the sequencer.
        on_sealed: called with every stored batch (projections, listeners).
        quarantine_dir: where a capture the ledger refuses is kept for a person.
        unrecorded: told of an event the processors could not turn into a record (a
            ``record_failed`` event takes its place; ``health()`` counts them).
    """

    def __init__(
        self,
        ledger: Any,
        *,
        cipher: WorkspaceCipher | None = None,
        encrypt: bool = True,
        serde: SerializerProtocol | None = None,
        processors: Sequence[Processor] = (),
        on_sealed: Callable[[SealResult], None] | None = None,
        quarantine_dir: str | os.PathLike[str] | None = None,
        max_threads: int = 64,
        max_captures: int = 1000,
        unrecorded: Callable[[Event, Exception], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.cipher = cipher
        self.processors = list(processors)
        self.unrecorded = unrecorded
        self.on_sealed = on_sealed
        self.quarantine_dir = Path(quarantine_dir) if quarantine_dir else None
        self.max_threads = max_threads
        self.max_captures = max_captures
        digest = cipher.address if cipher is not None else sha256_hex
        seal = cipher.seal if cipher is not None and encrypt else None
        self.reader = SaverReader(serde or JsonPlusSerializer())
        commit = cipher.commitment if cipher is not None else None
        self.builder = RecordBuilder(digest, seal, commit=commit)
        self.sealed_captures = 0
        self.sealed_events = 0
        self.full = False  # the last batch hit a limit: more is waiting right now
        self.refused: dict[str, str] = {}  # thread -> the last refusal (quarantined capture)

    # -- one batch -----------------------------------------------------------------------
    def seal_batch(self) -> int:
        """Seal one batch of sealable captures; returns how many captures it sealed.

        Raises what the ledger raises when it is unavailable (the batch rolled back).
        """
        try:
            result = self._seal(isolate=None)
        except Exception as exc:
            if not is_poison(exc):
                raise
            logger.warning("langgraph-external: a sealing batch was refused (%s); by thread", exc)
            result = self._seal_each_alone()
        self.full = len(result.threads) >= self.max_threads or result.captures >= self.max_captures
        if result.captures:
            self.sealed_captures += result.captures
            self.sealed_events += len(result.events)
            if self.on_sealed is not None:
                self.on_sealed(result)
        return result.captures

    def drain(self, timeout: float = 30.0) -> bool:
        """Seal until nothing is sealable (``False`` if ``timeout`` passed first)."""
        deadline = time.monotonic() + timeout
        while self.seal_batch():
            if time.monotonic() > deadline:
                return False
        return True

    def _seal(self, isolate: str | None) -> SealResult:
        with self.ledger.sealing(self.max_threads, self.max_captures) as tx:
            if tx is None:
                return SealResult()
            captures = [c for c in tx.captures if isolate is None or c.thread_id == isolate]
            events, ids = self._build(tx, captures)
            if not events:
                return SealResult()
            legacy: set[str] = getattr(tx, "legacy", set())
            events = [refiled(e) if e.thread_id in legacy else e for e in events]
            copied = _copied_paths(tx, events, legacy)
            sealed = Sequencer(lambda _ids: dict(tx.heads)).seal(events)
            tx.store(sealed, ids, copied)
        return SealResult(sum(len(v) for v in ids.values()), sealed, list(ids))

    def _seal_each_alone(self) -> SealResult:
        """After a refused batch: each thread in a transaction of its own; a capture still
        refused is kept aside and replaced by an ``error`` event, so the thread goes on."""
        total = SealResult()
        with self.ledger.sealing(self.max_threads, self.max_captures) as tx:
            threads = [] if tx is None else list(dict.fromkeys(c.thread_id for c in tx.captures))
        for tid in threads:
            try:
                got = self._seal(isolate=tid)
            except Exception as exc:
                if not is_poison(exc):
                    raise
                got = self._seal_refused(tid, exc)
            total.captures += got.captures
            total.events.extend(got.events)
            total.threads.extend(got.threads)
        return total

    def _seal_refused(self, tid: str, exc: BaseException) -> SealResult:
        with self.ledger.sealing(self.max_threads, self.max_captures) as tx:
            if tx is None:
                return SealResult()
            first = next((c for c in tx.captures if c.thread_id == tid), None)
            if first is None:
                return SealResult()
            why = f"{type(exc).__name__}: {exc}"[:2000]
            path = self._keep(first, why)
            self.refused[tid] = why
            logger.error(
                "langgraph-external: capture %s of thread %r refused by the ledger (%s)%s",
                first.id,
                tid,
                why,
                f"; kept in {path}" if path else "",
            )
            carried = len(first.riders) + (first.kind != "events")
            note = refusal(tid, why, path, capture=first.kind, events=carried)
            for proc in self.processors:
                note = proc(note)
            sealed = Sequencer(lambda _ids: dict(tx.heads)).seal([note])
            assert first.id is not None
            tx.store(sealed, {tid: [first.id]})
        return SealResult(1, sealed, [tid])

    def _keep(self, capture: Capture, why: str) -> Path | None:
        """Write the refused capture for a person: the reason and what it referenced, then
        the events it carried (redacted before they go to a file)."""
        if self.quarantine_dir is None:
            return None
        head = {
            "reason": why,
            "capture": capture.kind,
            "thread_id": capture.thread_id,
            "checkpoint_ns": capture.checkpoint_ns,
            "checkpoint_id": capture.checkpoint_id,
            "task_id": capture.task_id,
        }
        return keep_aside(self.quarantine_dir, head, self._riders(capture), "surrogatepass")

    # -- building ------------------------------------------------------------------------
    def _build(
        self, tx: Any, captures: Sequence[Capture]
    ) -> tuple[list[Event], dict[str, list[int]]]:
        conn = getattr(tx, "conn", None)
        referencing = [c for c in captures if c.kind != "events" and c.material is None]
        materials: dict[int, Any] = {}
        if conn is not None:
            self.builder.lookup_parent = lambda t, n, c: self.reader.parent(conn, t, n, c)
            if referencing:
                materials.update(self.reader.materials(conn, referencing, self.builder))
        for c in captures:
            if c.material is not None:  # captured by value (a saver the record cannot join)
                assert c.id is not None
                m = materials[c.id] = material_of(c, self.cipher)
                if isinstance(m, CheckpointMaterial) and m.sends is not None:
                    # a Send task's writes may commit before the checkpoint naming its
                    # node (durability="async"): they are named by it, from this batch
                    self.builder.note_sends(m.thread_id, m.checkpoint_ns, m.checkpoint_id, m.sends)
        events: list[Event] = []
        ids: dict[str, list[int]] = {}
        waiting: set[str] = set()
        for c in captures:
            if c.thread_id in waiting:
                continue
            try:
                own = self._main_event(c, materials, tx)
            except _Defer:
                waiting.add(c.thread_id)
                continue
            built = self._riders(c) + own
            if not built:
                continue
            assert c.id is not None
            events.extend(built)
            ids.setdefault(c.thread_id, []).append(c.id)
        # grouped by thread (the ledger stores one group per thread), commit order kept
        order = {tid: i for i, tid in enumerate(ids)}
        events.sort(key=lambda e: order[e.thread_id])
        return events, ids

    def _riders(self, c: Capture) -> list[Event]:
        """A capture's events; pending ones (snapshots the app left to the sealer) are
        redacted, normalized and offloaded here, before anything readable is written."""
        if not c.pending:
            return list(c.riders)
        return [run_all(e, self.processors, failed=self.unrecorded) for e in c.riders]

    def _main_event(self, c: Capture, materials: Mapping[int, Any], tx: Any) -> list[Event]:
        if c.kind == "events":
            return []
        if c.material is None:
            return self._event_of(c, materials, tx)
        # captured by value: the saver is not in this database, nothing is read from it
        lookup, self.builder.lookup_parent = self.builder.lookup_parent, None
        try:
            return self._event_of(c, materials, tx)
        finally:
            self.builder.lookup_parent = lookup

    def _event_of(self, c: Capture, materials: Mapping[int, Any], tx: Any) -> list[Event]:
        assert c.id is not None
        m = materials.get(c.id)
        if isinstance(m, WritesMaterial) and m.node is None and is_push_task_path(m.task_path):
            node = self.builder.node_of(m.thread_id, m.checkpoint_ns, m.checkpoint_id, m.task_path)
            if node is None and _age(c) < _DEFER_AT_MOST:
                raise _Defer  # the checkpoint with its Send packets is not committed yet
            m.node = node
        if m is None:
            event = _missing(c)
        elif isinstance(m, CheckpointMaterial):
            if m.partial and self.builder.needs_full(m.thread_id, m.checkpoint_ns, m.parent_id):
                self._parent_refs(tx, m)
            event = self.builder.checkpoint_event(m)
        else:
            event = self.builder.writes_event(m)
        for proc in self.processors:
            event = proc(event)
        return [event]

    def _parent_refs(self, tx: Any, m: CheckpointMaterial) -> None:
        """A by-value capture carries only its changed channels; the parent's references
        name the rest, read back when this builder lost them (another sealer, a restart)."""
        assert m.parent_id is not None
        read = getattr(tx, "checkpoint_refs", None)
        refs = read(m.thread_id, m.checkpoint_ns, m.parent_id) if read is not None else None
        if refs is None:
            # cannot happen while the parent's record exists; said, never made up
            logger.error(
                "langgraph-external: checkpoint %s of thread %r names a parent whose "
                "record is gone; its unchanged channels are recorded as unknown",
                m.checkpoint_id,
                m.thread_id,
            )
            refs = {}
        self.builder.adopt_refs(m.thread_id, m.checkpoint_ns, m.parent_id, refs)


def refusal(tid: str, why: str, path: Path | None, **what: Any) -> Event:
    """The ``error`` event recorded in place of what the ledger refused (``what``: how
    much; ``path``: where it was kept for a person)."""
    payload = {"error": why[:2000], **what, "file": str(path) if path else None}
    return Event.new("error", tid, status="quarantined", name="ledger_refused", payload=payload)


def _copied_paths(tx: Any, events: Sequence[Event], legacy: set[str]) -> dict[str, dict[str, str]]:
    """Per copy (``thread_copied``) sealed now, where each copied namespace's log is in
    the copy's folder, by the copy's rule whatever its source's."""
    conn = getattr(tx, "conn", None)
    out: dict[str, dict[str, str]] = {}
    for e in events:
        if e.kind != "thread_copied" or conn is None:
            continue
        src = str(e.payload.get("source_thread_id"))
        rows = conn.execute(tx.ledger.sql.namespaces, (src,)).fetchall()
        dst_legacy = e.thread_id in legacy
        out[e.thread_id] = {
            str(r[0]): checkpoints_relpath(e.thread_id, str(r[0]), legacy=dst_legacy) for r in rows
        }
    return out


def _age(c: Capture) -> float:
    if c.captured_at is None:
        return float("inf")
    return (datetime.now(timezone.utc) - c.captured_at).total_seconds()


def _missing(c: Capture) -> Event:
    """The record of a capture whose saver rows are gone before it was sealed (the thread
    or checkpoint was deleted or pruned meanwhile): it says so, nothing is made up."""
    what = "checkpoint" if c.kind == "checkpoint" else "task writes"
    return Event.new(
        "error",
        c.thread_id,
        event_id=c.event_id,
        ts=c.captured_at or datetime.now(timezone.utc),
        status="missing",
        name=f"{c.kind}_missing",
        checkpoint_ns=c.checkpoint_ns,
        checkpoint_id=c.checkpoint_id,
        task_id=c.task_id,
        payload={
            "error": f"the saver no longer holds this {what}; it was captured but not sealed",
            "capture": c.kind,
            "parent_checkpoint_id": c.parent_id,
        },
    )
