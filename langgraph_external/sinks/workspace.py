"""The workspace sink: mirrors sequenced events into the file workspace.

Per batch and thread it appends the envelopes to ``events.jsonl`` in one write, stores
attachments content-addressed, writes one JSON file per checkpoint (exact channel refs,
metadata, parent, readable rendering of the channels that changed), appends pending
writes next to their checkpoint, and replaces ``state.json`` once with the newest root
checkpoint's state.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Collection, Sequence
from datetime import datetime, timezone
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_external.events import SCHEMA_VERSION, Event
from langgraph_external.processors import Redactor
from langgraph_external.render import to_readable
from langgraph_external.workspace import Workspace, encode_thread_id

logger = logging.getLogger("langgraph_external")

_CACHE = 4096


class WorkspaceSink:
    """Writes events and checkpoint mirrors under a :class:`Workspace`.

    Args:
        workspace: where to write.
        serde: decodes exact bytes for the readable views (the saver's serializer).
        redactor: applied to every readable view (``state.json``, checkpoint and
            writes renderings) before it is written.
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        serde: SerializerProtocol | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.ws = workspace
        self.serde: SerializerProtocol = serde or JsonPlusSerializer()
        self.redactor = redactor
        digest = hashlib.sha256(workspace.location.encode()).hexdigest()[:12]
        self.name = f"workspace-{digest}"
        self._known_threads: set[str] = set()
        # (thread, ns, checkpoint_id) -> full channel map {ch: {version, type, sha256, size}}
        self._channel_maps: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()
        self._readable: OrderedDict[str, Any] = OrderedDict()  # sha -> readable value

    # -- Sink --------------------------------------------------------------------------
    def write(self, events: Sequence[Event]) -> None:
        """Mirror ``events``; rewriting an already-written batch is harmless."""
        by_thread: dict[str, list[Event]] = {}
        for e in events:
            by_thread.setdefault(e.thread_id, []).append(e)
        for tid, evs in by_thread.items():
            self._write_thread(tid, evs)

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Last ``(seq, hash)`` per thread from the tail of each ``events.jsonl``."""
        out: dict[str, tuple[int, str]] = {}
        for tid in thread_ids:
            last = self.ws.last_event(tid)
            if last and last.get("seq") is not None and last.get("hash"):
                out[tid] = (int(last["seq"]), str(last["hash"]))
        return out

    def close(self) -> None:
        """Nothing to release."""

    # -- internals ---------------------------------------------------------------------
    def _write_thread(self, tid: str, events: list[Event]) -> None:
        ws = self.ws
        tdir = ws.thread_dir(tid)
        start = 0
        for i, e in enumerate(events):
            if e.kind == "thread_deleted":
                ws.remove_thread(tid)
                self._known_threads.discard(tid)
                self._drop_thread_cache(tid)
                start = i
        events = events[start:]
        if tid not in self._known_threads:
            self._ensure_thread_json(tid, events[0])
        existing_seq = None
        last = ws.last_event(tid) if events[0].seq is not None else None
        if last is not None:
            existing_seq = int(last.get("seq") or 0)
        fresh = [e for e in events if existing_seq is None or (e.seq or 0) > existing_seq]
        for e in events:
            for rel, data in e.attachments.items():
                ws.write_if_absent(f"{tdir}/{rel}", data)
        latest_root: Event | None = None
        for e in fresh:
            if e.kind == "checkpoint":
                self._write_checkpoint(tid, e)
                if e.checkpoint_ns == "":
                    latest_root = e
            elif e.kind == "writes":
                self._write_writes(tid, e)
                if e.payload.get("late_for"):
                    self._add_late_writer(tid, e)
            elif e.kind in ("thread_pruned", "runs_deleted"):
                self._remove_checkpoints(tid, e)
            elif e.kind == "thread_copied":
                self._copy_checkpoints(e.payload["source_thread_id"], tid)
        if fresh:
            ws.append_lines(
                f"{tdir}/events.jsonl",
                (json.dumps(e.envelope(), ensure_ascii=False, default=str) for e in fresh),
            )
        if latest_root is not None:
            self._write_state(tid, latest_root)

    def _ensure_thread_json(self, tid: str, first: Event) -> None:
        path = f"{self.ws.thread_dir(tid)}/thread.json"
        if not self.ws.exists(path):
            self.ws.write_json(
                path,
                {
                    "thread_id": tid,
                    "encoded": encode_thread_id(tid),
                    "created": first.ts.isoformat(),
                    "schema_version": SCHEMA_VERSION,
                    "policy_hash": None,
                    "deleted": first.kind == "thread_deleted",
                },
            )
        self._known_threads.add(tid)

    def _full_channel_map(self, tid: str, e: Event) -> dict[str, Any]:
        p = e.payload
        versions: dict[str, Any] = p["checkpoint"]["channel_versions"]
        updated: dict[str, Any] = p.get("channels", {})
        if p.get("full") or not p.get("parent_checkpoint_id"):
            base: dict[str, Any] = {}
        else:
            base = self._channel_map(tid, e.checkpoint_ns, p["parent_checkpoint_id"]) or {}
        full = {}
        for ch, ver in versions.items():
            if ch in updated:
                full[ch] = updated[ch]
            elif ch in base and base[ch].get("version") == ver:
                full[ch] = base[ch]
            else:
                full[ch] = {"version": ver, "type": None, "sha256": None, "size": 0}
        return full

    def _channel_map(self, tid: str, ns: str, cid: str) -> dict[str, Any] | None:
        key = (tid, ns, cid)
        if key in self._channel_maps:
            self._channel_maps.move_to_end(key)
            return self._channel_maps[key]
        path = self.ws.checkpoint_path(tid, ns, cid)
        if not self.ws.exists(path):
            return None
        try:
            data = self.ws.read_json(path)
        except (OSError, ValueError):
            return None
        return dict(data.get("channels", {}))

    def _remember(self, key: tuple[str, str, str], full: dict[str, Any]) -> None:
        self._channel_maps[key] = full
        while len(self._channel_maps) > _CACHE:
            self._channel_maps.popitem(last=False)

    def _render(self, tid: str, ref: dict[str, Any]) -> Any:
        sha = ref.get("sha256")
        if sha is None:
            return None if ref.get("type") == "empty" else {"$unmirrored": ref.get("version")}
        if sha in self._readable:
            self._readable.move_to_end(sha)
            return self._readable[sha]
        try:
            data = self.ws.read_bytes(self.ws.blob_path(tid, sha))
            value = to_readable(self.serde.loads_typed((ref["type"], data)))
        except Exception as exc:  # readable views never block the exact mirror
            value = {"$undecodable": f"{type(exc).__name__}: {exc}"}
        self._readable[sha] = value
        while len(self._readable) > _CACHE:
            self._readable.popitem(last=False)
        return value

    def _redact(self, value: Any) -> Any:
        if self.redactor is None:
            return value
        return self.redactor(value)[0]

    def _write_checkpoint(self, tid: str, e: Event) -> None:
        assert e.checkpoint_id is not None
        full = self._full_channel_map(tid, e)
        self._remember((tid, e.checkpoint_ns, e.checkpoint_id), full)
        updated = e.payload.get("channels", {})
        doc = {
            "thread_id": tid,
            "checkpoint_ns": e.checkpoint_ns,
            "checkpoint_id": e.checkpoint_id,
            "parent_checkpoint_id": e.payload.get("parent_checkpoint_id"),
            "step": e.step,
            "source": e.payload.get("source"),
            "seq": e.seq,
            "metadata": e.payload.get("metadata"),
            "checkpoint": e.payload["checkpoint"],
            "channels": full,
            "writers": e.payload.get("writers", []),
            "updates": self._redact({ch: self._render(tid, full[ch]) for ch in updated}),
        }
        self.ws.write_json(self.ws.checkpoint_path(tid, e.checkpoint_ns, e.checkpoint_id), doc)

    def _write_writes(self, tid: str, e: Event) -> None:
        assert e.checkpoint_id is not None
        lines = []
        for w in e.payload.get("writes", []):
            line = dict(w)
            line["task_id"] = e.task_id
            line["task_path"] = e.payload.get("task_path", "")
            line["node"] = e.node
            line["value"] = self._redact(self._render(tid, w))
            lines.append(json.dumps(line, ensure_ascii=False, default=str))
        self.ws.append_lines(self.ws.writes_path(tid, e.checkpoint_ns, e.checkpoint_id), lines)

    def _add_late_writer(self, tid: str, e: Event) -> None:
        path = self.ws.checkpoint_path(tid, e.checkpoint_ns, e.payload["late_for"])
        if not self.ws.exists(path):
            return
        doc = self.ws.read_json(path)
        writers = doc.setdefault("writers", [])
        if all(w.get("task_id") != e.task_id for w in writers):
            writers.append(
                {"task_id": e.task_id, "task_path": e.payload.get("task_path"), "node": e.node}
            )
            self.ws.write_json(path, doc)

    def _write_state(self, tid: str, e: Event) -> None:
        assert e.checkpoint_id is not None
        full = self._channel_maps.get((tid, e.checkpoint_ns, e.checkpoint_id), {})
        values = {
            ch: self._render(tid, ref)
            for ch, ref in full.items()
            if not ch.startswith(("__", "branch:"))
        }
        self.ws.write_json(
            f"{self.ws.thread_dir(tid)}/state.json",
            {
                "thread_id": tid,
                "checkpoint_id": e.checkpoint_id,
                "step": e.step,
                "updated": datetime.now(timezone.utc).isoformat(),
                "values": self._redact(values),
            },
        )

    def _remove_checkpoints(self, tid: str, e: Event) -> None:
        for ns, ids in (e.payload.get("removed") or {}).items():
            for cid in ids:
                self.ws.remove(self.ws.checkpoint_path(tid, ns, cid))
                self.ws.remove(self.ws.writes_path(tid, ns, cid))
                self._channel_maps.pop((tid, ns, cid), None)

    def _copy_checkpoints(self, src: str, dst: str) -> None:
        src_dir = f"{self.ws.thread_dir(src)}/checkpoints"
        dst_dir = f"{self.ws.thread_dir(dst)}/checkpoints"
        if not self.ws.fs.exists(src_dir):
            return
        for path in self.ws.fs.find(src_dir):
            rel = path[len(src_dir.rstrip("/")) + 1 :] if path.startswith(src_dir) else None
            if rel is None:
                rel = path.split("/checkpoints/", 1)[1]
            target = f"{dst_dir}/{rel}"
            data = self.ws.read_bytes(path)
            if rel.endswith(".json") and not rel.startswith("blobs/"):
                doc = json.loads(data)
                doc["thread_id"] = dst
                doc["copied_from"] = src
                self.ws.write_json(target, doc)
            else:
                self.ws.write_if_absent(target, data)

    def _drop_thread_cache(self, tid: str) -> None:
        for key in [k for k in self._channel_maps if k[0] == tid]:
            del self._channel_maps[key]
