"""The write path: the statements that store sequenced events in the ledger.

One rule holds every write: a thread's position advances only from the position the
writer saw (``seal_thread``/``advance_thread`` raise ``LX001`` otherwise), in the same
transaction as the events. A thread's run of plain events is one ``COMMIT_EVENTS``
statement; a run holding a thread operation (deletion, prune, copy) is stored event by
event with the operation's side effects on the checkpoint index. The statements are
queued on a cursor of a transaction the caller owns: a sealer's, prune's, an import's, or
the ledger's own (:meth:`~langgraph_external.ledger.postgres.PostgresLedger.append`).

Example:
    >>> from langgraph_external.record.crypto import WorkspaceCipher
    >>> len(head_tag(WorkspaceCipher(bytes(32)), "t", 3, "ab")), head_tag(None, "t", 3, "ab")
    (64, None)
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langgraph_external.ledger.rows import checkpoint_row, commit_params, event_row
from langgraph_external.ledger.statements import LedgerStatements
from langgraph_external.record.artifacts import is_ref
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event
from langgraph_external.record.keys import head_tag as head_tag
from langgraph_external.record.locations import thread_relpath

__all__ = ["THREAD_OPS", "Statement", "execute_in", "head_tag", "write_statements"]

Statement = tuple[Any, Any]

THREAD_OPS = frozenset({"thread_deleted", "thread_pruned", "runs_deleted", "thread_copied"})
"""Event kinds whose storing changes the checkpoint index (stored event by event)."""


def write_statements(
    sql: LedgerStatements,
    cipher: WorkspaceCipher | None,
    events: Sequence[Event],
    captures: Mapping[str, Sequence[int]] | None = None,
    copied: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Statement]:
    """The statements that store ``events`` (sequenced, grouped by thread in order).

    The first statement of each thread advances its position from
    ``events[0].seq - 1`` (tagging the new head with ``cipher``) and deletes the thread's
    ``captures`` (ids) the events were sealed from; it fails with ``LX001`` if another
    writer got there first. ``copied``: per copy (``thread_copied``), the workspace path
    of each copied namespace's log in the copy's folder (the sealer names them: a copy of
    a thread with old folder names gets the current ones); a namespace not named there
    keeps its file name under the copy's folder.
    """
    captures = captures or {}
    copied = copied or {}
    out: list[Statement] = []
    for tid, run in itertools.groupby(events, key=lambda e: e.thread_id):
        group = list(run)
        first, last = group[0], group[-1]
        assert first.seq is not None and last.seq is not None
        tag = head_tag(cipher, tid, last.seq, last.hash)
        sealed_from = list(captures.get(tid, ()))
        head = (tid, first.seq - 1, first.prev, last.seq, last.hash, last.ts, tag, sealed_from)
        if all(e.line and e.kind not in THREAD_OPS for e in group):
            out.append((sql.commit, (*head, *commit_params(group))))
        else:
            out.append((sql.seal, head))
            for e in group:
                out.append((sql.insert_event, event_row(e)))
                out.extend(_side_effects(sql, e, copied.get(e.thread_id)))
        out.extend(_artifacts(sql, group))
    return out


def _artifacts(sql: LedgerStatements, group: Sequence[Event]) -> Iterator[Statement]:
    """The artifact rows of events whose large values were offloaded (rare)."""
    for e in group:
        if not e.attachments:
            continue
        kinds = {d: "text" if ref.get("as") == "text" else "json" for d, ref in _refs(e.payload)}
        for path, data in e.attachments.items():
            if not path.startswith("artifacts/"):
                continue
            digest = path.removeprefix("artifacts/")
            media = "bytes" if digest == e.artifact else kinds.get(digest, "json")
            yield (sql.artifact, (e.thread_id, digest, media, len(data), data))


def _refs(value: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if isinstance(value, Mapping):
        if is_ref(value):
            yield str(value["$artifact"]), value
            return
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            yield from _refs(v)


def _side_effects(
    sql: LedgerStatements, e: Event, paths: Mapping[str, str] | None = None
) -> Iterator[Statement]:
    if e.kind == "checkpoint":
        yield (sql.checkpoint, checkpoint_row(e))
    elif e.kind == "thread_deleted":
        yield (sql.forget, (e.thread_id, e.seq, e.ts))
    elif e.kind in ("thread_pruned", "runs_deleted"):
        for ns, ids in (e.payload.get("removed") or {}).items():
            if ids:
                yield (sql.delete_checkpoints, (e.thread_id, ns, list(ids)))
    elif e.kind == "thread_copied":
        src = e.payload["source_thread_id"]
        yield (
            sql.copy_checkpoints,
            {
                "src": src,
                "dst": e.thread_id,
                "dst_dir": f"{thread_relpath(e.thread_id)}/",
                "paths": json.dumps(dict(paths or {})),
            },
        )


def _batched(statements: Sequence[Statement], insert_event: Any) -> Iterator[tuple[Any, list[Any]]]:
    """The statements, consecutive event inserts grouped for one ``executemany``."""
    group: list[Any] = []
    for query, params in statements:
        if query is insert_event:
            group.append(params)
            continue
        if group:
            yield insert_event, group
            group = []
        yield query, [params]
    if group:
        yield insert_event, group


def execute_in(
    cur: Any,
    sql: LedgerStatements,
    cipher: WorkspaceCipher | None,
    events: Sequence[Event],
    captures: Mapping[str, Sequence[int]] | None = None,
    copied: Mapping[str, Mapping[str, str]] | None = None,
) -> None:
    """Queue the statements storing ``events`` on ``cur`` (a cursor of the caller's
    transaction)."""
    statements = write_statements(sql, cipher, events, captures, copied)
    for query, params in _batched(statements, sql.insert_event):
        if len(params) == 1:
            cur.execute(query, params[0])
        else:
            cur.executemany(query, params)
