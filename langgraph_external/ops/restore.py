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
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_external.errors import ConfigurationError, RestoreError
from langgraph_external.record.crypto import DecryptionError, WorkspaceCipher
from langgraph_external.record.events import Event, EventKind, hashed_line
from langgraph_external.record.keys import load_key
from langgraph_external.upstream import langgraph as _compat
from langgraph_external.workspace.files import (
    ROOT_NS_DIR,
    Workspace,
    decode_thread_id,
    encode_ns,
    sha256_hex,
)

if TYPE_CHECKING:
    from langgraph_external.external import External

__all__ = [
    "CheckpointLog",
    "RestoreError",
    "RestoredThread",
    "has_checkpoints",
    "iter_checkpoint_ids",
    "load_checkpoint",
    "read_verified_events",
    "restore_recorded",
    "restore_thread",
    "restore_thread_report",
    "verify_thread",
]


class CheckpointLog:
    """The parsed checkpoint log of one namespace of a thread.

    Every exact value read through :meth:`bytes_of` is checked against its address (the
    digest the checkpointer named it by: the keyed address of ``cipher``, by default the
    deployment key (``$LGX_KEY`` or the key file); sha256 without any key) before it is
    returned.

    Attributes:
        docs: checkpoint id -> its checkpoint line (oldest first).
        writes: checkpoint id -> its pending-write lines, in recording order.
        writers: checkpoint id -> writer lines recorded after the checkpoint.
        path: the log file.
        line_of: checkpoint id -> line number of its checkpoint line (1-based).
        write_lines: ``(line number, write line)`` in file order.

    Raises:
        RestoreError: a line is torn (not complete JSON) or not a JSON object.

    Example:
        >>> log = CheckpointLog(Workspace("memory://lgx-doc-log"), "t", "")
        >>> log.docs, log.path.endswith("/threads/t/checkpoints/_root.jsonl")
        ({}, True)
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
        self.cipher = cipher if cipher is not None else _deployment_key()
        self.digest: Callable[[bytes], str] = (
            self.cipher.address if self.cipher is not None else sha256_hex
        )
        self.docs: dict[str, dict[str, Any]] = {}
        self.writes: dict[str, list[dict[str, Any]]] = {}
        self.writers: dict[str, list[dict[str, Any]]] = {}
        self.line_of: dict[str, int] = {}
        self.write_lines: list[tuple[int, dict[str, Any]]] = []
        self._checked: dict[Any, bytes] = {}
        self.path = path = ws.checkpoint_log_path(thread_id, checkpoint_ns)
        if not ws.exists(path):
            return
        for n, raw in enumerate(ws.read_bytes(path).splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError as exc:
                raise RestoreError(
                    f"{path}: line {n} is torn or not JSON ({exc}); nothing was restored"
                ) from exc
            if not isinstance(line, dict):
                raise RestoreError(f"{path}: line {n} is not a JSON object")
            kind, cid = line.get("record"), cast(str, line.get("checkpoint_id"))
            if kind in ("checkpoint", "write", "writer") and not isinstance(cid, str):
                raise RestoreError(f"{path}: line {n} has no checkpoint id (a {kind} line)")
            if kind == "checkpoint":
                self.docs[cid] = line
                self.line_of[cid] = n
            elif kind == "write":
                self.writes.setdefault(cid, []).append(line)
                self.write_lines.append((n, line))
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

    def bytes_of(self, ref: dict[str, Any], *, where: str = "") -> bytes:
        """The exact bytes a channel or write reference points to, checked against it.

        Args:
            ref: a channel reference of a checkpoint line, or a write line.
            where: what refers to them, for error messages (``"line 3"``).

        Raises:
            RestoreError: the bytes are missing, or their digest is not their address.
            DecryptionError: encrypted bytes do not open with the key (naming the file).
        """
        sha = ref["sha256"]
        # one check per copy: the same place holds the same bytes for every reference
        # (unchanged channels refer back to the checkpoint that stored them)
        key = (
            ("b64", id(ref), sha)
            if ref.get("b64") is not None
            else ("inline", ref.get("in"), sha)
            if ref.get("inline")
            else ("file", None, sha),
            ref.get("enc") is not None,
        )
        if key in self._checked:
            return self._checked[key]
        try:
            if ref.get("b64") is not None:
                source = f"{self.path}: {where or 'write line'} inline bytes"
                data = base64.b64decode(ref["b64"], validate=True)
                sealed = ref.get("enc") is not None
            elif ref.get("inline"):
                holder_id = ref["in"]
                source = (
                    f"{self.path}: line {self.line_of.get(holder_id, '?')} "
                    f"(checkpoint {holder_id}) inline bytes"
                )
                holder = self.docs[holder_id]
                data = base64.b64decode(holder["blobs"][sha], validate=True)
                sealed = ref.get("enc") is not None or holder.get("enc") is not None
            else:
                source = self.ws.blob_path(self.thread_id, sha)
                data = self.ws.read_bytes(source)
                sealed = ref.get("enc") is not None
        except (FileNotFoundError, KeyError) as exc:
            raise RestoreError(
                f"the bytes {sha} of thread {self.thread_id!r} are missing"
                + (f" ({where} of {self.path})" if where else "")
            ) from exc
        except ValueError as exc:  # binascii.Error: the base64 text itself is damaged
            raise RestoreError(f"{source} of {sha} are not valid base64: {exc}") from exc
        if sealed:
            if self.cipher is None:
                raise RestoreError(
                    f"thread {self.thread_id!r} is encrypted in the workspace: pass cipher=..."
                )
            try:
                data = self.cipher.decrypt(data, sha.encode())
            except DecryptionError as exc:
                raise DecryptionError(f"{source} of {sha}: {exc}") from exc
        actual = self.digest(data)
        if actual != sha:
            raise RestoreError(
                f"{source}{f' ({where})' if where and 'line' not in source else ''}: "
                f"the bytes do not match their address: expected {sha}, found {actual}"
            )
        self._checked[key] = data
        return data

    def pending_writes(self, checkpoint_id: str) -> list[dict[str, Any]]:
        """Latest write per (task, idx), sorted like the savers return them."""
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        for w in self.writes.get(checkpoint_id, []):
            latest[(w["task_id"], int(w["idx"]))] = w  # a rewritten write replaces the old one
        return sorted(
            latest.values(), key=lambda w: (w.get("task_path") or "", w["task_id"], w["idx"])
        )

    def verify(self, events_by_seq: Mapping[int, Mapping[str, Any]]) -> None:
        """Check every line against the hash-chained event it mirrors, and every value.

        A checkpoint line must be the ``checkpoint`` event its ``seq`` names in
        ``events.jsonl`` (same id, parent, and channel addresses); a write line the
        ``writes`` event its ``seq`` names. So the exact bytes are bound to the chain:
        bytes that match an altered address still fail. Lines copied from another thread
        (``copied_from``) carry that thread's ``seq`` and are checked for their values only.

        Raises:
            RestoreError: naming the file, line, checkpoint and what differs.
        """
        for cid, doc in self.docs.items():
            n = self.line_of[cid]
            at = f"{self.path}: line {n} (checkpoint {cid})"
            try:
                skel, channels = doc["checkpoint"], doc["channels"]
                for key in ("id", "ts", "channel_versions", "versions_seen"):
                    skel[key]
            except (KeyError, TypeError) as exc:
                raise RestoreError(f"{at}: incomplete checkpoint line (no {exc})") from exc
            if skel["id"] != cid:
                raise RestoreError(f"{at}: the checkpoint inside says id {skel['id']}")
            if not doc.get("copied_from"):
                env = _event_at(events_by_seq, doc.get("seq"), "checkpoint", at)
                payload = env.get("payload") or {}
                if env.get("checkpoint_id") != cid:
                    raise RestoreError(
                        f"{at}: events.jsonl seq {doc.get('seq')} is checkpoint "
                        f"{env.get('checkpoint_id')}"
                    )
                if payload.get("parent_checkpoint_id") != doc.get("parent_checkpoint_id"):
                    raise RestoreError(
                        f"{at}: parent {doc.get('parent_checkpoint_id')} differs from the "
                        f"recorded parent {payload.get('parent_checkpoint_id')}"
                    )
                for ch, rec in (payload.get("channels") or {}).items():
                    _same_ref(at, f"channel {ch!r}", channels.get(ch), rec)
            for ch, ref in channels.items():
                if ref.get("sha256") is not None:
                    self.bytes_of(ref, where=f"line {n}, checkpoint {cid}, channel {ch!r}")
        for n, w in self.write_lines:
            cid = cast(str, w.get("checkpoint_id"))
            at = f"{self.path}: line {n} (write of checkpoint {cid})"
            try:
                task_id, idx, channel = w["task_id"], w["idx"], w["channel"]
                w["type"], w["sha256"]
            except KeyError as exc:
                raise RestoreError(f"{at}: incomplete write line (no {exc})") from exc
            if not (self.docs.get(cid) or {}).get("copied_from"):
                env = _event_at(events_by_seq, w.get("seq"), "writes", at)
                if env.get("checkpoint_id") != cid or env.get("task_id") != task_id:
                    raise RestoreError(
                        f"{at}: events.jsonl seq {w.get('seq')} records writes of task "
                        f"{env.get('task_id')} to checkpoint {env.get('checkpoint_id')}"
                    )
                recorded = [
                    r
                    for r in (env.get("payload") or {}).get("writes") or []
                    if r.get("idx") == idx and r.get("channel") == channel
                ]
                _same_ref(at, f"write {idx} to {channel!r}", w, recorded[0] if recorded else None)
            self.bytes_of(w, where=f"line {n}")


def _deployment_key() -> WorkspaceCipher | None:
    """The deployment key when one is configured (``$LGX_KEY`` or the key file)."""
    try:
        return load_key(create=False)
    except ConfigurationError:
        return None


def _event_at(
    events_by_seq: Mapping[int, Mapping[str, Any]], seq: Any, kind: str, at: str
) -> Mapping[str, Any]:
    env = events_by_seq.get(seq) if isinstance(seq, int) else None
    if env is None or env.get("kind") != kind:
        found = "no event" if env is None else f"a {env.get('kind')!r} event"
        raise RestoreError(f"{at}: events.jsonl has {found} at its seq {seq!r}, not a {kind!r}")
    return env


def _same_ref(at: str, what: str, line: Any, recorded: Any) -> None:
    """The log's reference must name the bytes the hash-chained event names."""
    if not isinstance(line, Mapping) or not isinstance(recorded, Mapping):
        raise RestoreError(f"{at}: {what} is not in both the log and the recorded event")
    for key in ("sha256", "type"):
        if line.get(key) != recorded.get(key):
            raise RestoreError(
                f"{at}: {what} {key} is {line.get(key)!r} in the log but "
                f"{recorded.get(key)!r} in the hash-chained event"
            )


