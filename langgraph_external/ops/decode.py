"""Decode a verified thread's checkpoints, and put them into a saver.

:func:`decode_all` turns every checkpoint of a thread (with its pending writes) into
values before anything is written, so a value the serializer cannot read leaves nothing
half-written; :func:`put_all` writes them with the saver's own ``put``/``put_writes``,
parents first, and :func:`put_all_atomic` writes them into the official sync Postgres
saver in bulk, in one transaction. :func:`load_checkpoint` rebuilds one checkpoint.

Example:
    >>> from langgraph_external.workspace.files import Workspace
    >>> decode_all(Workspace("memory://lgx-doc-decode"), "t", {}, JsonPlusSerializer())
    []
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, cast

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

from langgraph_external.errors import RestoreError
from langgraph_external.ops.exact import SPLICEABLE_TYPES, RawValue, exact_serde
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.escapes import unmark
from langgraph_external.upstream import langgraph as _compat
from langgraph_external.upstream import saver_ops
from langgraph_external.workspace.checkpoint_log import CheckpointLog, describe_error, verify_thread
from langgraph_external.workspace.files import Workspace

__all__ = [
    "RestorePlan",
    "RestoredThread",
    "build_tuple",
    "decode_all",
    "load_checkpoint",
    "put_all",
    "put_all_atomic",
]


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
    return build_tuple(log, checkpoint_id, serde)


def _value(log: CheckpointLog, ref: dict[str, Any], serde: SerializerProtocol, raw: bool) -> Any:
    """The value ``ref`` names: decoded, or (``raw``) its exact bytes as a :class:`RawValue`."""
    data = log.bytes_of(ref)
    if raw and ref["type"] in SPLICEABLE_TYPES:
        return RawValue(ref["type"], data)
    return serde.loads_typed((ref["type"], data))


def build_tuple(
    log: CheckpointLog, checkpoint_id: str, serde: SerializerProtocol, *, raw: bool = False
) -> CheckpointTuple:
    """One checkpoint of ``log`` as a saver returns it; ``raw``: values as exact bytes."""
    thread_id, checkpoint_ns = log.thread_id, log.checkpoint_ns
    doc = log.doc(checkpoint_id)
    values: dict[str, Any] = {}
    for ch, ref in doc["channels"].items():
        if ref.get("type") == "empty":
            continue
        if ref.get("sha256") is None:
            raise RestoreError(f"channel {ch!r} of checkpoint {checkpoint_id} was never mirrored")
        values[ch] = _value(log, ref, serde, raw)
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
        (w["task_id"], w["channel"], _value(log, w, serde, raw))
        for w in log.pending_writes(checkpoint_id)
    ]
    return CheckpointTuple(
        config=config,
        checkpoint=checkpoint,
        # text the record had to escape (a NUL, a lone surrogate) comes back as it was
        metadata=cast(CheckpointMetadata, unmark(doc.get("metadata") or {})),
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


RestorePlan = list[tuple[str, CheckpointTuple, dict[tuple[str, str], list[tuple[int, str, Any]]]]]


def decode_all(
    ws: Workspace,
    thread_id: str,
    logs: dict[str, CheckpointLog],
    serde: SerializerProtocol,
    *,
    raw: bool = False,
) -> RestorePlan:
    """Every checkpoint and its writes, decoded: done before the first write, so a value
    the serializer cannot read does not leave half a thread in the saver either.

    With ``raw`` (a saver that stores the serializer's bytes: :mod:`~langgraph_external.
    ops.exact`) the plan carries every value as its exact bytes; what is decoded before
    the first write is then every pending write and the newest checkpoint of each
    namespace (a thread's values are built from its writes: a type the serializer cannot
    read shows there), so the cost grows with the thread, not with its square."""
    plan: RestorePlan = []
    found = [(ns, cid) for ns, log in logs.items() for cid in log.docs]
    newest = {ns: max(log.docs) for ns, log in logs.items() if log.docs}
    # checkpoint ids are time-ordered (uuid6): parents before children
    for ns, cid in sorted(found, key=lambda t: (t[1], t[0])):
        log = logs[ns]
        try:
            if raw and newest.get(ns) == cid:
                build_tuple(log, cid, serde)  # decodes: the check
            tup = build_tuple(log, cid, serde, raw=raw)
            by_task: dict[tuple[str, str], list[tuple[int, str, Any]]] = {}
            for w in log.pending_writes(cid):
                value = serde.loads_typed((w["type"], log.bytes_of(w)))
                if raw and w["type"] in SPLICEABLE_TYPES:
                    value = RawValue(w["type"], log.bytes_of(w))
                key = (w["task_id"], w.get("task_path") or "")
                by_task.setdefault(key, []).append((int(w["idx"]), w["channel"], value))
        except RestoreError:
            raise
        except Exception as exc:  # the serializer refuses bytes, or a line's shape is off
            raise RestoreError(
                f"{log.path}: checkpoint {cid} cannot be decoded ({describe_error(exc)}); "
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

    A task's special writes (fixed negative indexes) and ordinary ones (their position) go
    in separate calls, as LangGraph makes them, so both keep their recorded index."""
    for (task_id, task_path), writes in by_task.items():
        ordered = sorted(writes, key=lambda w: w[0])
        for special in (True, False):
            group = [(ch, v) for _, ch, v in ordered if (ch in _SPECIAL_WRITES) is special]
            if group:
                yield task_id, task_path, group


def _last_root(plan: RestorePlan) -> str | None:
    return next((tup.checkpoint["id"] for ns, tup, _ in reversed(plan) if ns == ""), None)


def put_all(
    plan: RestorePlan, saver: BaseCheckpointSaver[Any], target: str, *, raw: bool = False
) -> RestoredThread:
    """Write a decoded thread into ``saver`` with its own ``put``/``put_writes``, parents
    first (``raw``: a plan of exact bytes, written through :func:`~langgraph_external.ops.
    exact.exact_serde`). Into ``SqliteSaver`` the whole thread is one transaction."""
    with exact_serde(saver) if raw else nullcontext(), _compat.sqlite_one_transaction(saver):
        for ns, tup, by_task in plan:
            stored = saver.put(*_put_args(ns, tup, target))
            for task_id, task_path, writes in _writes_args(by_task):
                saver.put_writes(stored, writes, task_id, task_path)
    return RestoredThread(len(plan), _last_root(plan))


def _bulk_rows(plan: RestorePlan, serde: SerializerProtocol, target: str) -> dict[str, list[Any]]:
    """The official Postgres saver's rows for the whole thread (what its puts would write)."""
    rows: dict[str, list[Any]] = {
        k: [] for k in ("blobs", "checkpoints", "writes_insert", "writes_upsert")
    }
    for ns, tup, by_task in plan:
        blobs, row = _compat.saver_put_rows(serde, *_put_args(ns, tup, target))
        rows["blobs"].extend(blobs)
        rows["checkpoints"].append(row)
        conf = {"thread_id": target, "checkpoint_ns": ns, "checkpoint_id": tup.checkpoint["id"]}
        stored: RunnableConfig = {"configurable": conf}
        for task_id, task_path, writes in _writes_args(by_task):
            upsert, wrows = _compat.saver_write_rows(serde, stored, writes, task_id, task_path)
            rows["writes_upsert" if upsert else "writes_insert"].extend(wrows)
    return rows


def put_all_atomic(
    plan: RestorePlan, saver: BaseCheckpointSaver[Any], target: str, *, raw: bool = False
) -> RestoredThread:
    """:func:`put_all`, in bulk and in one transaction into the official sync Postgres saver.

    Into the official ``PostgresSaver``: the rows its ``put``/``put_writes`` would write
    (``_compat.saver_put_rows``), all shaped before the first write, then one
    ``executemany`` per table in one transaction — all or nothing, a few round trips
    instead of two per checkpoint (``benchmarks/bench_cli.py``). Other savers (SQLite,
    in-memory, the async Postgres saver, custom ones) get their own puts one by one.
    """
    if not _compat.is_postgres_saver(saver) or _compat.is_async_postgres_saver(saver):
        return put_all(plan, saver, target, raw=raw)
    try:
        rows = _bulk_rows(plan, saver.serde, target)
    except Exception as exc:  # the saver's serializer refuses a value
        raise RestoreError(
            f"a checkpoint of thread {target!r} cannot be serialized for the saver "
            f"({describe_error(exc)}); nothing was restored"
        ) from exc
    saver_ops.bulk_insert(saver, rows)
    return RestoredThread(len(plan), _last_root(plan))
