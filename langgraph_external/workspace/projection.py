"""The workspace projection: the ledger mirrored into the file workspace.

It tails the ledger (the pipeline feeds it each thread's events after its position) and
is idempotent: every line it appends carries the ``seq`` of its event, a torn last line
(a crash mid-append) is cut before the next append, and a line whose ``seq`` a file
already holds is not written again. A deleted workspace is rebuilt from the ledger. A
deleted thread's folder goes; its tombstone is mirrored into a new one, except for a
replay copy (``lgx-replay:...``), which leaves no folder at all.

Per batch and thread it appends the envelopes to ``events.jsonl`` in one write, appends
one line per checkpoint and per pending write to the namespace's checkpoint log
``checkpoints/<ns>.jsonl`` in one write (metadata, parent, the version and exact bytes of
every channel — small values inline as base64, large ones as content-addressed blob
files — and a readable rendering of what changed), and replaces ``state.json`` once with
the newest root checkpoint's state. Everything but ``state.json`` and ``thread.json`` is
append-only; few files per batch keeps the mirror cheap.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import SCHEMA_VERSION, Event, canonical_line
from langgraph_external.record.locations import decode_ns
from langgraph_external.record.processors import Redactor
from langgraph_external.record.thread_ids import is_replay_copy
from langgraph_external.workspace.checkpoint_lines import CheckpointLines, read_checkpoint_line
from langgraph_external.workspace.files import Workspace, dumps_clean, encode_ns
from langgraph_external.workspace.lines import EVENTS_FILE, events_path, parse_lines
from langgraph_external.workspace.readable import ReadableViews, state_tag

logger = logging.getLogger("langgraph_external")

__all__ = ["STATE_INTERVAL", "WorkspaceProjection", "state_tag"]

_CACHE = 4096
_YOUNG = 20  # a thread's policy hash is looked for in its events up to this seq
# a deferred state.json whose thread another writer appended to after it was due, or whose
# files another writer left (it may have died with its own state.json deferred): the
# newest root checkpoint is then read from the log (our own later appends of writes lines
# must not make the old one look current)
_FOREIGN = -1
STATE_INTERVAL = 5.0  # state.json is rewritten at most this often per thread (and at flush)


def _policy_hash(e: Event) -> str | None:
    """The policy hash an event names (a run's start, or a checkpoint's metadata)."""
    found = e.payload.get("policy_hash") or (e.payload.get("metadata") or {}).get("lgx_policy_hash")
    return found if isinstance(found, str) else None


class WorkspaceProjection:
    """Writes events and checkpoint mirrors under a :class:`Workspace`.

    Args:
        workspace: where to write.
        serde: decodes exact bytes for the readable views (the saver's serializer).
        redactor: applied to every readable view (``state.json``, checkpoint and
            writes renderings) before it is written.
        cipher: the deployment key: opens exact copies sealed at the source (for the
            readable views) and seals ``state.json`` (a keyed tag ``lgx verify`` checks).
            Exact copies are written as the ledger holds them (encrypted by default,
            see :mod:`langgraph_external.record.crypto`).
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        serde: SerializerProtocol | None = None,
        redactor: Redactor | None = None,
        cipher: WorkspaceCipher | None = None,
    ) -> None:
        self.ws = workspace
        self.cipher = cipher
        self.serde: SerializerProtocol = serde or JsonPlusSerializer()
        self.redactor = redactor
        # one name however it is spelled: the app, its helper and `lgx` share the cursors
        digest = hashlib.sha256(workspace.identity.encode()).hexdigest()[:12]
        self.name = f"workspace-{digest}"
        self._last_seq: OrderedDict[str, int] = OrderedDict()  # thread -> last seq written
        self._file_seq: OrderedDict[str, int] = OrderedDict()  # log path -> last seq held
        self.views = ReadableViews(
            workspace,
            lambda tid, ns, cid: read_checkpoint_line(workspace, tid, ns, cid),
            serde=self.serde,
            redactor=redactor,
            cipher=cipher,
        )
        """Readable renderings (checkpoint and writes lines, ``state.json``)."""
        self.lines = CheckpointLines(workspace, self.views)
        """Checkpoint lines and the full channel maps of recent checkpoints."""
        self._described: set[str] = set()  # threads whose thread.json exists
        self._unpoliced: set[str] = set()  # young threads whose thread.json names no policy
        self._file_size: dict[str, int | None] = {}  # path -> size after our last append
        self._by_dir: dict[str, set[str]] = {}  # thread directory -> its cached log paths
        # thread -> (seq the cursor stays below, newest root checkpoint not in state.json
        # or None: the newest in the log, events.jsonl size then or _FOREIGN)
        self._state_due: dict[str, tuple[int, Event | None, int | None]] = {}
        self._state_at: OrderedDict[str, float] = OrderedDict()  # thread -> last state.json write
        self._inherited: set[str] = set()  # threads whose position was read from their files

    # -- Projection ----------------------------------------------------------------------
    def locate(self, ledger: Any, thread_ids: Collection[str]) -> None:
        """Take the ledger's word on where the threads' files go (a thread recorded before
        readable folder names keeps its old folder, even where it has none yet)."""
        self.ws.folders.locate(ledger, thread_ids)

    def position(self, thread_id: str) -> int:
        """Last ``seq`` in the thread's ``events.jsonl`` (a torn last line is cut first).

        A thread whose files vanished (a deleted folder, a wiped disk) is at 0 again, so
        the pipeline rebuilds it from the ledger.
        """
        path = events_path(self.ws, thread_id)
        if thread_id in self._last_seq:
            if self._last_seq[thread_id] == 0 or self.ws.exists(path):
                return self._last_seq[thread_id]
            self._forget(thread_id)
        with self.ws.thread_lock(thread_id, create=False):  # never cut another's append
            seq = self.ws.repair_tail(path)
        self._remember_seq(thread_id, seq)
        if seq > 0:
            self._inherited.add(thread_id)  # found, not written here: see _write_thread
        return seq

    def peek(self, thread_id: str) -> int:
        """:meth:`position` for a caller not holding the thread: cuts nothing (a torn
        tail may be another writer's append in progress)."""
        if thread_id in self._last_seq:
            return self._last_seq[thread_id]
        return self.ws.last_seq(events_path(self.ws, thread_id))

    def forget(self, thread_id: str) -> None:
        """Drop what is cached about ``thread_id``'s files (another writer may have moved)."""
        self._last_seq.pop(thread_id, None)
        due = self._state_due.get(thread_id)
        if due is not None:  # another writer may hold a newer root checkpoint than ours:
            self._state_due[thread_id] = (due[0], None, _FOREIGN)  # settle reads the log
        for path in self._paths_of(thread_id):
            self._drop_path(path)

    def revalidate(self, thread_id: str) -> None:
        """:meth:`forget` what another writer changed: a file whose size is not the size
        this projection left it at (one ``stat`` per file instead of re-reading tails)."""
        events = events_path(self.ws, thread_id)
        if thread_id in self._last_seq and self.ws.size(events) != self._file_size.get(events):
            self.forget(thread_id)
            return
        for path in self._paths_of(thread_id):
            if self.ws.size(path) != self._file_size.get(path):
                self._drop_path(path)

    def due(self) -> list[str]:
        """Threads whose ``state.json`` waits for :meth:`settle`."""
        return list(self._state_due)

    def overdue(self) -> list[str]:
        """Threads whose ``state.json`` waited :data:`STATE_INTERVAL` (settled even by a
        busy runner: their cursors are held back)."""
        since = time.monotonic() - STATE_INTERVAL
        return [t for t in self._state_due if self._state_at.get(t, since) <= since]

    def settle(self, threads: Collection[str] | None = None) -> None:
        """Write the ``state.json`` files deferred by :data:`STATE_INTERVAL` (of ``threads``,
        default all; the pipeline passes those whose projection lock it holds).

        A thread another writer appended to since (its ``events.jsonl`` is not the size this
        projection left it at) gets the state of the newest root checkpoint in its log instead.
        """
        for tid in list(self._state_due) if threads is None else list(threads):
            if tid in self._state_due:
                with self.ws.thread_lock(tid):
                    self._settle_one(tid)

    def _settle_one(self, tid: str) -> None:
        due = self._state_due.pop(tid, None)
        if due is not None:
            _, e, size = due
            log = events_path(self.ws, tid)
            try:
                if e is not None and self.ws.size(log) == self._file_size.get(log, size):
                    self._write_state(tid, e)
                else:  # another writer went on since: the newest root checkpoint is in the log
                    self._write_latest_state(tid)
                self._inherited.discard(tid)
            except BaseException:  # a full disk: still due, written by the next settle
                self._state_due.setdefault(tid, due)
                raise

    def settled(self, thread_id: str, position: int) -> int | None:
        """The cursor to record: ``position``, or just before the root checkpoint whose
        ``state.json`` is still deferred (a process that dies before :meth:`settle` leaves
        the thread lagging, and :meth:`resume` writes it later); ``None`` for files another
        writer left that this one did not write to (their writer may have died with its
        ``state.json`` deferred: a cursor from here would hide that from :meth:`resume`).
        """
        if thread_id in self._inherited:
            return None  # another writer's files, nothing written here: theirs to vouch for
        due = self._state_due.get(thread_id)
        if due is None:
            return position
        return min(position, due[0] - 1)

    def resume(self, thread_id: str) -> None:
        """The recorded cursor of ``thread_id`` is behind its files: whoever wrote them
        stopped before settling them (a crash). Write ``state.json`` from the newest root
        checkpoint of the log now, unless a write of this projection is pending already."""
        if thread_id not in self._state_due:
            with self.ws.thread_lock(thread_id):
                self._write_latest_state(thread_id)
            self._inherited.discard(thread_id)

    def apply(self, thread_id: str, events: Sequence[Event]) -> None:
        """Mirror ``events`` of one thread; events it already holds are skipped."""
        self._locked_write(thread_id, list(events))

    def write(self, events: Sequence[Event]) -> None:
        """Mirror events of any threads (grouped per thread, in order)."""
        for tid in dict.fromkeys(e.thread_id for e in events):
            self._locked_write(tid, [e for e in events if e.thread_id == tid])

    def _locked_write(self, tid: str, events: list[Event]) -> None:
        """Write under the thread's directory lock, seeing what another wrote meanwhile."""
        with self.ws.thread_lock(tid):
            self.revalidate(tid)
            self._write_thread(tid, events)

    def _inherit(self, tid: str, position: int) -> None:
        """Files another writer left (or this process before it forgot them), about to be
        written to or vouched for by a cursor: that writer may have died with its
        ``state.json`` deferred and its cursor held back. Until a settle here writes the
        newest root checkpoint of the log, the cursor stays below what was found, so
        whoever comes next knows too."""
        self._inherited.discard(tid)
        if position > 0 and tid not in self._state_due:
            self._state_due[tid] = (position, None, _FOREIGN)

    def _remember_seq(self, tid: str, seq: int) -> None:
        self._last_seq[tid] = seq
        self._last_seq.move_to_end(tid)
        while len(self._last_seq) > _CACHE:
            self._inherited.discard(self._last_seq.popitem(last=False)[0])

    def _append(self, path: str, lines: list[tuple[int, str]]) -> None:
        """Append ``(seq, line)`` pairs whose seq the file does not hold yet."""
        held = self._file_seq[path] if path in self._file_seq else self.ws.repair_tail(path)
        fresh = [line for seq, line in lines if seq > held]
        if fresh:
            try:
                self.ws.append_lines(path, fresh)
            except BaseException:
                # part of the append may have landed: the next attempt reads the tail
                # again (cutting a torn line) instead of trusting what it knew
                self._drop_path(path)
                raise
            held = max(seq for seq, _ in lines)
            self._file_size[path] = self.ws.size(path)
        elif path not in self._file_size:
            self._file_size[path] = self.ws.size(path)
        self._file_seq[path] = held
        self._file_seq.move_to_end(path)
        self._by_dir.setdefault(_dir_of(path), set()).add(path)
        while len(self._file_seq) > _CACHE:
            self._drop_path(next(iter(self._file_seq)))

    def _paths_of(self, tid: str) -> list[str]:
        """Cached log paths under a thread's directory."""
        return list(self._by_dir.get(self.ws.thread_dir(tid), ()))

    def _drop_path(self, path: str) -> None:
        self._file_seq.pop(path, None)
        self._file_size.pop(path, None)
        held = self._by_dir.get(_dir_of(path))
        if held is not None:
            held.discard(path)
            if not held:
                del self._by_dir[_dir_of(path)]

    def close(self) -> None:
        """Write what :meth:`settle` would."""
        self.settle()

    # -- per thread --------------------------------------------------------------------
    def _write_thread(self, tid: str, events: list[Event]) -> None:
        ws = self.ws
        last = self.position(tid)
        for i, e in enumerate(events):
            if e.kind == "thread_deleted" and (e.seq or 0) > last:
                ws.remove_thread(tid)
                self._forget(tid)
                last = (e.seq or 1) - 1
                self._last_seq[tid] = last
                events = events[i:]
        fresh = [e for e in events if (e.seq or 0) > last]
        if not fresh:
            return
        if len(fresh) == 1 and fresh[0].kind == "thread_deleted" and is_replay_copy(tid):
            # a deleted replay copy leaves no folder: its tombstone stays in the ledger
            # only (a rebuild reads it again and writes nothing; should the id be used
            # again, the tombstone is mirrored with what follows it)
            self._inherited.discard(tid)
            self._remember_seq(tid, fresh[0].seq or last)
            return
        if tid in self._inherited:
            self._inherit(tid, last)  # writing on: the files are ours to settle now
        tdir = ws.thread_dir(tid)
        if tid not in self._described or tid in self._unpoliced:
            self._write_thread_json(tid, fresh)
            self._described.add(tid)
            if len(self._described) > _CACHE:
                self._described.clear()
        for e in fresh:
            for sha, b64 in ((e.detail or {}).get("inline") or {}).items():
                self.views.remember_bytes(sha, base64.b64decode(b64))
            for rel, data in e.attachments.items():
                self.views.remember_bytes(rel.rsplit("/", 1)[-1], data)
                ws.write_if_absent(f"{tdir}/{rel}", data)
        logs: dict[str, list[tuple[int, dict[str, Any]]]] = {}  # ns -> (seq, line)
        latest_root: Event | None = None
        for e in fresh:
            if e.kind == "checkpoint" and e.checkpoint_id is not None:
                logs.setdefault(e.checkpoint_ns, []).append((e.seq or 0, self.lines.line(tid, e)))
                if e.checkpoint_ns == "":
                    latest_root = e
            elif e.kind == "writes" and e.checkpoint_id is not None:
                lines = logs.setdefault(e.checkpoint_ns, [])
                lines.extend((e.seq or 0, x) for x in self.views.writes_lines(tid, e))
            elif e.kind in ("thread_pruned", "runs_deleted"):
                self._flush_logs(tid, logs)
                self._remove_checkpoints(tid, e)
            elif e.kind == "thread_copied":
                self._flush_logs(tid, logs)
                self._copy_checkpoints(e.payload["source_thread_id"], tid, e.seq or 0)
        self._flush_logs(tid, logs)
        self._append(
            f"{tdir}/{EVENTS_FILE}", [(e.seq or 0, e.line or canonical_line(e)) for e in fresh]
        )
        self._remember_seq(tid, fresh[-1].seq or last)
        if latest_root is not None:
            # rendering the whole state grows with the thread: at most every
            # STATE_INTERVAL seconds per thread, and when the pipeline flushes
            hold = min(latest_root.seq or 1, self._state_due.get(tid, (1 << 62,))[0])
            size = self._file_size.get(f"{tdir}/{EVENTS_FILE}")
            self._state_due[tid] = (hold, latest_root, size)
            if time.monotonic() - self._state_at.get(tid, -STATE_INTERVAL) >= STATE_INTERVAL:
                # due until written: a write that fails (a full disk) is retried by settle,
                # and the thread's cursor stays held back meanwhile (settled)
                self._write_state(tid, latest_root)
                self._state_due.pop(tid, None)

    def _flush_logs(self, tid: str, logs: dict[str, list[tuple[int, dict[str, Any]]]]) -> None:
        for ns, lines in logs.items():
            if lines:
                path = self.ws.checkpoint_log_path(tid, ns)
                self._append(path, [(seq, _dumps_line(x)) for seq, x in lines])
        logs.clear()

    def _write_thread_json(self, tid: str, fresh: list[Event]) -> None:
        """``thread.json``: written with the thread's first events. Its policy hash comes
        from the first event that names one — a task's writes can be sealed before the
        run's start (they commit in their own transaction), so while a young thread's
        ``thread.json`` has none, the next events are looked at too."""
        path = f"{self.ws.thread_dir(tid)}/thread.json"
        policy = next((h for e in fresh if (h := _policy_hash(e))), None)
        if self.ws.exists(path):
            if tid in self._unpoliced and policy is not None:
                doc = self.ws.read_json(path)
                if doc.get("policy_hash") is None:
                    self.ws.write_json(path, {**doc, "policy_hash": policy})
            if policy is not None or (fresh[-1].seq or 0) > _YOUNG:
                self._unpoliced.discard(tid)
            return
        first = fresh[0]
        self.ws.write_json(
            path,
            {
                "thread_id": tid,
                "encoded": self.ws.folder(tid),
                "created": first.ts.isoformat(),
                "schema_version": SCHEMA_VERSION,
                "policy_hash": policy,
            },
            clean=True,
        )
        if policy is None and (fresh[-1].seq or 0) <= _YOUNG:
            self._unpoliced.add(tid)

    def _write_state(self, tid: str, e: Event) -> None:
        assert e.checkpoint_id is not None
        full = self.lines.kept(tid, e.checkpoint_ns, e.checkpoint_id)
        self._write_state_of(tid, e.checkpoint_id, e.step, full)

    def _write_latest_state(self, tid: str) -> None:
        """``state.json`` from the newest root checkpoint line of the log (whoever wrote it),
        unless it shows that checkpoint already (its writer settled it before going on)."""
        doc = _latest_root_checkpoint(self.ws, tid)
        if doc is not None and not _state_shows(self.ws, tid, doc["checkpoint_id"]):
            full = dict(doc.get("channels") or {})
            self._write_state_of(tid, doc["checkpoint_id"], doc.get("step"), full)

    def _write_state_of(
        self, tid: str, checkpoint_id: str, step: int | None, full: dict[str, Any]
    ) -> None:
        self._state_at[tid] = time.monotonic()
        self._state_at.move_to_end(tid)
        while len(self._state_at) > _CACHE:
            self._state_at.popitem(last=False)
        doc = self.views.state_doc(tid, checkpoint_id, step, full)
        self.ws.write_json(f"{self.ws.thread_dir(tid)}/state.json", doc, clean=True)

    # -- thread operations -------------------------------------------------------------
    def _remove_checkpoints(self, tid: str, e: Event) -> None:
        """Drop the lines of pruned or deleted checkpoints from the logs."""
        for ns, ids in (e.payload.get("removed") or {}).items():
            gone = set(ids)
            path = self.ws.checkpoint_log_path(tid, ns)
            if self.ws.exists(path):
                kept = _without_checkpoints(self.ws.read_bytes(path), gone)
                self.ws.write_atomic(path, b"".join(x + b"\n" for x in kept))
                self._drop_path(path)
            for cid in gone:
                self.lines.forget(tid, ns, cid)

    def _copy_checkpoints(self, src: str, dst: str, seq: int) -> None:
        """Copy the source thread's logs and blobs; copied lines take the copy event's seq."""
        for path, lines, data in _copied_files(self.ws, src, dst, seq):
            if lines is not None:
                self._append(path, lines)
            else:
                self.ws.write_if_absent(path, data)

    def _forget(self, tid: str) -> None:
        self.lines.forget(tid)
        self._described.discard(tid)
        self._state_due.pop(tid, None)  # before forget(), which would keep it due
        self.forget(tid)


