"""Repair: bring the ledger and the workspace back to what the saver committed.

After a crash, an outage or a hand edit, :func:`repair`:

1. replays the write-ahead logs dead processes left (events of non-Postgres savers, and
   events that outlived a close while the ledger was down) — skipping events the ledger
   already holds;
2. reconciles the ledger with the official Postgres saver's tables in the same database:
   a checkpoint or a task's writes the saver holds without its event (written by a plain
   saver, or writes whose event was still buffered when the process died) is recorded
   now, from the exact bytes the saver stored, marked ``"recovered": true``;
3. lets the workspace projection try quarantined threads again and brings every thread
   up to the ledger (``rebuild=[...]`` first deletes those threads' files and rebuilds
   them from the ledger).

It is idempotent: a second run finds nothing to do.

Example:
    >>> report = repair(dsn="postgresql:///app", workspace="./agent_workspace")  # doctest: +SKIP
    >>> report.writes_recovered, report.threads_projected                      # doctest: +SKIP
    (0, 12)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from langgraph.checkpoint.base import WRITES_IDX_MAP

from langgraph_external import _compat, ledger
from langgraph_external.assembly import assemble
from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.events import Event, EventKind
from langgraph_external.workspace import Workspace

MISSING_WRITES = """
select w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.idx,
       w.channel, w.type, w.blob
from public.checkpoint_writes w
where not exists (
    select 1 from {schema}.events e
    where e.thread_id = w.thread_id and e.kind = 'writes'
      and e.checkpoint_ns = w.checkpoint_ns and e.checkpoint_id = w.checkpoint_id
      and e.task_id = w.task_id)
order by w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
"""

MISSING_CHECKPOINTS = """
select c.thread_id, c.checkpoint_ns, c.checkpoint_id
from public.checkpoints c
where not exists (
    select 1 from {schema}.checkpoints l
    where l.thread_id = c.thread_id and l.checkpoint_ns = c.checkpoint_ns
      and l.checkpoint_id = c.checkpoint_id)
order by c.thread_id, c.checkpoint_ns, c.checkpoint_id
"""

SAVER_TABLES = "select to_regclass('public.checkpoints'), to_regclass('public.checkpoint_writes')"


@dataclass
class RepairReport:
    """What :func:`repair` did."""

    wal_events_replayed: int = 0
    checkpoints_recovered: int = 0
    writes_recovered: int = 0
    threads_projected: int = 0
    quarantine_cleared: int = 0
    threads_rebuilt: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether everything could be brought up to date."""
        return not self.problems


def repair(
    *,
    dsn: str,
    workspace: str | os.PathLike[str] | Workspace,
    schema: str = ledger.DEFAULT_SCHEMA,
    spool_dir: str | os.PathLike[str] | None = None,
    cipher: WorkspaceCipher | None = None,
    rebuild: Sequence[str] = (),
    timeout: float = 600.0,
) -> RepairReport:
    """Drain, reconcile with the saver's tables, and bring the workspace up to the ledger.

    Raises:
        LedgerUnavailableError: the database cannot be reached.
    """
    report = RepairReport()
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    if rebuild:
        from langgraph_external.sinks.workspace import WorkspaceProjection

        name = WorkspaceProjection(ws).name
        with ledger.connect(dsn, autocommit=True) as conn:
            for tid in rebuild:
                ws.remove_thread(tid)
                conn.execute(ledger.q(ledger.UPSERT_CURSOR, schema), (name, tid, 0, None))
                report.threads_rebuilt.append(tid)
    rec = assemble(workspace=ws, dsn=dsn, schema=schema, spool_dir=spool_dir, cipher=cipher)
    try:
        pipeline = rec.pipeline
        report.wal_events_replayed = pipeline.health()["buffered"]
        store: Any = pipeline.ledger
        report.quarantine_cleared = len(store.quarantined(rec.mirror.name))
        store.clear_quarantine(rec.mirror.name)
        with ledger.connect(dsn, autocommit=True) as conn:
            row = conn.execute(SAVER_TABLES).fetchone()
            if row is not None and row[0] is not None:
                _reconcile(conn, dsn, schema, rec, report)
        if not pipeline.flush(timeout):
            report.problems.append("could not record everything within the timeout")
        caught_up, behind = pipeline.catch_up(timeout)
        report.threads_projected = caught_up
        report.problems.extend(f"workspace: {p}" for p in behind)
    finally:
        rec.close()
    return report


def _reconcile(
    conn: psycopg.Connection[Any], dsn: str, schema: str, rec: Any, report: RepairReport
) -> None:
    """Record what the official saver holds without an event."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from langgraph_external.checkpointers import ExternalCheckpointer, _Blobs, _Capture

    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as sc:
        saver = PostgresSaver(sc)
        wrapper = ExternalCheckpointer(saver, pipeline=rec.pipeline, outbox=False)
        rows = conn.execute(ledger.q(MISSING_CHECKPOINTS, schema)).fetchall()
        for tid, ns, cid in rows:
            tup = saver.get_tuple(
                {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
            )
            if tup is None:
                continue
            parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            config = {"configurable": {"thread_id": tid, "checkpoint_ns": ns}}
            if parent:
                config["configurable"]["checkpoint_id"] = parent
            put = wrapper._prepare_put(
                tid,
                config,  # type: ignore[arg-type]
                tup.checkpoint,
                tup.metadata,
                dict(tup.checkpoint["channel_versions"]),
            )
            event = wrapper._build_checkpoint(put, _Capture())
            rec.pipeline.emit(
                event.replace(payload={**event.payload, "recovered": True}), durable=True
            )
            report.checkpoints_recovered += 1
        groups: dict[tuple[str, str, str, str], list[Any]] = {}
        for r in conn.execute(ledger.q(MISSING_WRITES, schema)).fetchall():
            groups.setdefault((r[0], r[1], r[2], r[3]), []).append(r)
        for (tid, ns, cid, task_id), writes in groups.items():
            task_path = writes[0][4] or ""
            node = _node_of(saver, tid, ns, cid, task_path)
            blobs = _Blobs(wrapper._digest, wrapper._seal)
            refs = []
            for _, _, _, _, _, idx, channel, typ, blob in writes:
                data = bytes(blob) if blob is not None else b""
                ref = {"idx": WRITES_IDX_MAP.get(channel, idx), "channel": channel, "type": typ}
                refs.append({**ref, **blobs.add(data, None)})
            rec.pipeline.emit(
                Event(
                    kind=EventKind.WRITES.value,
                    thread_id=tid,
                    checkpoint_ns=ns,
                    checkpoint_id=cid,
                    task_id=task_id,
                    node=node,
                    name=node,
                    payload={"task_path": task_path, "writes": refs, "recovered": True},
                    detail={"inline": blobs.inline, "enc": blobs.enc},
                    attachments=blobs.files,
                ),
                durable=True,
            )
            report.writes_recovered += 1


def _node_of(saver: Any, tid: str, ns: str, cid: str, task_path: str) -> str | None:
    parts = [p.strip() for p in task_path.split(",")] if task_path else []
    if len(parts) < 2:
        return None
    if parts[0] == _compat.TASK_PATH_PULL:
        return parts[1]
    if parts[0] == _compat.TASK_PATH_PUSH:
        tup = saver.get_tuple(
            {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
        )
        targets = _compat.send_targets(tup.checkpoint["channel_values"]) if tup else []
        try:
            return targets[int(parts[1])]
        except (ValueError, IndexError):
            return None
    return None
