"""The checkpoint lines of the workspace mirror: one line per checkpoint in
``checkpoints/<ns>.jsonl`` with its metadata, parent, the version and stored copy of every
channel (unchanged ones carried from the parent's line) and a readable rendering of what
changed; the full channel maps of recent checkpoints are kept for the next line and for
``state.json``.

Example:
    >>> import tempfile
    >>> from langgraph_external.workspace.files import Workspace
    >>> read_checkpoint_line(Workspace(tempfile.mkdtemp()), "t", "", "c1") is None
    True
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from langgraph_external.record.crypto import ALGORITHM
from langgraph_external.record.events import Event
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.readable import INTERNAL_CHANNELS, ReadableViews

__all__ = ["CheckpointLines", "read_checkpoint_line"]

_CACHE = 4096


class CheckpointLines:
    """Builds checkpoint lines of one workspace and keeps recent full channel maps."""

    def __init__(self, workspace: Workspace, views: ReadableViews) -> None:
        self.ws = workspace
        self.views = views
        # (thread, ns, checkpoint_id) -> full channel map {ch: {version, type, sha256, ...}}
        self._maps: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()

    def kept(self, tid: str, ns: str, cid: str) -> dict[str, Any]:
        """The kept full channel map of checkpoint ``cid`` (``{}``: not kept)."""
        return self._maps.get((tid, ns, cid), {})

    def forget(self, tid: str, ns: str | None = None, cid: str | None = None) -> None:
        """Drop the kept maps of one checkpoint, or (``ns`` ``None``) of a whole thread."""
        if ns is not None and cid is not None:
            self._maps.pop((tid, ns, cid), None)
            return
        for key in [k for k in self._maps if k[0] == tid]:
            del self._maps[key]

    def line(self, tid: str, e: Event) -> dict[str, Any]:
        """The checkpoint log line of checkpoint event ``e`` (its full channel map kept)."""
        assert e.checkpoint_id is not None
        detail = e.detail or {}
        skel = detail.get("checkpoint") or {}
        full = self._full_channel_map(tid, e, skel.get("channel_versions") or {})
        self._maps[(tid, e.checkpoint_ns, e.checkpoint_id)] = full
        while len(self._maps) > _CACHE:
            self._maps.popitem(last=False)
        updated = e.payload.get("changed") or e.payload.get("channels", {})
        return {
            "record": "checkpoint",
            "thread_id": tid,
            "checkpoint_ns": e.checkpoint_ns,
            "checkpoint_id": e.checkpoint_id,
            "parent_checkpoint_id": e.payload.get("parent_checkpoint_id"),
            "step": e.step,
            "source": e.payload.get("source"),
            "seq": e.seq,
            "metadata": e.payload.get("metadata"),
            "writers": [dict(w) for w in e.payload.get("writers", [])],
            "updates": self.views.redact(
                {
                    ch: self.views.render_update(tid, full[ch], e.checkpoint_ns)
                    for ch in updated
                    if not ch.startswith(INTERNAL_CHANNELS) and ch in full
                }
            ),
            "checkpoint": skel,
            "channels": full,
            "blobs": dict(detail.get("inline") or {}),
            **({"enc": ALGORITHM} if detail.get("enc") else {}),
        }

    def _full_channel_map(self, tid: str, e: Event, versions: dict[str, Any]) -> dict[str, Any]:
        p = e.payload
        updated: dict[str, Any] = p.get("channels", {})
        if p.get("complete"):  # the event names every channel: nothing to look up
            return {ch: updated[ch] for ch in versions if ch in updated}
        base: dict[str, Any] = {}
        if not p.get("full") and p.get("parent_checkpoint_id"):
            base = self.channel_map(tid, e.checkpoint_ns, p["parent_checkpoint_id"]) or {}
        full = {}
        for ch, ver in versions.items():
            if ch in updated:
                full[ch] = updated[ch]
            elif ch in base and base[ch].get("version") == ver:
                full[ch] = base[ch]
            else:
                full[ch] = {"version": ver, "type": None, "sha256": None, "size": 0}
        return full

    def channel_map(self, tid: str, ns: str, cid: str) -> dict[str, Any] | None:
        """The full channel map of checkpoint ``cid`` (kept, or read from its line)."""
        key = (tid, ns, cid)
        if key in self._maps:
            self._maps.move_to_end(key)
            return self._maps[key]
        doc = read_checkpoint_line(self.ws, tid, ns, cid)
        return dict(doc.get("channels", {})) if doc else None


def read_checkpoint_line(ws: Workspace, tid: str, ns: str, cid: str) -> dict[str, Any] | None:
    """The line of checkpoint ``cid`` in the thread's log of namespace ``ns`` (or ``None``)."""
    path = ws.checkpoint_log_path(tid, ns)
    try:
        for line in ws.lines_from_end(path):  # a recent checkpoint: the log's tail only
            if cid.encode() in line:
                doc = json.loads(line)
                if doc.get("record") == "checkpoint" and doc.get("checkpoint_id") == cid:
                    return dict(doc)
    except (OSError, ValueError):
        return None
    return None
