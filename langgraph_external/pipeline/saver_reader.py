"""Reads what captures reference from the official Postgres saver's own tables: the
checkpoint documents, the blobs of changed channels and a task's writes, batched into one
query each (the sealer's read of a batch, :mod:`langgraph_external.pipeline.seal`).

Example:
    >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    >>> SaverReader(JsonPlusSerializer())._sends(None)
    []
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external.record.capture import Capture
from langgraph_external.record.checkpoints import (
    CheckpointMaterial,
    RecordBuilder,
    WritesMaterial,
)
from langgraph_external.upstream import langgraph as _compat
from langgraph_external.upstream import saver_ops

logger = logging.getLogger("langgraph_external")

__all__ = ["SaverReader"]

_TASKS = _compat.TASKS


class SaverReader:
    """Reads what captures reference from the official Postgres saver's tables.

    ``serde`` encodes values the saver keeps inline (the bytes a serializer gives them,
    as the checkpointer records them) and decodes ``Send`` packets (which node a push
    task ran).
    """

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    def materials(
        self, conn: Any, captures: Sequence[Capture], builder: RecordBuilder
    ) -> dict[int, CheckpointMaterial | WritesMaterial | None]:
        """Material for each capture (by capture id); ``None`` when the rows are gone."""
        out: dict[int, CheckpointMaterial | WritesMaterial | None] = {}
        cps = [c for c in captures if c.kind == "checkpoint"]
        ws = [c for c in captures if c.kind == "writes"]
        if cps:
            out.update(self._checkpoints(conn, cps, builder))
        if ws:
            out.update(self._writes(conn, ws))
        return out

    def _checkpoints(
        self, conn: Any, cps: Sequence[Capture], builder: RecordBuilder
    ) -> dict[int, CheckpointMaterial | None]:
        # a parent is read only when neither the builder's caches nor this batch (built
        # in order, before its children) tell what it proved
        here = {(c.thread_id, c.checkpoint_ns, c.checkpoint_id) for c in cps}
        rows = conn.execute(
            saver_ops.SAVER_CHECKPOINT_ROWS_SQL,
            (
                _requests(
                    [
                        c.thread_id,
                        c.checkpoint_ns,
                        c.checkpoint_id,
                        None
                        if c.parent_id is None
                        or (c.thread_id, c.checkpoint_ns, c.parent_id) in here
                        or builder.knows(c.thread_id, c.checkpoint_ns, c.parent_id)
                        else c.parent_id,
                    ]
                    for c in cps
                ),
            ),
        ).fetchall()
        docs = {int(r[0]): r for r in rows}
        out: dict[int, CheckpointMaterial | None] = {}
        wanted: list[tuple[int, str, str, str, str]] = []  # (request, thread, ns, ch, version)
        plans: list[tuple[Capture, dict[str, Any], dict[str, Any], Any]] = []
        for i, c in enumerate(cps, 1):
            r = docs.get(i, (None,) * 4)  # no row: the checkpoint is gone
            cp = _json(r[1])
            assert c.id is not None
            if not cp:
                out[c.id] = None
                continue
            meta = _json(r[2]) or {}
            parent = _json(r[3]) if c.parent_id else None
            versions = cp.get("channel_versions") or {}
            full = c.changed is None or builder.needs_full(
                c.thread_id, c.checkpoint_ns, c.parent_id
            )
            need = set(versions) if full else {ch for ch in c.changed or () if ch in versions}
            if _TASKS in versions:
                need.add(_TASKS)  # its Send packets name the nodes of the next step's pushes
            for ch in sorted(need):
                wanted.append((len(plans), c.thread_id, c.checkpoint_ns, ch, str(versions[ch])))
            cached = builder.sends_of(c.thread_id, c.checkpoint_ns, c.parent_id)
            if parent and cached is None and _TASKS in (parent.get("channel_versions") or {}):
                ver = str(parent["channel_versions"][_TASKS])
                wanted.append((-1 - len(plans), c.thread_id, c.checkpoint_ns, _TASKS, ver))
            plans.append((c, cp, meta, parent))
        blobs = self._blobs(conn, wanted)
        by_plan: dict[int, list[str]] = {}
        for req, _tid, _ns, ch, _ver in wanted:
            by_plan.setdefault(req, []).append(ch)
        for n, (c, cp, meta, parent) in enumerate(plans):
            assert c.id is not None
            inline = cp.get("channel_values") or {}
            values: dict[str, tuple[str, bytes] | None] = {}
            rows_of: set[str] = set()
            for ch in by_plan.get(n, ()):
                hit = blobs.get((n, ch))
                if hit is not None:
                    values[ch] = hit
                    rows_of.add(ch)
                elif c.inline and ch in c.inline and ch in (c.changed or ()):
                    values[ch] = c.inline[ch]  # the app's bytes: the JSON row is not exact
                elif ch in inline and inline[ch] is not _compat.SAVER_INLINE_TRUE:
                    values[ch] = self.serde.dumps_typed(inline[ch])
                else:
                    values[ch] = None
            parent_sends: list[str | None] | None = None
            if parent and builder.sends_of(c.thread_id, c.checkpoint_ns, c.parent_id) is None:
                parent_sends = self._sends(blobs.get((-1 - n, _TASKS)))
            out[c.id] = CheckpointMaterial(
                thread_id=c.thread_id,
                checkpoint_ns=c.checkpoint_ns,
                checkpoint_id=str(c.checkpoint_id),
                parent_id=c.parent_id,
                checkpoint=cp,
                metadata=meta,
                changed=None if c.changed is None else list(c.changed),
                values=values,
                saver_rows=rows_of,
                parent_seen=parent.get("versions_seen") or {} if parent else None,
                parent_sends=parent_sends,
                sends=self._sends(values.get(_TASKS)),
                event_id=c.event_id,
                ts=c.captured_at,
                recovered=c.recovered,
            )
        return out

    def _blobs(
        self, conn: Any, wanted: Sequence[tuple[int, str, str, str, str]]
    ) -> dict[tuple[int, str], tuple[str, bytes]]:
        if not wanted:
            return {}
        rows = conn.execute(
            saver_ops.SAVER_BLOB_ROWS_SQL, (_requests([w[1], w[2], w[3], w[4]] for w in wanted),)
        ).fetchall()
        out: dict[tuple[int, str], tuple[str, bytes]] = {}
        for r in rows:
            w = wanted[int(r[0]) - 1]
            typ, blob = r[1], r[2]
            if blob is None or typ == "empty":
                continue
            out[(w[0], w[3])] = (str(typ), bytes(blob))
        return out

    def _sends(self, value: tuple[str, bytes] | None) -> list[str | None]:
        if value is None:
            return []
        try:
            packets = self.serde.loads_typed(value)
        except Exception as exc:  # a packet this process cannot decode: names unknown
            logger.warning("langgraph-external: cannot decode Send packets: %s", exc)
            return []
        return _compat.send_targets({_TASKS: packets})

    def _writes(self, conn: Any, ws: Sequence[Capture]) -> dict[int, WritesMaterial | None]:
        rows = conn.execute(
            saver_ops.SAVER_WRITE_ROWS_SQL,
            (_requests([c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.task_id] for c in ws),),
        ).fetchall()
        by_req: dict[int, dict[int, tuple[Any, Any, Any, Any]]] = {}
        for i, idx, ch, typ, blob, path in rows:
            by_req.setdefault(i, {})[idx] = (ch, typ, blob, path)
        out: dict[int, WritesMaterial | None] = {}
        for i, c in enumerate(ws, 1):
            assert c.id is not None
            held = by_req.get(i, {})
            order = c.idx if c.idx is not None else sorted(held)
            picked = [(idx, held[idx]) for idx in order if idx in held]
            if not picked:
                out[c.id] = None
                continue
            out[c.id] = WritesMaterial(
                thread_id=c.thread_id,
                checkpoint_ns=c.checkpoint_ns,
                checkpoint_id=c.checkpoint_id,
                task_id=str(c.task_id),
                task_path=c.task_path if c.task_path is not None else str(picked[0][1][3] or ""),
                writes=[
                    (idx, ch, typ, bytes(blob) if blob is not None else b"")
                    for idx, (ch, typ, blob, _path) in picked
                ],
                node=c.node,
                event_id=c.event_id,
                ts=c.captured_at,
                recovered=c.recovered,
            )
        return out

    def parent(
        self, conn: Any, tid: str, ns: str, cid: str
    ) -> tuple[Mapping[str, Any], Sequence[str | None]] | None:
        """``(versions_seen, Send targets)`` of a stored checkpoint (a builder look-up)."""
        rows = conn.execute(
            saver_ops.SAVER_CHECKPOINT_ROWS_SQL, (_requests([[tid, ns, cid, None]]),)
        ).fetchall()
        cp = _json(rows[0][1]) if rows else None
        if not cp:
            return None
        versions = cp.get("channel_versions") or {}
        sends: list[str | None] = []
        if _TASKS in versions:
            got = self._blobs(conn, [(0, tid, ns, _TASKS, str(versions[_TASKS]))])
            sends = self._sends(got.get((0, _TASKS)))
        return cp.get("versions_seen") or {}, sends


def _requests(rows: Any) -> str:
    """Requests for the saver-row queries as one JSON parameter (arrays of text cost
    psycopg far more to send): ``[[a, b, c, d], ...]``, answered by position."""
    return json.dumps(list(rows), ensure_ascii=False, separators=(",", ":"))


def _json(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        return json.loads(value)
    return value
