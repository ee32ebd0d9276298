"""The checkpoint record: ``checkpoint`` and ``writes`` events built from what a saver stored.

A :class:`RecordBuilder` turns one stored checkpoint (:class:`CheckpointMaterial`) or one
task's stored writes (:class:`WritesMaterial`) into its event: which nodes produced the
checkpoint (from ``versions_seen``, never from timing), a reference to every channel's
exact bytes (keyed address, version, where the bytes are), the bytes themselves sealed
with the deployment key, and the metadata rendered. Material comes from two feeders:

* the sealer reads it back from the official Postgres saver's rows after the saver's
  transaction committed (:mod:`langgraph_external.pipeline.seal`), so the app's thread only
  captures a reference;
* for any other saver, the checkpointer hands over the objects and the bytes the saver
  serialized, on the app's thread (they go to the write-ahead log before ``put`` returns).

Both feed the same builder, so a checkpoint's event does not depend on who built it.

Example:
    >>> b = RecordBuilder()
    >>> m = CheckpointMaterial(
    ...     thread_id="t", checkpoint_ns="", checkpoint_id="c1", parent_id=None,
    ...     checkpoint={"id": "c1", "v": 4, "ts": "2026-12-02T00:00:00+00:00",
    ...                 "channel_versions": {"n": "1"}, "versions_seen": {"a": {"n": "1"}}},
    ...     metadata={"source": "loop", "step": 1}, changed=None,
    ...     values={"n": ("msgpack", b"\\x01")})
    >>> e = b.checkpoint_event(m)
    >>> e.kind, e.payload["nodes"], sorted(e.payload["channels"])
    ('checkpoint', ['a'], ['n'])
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langgraph_external.record.crypto import ALGORITHM
from langgraph_external.record.events import Event, EventKind, new_id
from langgraph_external.record.locations import checkpoints_relpath, sha256_hex
from langgraph_external.record.render import to_readable
from langgraph_external.upstream import langgraph as _compat

__all__ = [
    "INLINE_MAX",
    "CheckpointMaterial",
    "RecordBuilder",
    "WritesMaterial",
    "is_push_task_path",
    "names_old_folder",
    "node_of_task_path",
    "refiled",
]

_PUSH = _compat.TASK_PATH_PUSH
_LRU = 2048
PER_THREAD = 32  # checkpoints of one (thread, namespace) the caches keep

INLINE_MAX = 16 * 1024
"""Serialized values up to this size live inside the checkpoint's JSON line (base64);
larger ones are content-addressed files under ``checkpoints/blobs/``."""

Bytes = tuple[str, bytes]
"""``(serde type, exact bytes)`` of one value, as the saver stored it."""


@dataclass
class CheckpointMaterial:
    """One stored checkpoint, as what its event is built from.

    ``checkpoint`` holds the saver's checkpoint document (``id``, ``v``, ``ts``,
    ``channel_versions``, ``versions_seen``, ``updated_channels``); ``values`` the exact
    bytes of the channels the event must carry (``None``: the channel has no value);
    ``changed`` the channels of new versions (``None``: unknown, every channel is
    referenced afresh); ``saver_rows`` the channels whose bytes are a row of the saver's
    blob table in the same database (a large one is then named, not copied).
    ``parent_seen``/``parent_sends``: the parent's ``versions_seen`` and ``Send``
    targets when the feeder has them (else the builder's cache, else ``lookup_parent``).
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: Mapping[str, Any]
    metadata: Mapping[str, Any]
    changed: Collection[str] | None
    values: Mapping[str, Bytes | None]
    saver_rows: Collection[str] = ()
    parent_seen: Mapping[str, Any] | None = None
    parent_sends: Sequence[str | None] | None = None
    sends: Sequence[str | None] | None = None
    event_id: str = field(default_factory=new_id)
    ts: datetime | None = None
    recovered: bool = False
    partial: bool = False  # ``values`` holds only the changed channels (a by-value capture)


@dataclass
class WritesMaterial:
    """One task's stored writes: ``writes`` is ``[(idx, channel, serde type, bytes)]``."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None
    task_id: str
    task_path: str
    writes: Sequence[tuple[int, str, str, bytes]]
    node: str | None = None
    event_id: str = field(default_factory=new_id)
    ts: datetime | None = None
    recovered: bool = False


@dataclass(slots=True)
class _Blobs:
    """Collects the exact bytes of one event: small ones inline, large ones as files."""

    digest: Callable[[bytes], str] = sha256_hex
    seal: Callable[[bytes, bytes], bytes] | None = None  # encrypts (address as associated data)
    commit: Callable[[bytes, str], str] | None = None  # auditors' commitment (keyed addresses only)
    inline: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    saver: dict[str, list[str]] = field(default_factory=dict)  # address -> saver's channel, version
    size: int = 0

    @property
    def enc(self) -> str | None:
        return ALGORITHM if self.seal is not None else None

    def add(
        self, data: bytes, checkpoint_id: str | None, saver_row: list[str] | None = None
    ) -> dict[str, Any]:
        """Reference ``data``: inline when small, else a blob file; a large value the
        saver stores in the same database (``saver_row``) is not copied into the ledger."""
        digest = self.digest(data)
        size = len(data)
        self.size += size
        ref: dict[str, Any] = {"sha256": digest, "size": size}
        if self.commit is not None:
            ref["commit"] = self.commit(data, digest)
        if self.seal is not None:
            data = self.seal(data, digest.encode())
            ref["enc"] = ALGORITHM
        if size <= INLINE_MAX:
            self.inline[digest] = base64.b64encode(data).decode()
            ref["inline"] = True
            if checkpoint_id is not None:
                ref["in"] = checkpoint_id
            return ref
        self.files[f"checkpoints/blobs/{digest}"] = data
        if saver_row is not None:
            self.saver[digest] = saver_row
        return ref


def shared_seen(
    seen: Mapping[str, Mapping[str, Any]], before: Mapping[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """A copy of ``versions_seen`` sharing the parent's entries that did not change
    (most nodes' at every step): a long thread's remembered checkpoints stay small."""
    out = {}
    for node, versions in seen.items():
        kept = before.get(node) if before else None
        out[node] = kept if kept is not None and kept == versions else dict(versions)
    return out


class Lru(OrderedDict[Any, Any]):
    """The most recent ``_LRU`` entries; with ``per_group``, also at most that many of
    one ``key[:2]`` (a thread's namespace: its recent checkpoints are what a put or a
    write looks up; an older parent is read from the saver), so one long thread does
    not fill the cache with its whole history."""

    def __init__(self, per_group: int | None = None) -> None:
        super().__init__()
        self._per_group = per_group
        self._groups: OrderedDict[Any, OrderedDict[Any, None]] = OrderedDict()

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        if self._per_group is not None:
            group = self._groups.setdefault(key[:2], OrderedDict())
            self._groups.move_to_end(key[:2])
            group[key] = None
            group.move_to_end(key)
            while len(group) > self._per_group:
                self.pop(group.popitem(last=False)[0], None)
            while len(self._groups) > _LRU:
                self._groups.popitem(last=False)
        while len(self) > _LRU:
            self.popitem(last=False)

    def forget_thread(self, thread_id: str) -> None:
        for key in [k for k in self if k[0] == thread_id]:
            del self[key]
        for group in [g for g in self._groups if g[0] == thread_id]:
            del self._groups[group]


ParentLookup = Callable[[str, str, str], tuple[Mapping[str, Any], Sequence[str | None]] | None]
"""``(thread, namespace, checkpoint id) -> (versions_seen, Send targets)`` of a stored
checkpoint, or ``None`` when the saver does not hold it."""


class RecordBuilder:
    """Builds checkpoint and writes events; remembers what recent checkpoints proved.

    Args:
        digest: content address of exact bytes (the deployment key's keyed address).
        seal: encrypts exact bytes (``None``: kept in clear).
        lookup_parent: reads a parent checkpoint the caches no longer hold.
        commit: the commitment to exact bytes that a bundle opens for an auditor
            (:meth:`~langgraph_external.record.crypto.WorkspaceCipher.commitment`; with
            a keyed ``digest``, which no one without the key can check).
    """

    def __init__(
        self,
        digest: Callable[[bytes], str] = sha256_hex,
        seal: Callable[[bytes, bytes], bytes] | None = None,
        lookup_parent: ParentLookup | None = None,
        commit: Callable[[bytes, str], str] | None = None,
    ) -> None:
        self.digest = digest
        self.seal = seal
        self.commit = commit
        self.lookup_parent = lookup_parent
        self._seen: Lru = Lru(PER_THREAD)  # (thread, ns, checkpoint_id) -> versions_seen
        self._sends: Lru = Lru(PER_THREAD)  # (thread, ns, checkpoint_id) -> Send targets
        self._refs: Lru = Lru(PER_THREAD)  # (thread, ns, checkpoint_id) -> channel references

    # -- what earlier checkpoints proved ------------------------------------------------
    def remember(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        versions_seen: Mapping[str, Any],
        sends: Sequence[str | None],
    ) -> None:
        """Keep what a stored checkpoint proves (a read of it, or its own record)."""
        key = (thread_id, ns, checkpoint_id)
        self._seen.put(key, {k: dict(v) for k, v in versions_seen.items()})
        self._sends.put(key, list(sends))

    def sends_of(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> list[str | None] | None:
        """The ``Send`` targets of a checkpoint the builder has seen, else ``None``."""
        if checkpoint_id is None:
            return None
        got = self._sends.get((thread_id, ns, checkpoint_id))
        return None if got is None else list(got)

    def knows(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        """Whether what a checkpoint proved (``versions_seen``, ``Send`` targets) is at hand."""
        key = (thread_id, ns, checkpoint_id)
        return key in self._seen and key in self._sends

    def proved(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> tuple[dict[str, Any] | None, list[str | None] | None]:
        """``(versions_seen, Send targets)`` a checkpoint proved, each ``None`` if unknown."""
        if checkpoint_id is None:
            return {}, []
        seen = self._seen.get((thread_id, ns, checkpoint_id))
        copy = None if seen is None else {k: dict(v) for k, v in seen.items()}
        return copy, self.sends_of(thread_id, ns, checkpoint_id)

    def note_sends(
        self, thread_id: str, ns: str, checkpoint_id: str, sends: Sequence[str | None]
    ) -> None:
        """Keep a checkpoint's ``Send`` targets before its event is built."""
        self._sends.put((thread_id, ns, checkpoint_id), list(sends))

    def adopt_refs(
        self, thread_id: str, ns: str, checkpoint_id: str, refs: Mapping[str, Any]
    ) -> None:
        """Take a sealed checkpoint's channel references (read back from the ledger) as if
        this builder had built them: its children reference unchanged channels by them."""
        self._refs.put((thread_id, ns, checkpoint_id), {k: dict(v) for k, v in refs.items()})

    def needs_full(self, thread_id: str, ns: str, parent_id: str | None) -> bool:
        """Whether a checkpoint of this parent must reference every channel afresh (the
        parent's references are not remembered)."""
        return parent_id is not None and (thread_id, ns, parent_id) not in self._refs

    def forget(self, thread_id: str) -> None:
        """Drop everything remembered about ``thread_id`` (deleted)."""
        for cache in (self._seen, self._sends, self._refs):
            cache.forget_thread(thread_id)

    def forget_checkpoints(self, thread_id: str, ns: str, ids: Collection[str]) -> None:
        """Drop what is remembered about these checkpoints (pruned, deleted)."""
        for cid in ids:
            for cache in (self._seen, self._sends, self._refs):
                cache.pop((thread_id, ns, cid), None)

    def _parent(self, m: CheckpointMaterial) -> tuple[Mapping[str, Any], Sequence[str | None]]:
        if m.parent_id is None:
            return {}, []
        key = (m.thread_id, m.checkpoint_ns, m.parent_id)
        seen = m.parent_seen if m.parent_seen is not None else self._seen.get(key)
        sends = m.parent_sends if m.parent_sends is not None else self._sends.get(key)
        if (seen is None or sends is None) and self.lookup_parent is not None:
            found = self.lookup_parent(m.thread_id, m.checkpoint_ns, m.parent_id)
            if found is not None:
                seen = found[0] if seen is None else seen
                sends = found[1] if sends is None else sends
        return seen or {}, sends or []

    # -- building ------------------------------------------------------------------------
    def producers(self, m: CheckpointMaterial) -> list[dict[str, Any]]:
        """The nodes whose tasks produced the checkpoint, from the checkpoint alone.

        A pull task records the channel versions it saw in ``versions_seen[node]``: the
        entries that differ from the parent's name exactly the nodes that ran. Push
        (``Send``) tasks are the parent's Send packets, by index.
        """
        seen_now = m.checkpoint.get("versions_seen") or {}
        before, sends = self._parent(m)
        writers: list[dict[str, Any]] = [
            {"node": node, "via": "pull"}
            for node in sorted(seen_now)
            if seen_now[node] != (before.get(node) or {})
            and not node.startswith("__input")
            and node not in _compat.SEEN_NOT_A_NODE
        ]
        writers.extend(
            {"node": target, "via": "push", "index": i} for i, target in enumerate(sends)
        )
        return writers

    def checkpoint_event(self, m: CheckpointMaterial) -> Event:
        """The ``checkpoint`` event of ``m`` (and remember what it proves)."""
        tid, ns, cid = m.thread_id, m.checkpoint_ns, m.checkpoint_id
        writers = self.producers(m)
        cp = m.checkpoint
        versions: Mapping[str, Any] = cp.get("channel_versions") or {}
        before = self._refs.get((tid, ns, m.parent_id)) if m.parent_id else {}
        # ``changed``: the channels of new versions (all of them when unknown); ``full``:
        # every channel referenced afresh (the parent's references are not at hand)
        changed = set(versions) if m.changed is None else set(m.changed) & set(versions)
        full = before is None or m.changed is None
        refs: dict[str, Any] = {}
        blobs = _Blobs(self.digest, self.seal, self.commit)
        for ch, ver in versions.items():
            kept = None if full or ch in changed else (before or {}).get(ch)
            if kept is not None and kept.get("version") == ver:
                refs[ch] = kept
                continue
            value = m.values.get(ch)
            if value is None:
                refs[ch] = {"version": ver, "type": "empty", "sha256": None, "size": 0}
                continue
            typ, data = value
            row = [ch, ver] if ch in m.saver_rows and isinstance(ver, str) else None
            refs[ch] = {"version": ver, "type": typ, **blobs.add(data, cid, row)}
        seen = cp.get("versions_seen") or {}
        self._refs.put((tid, ns, cid), refs)
        self._seen.put((tid, ns, cid), shared_seen(seen, self._seen.get((tid, ns, m.parent_id))))
        if m.sends is not None:
            self._sends.put((tid, ns, cid), list(m.sends))
        metadata = dict(m.metadata)
        step = metadata.get("step")
        nodes = sorted({w["node"] for w in writers if w.get("node")})
        payload: dict[str, Any] = {
            "parent_checkpoint_id": m.parent_id,
            "source": metadata.get("source"),
            "metadata": to_readable(metadata),
            "writers": writers,
            "nodes": nodes,
            "channels": refs,
            "changed": sorted(ch for ch in refs if ch in changed),
            "complete": True,
            "full": full,
            "size": blobs.size,
            "path": checkpoints_relpath(tid, ns),
        }
        if m.recovered:
            payload["recovered"] = True
        return Event(
            kind=EventKind.CHECKPOINT.value,
            ts=m.ts if m.ts is not None else datetime.now(timezone.utc),
            thread_id=tid,
            checkpoint_ns=ns,
            checkpoint_id=cid,
            event_id=m.event_id,
            name=metadata.get("source"),
            node=nodes[0] if len(nodes) == 1 else None,
            step=step if isinstance(step, int) else None,
            run_id=None if metadata.get("run_id") is None else str(metadata.get("run_id")),
            payload=payload,
            detail={
                "checkpoint": {
                    "v": cp.get("v"),
                    "id": cid,
                    "ts": cp.get("ts"),
                    "channel_versions": dict(versions),
                    "versions_seen": {k: dict(v) for k, v in seen.items()},
                    "updated_channels": sorted(cp.get("updated_channels") or []),
                },
                "inline": blobs.inline,
                "enc": blobs.enc,
                **({"saver_blobs": blobs.saver} if blobs.saver else {}),
            },
            attachments=blobs.files,
        )

    def writes_event(self, m: WritesMaterial) -> Event:
        """The ``writes`` event of one task: the exact bytes it wrote, and who it was."""
        node = m.node or self.node_of(m.thread_id, m.checkpoint_ns, m.checkpoint_id, m.task_path)
        blobs = _Blobs(self.digest, self.seal, self.commit)
        refs = [
            {"idx": idx, "channel": channel, "type": typ, **blobs.add(data, None)}
            for idx, channel, typ, data in m.writes
        ]
        payload: dict[str, Any] = {"task_path": m.task_path, "writes": refs}
        if m.recovered:
            payload["recovered"] = True
        return Event(
            kind=EventKind.WRITES.value,
            ts=m.ts if m.ts is not None else datetime.now(timezone.utc),
            thread_id=m.thread_id,
            checkpoint_ns=m.checkpoint_ns,
            checkpoint_id=m.checkpoint_id,
            event_id=m.event_id,
            task_id=str(m.task_id),
            node=node,
            name=node,
            payload=payload,
            detail={"inline": blobs.inline, "enc": blobs.enc},
            attachments=blobs.files,
        )

    def node_of(self, tid: str, ns: str, cid: str | None, task_path: str) -> str | None:
        """The node of a task, from its path (a ``Send`` task: its checkpoint's packets,
        remembered or read from the saver)."""

        def sends() -> Sequence[str | None] | None:
            got = self.sends_of(tid, ns, cid)
            if got is None and cid is not None and self.lookup_parent is not None:
                found = self.lookup_parent(tid, ns, cid)
                if found is not None:
                    got = list(found[1])
                    self._sends.put((tid, ns, cid), got)
            return got

        return node_of_task_path(task_path, sends)


def node_of_task_path(
    task_path: str, sends: Callable[[], Sequence[str | None] | None]
) -> str | None:
    """The node a task path names: ``~__pregel_pull, node`` directly; a ``Send`` task
    (``~__pregel_push, index``) by the Send packets ``sends()`` returns.

    Example:
        >>> node_of_task_path("~__pregel_pull, agent", lambda: None)
        'agent'
        >>> node_of_task_path("~__pregel_push, 1", lambda: ["a", "b"])
        'b'
    """
    parts = [p.strip() for p in task_path.split(",")] if task_path else []
    if len(parts) < 2:
        return None
    if parts[0] == _compat.TASK_PATH_PULL:
        return parts[1]
    if parts[0] == _PUSH:
        targets = sends()
        try:
            return targets[int(parts[1])] if targets else None
        except (ValueError, IndexError):
            return None
    return None


def is_push_task_path(task_path: str) -> bool:
    """Whether a task path is a ``Send`` (push) task's (its node is named by the packets of
    the checkpoint it ran from, not by the path).

    Example:
        >>> is_push_task_path("~__pregel_push, 1"), is_push_task_path("~__pregel_pull, agent")
        (True, False)
    """
    return task_path.startswith(_PUSH)


def refiled(event: Event) -> Event:
    """``event`` of a thread that keeps its folder of the old rule (recorded before
    readable folder names): a checkpoint event names its log there, so the thread is never
    split across two folders (the sealer calls this for the threads the ledger marks).

    Example:
        >>> e = Event.new("checkpoint", "sp-A", payload={"path": "threads/sp-!a/x"})
        >>> refiled(e).payload["path"]
        'threads/~onyc2qi/checkpoints/_root.jsonl'
    """
    if event.kind != EventKind.CHECKPOINT.value or "path" not in event.payload:
        return event
    path = checkpoints_relpath(event.thread_id, event.checkpoint_ns, legacy=True)
    return event.replace(payload={**event.payload, "path": path})


def names_old_folder(envelopes: Sequence[Mapping[str, Any]], thread_id: str) -> bool:
    """Whether a thread's record (envelopes) names its folder of the old rule: a checkpoint
    event's log is there. Such a thread keeps that folder wherever its record goes (a
    restore into an empty ledger, an import).

    Example:
        >>> path = "threads/~onyc2qi/checkpoints/_root.jsonl"
        >>> cp = {"kind": "checkpoint", "payload": {"path": path}}
        >>> names_old_folder([cp], "sp-A"), names_old_folder([cp], "thread-42")
        (True, False)
    """
    old = checkpoints_relpath(thread_id, "", legacy=True).rsplit("/", 1)[0] + "/"
    new = checkpoints_relpath(thread_id, "").rsplit("/", 1)[0] + "/"
    for env in envelopes:
        if env.get("kind") != EventKind.CHECKPOINT.value:
            continue
        path = str((env.get("payload") or {}).get("path") or "")
        ns = str(env.get("checkpoint_ns") or "")
        if path.startswith(old) and (old != new or path != checkpoints_relpath(thread_id, ns)):
            return True
    return False