def _check_link(prev: Mapping[str, Any] | None, env: Mapping[str, Any], raw: bytes) -> str:
    """:func:`verify_chain` of ``[prev, env]`` where ``prev`` was checked already.

    Returns the canonical line of ``env`` (what the ledger stores), computed while hashing.
    """
    seq = env["seq"]
    if prev is not None:
        if seq != prev["seq"] + 1:
            raise ValueError(f"gap in sequence: expected seq {prev['seq'] + 1}, found {seq}")
        if env["prev"] != prev["hash"]:
            raise ValueError(f"seq {seq}: prev does not match the hash of seq {seq - 1}")
    own = env["hash"]
    if isinstance(own, str) and own.isalnum():
        # a line written canonically hashes as it is, without its own hash member (text
        # that hashes to the recorded hash is the text the recorder hashed)
        text = raw.decode()
        body = text.replace(f',"hash":"{own}"', "", 1)
        if body != text and hashlib.sha256(body.encode()).hexdigest() == own:
            return text
    line, digest = hashed_line(env)
    if digest != own:
        raise ValueError(f"seq {seq}: hash does not match the event's content")
    return line


def read_verified_events(ws: Workspace, thread_id: str) -> list[dict[str, Any]]:
    """The envelopes of the thread's ``events.jsonl``, after checking its hash chain.

    Raises:
        RestoreError: the file is missing, a line is torn, or the chain breaks (naming
            the line and ``seq``).

    Example:
        >>> try:
        ...     read_verified_events(Workspace("memory://lgx-doc-ev"), "t")
        ... except RestoreError as exc:
        ...     print(str(exc).split(": ")[0].rsplit("/", 2)[-2:])
        ['t', 'events.jsonl is missing']
    """
    return [env for env, _ in _read_verified(ws, thread_id)]


