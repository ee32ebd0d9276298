"""Rebuild checkpoints from the workspace's exact copies, and restore threads into a saver.

The workspace keeps every checkpoint as typed serde bytes (content-addressed blobs) plus
a JSON document naming, for every channel, the version and blob it had. Decoding them
gives back the same values the saver holds, so a thread can be restored into any saver
(after a database loss, or to move it) without going through the original database.

Example:
    >>> from langgraph_external import Workspace
    >>> ws = Workspace("memory://lgx-restore-doc")
    >>> list(iter_checkpoint_ids(ws, "no-such-thread"))
    []
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_external.errors import ExternalError
from langgraph_external.workspace import Workspace, decode_thread_id

__all__ = ["iter_checkpoint_ids", "load_checkpoint", "restore_thread"]


class RestoreError(ExternalError):
    """A checkpoint cannot be rebuilt from the workspace (missing or corrupt file)."""


def iter_checkpoint_ids(ws: Workspace, thread_id: str) -> Iterator[tuple[str, str]]:
    """Yield ``(checkpoint_ns, checkpoint_id)`` of every mirrored checkpoint, oldest first."""
    base = f"{ws.thread_dir(thread_id)}/checkpoints"
    if not ws.exists(base):
        return
    found = []
    for ns_dir in ws.fs.ls(base, detail=False):
        name = ns_dir.rstrip("/").rsplit("/", 1)[-1]
        if name == "blobs":
            continue
        ns = "" if name == "_root" else decode_thread_id(name)
        if ns is None:
            continue
        for path in ws.fs.ls(ns_dir, detail=False):
            fname = path.rsplit("/", 1)[-1]
            if fname.endswith(".json") and not fname.endswith(".writes.jsonl"):
                found.append((ns, fname[: -len(".json")]))
    # checkpoint ids are time-ordered (uuid6), so sorting by id is oldest first
    yield from sorted(found, key=lambda t: (t[1], t[0]))


def _blob(ws: Workspace, thread_id: str, ref: dict[str, Any], serde: SerializerProtocol) -> Any:
    try:
        data = ws.read_bytes(ws.blob_path(thread_id, ref["sha256"]))
    except FileNotFoundError as exc:
        raise RestoreError(f"blob {ref['sha256']} of thread {thread_id!r} is missing") from exc
    return serde.loads_typed((ref["type"], data))


def load_checkpoint(
    ws: Workspace,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    *,
    serde: SerializerProtocol | None = None,
) -> CheckpointTuple:
    """Rebuild one checkpoint (values, metadata, parent, pending writes) from the workspace.

    Raises:
        RestoreError: the checkpoint or one of its blobs is not in the workspace, or a
            channel was never mirrored (thread recorded from the middle).
    """
    serde = serde or JsonPlusSerializer()
    path = ws.checkpoint_path(thread_id, checkpoint_ns, checkpoint_id)
    try:
        doc = ws.read_json(path)
    except FileNotFoundError as exc:
        raise RestoreError(f"no mirrored checkpoint {checkpoint_id} in {path}") from exc
    values: dict[str, Any] = {}
    for ch, ref in doc["channels"].items():
        if ref.get("type") == "empty":
            continue
        if ref.get("sha256") is None:
            raise RestoreError(f"channel {ch!r} of checkpoint {checkpoint_id} was never mirrored")
        values[ch] = _blob(ws, thread_id, ref, serde)
    skel = doc["checkpoint"]
    checkpoint: Checkpoint = {
        "v": skel.get("v") or 4,
        "id": skel["id"],
        "ts": skel["ts"],
        "channel_values": values,
        "channel_versions": dict(skel["channel_versions"]),
        "versions_seen": {k: dict(v) for k, v in skel["versions_seen"].items()},
        "updated_channels": skel.get("updated_channels") or None,
    }
    config: RunnableConfig = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }
    parent = doc.get("parent_checkpoint_id")
    parent_config: RunnableConfig | None = (
        {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": parent,
            }
        }
        if parent
        else None
    )
    writes = _load_writes(ws, thread_id, checkpoint_ns, checkpoint_id, serde)
    return CheckpointTuple(
        config=config,
        checkpoint=checkpoint,
        metadata=cast(CheckpointMetadata, doc.get("metadata") or {}),
        parent_config=parent_config,
        pending_writes=[(w["task_id"], w["channel"], w["value"]) for w in writes],
    )


def _load_writes(
    ws: Workspace, thread_id: str, ns: str, cid: str, serde: SerializerProtocol
) -> list[dict[str, Any]]:
    path = ws.writes_path(thread_id, ns, cid)
    if not ws.exists(path):
        return []
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for line in ws.read_bytes(path).decode().splitlines():
        if not line.strip():
            continue
        w = json.loads(line)
        latest[(w["task_id"], int(w["idx"]))] = w  # a rewritten write replaces the old one
    out = []
    for w in latest.values():
        out.append(
            {
                "task_id": w["task_id"],
                "task_path": w.get("task_path", ""),
                "idx": int(w["idx"]),
                "channel": w["channel"],
                "value": _blob(ws, thread_id, w, serde) if w.get("sha256") else None,
            }
        )
    out.sort(key=lambda w: (w["task_path"], w["task_id"], w["idx"]))
    return out


def restore_thread(
    ws: Workspace,
    thread_id: str,
    saver: BaseCheckpointSaver[Any],
    *,
    target_thread_id: str | None = None,
    serde: SerializerProtocol | None = None,
) -> int:
    """Put every mirrored checkpoint of ``thread_id`` (and its writes) into ``saver``.

    Returns the number of checkpoints restored. Parents are restored before children.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> restore_thread(Workspace("memory://lgx-doc-empty"), "t", InMemorySaver())
        0
    """
    serde = serde or saver.serde
    target = target_thread_id or thread_id
    n = 0
    for ns, cid in iter_checkpoint_ids(ws, thread_id):
        tup = load_checkpoint(ws, thread_id, ns, cid, serde=serde)
        parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        conf: dict[str, Any] = {"thread_id": target, "checkpoint_ns": ns}
        if parent:
            conf["checkpoint_id"] = parent
        stored = saver.put(
            {"configurable": conf},
            tup.checkpoint,
            tup.metadata,
            dict(tup.checkpoint["channel_versions"]),
        )
        by_task: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for w in _load_writes(ws, thread_id, ns, cid, serde):
            by_task.setdefault((w["task_id"], w["task_path"]), []).append(w)
        for (task_id, task_path), ws_ in by_task.items():
            ws_.sort(key=lambda w: w["idx"])
            saver.put_writes(stored, [(w["channel"], w["value"]) for w in ws_], task_id, task_path)
        n += 1
    return n
