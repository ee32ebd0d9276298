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
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph_external.assembly import assemble
from langgraph_external.ledger import schema as ledger
from langgraph_external.options import Options
from langgraph_external.pipeline.backend import FlushRequest
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.settings import Settings
from langgraph_external.upstream.saver_ops import (
    CAPTURE_MISSING_CHECKPOINTS,
    CAPTURE_MISSING_WRITES,
    SAVER_TABLES,
)
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.projection import WorkspaceProjection


@dataclass
class RepairReport:
    """What :func:`repair` did."""

    wal_events_replayed: int = 0
    captures_sealed: int = 0
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
        name = WorkspaceProjection(ws).name
        with ledger.connect(dsn, autocommit=True) as conn:
            ledger.file_workspace(conn, ws, rebuild, schema)  # their folders, by the ledger
            for tid in rebuild:
                ws.remove_thread(tid)
                conn.execute(ledger.q(ledger.UPSERT_CURSOR, schema), (name, tid, 0, None))
                report.threads_rebuilt.append(tid)
    rec = assemble(
        Settings.resolve(
            workspace=ws,
            dsn=dsn,
            cipher=cipher,
            sealing="thread",
            options=Options(schema=schema, spool_dir=spool_dir),
        ),
        workspace=ws,
    )
    try:
        pipeline = rec.pipeline
        report.wal_events_replayed = pipeline.health()["buffered"]
        store: Any = pipeline.ledger
        assert rec.mirror is not None  # sealing="thread": the mirror runs here
        report.quarantine_cleared = len(store.quarantined(rec.mirror.name))
        store.clear_quarantine(rec.mirror.name)
        # what dead processes captured is sealed first: it is what the saver holds
        if not pipeline.flush(timeout):
            report.problems.append("could not record everything within the timeout")
        report.captures_sealed = _seal_all(pipeline, timeout)
        with ledger.connect(dsn, autocommit=True) as conn:
            row = conn.execute(SAVER_TABLES).fetchone()
            if row is not None and row[0] is not None:
                cur = conn.execute(ledger.q(CAPTURE_MISSING_CHECKPOINTS, schema))
                report.checkpoints_recovered = cur.rowcount
                cur = conn.execute(ledger.q(CAPTURE_MISSING_WRITES, schema))
                report.writes_recovered = cur.rowcount
        report.captures_sealed += _seal_all(pipeline, timeout)
        if not pipeline.flush(timeout):
            report.problems.append("could not record everything within the timeout")
        # a killed process's transaction ends moments after it (its server session
        # notices when its statement is done): captures behind it are sealed then
        report.captures_sealed += _seal_behind_running(pipeline, store, timeout)
        caught_up, behind = pipeline.catch_up(timeout)
        report.threads_projected = caught_up
        report.problems.extend(f"workspace: {p}" for p in behind)
        left = store.pending()["captures"]
        if left:
            report.problems.append(
                f"{left} captures are still waiting for a sealer (a transaction older than"
                " them is still running)"
            )
    finally:
        rec.close()
    return report


LINGER_AT_MOST = 30.0
"""Seconds ``repair`` waits for the transactions of killed processes to end."""


def _seal_behind_running(pipeline: Any, store: Any, timeout: float) -> int:
    """Seal what is left once the transactions holding it back end — the sessions of
    killed processes, which the server ends when it notices (a statement waiting on a
    lock notices only once it has the lock); at most :data:`LINGER_AT_MOST` seconds
    (what is still left then is said by the caller)."""
    sealed = 0
    deadline = time.monotonic() + min(timeout, LINGER_AT_MOST)
    while store.pending()["captures"] and time.monotonic() < deadline:
        time.sleep(0.2)
        sealed += _seal_all(pipeline, max(0.0, deadline - time.monotonic()))
    return sealed


def _seal_all(pipeline: Pipeline, timeout: float) -> int:
    """Seal every sealable capture (any process's) with the pipeline's local sealer."""
    service = pipeline.service
    assert service is not None
    before = service.sealer.sealed_captures
    service.flush(FlushRequest((), service.horizon(), timeout))
    deadline = time.monotonic() + timeout
    while service.sealer.seal_batch() and time.monotonic() < deadline:
        pass
    return int(service.sealer.sealed_captures - before)