def _read_verified(ws: Workspace, thread_id: str) -> list[tuple[dict[str, Any], str]]:
    """:func:`read_verified_events`, each envelope with its canonical line."""
    path = f"{ws.thread_dir(thread_id)}/events.jsonl"
    if not ws.exists(path):
        raise RestoreError(
            f"{path} is missing: the checkpoints cannot be checked against the record"
        )
    records: list[tuple[dict[str, Any], str]] = []
    for n, raw in enumerate(ws.read_bytes(path).splitlines(), 1):
        if not raw.strip():
            continue
        try:
            env = json.loads(raw)
        except ValueError as exc:
            raise RestoreError(f"{path}: line {n} is torn or not JSON ({exc})") from exc
        if not isinstance(env, dict):
            raise RestoreError(f"{path}: line {n} is not a JSON object")
        try:
            # the whole check (gap, prev link, own hash), hashing each event once
            line = _check_link(records[-1][0] if records else None, env, raw)
        except ValueError as exc:
            raise RestoreError(f"{path}: line {n}: hash chain broken: {exc}") from exc
        except (KeyError, TypeError) as exc:
            raise RestoreError(f"{path}: line {n}: malformed event ({exc!r})") from exc
        records.append((env, line))
    if records:
        first = records[0][0]
        if first.get("kind") != "thread_deleted" and (
            first.get("seq") != 1 or first.get("prev") is not None
        ):
            raise RestoreError(f"{path}: events before seq {first.get('seq')} are missing")
    return records