def _latest_root_checkpoint(ws: Workspace, tid: str) -> dict[str, Any] | None:
    """The newest checkpoint line of the thread's root log (read from its end)."""
    for line in ws.lines_from_end(ws.checkpoint_log_path(tid, "")):
        # compact since 2026-12-06 (orjson), spaced before: a log may hold both
        if b'"record":"checkpoint"' in line or b'"record": "checkpoint"' in line:
            doc = json.loads(line)
            if doc.get("record") == "checkpoint" and doc.get("checkpoint_id"):
                return dict(doc)
    return None


def _state_shows(ws: Workspace, tid: str, checkpoint_id: str) -> bool:
    """Whether the thread's ``state.json`` is the one of ``checkpoint_id``."""
    try:
        doc = ws.read_json(f"{ws.thread_dir(tid)}/state.json")
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("checkpoint_id") == checkpoint_id


def _without_checkpoints(log: bytes, gone: set[str]) -> list[bytes]:
    """The lines of a checkpoint log without those of the ``gone`` checkpoints. A kept
    checkpoint may reference inline bytes stored in a removed checkpoint's line (unchanged
    channels are not stored twice): those bytes move into the kept line."""
    docs = [json.loads(line) for line in log.splitlines() if line.strip()]
    moving: dict[str, str] = {}
    for doc in docs:
        if doc.get("record") == "checkpoint" and doc.get("checkpoint_id") in gone:
            moving.update(doc.get("blobs") or {})
    kept = []
    for doc in docs:
        if doc.get("checkpoint_id") in gone:
            continue
        if doc.get("record") == "checkpoint":
            for ref in (doc.get("channels") or {}).values():
                if ref.get("inline") and ref.get("in") in gone:
                    doc.setdefault("blobs", {})[ref["sha256"]] = moving[ref["sha256"]]
                    ref["in"] = doc["checkpoint_id"]
        kept.append(_dumps_line(doc).encode("utf-8", "surrogatepass"))
    return kept


