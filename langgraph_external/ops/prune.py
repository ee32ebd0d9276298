"""Prune old checkpoints: keep the latest N per thread, or drop those older than a time.

The official savers only offer ``prune(strategy="keep_latest")`` (one checkpoint per
namespace) and refuse threads that use a ``DeltaChannel``. :func:`plan_prune` and
:func:`prune` work on the official Postgres saver's tables directly:

* **What goes.** In the root namespace and in every namespace of a ``checkpointer=True``
  subgraph (no ``:`` in its name), the checkpoints beyond the latest ``keep`` (by id,
  which is time-ordered) *and*, when ``older_than`` is given, created before it. A
  subgraph *call*'s namespace (``node:<task id>``) goes with the root checkpoint the call
  started from (``metadata.parents[""]``), whole, as in the official saver.
* **Delta-channel ancestry is kept.** A ``DeltaChannel`` stores no value in most
  checkpoints; its value is rebuilt by replaying the writes of ancestors back to the
  nearest checkpoint that holds a snapshot of it. For every kept checkpoint whose
  ``metadata.counters_since_delta_snapshot`` names channels, the parent chain is kept (with
  its writes) up to the first ancestor whose counters no longer name the channel (it holds
  the snapshot, or the channel had never been written before it). Those checkpoints are
  reported as ``kept_for_ancestry``.
* **Consistently, in one transaction per thread:** the checkpoints' rows, their pending
  writes, the blobs no kept checkpoint refers to, the ledger's checkpoint index, and a
  ``thread_pruned`` event (payload: ``removed`` ids per namespace, ``count``,
  ``kept_for_ancestry``, ``keep``, ``older_than``) that the workspace projection applies to
  the checkpoint logs (a kept line that referred to inline bytes of a removed line gets
  them). A kept checkpoint's ``parent_checkpoint_id`` is left as it was (the saver, the
  index and the workspace agree): it names a checkpoint that no longer exists.
* **While the app runs:** the thread's head row is locked and the thread read on one
  snapshot; if the app committed to the thread in between, the thread is planned again.
* **The audit trail stays.** Events are never deleted by a prune: the ledger is
  append-only, and the removed checkpoints' ``checkpoint`` and ``writes`` events (and their
  exact bytes) remain queryable. To drop a thread's record, delete the thread.

Example:
    >>> ck = [Ckpt("", f"c{i}", f"c{i - 1}" if i else None, f"2026-01-0{i + 1}T00:00:00+00:00",
    ...            {}, None, {}) for i in range(4)]
    >>> plan = plan_thread("t", ck, keep=2)
    >>> plan.remove, plan.keep
    ({'': ['c0', 'c1']}, {'': ['c2', 'c3']})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from langgraph_external.errors import ConfigurationError
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger import statements as stmt
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.read.inspection import parse_since
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event, EventKind
from langgraph_external.record.keys import existing_key
from langgraph_external.record.processors import Sequencer
from langgraph_external.upstream import saver_ops

__all__ = ["Ckpt", "PrunePlan", "parse_age", "plan_prune", "plan_thread", "prune"]


@dataclass(frozen=True)
class Ckpt:
    """One checkpoint as the planner sees it (a row of the saver's ``checkpoints``)."""

    ns: str
    id: str
    parent: str | None
    ts: str | None
    counters: dict[str, Any]
    root: str | None
    versions: dict[str, Any]


@dataclass
class PrunePlan:
    """What a prune of one thread removes and keeps (namespace -> checkpoint ids)."""

    thread_id: str
    total: int = 0
    keep: dict[str, list[str]] = field(default_factory=dict)
    kept_for_ancestry: dict[str, list[str]] = field(default_factory=dict)
    remove: dict[str, list[str]] = field(default_factory=dict)
    blobs: int = 0
    writes: int = 0
    pruned: bool = False

    @property
    def removed(self) -> int:
        return sum(len(v) for v in self.remove.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "removed": self.removed}


def plan_thread(
    thread_id: str,
    checkpoints: Sequence[Ckpt],
    *,
    keep: int,
    older_than: datetime | None = None,
) -> PrunePlan:
    """Decide what to remove from one thread's checkpoints (see the module docstring)."""
    if keep < 1:
        raise ConfigurationError("keep must be at least 1 (to drop a thread, delete it)")
    by_ns: dict[str, list[Ckpt]] = {}
    for c in checkpoints:
        by_ns.setdefault(c.ns, []).append(c)
    index = {(c.ns, c.id): c for c in checkpoints}
    remove: set[tuple[str, str]] = set()
    for ns, cks in by_ns.items():
        if ":" in ns:
            continue  # a subgraph call: decided by its root checkpoint below
        cks.sort(key=lambda c: c.id)
        for c in cks[: max(0, len(cks) - keep)]:
            if older_than is None or (
                c.ts is not None and datetime.fromisoformat(c.ts) < older_than
            ):
                remove.add((ns, c.id))
    for ns, cks in by_ns.items():
        if ":" in ns:
            latest = max(cks, key=lambda c: c.id)
            if latest.root is not None and ("", latest.root) in remove:
                remove.update((ns, c.id) for c in cks)
    ancestry = _ancestry(index, {k for k in index if k not in remove})
    remove -= ancestry
    plan = PrunePlan(thread_id, total=len(checkpoints))
    for ns, cid in sorted(index):
        bucket = plan.remove if (ns, cid) in remove else plan.keep
        bucket.setdefault(ns, []).append(cid)
        if (ns, cid) in ancestry:
            plan.kept_for_ancestry.setdefault(ns, []).append(cid)
    return plan


def _ancestry(
    index: dict[tuple[str, str], Ckpt], kept: set[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Checkpoints the kept ones need to rebuild their delta channels (and not kept yet)."""
    needed: set[tuple[str, str]] = set()
    for key in sorted(kept):
        c = index[key]
        channels = set(c.counters)
        parent = c.parent
        while channels and parent is not None and (c.ns, parent) in index:
            p = index[(c.ns, parent)]
            if (c.ns, p.id) not in kept:
                needed.add((c.ns, p.id))
            channels &= set(p.counters)  # a channel missing here has its snapshot here
            parent = p.parent
    return needed


def parse_age(text: str, now: datetime | None = None) -> datetime:
    """The cut-off time of ``--older-than``: an age (``30d``, ``12h``, ``90m``, ``45s``,
    ``2w``, or combined: ``1d12h``) before ``now``, or an ISO 8601 time (UTC when it has
    no offset) — the forms of ``--since`` (:func:`~langgraph_external.read.inspection.parse_since`).

    Raises:
        ConfigurationError: neither.

    Example:
        >>> parse_age("1d12h", datetime.fromisoformat("2026-01-31T00:00Z")).isoformat()
        '2026-01-29T12:00:00+00:00'
    """
    try:
        return parse_since(text, now)
    except ValueError as exc:
        raise ConfigurationError(f"--older-than: {exc}") from None


def _load(conn: psycopg.Connection[Any], thread_id: str) -> list[Ckpt]:
    cur = conn.cursor(row_factory=tuple_row)  # whatever rows the caller's connection makes
    rows = cur.execute(saver_ops.PRUNE_SELECT_CHECKPOINTS, (thread_id,)).fetchall()
    return [
        Ckpt(ns, cid, parent, ts, dict(counters or {}), root, dict(versions or {}))
        for ns, cid, parent, ts, counters, root, versions in rows
    ]


def _garbage(checkpoints: Sequence[Ckpt], plan: PrunePlan) -> dict[tuple[str, str], list[str]]:
    """(ns, channel) -> blob versions only removed checkpoints refer to."""
    gone = {(ns, cid) for ns, ids in plan.remove.items() for cid in ids}
    used: set[tuple[str, str, str]] = set()
    freed: set[tuple[str, str, str]] = set()
    for c in checkpoints:
        target = freed if (c.ns, c.id) in gone else used
        target.update((c.ns, ch, str(v)) for ch, v in c.versions.items())
    out: dict[tuple[str, str], list[str]] = {}
    for ns, ch, v in sorted(freed - used):
        out.setdefault((ns, ch), []).append(v)
    return out


def plan_prune(
    conn: psycopg.Connection[Any],
    thread_ids: Sequence[str] | None,
    *,
    keep: int,
    older_than: datetime | None = None,
) -> list[PrunePlan]:
    """Plans for ``thread_ids`` (``None``: every thread in the saver's tables); no writes."""
    ids = list(thread_ids) if thread_ids is not None else saver_threads(conn)
    return [plan_thread(t, _load(conn, t), keep=keep, older_than=older_than) for t in ids]


def saver_threads(conn: psycopg.Connection[Any]) -> list[str]:
    """Every thread id in the official saver's ``checkpoints`` table."""
    return [r[0] for r in conn.execute(saver_ops.SAVER_THREADS_ORDERED).fetchall()]


def prune(
    dsn: str,
    thread_ids: Sequence[str] | None,
    *,
    keep: int,
    older_than: datetime | None = None,
    schema: str = ledger.DEFAULT_SCHEMA,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
    cipher: WorkspaceCipher | None = None,
) -> list[PrunePlan]:
    """Prune the threads in the saver's tables and the ledger; one transaction per thread.

    The workspace follows through its projection (the ``thread_pruned`` event); call
    ``Pipeline.catch_up`` or ``lgx repair`` to apply it now (``lgx prune`` does).

    Returns:
        One plan per thread, ``pruned=True`` where something was removed.

    Raises:
        ConfigurationError: ``keep`` is below 1.
        LedgerUnavailableError: the database cannot be reached.
    """
    # the prune event moves the thread's head: tagged with the deployment key like any other
    sink = PostgresLedger(dsn, schema, cipher=cipher or existing_key())
    plans: list[PrunePlan] = []
    with ledger.connect(dsn, autocommit=True) as conn:
        conn.execute("set time zone 'UTC'")
        ids = list(thread_ids) if thread_ids is not None else saver_threads(conn)
        for n, tid in enumerate(ids, 1):
            for attempt in range(_ATTEMPTS):
                try:
                    plan = _prune_one(conn, sink, tid, keep, older_than, schema, dry_run)
                    break
                except psycopg.Error as exc:
                    # a run of the app committed to the thread meanwhile: plan again
                    if exc.sqlstate not in _RETRY or attempt == _ATTEMPTS - 1:
                        raise
            plans.append(plan)
            if progress:
                progress(n, len(ids))
    return plans


_ATTEMPTS = 20
_RETRY = ("40001", "40P01", stmt.POSITION_MOVED)  # serialization, deadlock, head moved


def _prune_one(
    conn: psycopg.Connection[Any],
    sink: PostgresLedger,
    tid: str,
    keep: int,
    older_than: datetime | None,
    schema: str,
    dry_run: bool,
) -> PrunePlan:
    """One thread, in one transaction on one snapshot (its head row locked)."""
    with conn.transaction():
        conn.execute("set transaction isolation level repeatable read")
        head = conn.execute(ledger.q(stmt.LOCK_HEAD, schema), (tid,)).fetchone()
        checkpoints = _load(conn, tid)
        plan = plan_thread(tid, checkpoints, keep=keep, older_than=older_than)
        garbage = _garbage(checkpoints, plan)
        plan.blobs = sum(len(v) for v in garbage.values())
        if plan.removed and not dry_run:
            with conn.cursor() as cur:
                for ns, ids in plan.remove.items():
                    cur.execute(saver_ops.PRUNE_DELETE_WRITES, (tid, ns, ids))
                    plan.writes += cur.rowcount
                    cur.execute(saver_ops.PRUNE_DELETE_CHECKPOINTS, (tid, ns, ids))
                for (ns, ch), versions in garbage.items():
                    cur.execute(saver_ops.PRUNE_DELETE_BLOBS, (tid, ns, ch, versions))
                position = (int(head[0]), str(head[1])) if head and head[0] else None
                event = _sealed(_pruned_event(tid, plan, keep, older_than), position)
                sink.execute_in(cur, [event])
            plan.pruned = True
    return plan


def _sealed(event: Event, position: tuple[int, str] | None) -> Event:
    """``event`` numbered and chained after the thread's head (``None``: a new thread)."""
    return Sequencer(lambda _ids: {event.thread_id: position} if position else {}).seal([event])[0]


def _pruned_event(tid: str, plan: PrunePlan, keep: int, older_than: datetime | None) -> Event:
    return Event.new(
        EventKind.THREAD_PRUNED,
        tid,
        name="keep_latest",
        payload={
            "removed": plan.remove,
            "count": plan.removed,
            "kept_for_ancestry": plan.kept_for_ancestry,
            "keep": keep,
            "older_than": older_than.isoformat() if older_than else None,
            "writes": plan.writes,
            "blobs": plan.blobs,
        },
    )