def verify_thread(
    ws: Workspace, thread_id: str, *, cipher: WorkspaceCipher | None = None
) -> dict[str, CheckpointLog]:
    """Check everything a restore of ``thread_id`` would read; write nothing.

    (a) every exact value (inline or blob file) matches its address, computed with the
    checkpointer's digest (sha256, or the keyed address of ``cipher``); (b) the thread's
    ``events.jsonl`` hash chain verifies, and every checkpoint and write line is the
    event of that chain it claims to be; (c) every line of the checkpoint logs is
    complete JSON.

    Returns:
        The parsed logs, namespace -> :class:`CheckpointLog` (empty: nothing to restore).

    Raises:
        RestoreError: naming the file, line or checkpoint, and what differs.
        DecryptionError: encrypted bytes do not open with ``cipher``.

    Example:
        >>> verify_thread(Workspace("memory://lgx-doc-verify"), "t")
        {}
    """
    return _verified(ws, thread_id, cipher)[0]


def _verified(
    ws: Workspace, thread_id: str, cipher: WorkspaceCipher | None
) -> tuple[dict[str, CheckpointLog], list[tuple[dict[str, Any], str]] | None]:
    """:func:`verify_thread`, also returning the verified envelopes with their canonical
    lines (``None``: not read)."""
    logs = {
        ns: CheckpointLog(ws, thread_id, ns, cipher=cipher) for ns in _namespaces(ws, thread_id)
    }
    if not any(log.docs or log.write_lines for log in logs.values()):
        return logs, None
    records = _read_verified(ws, thread_id)
    by_seq = {env["seq"]: env for env, _ in records}
    for log in logs.values():
        try:
            log.verify(by_seq)
        except _MALFORMED as exc:  # a line of the wrong shape (hand-edited, hostile)
            raise RestoreError(f"{log.path}: a malformed line ({_describe(exc)})") from exc
    return logs, records


_MALFORMED = (KeyError, TypeError, AttributeError, ValueError, IndexError)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


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
        if ns is None:  # a hashed name: the namespace is written in its checkpoint lines
            ns = _named_namespace(ws, path, stem)
        out.append(ns)
    return sorted(out)


def _named_namespace(ws: Workspace, path: str, stem: str) -> str:
    """The namespace of a log whose file name is a hash (a namespace too long to spell)."""
    for line in ws.read_bytes(path).splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        ns = doc.get("checkpoint_ns") if isinstance(doc, dict) else None
        if isinstance(ns, str) and ns and encode_ns(ns) == stem:
            return ns
    raise RestoreError(f"{path}: no checkpoint line names the namespace this log is for")


def iter_checkpoint_ids(ws: Workspace, thread_id: str) -> Iterator[tuple[str, str]]:
    """Yield ``(checkpoint_ns, checkpoint_id)`` of every mirrored checkpoint, oldest first."""
    found: list[tuple[str, str]] = []
    for ns in _namespaces(ws, thread_id):
        found.extend((ns, cid) for cid in CheckpointLog(ws, thread_id, ns).docs)
    # checkpoint ids are time-ordered (uuid6), so sorting by id is oldest first
    yield from sorted(found, key=lambda t: (t[1], t[0]))


