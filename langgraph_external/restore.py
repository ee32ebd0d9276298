"""Rebuild checkpoints from the workspace's exact copies, and restore threads into a saver.

The workspace keeps, per thread and namespace, an append-only checkpoint log
(``checkpoints/<ns>.jsonl``): one line per checkpoint naming, for every channel, the
version it had and where its exact serde bytes are (inline base64 in the line of the
checkpoint that stored them, or a content-addressed blob file), plus one line per
pending write. Decoding them gives back the values the saver holds, so a thread can be
restored into any saver (after a database loss, or to move it) without the original
database.

Example:
    >>> from langgraph_external import Workspace
    >>> ws = Workspace("memory://lgx-restore-doc")
    >>> list(iter_checkpoint_ids(ws, "no-such-thread"))
    []
"""

from __future__ import annotations

import base64
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

from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.errors import ExternalError
from langgraph_external.workspace import ROOT_NS_DIR, Workspace, decode_thread_id

__all__ = [
    "CheckpointLog",
    "RestoreError",
    "iter_checkpoint_ids",
    "load_checkpoint",
    "restore_thread",
]


class RestoreError(ExternalError):
    """A checkpoint cannot be rebuilt from the workspace (missing or corrupt data)."""


class CheckpointLog:
    """The parsed checkpoint log of one namespace of a thread.

    Attributes:
        docs: checkpoint id -> its checkpoint line (oldest first).
        writes: checkpoint id -> its pending-write lines, in recording order.
        writers: checkpoint id -> writer lines recorded after the checkpoint.
    """

    def __init__(
        self,
        ws: Workspace,
        thread_id: str,
        checkpoint_ns: str,
        *,
        cipher: WorkspaceCipher | None = None,
    ) -> None:
        self.ws, self.thread_id, self.checkpoint_ns = ws, thread_id, checkpoint_ns
        self.cipher = cipher
        self.docs: dict[str, dict[str, Any]] = {}
        self.writes: dict[str, list[dict[str, Any]]] = {}
        self.writers: dict[str, list[dict[str, Any]]] = {}
        path = ws.checkpoint_log_path(thread_id, checkpoint_ns)
        if not ws.exists(path):
            return
        for n, raw in enumerate(ws.read_bytes(path).splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError as exc:
                raise RestoreError(f"{path}: line {n} is not JSON: {exc}") from exc
            kind, cid = line.get("record"), line.get("checkpoint_id")
            if kind == "checkpoint":
                self.docs[cid] = line
            elif kind == "write":
                self.writes.setdefault(cid, []).append(line)
            elif kind == "writer":
                self.writers.setdefault(cid, []).append(line)

    def doc(self, checkpoint_id: str) -> dict[str, Any]:
        """The checkpoint line of ``checkpoint_id`` (with late writers merged in)."""
        if checkpoint_id not in self.docs:
            raise RestoreError(
                f"checkpoint {checkpoint_id} of thread {self.thread_id!r} "
                f"(namespace {self.checkpoint_ns!r}) is not in the workspace"
            )
        doc = dict(self.docs[checkpoint_id])
        late = self.writers.get(checkpoint_id, [])
        if late:
            known = {w.get("task_id") for w in doc.get("writers", [])}
            doc["writers"] = [
                *doc.get("writers", []),
                *(w for w in late if w["task_id"] not in known),
            ]
        return doc

    def bytes_of(self, ref: dict[str, Any]) -> bytes:
        """The exact bytes a channel or write reference points to."""
        sha = ref["sha256"]
        try:
            if ref.get("b64") is not None:
                data = base64.b64decode(ref["b64"])
                sealed = ref.get("enc") is not None
            elif ref.get("inline"):
                holder = self.docs[ref["in"]]
                data = base64.b64decode(holder["blobs"][sha])
                sealed = holder.get("enc") is not None
            else:
                data = self.ws.read_bytes(self.ws.blob_path(self.thread_id, sha))
                sealed = self.cipher is not None
        except (FileNotFoundError, KeyError) as exc:
            raise RestoreError(f"the bytes {sha} of thread {self.thread_id!r} are missing") from exc
        if not sealed:
            return data
        if self.cipher is None:
            raise RestoreError(
                f"thread {self.thread_id!r} is encrypted in the workspace: pass cipher=..."
            )
        return self.cipher.decrypt(data, sha.encode())

    def pending_writes(self, checkpoint_id: str) -> list[dict[str, Any]]:
        """Latest write per (task, idx), sorted like the savers return them."""
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        for w in self.writes.get(checkpoint_id, []):
            latest[(w["task_id"], int(w["idx"]))] = w  # a rewritten write replaces the old one
        return sorted(
            latest.values(), key=lambda w: (w.get("task_path") or "", w["task_id"], w["idx"])
        )


def _namespaces(ws: Workspace, thread_id: str) -> list[str]:
    base = f"{ws.thread_dir(thread_id)}/checkpoints"
    if not ws.exists(base):
        return []
    out = []
    for path in ws.fs.ls(base, detail=False):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if not name.endswith(".jsonl"):
            continue
        stem = name[: -len(".jsonl")]
        ns = "" if stem == ROOT_NS_DIR else decode_thread_id(stem)
        if ns is not None:
            out.append(ns)
    return sorted(out)


def iter_checkpoint_ids(ws: Workspace, thread_id: str) -> Iterator[tuple[str, str]]:
    """Yield ``(checkpoint_ns, checkpoint_id)`` of every mirrored checkpoint, oldest first."""
    found: list[tuple[str, str]] = []
    for ns in _namespaces(ws, thread_id):
        found.extend((ns, cid) for cid in CheckpointLog(ws, thread_id, ns).docs)
    # checkpoint ids are time-ordered (uuid6), so sorting by id is oldest first
    yield from sorted(found, key=lambda t: (t[1], t[0]))


def load_checkpoint(
    ws: Workspace,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    *,
    serde: SerializerProtocol | None = None,
    log: CheckpointLog | None = None,
    cipher: WorkspaceCipher | None = None,
) -> CheckpointTuple:
    """Rebuild one checkpoint (values, metadata, parent, pending writes) from the workspace.

    Raises:
        RestoreError: the checkpoint or some of its bytes are not in the workspace, or a
            channel was never mirrored (a thread recorded from the middle).
    """
    serde = serde or JsonPlusSerializer()
    log = log or CheckpointLog(ws, thread_id, checkpoint_ns, cipher=cipher)
    doc = log.doc(checkpoint_id)
    values: dict[str, Any] = {}
    for ch, ref in doc["channels"].items():
        if ref.get("type") == "empty":
            continue
        if ref.get("sha256") is None:
            raise RestoreError(f"channel {ch!r} of checkpoint {checkpoint_id} was never mirrored")
        values[ch] = serde.loads_typed((ref["type"], log.bytes_of(ref)))
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
    conf = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    parent = doc.get("parent_checkpoint_id")
    config: RunnableConfig = {"configurable": {**conf, "checkpoint_id": checkpoint_id}}
    parent_config: RunnableConfig | None = (
        {"configurable": {**conf, "checkpoint_id": parent}} if parent else None
    )
    writes = [
        (w["task_id"], w["channel"], serde.loads_typed((w["type"], log.bytes_of(w))))
        for w in log.pending_writes(checkpoint_id)
    ]
    return CheckpointTuple(
        config=config,
        checkpoint=checkpoint,
        metadata=cast(CheckpointMetadata, doc.get("metadata") or {}),
        parent_config=parent_config,
        pending_writes=writes,
    )


def restore_thread(
    ws: Workspace,
    thread_id: str,
    saver: BaseCheckpointSaver[Any],
    *,
    target_thread_id: str | None = None,
    serde: SerializerProtocol | None = None,
    cipher: WorkspaceCipher | None = None,
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
    logs = {
        ns: CheckpointLog(ws, thread_id, ns, cipher=cipher) for ns in _namespaces(ws, thread_id)
    }
    n = 0
    for ns, cid in iter_checkpoint_ids(ws, thread_id):
        log = logs[ns]
        tup = load_checkpoint(ws, thread_id, ns, cid, serde=serde, log=log)
        conf: dict[str, Any] = {"thread_id": target, "checkpoint_ns": ns}
        if tup.parent_config:
            conf["checkpoint_id"] = tup.parent_config["configurable"]["checkpoint_id"]
        stored = saver.put(
            {"configurable": conf},
            tup.checkpoint,
            tup.metadata,
            dict(tup.checkpoint["channel_versions"]),
        )
        by_task: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for w in log.pending_writes(cid):
            by_task.setdefault((w["task_id"], w.get("task_path") or ""), []).append(w)
        for (task_id, task_path), ws_ in by_task.items():
            ws_.sort(key=lambda w: w["idx"])
            saver.put_writes(
                stored,
                [(w["channel"], serde.loads_typed((w["type"], log.bytes_of(w)))) for w in ws_],
                task_id,
                task_path,
            )
        n += 1
    return n
