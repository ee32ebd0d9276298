"""The workspace's exact copies of a thread's checkpoints, read and verified.

The workspace keeps, per thread and namespace, an append-only checkpoint log
(``checkpoints/<ns>.jsonl``): one line per checkpoint naming, for every channel, the
version it had and where its exact serde bytes are (inline base64 in the line of the
checkpoint that stored them, or a content-addressed blob file), plus one line per
pending write. :class:`CheckpointLog` parses one log; :func:`verify_thread` checks a whole
thread — every value against its address, the ``events.jsonl`` hash chain, every line
against the chained event it mirrors — before anything is decoded
(:mod:`langgraph_external.ops.decode`) or restored (:mod:`langgraph_external.ops.restore`).

Example:
    >>> from langgraph_external.workspace.files import Workspace
    >>> ws = Workspace("memory://lgx-restore-doc")
    >>> list(iter_checkpoint_ids(ws, "no-such-thread")), has_checkpoints(ws, "no-such-thread")
    ([], False)
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from langgraph_external.errors import RestoreError
from langgraph_external.record.crypto import DecryptionError, WorkspaceCipher
from langgraph_external.record.events import hashed_line
from langgraph_external.record.keys import existing_key
from langgraph_external.record.locations import decode_ns, sha256_hex
from langgraph_external.workspace.files import Workspace, encode_ns
from langgraph_external.workspace.lines import BadLine, events_path, read_lines

__all__ = [
    "CheckpointLog",
    "describe_error",
    "has_checkpoints",
    "iter_checkpoint_ids",
    "read_verified_events",
    "read_verified_records",
    "verify_thread",
    "verify_thread_records",
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
        self.cipher = cipher if cipher is not None else existing_key()
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
        try:
            for n, _, line in read_lines(ws, path):
                self._add(n, line)
        except BadLine as bad:
            raise _bad_line(path, bad, "; nothing was restored") from bad

    def _add(self, n: int, line: dict[str, Any]) -> None:
        kind, cid = line.get("record"), cast(str, line.get("checkpoint_id"))
        if kind in ("checkpoint", "write", "writer") and not isinstance(cid, str):
            raise RestoreError(f"{self.path}: line {n} has no checkpoint id (a {kind} line)")
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
            writers = doc.get("writers", [])
            known = {w.get("task_id") for w in writers}
            doc["writers"] = [*writers, *(w for w in late if w["task_id"] not in known)]
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
        sealed = ref.get("enc") is not None
        # one check per copy: the same place holds the same bytes for every reference
        # (unchanged channels refer back to the checkpoint that stored them)
        kind = "b64" if ref.get("b64") is not None else "inline" if ref.get("inline") else "file"
        key = (kind, {"b64": id(ref), "inline": ref.get("in")}.get(kind), sha, sealed)
        if key in self._checked:
            return self._checked[key]
        try:
            if kind == "b64":
                source = f"{self.path}: {where or 'write line'} inline bytes"
                data = base64.b64decode(ref["b64"], validate=True)
            elif kind == "inline":
                holder_id = ref["in"]
                source = (
                    f"{self.path}: line {self.line_of.get(holder_id, '?')} "
                    f"(checkpoint {holder_id}) inline bytes"
                )
                holder = self.docs[holder_id]
                data = base64.b64decode(holder["blobs"][sha], validate=True)
                sealed = sealed or holder.get("enc") is not None
            else:
                source = self.ws.blob_path(self.thread_id, sha)
                data = self.ws.read_bytes(source)
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


def _bad_line(path: str, bad: BadLine, after: str = "") -> RestoreError:
    if bad.error is None:
        return RestoreError(f"{path}: line {bad.lineno} is not a JSON object")
    return RestoreError(f"{path}: line {bad.lineno} is torn or not JSON ({bad.error}){after}")


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
    """:func:`verify_chain` of ``[prev, env]`` where ``prev`` was checked already; returns
    the canonical line of ``env`` (what the ledger stores), computed while hashing."""
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
    return [env for env, _ in read_verified_records(ws, thread_id)]


def read_verified_records(ws: Workspace, thread_id: str) -> list[tuple[dict[str, Any], str]]:
    """:func:`read_verified_events`, each envelope with its canonical line."""
    path = events_path(ws, thread_id)
    if not ws.exists(path):
        raise RestoreError(
            f"{path} is missing: the checkpoints cannot be checked against the record"
        )
    records: list[tuple[dict[str, Any], str]] = []
    try:
        for n, raw, env in read_lines(ws, path):
            try:
                # the whole check (gap, prev link, own hash), hashing each event once
                line = _check_link(records[-1][0] if records else None, env, raw)
            except ValueError as exc:
                raise RestoreError(f"{path}: line {n}: hash chain broken: {exc}") from exc
            except (KeyError, TypeError) as exc:
                raise RestoreError(f"{path}: line {n}: malformed event ({exc!r})") from exc
            records.append((env, line))
    except BadLine as bad:
        raise _bad_line(path, bad) from bad
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
    return verify_thread_records(ws, thread_id, cipher)[0]


def verify_thread_records(
    ws: Workspace, thread_id: str, cipher: WorkspaceCipher | None
) -> tuple[dict[str, CheckpointLog], list[tuple[dict[str, Any], str]] | None]:
    """:func:`verify_thread`, also returning the verified envelopes with their canonical
    lines (``None``: not read)."""
    logs = {
        ns: CheckpointLog(ws, thread_id, ns, cipher=cipher) for ns in _namespaces(ws, thread_id)
    }
    if not any(log.docs or log.write_lines for log in logs.values()):
        return logs, None
    records = read_verified_records(ws, thread_id)
    by_seq = {env["seq"]: env for env, _ in records}
    for log in logs.values():
        try:
            log.verify(by_seq)
        except _MALFORMED as exc:  # a line of the wrong shape (hand-edited, hostile)
            raise RestoreError(f"{log.path}: a malformed line ({describe_error(exc)})") from exc
    return logs, records


_MALFORMED = (KeyError, TypeError, AttributeError, ValueError, IndexError)


def describe_error(exc: BaseException) -> str:
    """An error as one short phrase for a :class:`RestoreError` message.

    Example:
        >>> describe_error(KeyError("seq"))
        "KeyError: 'seq'"
    """
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
        ns = decode_ns(stem)
        if ns is None:  # a hashed name: the namespace is written in its checkpoint lines
            ns = _named_namespace(ws, path, stem)
        out.append(ns)
    return sorted(out)


def _named_namespace(ws: Workspace, path: str, stem: str) -> str:
    """The namespace of a log whose file name is a hash (a namespace too long to spell)."""
    for _, _, doc in read_lines(ws, path, skip_bad=True):
        ns = doc.get("checkpoint_ns")
        if isinstance(ns, str) and ns and stem in (encode_ns(ns), encode_ns(ns, legacy=True)):
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
    return any(  # a torn line is skipped here: verifying names it
        line.get("record") == "checkpoint"
        for ns in _namespaces(ws, thread_id)
        for _, _, line in read_lines(ws, ws.checkpoint_log_path(thread_id, ns), skip_bad=True)
    )