def has_checkpoints(ws: Workspace, thread_id: str) -> bool:
    """Whether the workspace mirrors any checkpoint of ``thread_id`` (reads up to the first).

    Example:
        >>> has_checkpoints(Workspace("memory://lgx-doc-has"), "t")
        False
    """
    for ns in _namespaces(ws, thread_id):
        path = ws.checkpoint_log_path(thread_id, ns)
        for raw in ws.read_bytes(path).splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a torn line: verifying names it
            if isinstance(line, dict) and line.get("record") == "checkpoint":
                return True
    return False


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

    Without ``log`` the whole thread is verified first (:func:`verify_thread`); a ``log``
    passed in is trusted to come from it. Every value read is checked against its address
    either way.

    Raises:
        RestoreError: the checkpoint or some of its bytes are not in the workspace, were
            altered, or a channel was never mirrored (a thread recorded from the middle).

    Example:
        >>> try:
        ...     load_checkpoint(Workspace("memory://lgx-doc-load"), "t", "", "c-1")
        ... except RestoreError as exc:
        ...     print(str(exc)[:35])
        checkpoint c-1 of thread 't' (names
    """
    serde = serde or JsonPlusSerializer()
    if log is None:
        logs = verify_thread(ws, thread_id, cipher=cipher)
        log = logs.get(checkpoint_ns) or CheckpointLog(ws, thread_id, checkpoint_ns, cipher=cipher)
    return _build_tuple(log, checkpoint_id, serde)


def _build_tuple(
    log: CheckpointLog, checkpoint_id: str, serde: SerializerProtocol
) -> CheckpointTuple:
    thread_id, checkpoint_ns = log.thread_id, log.checkpoint_ns
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


@dataclass(frozen=True)
class RestoredThread:
    """What :func:`restore_thread` put into the saver.

    Attributes:
        checkpoints: how many checkpoints were restored.
        last_checkpoint_id: id of the newest restored root checkpoint (``None``: none).
    """

    checkpoints: int
    last_checkpoint_id: str | None


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

    Verifies first and writes nothing unless everything checks out
    (:func:`verify_thread`: values against their addresses, the ``events.jsonl`` hash
    chain, complete lines); then decodes every checkpoint, and only then writes, parents
    before children. Returns the number of checkpoints restored.

    Raises:
        RestoreError: the workspace copy is incomplete or altered (nothing was written).

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> restore_thread(Workspace("memory://lgx-doc-empty"), "t", InMemorySaver())
        0
    """
    return restore_thread_report(
        ws, thread_id, saver, target_thread_id=target_thread_id, serde=serde, cipher=cipher
    ).checkpoints


def restore_thread_report(
    ws: Workspace,
    thread_id: str,
    saver: BaseCheckpointSaver[Any],
    *,
    target_thread_id: str | None = None,
    serde: SerializerProtocol | None = None,
    cipher: WorkspaceCipher | None = None,
) -> RestoredThread:
    """:func:`restore_thread`, returning the count and the last restored checkpoint id.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> restore_thread_report(Workspace("memory://lgx-doc-none"), "t", InMemorySaver())
        RestoredThread(checkpoints=0, last_checkpoint_id=None)
    """
    serde = serde or saver.serde
    logs = verify_thread(ws, thread_id, cipher=cipher)
    plan = _decode_all(ws, thread_id, logs, serde)
    return _put_all_atomic(plan, saver, target_thread_id or thread_id)


_Plan = list[tuple[str, CheckpointTuple, dict[tuple[str, str], list[tuple[int, str, Any]]]]]


def _decode_all(
    ws: Workspace, thread_id: str, logs: dict[str, CheckpointLog], serde: SerializerProtocol
) -> _Plan:
    """Every checkpoint and its writes, decoded: done before the first write, so a value
    the serializer cannot read does not leave half a thread in the saver either."""
    plan: _Plan = []
    found = [(ns, cid) for ns, log in logs.items() for cid in log.docs]
    # checkpoint ids are time-ordered (uuid6): parents before children
    for ns, cid in sorted(found, key=lambda t: (t[1], t[0])):
        log = logs[ns]
        try:
            tup = _build_tuple(log, cid, serde)
            by_task: dict[tuple[str, str], list[tuple[int, str, Any]]] = {}
            for w in log.pending_writes(cid):
                value = serde.loads_typed((w["type"], log.bytes_of(w)))
                key = (w["task_id"], w.get("task_path") or "")
                by_task.setdefault(key, []).append((int(w["idx"]), w["channel"], value))
        except RestoreError:
            raise
        except Exception as exc:  # the serializer refuses bytes, or a line's shape is off
            raise RestoreError(
                f"{log.path}: checkpoint {cid} cannot be decoded ({_describe(exc)}); "
                "nothing was restored"
            ) from exc
        plan.append((ns, tup, by_task))
    return plan


def _put_args(
    ns: str, tup: CheckpointTuple, target: str
) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, dict[str, Any]]:
    """The ``put`` arguments that store ``tup`` as a checkpoint of ``target``."""
    conf: dict[str, Any] = {"thread_id": target, "checkpoint_ns": ns}
    if tup.parent_config:
        conf["checkpoint_id"] = tup.parent_config["configurable"]["checkpoint_id"]
    checkpoint = tup.checkpoint
    return {"configurable": conf}, checkpoint, tup.metadata, dict(checkpoint["channel_versions"])