def _copied_files(
    ws: Workspace, src: str, dst: str, seq: int
) -> Iterator[tuple[str, list[tuple[int, str]] | None, bytes]]:
    """What a copy of ``src`` holds under ``dst``'s folder: each checkpoint log's lines
    (taking the copy event's ``seq``), or a blob's bytes. A log is named by the copy's
    rule (a source with folder names of the old rule gives a copy with current ones)."""
    src_dir = f"{ws.thread_dir(src)}/checkpoints"
    dst_dir = f"{ws.thread_dir(dst)}/checkpoints"
    if not ws.fs.exists(src_dir):
        return
    dst_legacy = bool(ws.folders.is_legacy(dst))
    for path in ws.fs.find(src_dir):
        rel = path.split("/checkpoints/", 1)[1]
        data = ws.read_bytes(path)
        if not rel.endswith(".jsonl"):
            yield f"{dst_dir}/{rel}", None, data
            continue
        ns = _namespace_of(rel[: -len(".jsonl")], data)
        if ns is not None:
            rel = f"{encode_ns(ns, legacy=dst_legacy)}.jsonl"
        lines = []
        for _, _, line in parse_lines(data):
            if line.get("record") == "checkpoint":
                line["thread_id"] = dst
                line["copied_from"] = src
            line["source_seq"], line["seq"] = line.get("seq"), seq
            lines.append((seq, _dumps_line(line)))
        yield f"{dst_dir}/{rel}", lines, data


def _namespace_of(stem: str, log: bytes) -> str | None:
    """The namespace of a checkpoint log: from its file name, else (a hashed name) from
    its first line naming one; ``None`` if neither tells."""
    ns = decode_ns(stem)
    if ns is not None:
        return ns
    for _, _, doc in parse_lines(log):
        if isinstance(doc.get("checkpoint_ns"), str):
            return str(doc["checkpoint_ns"])
    return None


def _dir_of(path: str) -> str:
    """The thread directory of a log path (``<dir>/events.jsonl``, ``<dir>/checkpoints/..``)."""
    return path.rsplit("/", 1 if path.endswith("/" + EVENTS_FILE) else 2)[0]


def _dumps_line(obj: dict[str, Any]) -> str:
    # keys sorted, so a line is the same whether its event came from memory or back from
    # the ledger (jsonb orders keys its own way); its values are rendered (to_readable) or
    # normalized (json_safe) already, so the native encoder writes them
    return dumps_clean(obj, sort_keys=True)