_SPECIAL_WRITES = frozenset(WRITES_IDX_MAP)


def _writes_args(
    by_task: dict[tuple[str, str], list[tuple[int, str, Any]]],
) -> Iterator[tuple[str, str, list[tuple[str, Any]]]]:
    """The ``put_writes`` calls (task id, task path, writes) that store a checkpoint's writes.

    A task's special writes (error, interrupt, resume, scheduled: stored under fixed
    negative indexes) and its ordinary writes (stored under their position) go in separate
    calls, as LangGraph makes them, so both keep the index they were recorded with.
    """
    for (task_id, task_path), writes in by_task.items():
        ordered = sorted(writes, key=lambda w: w[0])
        for special in (True, False):
            group = [(ch, v) for _, ch, v in ordered if (ch in _SPECIAL_WRITES) is special]
            if group:
                yield task_id, task_path, group


def _stored_config(ns: str, checkpoint_id: str, target: str) -> RunnableConfig:
    return {
        "configurable": {"thread_id": target, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
    }


def _last_root(plan: _Plan) -> str | None:
    roots = [tup.checkpoint["id"] for ns, tup, _ in plan if ns == ""]
    return roots[-1] if roots else None


def _put_all(plan: _Plan, saver: BaseCheckpointSaver[Any], target: str) -> RestoredThread:
    """Write a decoded thread into ``saver`` with its own ``put``/``put_writes``, parents first."""
    for ns, tup, by_task in plan:
        stored = saver.put(*_put_args(ns, tup, target))
        for task_id, task_path, writes in _writes_args(by_task):
            saver.put_writes(stored, writes, task_id, task_path)
    return RestoredThread(len(plan), _last_root(plan))


def _bulk_rows(plan: _Plan, serde: SerializerProtocol, target: str) -> dict[str, list[Any]]:
    """The official Postgres saver's rows for the whole thread (what its puts would write)."""
    rows: dict[str, list[Any]] = {
        "blobs": [],
        "checkpoints": [],
        "writes_insert": [],
        "writes_upsert": [],
    }
    for ns, tup, by_task in plan:
        blobs, row = _compat.saver_put_rows(serde, *_put_args(ns, tup, target))
        rows["blobs"].extend(blobs)
        rows["checkpoints"].append(row)
        stored = _stored_config(ns, tup.checkpoint["id"], target)
        for task_id, task_path, writes in _writes_args(by_task):
            upsert, wrows = _compat.saver_write_rows(serde, stored, writes, task_id, task_path)
            rows["writes_upsert" if upsert else "writes_insert"].extend(wrows)
    return rows


def _put_all_atomic(plan: _Plan, saver: BaseCheckpointSaver[Any], target: str) -> RestoredThread:
    """:func:`_put_all`, in bulk and in one transaction into the official sync Postgres saver.

    Into the official ``PostgresSaver``: the rows its ``put``/``put_writes`` would write
    (``_compat.saver_put_rows``), all shaped before the first write, then one
    ``executemany`` per table in one transaction — all or nothing, a few round trips
    instead of two per checkpoint (``benchmarks/bench_cli.py``). Other savers (SQLite,
    in-memory, the async Postgres saver, custom ones) get their own puts one by one.
    """
    from langgraph_external.upstream import saver_ops as pg

    if not pg.is_postgres_saver(saver) or pg.is_async_postgres_saver(saver):
        return _put_all(plan, saver, target)
    try:
        rows = _bulk_rows(plan, saver.serde, target)
    except Exception as exc:  # the saver's serializer refuses a value
        raise RestoreError(
            f"a checkpoint of thread {target!r} cannot be serialized for the saver "
            f"({_describe(exc)}); nothing was restored"
        ) from exc
    pg.bulk_insert(saver, rows)
    return RestoredThread(len(plan), _last_root(plan))


def restore_recorded(
    ext: External, thread_id: str, *, target_thread_id: str | None = None
) -> RestoredThread:
    """Restore a thread from ``ext``'s workspace into its saver, and record that it was.

    Verifies first (:func:`verify_thread`; nothing is written on a mismatch), then:

    * **same id** (after a database loss): the workspace already holds the thread's
      record. A ledger that lost the thread gets the verified ``events.jsonl`` back as it
      was (same ``seq`` and hashes); a ledger that still has it must end where the
      workspace ends. The checkpoints go into the wrapped saver unrecorded (the record
      has them already).
    * **new id** (``target_thread_id``): the checkpoints go through the recording
      checkpointer, so the new thread gets its own checkpoint events and workspace files.

    Either way a ``thread_restored`` event closes the restore (payload: source thread,
    workspace, checkpoints restored, last checkpoint id), so ``lgx show`` and
    ``lgx verify`` see the thread. Call it on a set-up :class:`External`.

    Raises:
        RestoreError: the copy does not verify, the target already has checkpoints or
            (new id) a record, or the ledger holds a different record of the thread.

    Example:
        >>> with External(workspace="./agent_workspace") as ext:  # doctest: +SKIP
        ...     restore_recorded(ext, "thread-42")
        RestoredThread(checkpoints=12, last_checkpoint_id='1f1e...')
    """
    ws, pipeline, recording = ext.workspace, ext.pipeline, ext.checkpointer
    assert pipeline is not None
    if ws is None:
        raise RestoreError("restore reads the workspace; this External has none (pass one)")
    target = target_thread_id or thread_id
    if recording.get_tuple({"configurable": {"thread_id": target}}) is not None:
        raise RestoreError(f"thread {target!r} already has checkpoints in the saver")
    # every check and every decode before the first write (ledger or saver)
    logs, verified = _verified(ws, thread_id, ext.cipher)
    plan = _decode_all(ws, thread_id, logs, recording.serde)
    ledger = pipeline.ledger
    held = ledger.positions([target]).get(target)
    if target == thread_id:
        records = verified if verified is not None else _read_verified(ws, thread_id)
        envelopes = [env for env, _ in records]
        if held is None and envelopes:
            # the verified record goes back as it was: same seq, same hashes (with their
            # canonical lines, so the ledger stores a run of them in one statement)
            keys = Event.new("error", target).envelope().keys()
            ledger.append(
                [
                    Event.from_envelope(env, line=ln if env.keys() == keys else None)
                    for env, ln in records
                ]
            )
        elif envelopes and held != (envelopes[-1]["seq"], envelopes[-1]["hash"]):
            raise RestoreError(
                f"the ledger's record of thread {target!r} ends at seq {held[0] if held else 0}"
                f", the workspace's at seq {envelopes[-1]['seq']}: they are different "
                "records; restore under another id"
            )
        # the record has these checkpoints already: write them past the recorder
        result = _put_all_atomic(plan, recording.inner, target)
    else:
        if held is not None or ws.exists(f"{ws.thread_dir(target)}/events.jsonl"):
            raise RestoreError(f"thread {target!r} is already recorded; pick an unused id")
        result = _put_all(plan, recording, target)
    pipeline.emit(
        Event.new(
            EventKind.THREAD_RESTORED,
            target,
            name="restore",
            checkpoint_id=result.last_checkpoint_id,
            payload={
                "source_thread_id": thread_id,
                "workspace": ws.location,
                "checkpoints": result.checkpoints,
                "last_checkpoint_id": result.last_checkpoint_id,
            },
        )
    )
    if not ext.flush():
        raise RestoreError(
            f"thread {target!r} was restored, but its thread_restored event is not recorded "
            "yet (see External.health())"
        )
    return result
