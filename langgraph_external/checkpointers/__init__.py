"""``ExternalCheckpointer``: a drop-in saver that records every checkpoint it stores.

It wraps any :class:`~langgraph.checkpoint.base.BaseCheckpointSaver` (the official
Postgres saver, ``InMemorySaver``, ``SqliteSaver``, ...). Reads and versioning are the
wrapped saver's; every ``put``/``put_writes`` is first committed by the wrapped saver,
then mirrored (exact serde bytes, metadata, parent, which task wrote what) as
``checkpoint``/``writes`` events through the pipeline into the workspace and ledger.

Optional capabilities are offered exactly when they work: ``prune`` when the wrapped
saver has it, ``copy_thread`` and ``delete_for_runs`` when it has them or stores in the
official Postgres tables (implemented here in SQL).

Example:
    >>> import tempfile
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> with ExternalCheckpointer(InMemorySaver(), workspace=tempfile.mkdtemp()) as saver:
    ...     sorted(saver.capabilities)
    []

    With the ledger too: ``ExternalCheckpointer(PostgresSaver(pool), workspace="./ws",
    dsn="postgresql://...")``; or let :class:`~langgraph_external.External` build it all.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextvars
import inspect
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external import _compat
from langgraph_external.checkpointers import _postgres_ops as pg
from langgraph_external.crypto import ALGORITHM
from langgraph_external.errors import (
    ConfigurationError,
    InvalidCheckpointIdError,
    InvalidFilterError,
    PositionMovedError,
    RecordingError,
    SerializationError,
)
from langgraph_external.events import Event, EventKind
from langgraph_external.ledger import DEFAULT_SCHEMA, POSITION_MOVED
from langgraph_external.pipeline import Pipeline
from langgraph_external.render import to_readable
from langgraph_external.thread_ids import check_thread_id
from langgraph_external.workspace import Workspace, encode_ns, encode_thread_id, sha256_hex

__all__ = ["ExternalCheckpointer"]

_PULL = _compat.TASK_PATH_PULL
_PUSH = _compat.TASK_PATH_PUSH
_LRU = 2048
_PER_THREAD = 32  # checkpoints of one (thread, namespace) the caches above keep
_COMMIT_ATTEMPTS = 50


class _Capture:
    """What the wrapped saver serialized during one call, by object identity."""

    __slots__ = ("failed", "seen")

    def __init__(self) -> None:
        self.seen: dict[int, tuple[Any, tuple[str, bytes]]] = {}
        self.failed: BaseException | None = None

    def get(self, value: Any) -> tuple[str, bytes] | None:
        hit = self.seen.get(id(value))
        return hit[1] if hit is not None and hit[0] is value else None


_CAPTURE: contextvars.ContextVar[_Capture | None] = contextvars.ContextVar(
    "lgx_serde_capture", default=None
)


class _TapSerde:
    """Transparent serializer wrapper that lets the recorder reuse the saver's bytes.

    The mirror must hold exactly what the saver stored. A value can change between two
    serializations (``add_messages`` assigns message ids in place while a saver with
    ``durability="async"`` is still writing), so instead of serializing again the
    recorder keeps the bytes the saver produced. Serializing once is also cheaper.
    """

    def __init__(self, inner: SerializerProtocol) -> None:
        self.inner = inner

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        cap = _CAPTURE.get()
        try:
            out = self.inner.dumps_typed(obj)
        except BaseException as exc:
            if cap is not None:
                cap.failed = exc
            raise
        if cap is not None:
            cap.seen[id(obj)] = (obj, out)
        return out

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _untapped(serde: SerializerProtocol) -> SerializerProtocol:
    return serde.inner if isinstance(serde, _TapSerde) else serde


def _overrides(saver: BaseCheckpointSaver[Any], method: str) -> bool:
    impl = getattr(type(saver), method, None)
    return impl is not None and impl is not getattr(BaseCheckpointSaver, method, None)


INLINE_MAX = 16 * 1024
"""Serialized values up to this size live inside the checkpoint's JSON file (base64);
larger ones are content-addressed files under ``checkpoints/blobs/``."""


class _Blobs:
    """Collects the exact bytes of one event: small ones inline, large ones as files."""

    __slots__ = ("digest", "enc", "files", "inline", "saver", "seal", "size")

    def __init__(
        self,
        digest: Callable[[bytes], str] = sha256_hex,
        seal: Callable[[bytes, bytes], bytes] | None = None,
    ) -> None:
        self.digest = digest
        self.seal = seal  # encrypts the exact bytes (address as associated data)
        self.enc = ALGORITHM if seal is not None else None
        self.inline: dict[str, str] = {}
        self.files: dict[str, bytes] = {}
        self.saver: dict[str, list[str]] = {}  # address -> [channel, version] in the saver
        self.size = 0

    def add(
        self, data: bytes, checkpoint_id: str | None, saver_row: list[str] | None = None
    ) -> dict[str, Any]:
        """Reference ``data``: inline when small, else a blob file; a large value the
        saver stores in this transaction (``saver_row``) is not copied into the ledger."""
        digest = self.digest(data)
        size = len(data)
        self.size += size
        ref: dict[str, Any] = {"sha256": digest, "size": size}
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


def _shared_seen(
    seen: Mapping[str, Mapping[str, Any]], before: Mapping[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """A copy of ``versions_seen`` sharing the parent's entries that did not change
    (most nodes' at every step): a long thread's remembered checkpoints stay small."""
    out = {}
    for node, versions in seen.items():
        kept = before.get(node) if before else None
        out[node] = kept if kept is not None and kept == versions else dict(versions)
    return out


class _Lru(OrderedDict[Any, Any]):
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
            group = self._groups.get(key[:2])
            if group is None:
                group = self._groups[key[:2]] = OrderedDict()
            self._groups.move_to_end(key[:2])
            group[key] = None
            group.move_to_end(key)
            while len(group) > self._per_group:
                self.pop(group.popitem(last=False)[0], None)
            while len(self._groups) > _LRU:
                self._groups.popitem(last=False)
        while len(self) > _LRU:
            self.popitem(last=False)


class ExternalCheckpointer(BaseCheckpointSaver[Any]):
    """Wrap ``inner`` so every checkpoint and write it stores is recorded.

    Args:
        inner: the saver that stores and serves checkpoints.
        pipeline: where events go (``External`` builds one). Without it, one is built
            from ``workspace`` (required then) and ``dsn`` (optional ledger) and closed
            by :meth:`close`.
        workspace: local path, fsspec URL or :class:`Workspace` for the mirror.
        dsn: Postgres DSN of the ledger (schema ``schema``, created if missing).
        strict: raise into the app when recording fails.
        spool_dir: where failed batches wait for replay.
        reject_nul: refuse thread ids containing NUL (PostgreSQL text cannot hold it).
        digest: content-address function for exact bytes (default: the keyed address of
            the pipeline's deployment key, see :mod:`langgraph_external.keys`; sha256
            only for a pipeline without a key).
        key: the deployment key of the pipeline built here (default: ``$LGX_KEY`` or
            the key file, created on first use).
        encrypt: encrypt the exact copies with the key (AES-256-GCM) when building the
            pipeline here.

    The instance's class is a subclass of ``ExternalCheckpointer`` that carries
    exactly the optional methods that work for ``inner`` (see :attr:`capabilities`).
    """

    capabilities: ClassVar[frozenset[str]] = frozenset()

    def __new__(cls, inner: BaseCheckpointSaver[Any], *args: Any, **kwargs: Any) -> Any:
        caps = _capabilities_of(inner)
        return super().__new__(_class_for(cls, caps))

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        *,
        pipeline: Pipeline | None = None,
        workspace: str | os.PathLike[str] | Workspace | None = None,
        dsn: str | None = None,
        schema: str = DEFAULT_SCHEMA,
        strict: bool = False,
        spool_dir: str | os.PathLike[str] | None = None,
        reject_nul: bool = True,
        digest: Callable[[bytes], str] | None = None,
        redaction: str = "standard",
        outbox: bool | None = None,
        saver_blob_refs: bool = False,
        key: str | bytes | None = None,
        encrypt: bool = True,
    ) -> None:
        if not isinstance(inner, BaseCheckpointSaver):
            raise TypeError(f"inner must be a BaseCheckpointSaver, got {type(inner).__name__}")
        # no super().__init__: serde is the inner saver's (see the property below)
        if not isinstance(inner.serde, _TapSerde):
            inner.serde = _TapSerde(inner.serde)
        self._recording = None
        if pipeline is None:
            if workspace is None:
                raise ConfigurationError("pass pipeline=... or workspace=... (and dsn=...)")
            from langgraph_external.assembly import assemble

            self._recording = assemble(
                workspace=workspace,
                dsn=dsn,
                schema=schema,
                redaction=redaction,
                strict=strict,
                spool_dir=spool_dir,
                serde=_untapped(inner.serde),
                key=key,
                encrypt=encrypt,
            )
            pipeline = self._recording.pipeline
            if outbox is None:
                outbox = _same_database(inner, self._recording.dsn)
        self.inner = inner
        self.pipeline = pipeline
        self.reject_nul = reject_nul
        cipher = getattr(pipeline, "cipher", None)
        self._digest = digest or (cipher.address if cipher is not None else sha256_hex)
        self._seal = cipher.seal if cipher is not None and pipeline.encrypt else None
        self._task_path_arg = "task_path" in inspect.signature(inner.put_writes).parameters
        self._async_native = {
            m: _overrides(inner, m)
            for m in ("aget_tuple", "alist", "aput", "aput_writes", "adelete_thread")
        }
        # None: decided on first write (the async saver can only be asked asynchronously)
        self.outbox: bool | None = outbox
        # large channel values: the ledger names the saver's row (same database, same
        # transaction) instead of holding a second copy; only for savers External built,
        # whose tables the ledger's connections see under their usual names
        self.saver_blob_refs = saver_blob_refs
        if outbox is not None:
            self.outbox = self._use_outbox(outbox)
        self._seen: _Lru = _Lru(_PER_THREAD)  # (thread, ns, checkpoint_id) -> versions_seen
        self._sends: _Lru = _Lru(_PER_THREAD)  # (thread, ns, checkpoint_id) -> Send targets
        self._refs: _Lru = _Lru(_PER_THREAD)  # (thread, ns, checkpoint_id) -> channel references
        self._threads: _Lru = _Lru()  # threads this process stored checkpoints of, lately
        # Send-task writes seen before their step's checkpoint (durability="async")
        self._unresolved: dict[tuple[str, str, str], list[Event]] = {}
        pipeline.add_flush_hook(self._drain_unresolved)
        self._book = threading.Lock()  # puts and writes may arrive from several threads

    def _use_outbox(self, wanted: bool) -> bool:
        in_tx = hasattr(self.pipeline.ledger, "execute_in")
        return wanted and in_tx and _compat.install_outbox(self.inner)

    def _decide_outbox(self) -> bool:
        if self.outbox is None:
            dsn = getattr(self.pipeline.ledger, "dsn", None)
            self.outbox = self._use_outbox(dsn is not None and _same_database(self.inner, dsn))
        return self.outbox

    async def _adecide_outbox(self) -> bool:
        if self.outbox is None:
            dsn = getattr(self.pipeline.ledger, "dsn", None)
            same = False
            if dsn is not None and _compat.is_async_postgres_saver(self.inner):
                try:
                    mine = await _compat.asaver_database_identity(self.inner)
                    same = mine == await asyncio.to_thread(_database_identity, dsn)
                except Exception:
                    same = False
            elif dsn is not None:
                same = await asyncio.to_thread(_same_database, self.inner, dsn)
            self.outbox = self._use_outbox(same)
        return self.outbox

    def close(self) -> None:
        """Flush what is recorded; close the pipeline if this checkpointer built it."""
        if self._recording is not None:
            self._recording.close()
        else:
            self.pipeline.flush()

    def __enter__(self) -> ExternalCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- delegated surface ---------------------------------------------------------------
    @property
    def serde(self) -> SerializerProtocol:
        """The wrapped saver's serializer (one serializer, never two)."""
        return self.inner.serde

    @serde.setter
    def serde(self, value: SerializerProtocol) -> None:
        self.inner.serde = value

    @property
    def config_specs(self) -> list[Any]:
        """The wrapped saver's configuration specs."""
        return list(self.inner.config_specs)

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The wrapped saver's versioning (string versions for the Postgres savers)."""
        return self.inner.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Any) -> ExternalCheckpointer:
        """Wrap the wrapped saver's allow-listed clone; share this recorder's pipeline."""
        tap = self.inner.serde
        self.inner.serde = _untapped(tap)
        try:
            inner = self.inner.with_allowlist(extra_allowlist)
        finally:
            self.inner.serde = tap
        if inner is self.inner:
            return self
        return ExternalCheckpointer(
            inner,
            pipeline=self.pipeline,
            reject_nul=self.reject_nul,
            digest=self._digest,
            outbox=self.outbox,
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Delegated to the wrapped saver (after checking the thread id)."""
        tid = self._checked_ids(config)
        return self._saw(tid, config, self.inner.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Delegated to the wrapped saver (after checking the ids it is given)."""
        for given in (config, before):
            if given is not None:
                self._checked_ids(given, thread=False)
        self._check_filter(filter)
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Delegated to the wrapped saver (in a worker thread if it is sync-only)."""
        tid = self._checked_ids(config)
        if self._async_native["aget_tuple"]:
            return self._saw(tid, config, await self.inner.aget_tuple(config))
        return self._saw(tid, config, await asyncio.to_thread(self.inner.get_tuple, config))

    def _saw(
        self, tid: str, config: RunnableConfig, tup: CheckpointTuple | None
    ) -> CheckpointTuple | None:
        """Remember what a read proves: the checkpoint's versions_seen and Sends."""
        ns = config["configurable"].get("checkpoint_ns", "") or ""
        if tup is None:
            if ns == "" and not config["configurable"].get("checkpoint_id"):
                self.pipeline.assume_new(tid)
            return tup
        cp = tup.checkpoint
        key = (tid, tup.config["configurable"].get("checkpoint_ns", "") or "", cp["id"])
        step = (tup.metadata or {}).get("step")
        self.pipeline.note_committed(tid, key[1], step if isinstance(step, int) else None, cp["id"])
        with self._book:
            self._seen.put(key, {k: dict(v) for k, v in cp["versions_seen"].items()})
            self._sends.put(key, _compat.send_targets(cp["channel_values"]))
        return tup

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Delegated to the wrapped saver (in a worker thread if it is sync-only)."""
        for given in (config, before):
            if given is not None:
                self._checked_ids(given, thread=False)
        self._check_filter(filter)
        if self._async_native["alist"]:
            async for tup in self.inner.alist(config, filter=filter, before=before, limit=limit):
                yield tup
            return
        items = await asyncio.to_thread(
            lambda: list(self.inner.list(config, filter=filter, before=before, limit=limit))
        )
        for tup in items:
            yield tup

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Delegated to the wrapped saver (its storage-aware walk)."""
        return self.inner.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Delegated to the wrapped saver."""
        if _overrides(self.inner, "aget_delta_channel_history") or self._async_native["aget_tuple"]:
            return await self.inner.aget_delta_channel_history(config=config, channels=channels)
        return await asyncio.to_thread(
            self.inner.get_delta_channel_history, config=config, channels=channels
        )

    # -- recorded writes -----------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store through the wrapped saver; the checkpoint's event commits with it.

        On the official Postgres saver the event is written in the saver's own
        transaction; on other savers it is in the write-ahead log before this returns.
        """
        tid = self._checked_ids(config)
        rec = self._prepare_put(tid, config, checkpoint, metadata, new_versions)
        if not self._decide_outbox():
            with _capturing("checkpoint") as cap:
                next_config = self.inner.put(config, checkpoint, metadata, new_versions)
            self.pipeline.emit(rec.event(cap), durable=True)
            return next_config
        for _ in range(_COMMIT_ATTEMPTS):
            commit = self.pipeline.open_commit(tid)
            with _capturing("checkpoint") as cap:
                box = _compat.Outbox(rec.run(commit, cap), rec.arun(commit, cap))
                token = _compat.OUTBOX.set(box)
                try:
                    next_config = self.inner.put(config, checkpoint, metadata, new_versions)
                except BaseException as exc:
                    moved = _position_moved(exc)
                    commit.failed(doubtful=not moved)
                    if moved:
                        continue
                    raise
                finally:
                    _compat.OUTBOX.reset(token)
            self._settle(commit, box, rec, cap)
            return next_config
        raise RecordingError(f"thread {tid!r}: its ledger position kept moving; nothing stored")

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put`."""
        tid = self._checked_ids(config)
        await self.pipeline.wait_for_room(tid)  # back-pressure without blocking the loop
        rec = self._prepare_put(tid, config, checkpoint, metadata, new_versions)
        args = (config, checkpoint, metadata, new_versions)
        if not await self._adecide_outbox():
            with _capturing("checkpoint") as cap:
                next_config = await self._inner_aput(*args)
            await asyncio.to_thread(self.pipeline.emit, rec.event(cap), durable=True)
            return next_config
        for _ in range(_COMMIT_ATTEMPTS):
            commit = self.pipeline.open_commit(tid)
            with _capturing("checkpoint") as cap:
                box = _compat.Outbox(rec.run(commit, cap), rec.arun(commit, cap))
                token = _compat.OUTBOX.set(box)
                try:
                    next_config = await self._inner_aput(*args)
                except BaseException as exc:
                    moved = _position_moved(exc)
                    commit.failed(doubtful=not moved)
                    if moved:
                        continue
                    raise
                finally:
                    _compat.OUTBOX.reset(token)
            self._settle(commit, box, rec, cap)
            return next_config
        raise RecordingError(f"thread {tid!r}: its ledger position kept moving; nothing stored")

    async def _inner_aput(self, *args: Any) -> RunnableConfig:
        if self._async_native["aput"]:
            return await self.inner.aput(*args)
        return await asyncio.to_thread(self.inner.put, *args)

    def _settle(self, commit: Any, box: _compat.Outbox, rec: _PutRecord, cap: _Capture) -> None:
        if box.ran:
            commit.done()
        else:  # the saver never opened a transaction of its own: record durably here
            commit.failed()
            self.pipeline.emit(rec.event(cap), durable=True)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store through the wrapped saver, then record which task wrote what."""
        tid = self._checked_ids(config)
        with _capturing("write") as cap:
            self.inner.put_writes(*self._writes_args(config, writes, task_id, task_path))
        self._record_writes(self._writes_event(tid, config, writes, task_id, task_path, cap))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        tid = self._checked_ids(config)
        await self.pipeline.wait_for_room()
        args = self._writes_args(config, writes, task_id, task_path)
        with _capturing("write") as cap:
            if self._async_native["aput_writes"]:
                await self.inner.aput_writes(*args)
            else:
                await asyncio.to_thread(self.inner.put_writes, *args)
        self._record_writes(self._writes_event(tid, config, writes, task_id, task_path, cap))

    def _writes_args(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, path: str
    ) -> tuple[Any, ...]:
        # the saver gets task_path only if its signature declares it (as LangGraph does)
        return (config, writes, task_id, path) if self._task_path_arg else (config, writes, task_id)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread in the saver, the ledger and the workspace; leave a tombstone."""
        tid = self._thread_id(thread_id)
        self.pipeline.flush()
        self.inner.delete_thread(thread_id)
        self._forget(tid)
        self.pipeline.emit(_tombstone(tid))
        self.pipeline.flush()

    async def adelete_thread(self, thread_id: str) -> None:
        """Async twin of :meth:`delete_thread`."""
        tid = self._thread_id(thread_id)
        await asyncio.to_thread(self.pipeline.flush)
        if self._async_native["adelete_thread"]:
            await self.inner.adelete_thread(thread_id)
        else:
            await asyncio.to_thread(self.inner.delete_thread, thread_id)
        self._forget(tid)
        self.pipeline.emit(_tombstone(tid))
        await asyncio.to_thread(self.pipeline.flush)

    # -- event building ------------------------------------------------------------------
    def _checked_ids(self, config: RunnableConfig, *, thread: bool = True) -> str:
        """The config's thread id, after checking it and its checkpoint id and namespace.

        Refused here rather than by the saver's database driver: the error is typed
        and nothing is stored (``thread=False``: a missing thread id is allowed).
        """
        conf = config.get("configurable") or {}
        tid = self._thread_id(conf.get("thread_id")) if thread or "thread_id" in conf else ""
        for key in ("checkpoint_ns", "checkpoint_id"):
            value = conf.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                raise InvalidCheckpointIdError(f"{key} must be a str, got {type(value).__name__}")
            if self.reject_nul and "\x00" in value:
                raise InvalidCheckpointIdError(
                    f"{key} {value[:80]!r} contains NUL, which PostgreSQL text cannot store"
                )
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise InvalidCheckpointIdError(
                        f"{key} {value[:80]!r} is not valid Unicode text"
                    ) from exc
        return tid

    def _check_filter(self, flt: Any) -> None:
        """Refuse a filter no stored metadata can match (the database would fail untyped)."""
        if flt is None:
            return
        if not isinstance(flt, dict):
            raise InvalidFilterError(f"filter must be a dict, got {type(flt).__name__}")
        try:
            problem = _filter_problem(flt, self.reject_nul)
        except RecursionError:
            problem = "is nested too deeply"
        if problem is not None:
            raise InvalidFilterError(f"filter {problem}")

    def _thread_id(self, value: Any) -> str:
        return check_thread_id(value, reject_nul=self.reject_nul)

    def _dump(self, value: Any, cap: _Capture) -> tuple[str, bytes]:
        hit = cap.get(value)
        if hit is not None:
            return hit
        # the saver stored it without its serializer (inline primitives): encode it here
        return _untapped(self.serde).dumps_typed(value)

    def _prepare_put(
        self,
        tid: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> _PutRecord:
        """What the checkpoint proves about who produced it, taken before the saver runs."""
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "") or ""
        parent = conf.get("checkpoint_id")
        # the metadata as savers store it: run metadata and configurable keys merged in
        metadata = get_serializable_checkpoint_metadata(config, metadata)
        writers = self._producers(tid, ns, parent, checkpoint)
        key = (tid, ns, checkpoint["id"])
        with self._book:
            self._threads.put(tid, None)
            before = self._seen.get((tid, ns, parent)) if parent else None
            self._seen.put(key, _shared_seen(checkpoint["versions_seen"], before))
            self._sends.put(key, _compat.send_targets(checkpoint["channel_values"]))
            waiting = self._unresolved.pop(key, [])
        for e in waiting:  # Send-task writes that arrived before this checkpoint
            self.pipeline.emit(self._resolved(e))
        return _PutRecord(self, tid, ns, parent, checkpoint, metadata, new_versions, writers)

    def _producers(
        self, tid: str, ns: str, parent: str | None, checkpoint: Checkpoint
    ) -> builtins.list[dict[str, Any]]:
        """The nodes whose tasks produced ``checkpoint``, from the checkpoint alone.

        A pull task records the channel versions it saw in ``versions_seen[node]``: the
        entries that differ from the parent's name exactly the nodes that ran. Push
        (``Send``) tasks are the parent's Send packets, by index.
        """
        seen_now = checkpoint["versions_seen"]
        before: dict[str, Any] | None = {}
        sends: builtins.list[str | None] | None = []
        if parent is not None:
            with self._book:
                before = self._seen.get((tid, ns, parent))
                sends = self._sends.get((tid, ns, parent))
            if before is None or sends is None:
                tup = self.inner.get_tuple(
                    {
                        "configurable": {
                            "thread_id": tid,
                            "checkpoint_ns": ns,
                            "checkpoint_id": parent,
                        }
                    }
                )
                before = dict(tup.checkpoint["versions_seen"]) if tup else {}
                sends = _compat.send_targets(tup.checkpoint["channel_values"]) if tup else []
        assert before is not None and sends is not None
        writers: builtins.list[dict[str, Any]] = [
            {"node": node, "via": "pull"}
            for node in sorted(seen_now)
            if dict(seen_now[node]) != dict(before.get(node) or {})
            and not node.startswith("__input")
            and node not in _compat.SEEN_NOT_A_NODE
        ]
        writers.extend(
            {"node": target, "via": "push", "index": i} for i, target in enumerate(sends)
        )
        return writers

    def _build_checkpoint(self, rec: _PutRecord, cap: _Capture) -> Event:
        tid, ns, checkpoint = rec.tid, rec.ns, rec.checkpoint
        cid = checkpoint["id"]
        # every checkpoint names every channel's exact value (a reference: sha256, version,
        # where the bytes are); only what changed since the parent is serialized again
        with self._book:
            before = self._refs.get((tid, ns, rec.parent)) if rec.parent else {}
        full = before is None
        versions = checkpoint["channel_versions"]
        changed = versions if full else rec.new_versions
        values = checkpoint["channel_values"]
        refs: dict[str, Any] = {}
        blobs = _Blobs(self._digest, self._seal)
        by_ref = self.saver_blob_refs and self.outbox is True and rec.in_tx
        for ch, ver in versions.items():
            kept = None if full or ch in changed else (before or {}).get(ch)
            if kept is not None and kept.get("version") == ver:
                refs[ch] = kept
            elif ch in values:
                hit = cap.get(values[ch])  # serialized by the saver: its blob row
                typ, data = hit or self._dump(values[ch], cap)
                row = [ch, ver] if by_ref and hit and isinstance(ver, str) else None
                refs[ch] = {"version": ver, "type": typ, **blobs.add(data, cid, row)}
            else:
                refs[ch] = {"version": ver, "type": "empty", "sha256": None, "size": 0}
        with self._book:
            self._refs.put((tid, ns, cid), refs)
        step = rec.metadata.get("step")
        nodes = sorted({w["node"] for w in rec.writers if w.get("node")})
        return Event(
            kind=EventKind.CHECKPOINT.value,
            thread_id=tid,
            checkpoint_ns=ns,
            checkpoint_id=cid,
            name=rec.metadata.get("source"),
            node=nodes[0] if len(nodes) == 1 else None,
            step=step if isinstance(step, int) else None,
            run_id=_str_or_none(rec.metadata.get("run_id")),
            payload={
                "parent_checkpoint_id": rec.parent,
                "source": rec.metadata.get("source"),
                "metadata": to_readable(dict(rec.metadata)),
                "writers": rec.writers,
                "nodes": nodes,
                "channels": refs,
                "changed": sorted(ch for ch in refs if ch in changed or full),
                "complete": True,
                "full": full,
                "size": blobs.size,
                "path": _checkpoint_relpath(tid, ns, cid),
            },
            detail={
                "checkpoint": {
                    "v": checkpoint.get("v"),
                    "id": cid,
                    "ts": checkpoint.get("ts"),
                    "channel_versions": dict(checkpoint["channel_versions"]),
                    "versions_seen": {k: dict(v) for k, v in checkpoint["versions_seen"].items()},
                    "updated_channels": sorted(checkpoint.get("updated_channels") or []),
                },
                "inline": blobs.inline,
                "enc": blobs.enc,
                **({"saver_blobs": blobs.saver} if blobs.saver else {}),
            },
            attachments=blobs.files,
        )

    def _resolved(self, event: Event) -> Event:
        with self._book:
            node = self._node_of(
                event.thread_id,
                event.checkpoint_ns,
                event.checkpoint_id,
                event.payload["task_path"],
            )
        return event.replace(node=node, name=node) if node else event

    def _drain_unresolved(self) -> None:
        """Emit Send-task writes still waiting for their checkpoint (run ended or failed)."""
        with self._book:
            waiting = [e for evs in self._unresolved.values() for e in evs]
            self._unresolved.clear()
        for e in waiting:
            self.pipeline.emit(self._resolved(e))

    def _writes_event(
        self,
        tid: str,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        cap: _Capture,
    ) -> Event:
        """The exact bytes the saver stored for one task's writes, and who wrote them."""
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "") or ""
        cid = conf.get("checkpoint_id")
        with self._book:
            node = self._node_of(tid, ns, cid, task_path)
        blobs = _Blobs(self._digest, self._seal)
        refs = []
        for idx, (channel, value) in enumerate(writes):
            typ, data = self._dump(value, cap)
            ref = {"idx": WRITES_IDX_MAP.get(channel, idx), "channel": channel, "type": typ}
            refs.append({**ref, **blobs.add(data, None)})
        return Event(
            kind=EventKind.WRITES.value,
            thread_id=tid,
            checkpoint_ns=ns,
            checkpoint_id=cid,
            task_id=str(task_id),
            node=node,
            name=node,
            payload={"task_path": task_path, "writes": refs},
            detail={"inline": blobs.inline, "enc": blobs.enc},
            attachments=blobs.files,
        )

    def _record_writes(self, event: Event) -> None:
        key = (event.thread_id, event.checkpoint_ns, event.checkpoint_id)
        task_path = event.payload["task_path"]
        with self._book:
            if event.node is None and task_path.startswith(_PUSH):
                if key not in self._sends:
                    # the Send packets arrive with this step's checkpoint: wait for it
                    self._unresolved.setdefault(key, []).append(event)  # type: ignore[arg-type]
                    return
                # they arrived while the event was being built: name the node now
                node = self._node_of(event.thread_id, event.checkpoint_ns, key[2], task_path)
                if node:
                    event = event.replace(node=node, name=node)
        self.pipeline.emit(event)

    def _node_of(self, tid: str, ns: str, cid: str | None, task_path: str) -> str | None:
        parts = [p.strip() for p in task_path.split(",")] if task_path else []
        if len(parts) < 2:
            return None
        if parts[0] == _PULL:
            return parts[1]
        if parts[0] == _PUSH and cid is not None:
            targets = self._sends.get((tid, ns, cid))
            try:
                return targets[int(parts[1])] if targets else None
            except (ValueError, IndexError):
                return None
        return None

    def checkpointed(self, thread_id: str) -> bool:
        """Whether this checkpointer stored (and recorded) a checkpoint of ``thread_id``
        lately: the thread's state is in the record, so an audit handler of the same
        pipeline may name it instead of rendering it again (see ``AuditCallbackHandler``).
        """
        with self._book:
            return thread_id in self._threads

    def _forget(self, tid: str) -> None:
        with self._book:
            self._threads.pop(tid, None)
            for cache in (self._seen, self._sends, self._refs):
                for key in [k for k in cache if k[0] == tid]:
                    del cache[key]
            for key in [k for k in self._unresolved if k[0] == tid]:
                del self._unresolved[key]


@contextmanager
def _capturing(what: str) -> Iterator[_Capture]:
    """Capture what the wrapped saver serializes inside the block (see :class:`_TapSerde`).

    A serializer failure inside the saver becomes a :class:`SerializationError`.
    """
    cap = _Capture()
    token = _CAPTURE.set(cap)
    try:
        yield cap
    except Exception as exc:
        err = _serialization_error(cap, exc, what)
        if err is exc:
            raise
        raise err from exc
    finally:
        _CAPTURE.reset(token)


def _filter_problem(value: Any, reject_nul: bool) -> str | None:
    """What makes ``value`` impossible as JSON metadata, or ``None``."""
    if isinstance(value, str):
        if reject_nul and "\x00" in value:
            return "holds NUL, which PostgreSQL cannot store"
        try:
            value.isascii() or value.encode("utf-8")
        except UnicodeEncodeError:
            return "holds text that is not valid Unicode"
        return None
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return "holds NaN or an infinity, which JSON cannot"
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"has a key that is not a str: {type(k).__name__}"
            problem = _filter_problem(k, reject_nul) or _filter_problem(v, reject_nul)
            if problem is not None:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        for v in value:
            problem = _filter_problem(v, reject_nul)
            if problem is not None:
                return problem
    return None


def _serialization_error(cap: _Capture, exc: Exception, what: str) -> Exception:
    """Turn a serializer failure inside the saver into a typed error; pass others on.

    A value the database driver cannot send (a channel or task named with NUL or with
    text that is not valid Unicode, as hostile node names make them) is one too.
    """
    if isinstance(exc, (UnicodeEncodeError, psycopg.DataError)):
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return SerializationError(f"the saver cannot store this {what}: {detail}")
    if cap.failed is None or isinstance(exc, SerializationError):
        return exc
    return SerializationError(
        f"cannot serialize a {what} value: {cap.failed}. The saver stored nothing "
        "and nothing was recorded."
    )


class _PutRecord:
    """One checkpoint's record in the making: built inside the saver's transaction."""

    __slots__ = (
        "checkpoint",
        "in_tx",
        "metadata",
        "new_versions",
        "ns",
        "owner",
        "parent",
        "tid",
        "writers",
    )

    def __init__(
        self,
        owner: ExternalCheckpointer,
        tid: str,
        ns: str,
        parent: str | None,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        writers: list[dict[str, Any]],
    ) -> None:
        self.owner = owner
        self.tid = tid
        self.ns = ns
        self.parent = parent
        self.checkpoint = checkpoint
        self.metadata = metadata
        self.new_versions = new_versions
        self.writers = writers
        self.in_tx = False  # built inside the saver's transaction (the outbox)

    def event(self, cap: _Capture) -> Event:
        return self.owner._build_checkpoint(self, cap)

    def _sealed(self, commit: Any, cap: _Capture) -> list[Event]:
        self.in_tx = True
        step = self.metadata.get("step")
        return commit.take(
            [self.event(cap)],
            ns=self.ns,
            step=step if isinstance(step, int) else None,
            checkpoint_id=self.checkpoint["id"],
            parent_id=self.parent,
        )

    def run(self, commit: Any, cap: _Capture) -> Callable[[Any], None]:
        ledger = self.owner.pipeline.ledger

        def run(cur: Any) -> None:
            ledger.execute_in(cur, self._sealed(commit, cap))  # type: ignore[attr-defined]

        return run

    def arun(self, commit: Any, cap: _Capture) -> Callable[[Any], Any]:
        ledger = self.owner.pipeline.ledger

        async def arun(cur: Any) -> None:
            await ledger.aexecute_in(cur, self._sealed(commit, cap))  # type: ignore[attr-defined]

        return arun


def _position_moved(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) == POSITION_MOVED or isinstance(exc, PositionMovedError)


def _same_database(inner: BaseCheckpointSaver[Any], dsn: str) -> bool:
    """Whether the official sync saver writes to the ledger's database (outbox possible)."""
    try:
        mine = _compat.saver_database_identity(inner)
        return mine is not None and mine == _database_identity(dsn)
    except Exception:
        return False


def _database_identity(dsn: str) -> tuple[str, str]:
    from langgraph_external import ledger as _ledger

    with _ledger.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(_compat.IDENTITY_SQL).fetchone()
    assert row is not None
    return (str(row[0]), str(row[1]))


def _tombstone(tid: str) -> Event:
    return Event(
        kind=EventKind.THREAD_DELETED.value,
        thread_id=tid,
        status="deleted",
        payload={"thread_id": tid},
    )


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def _checkpoint_relpath(tid: str, ns: str, cid: str) -> str:
    # the namespace's checkpoint log; the checkpoint is the line with this checkpoint_id
    return f"threads/{encode_thread_id(tid)}/checkpoints/{encode_ns(ns)}.jsonl"


# -- optional capabilities ---------------------------------------------------------------
class _PruneMixin(ExternalCheckpointer):
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune in the wrapped saver and remove the pruned checkpoints' mirrors."""
        before = {t: self._ids(t) for t in thread_ids}
        self.pipeline.flush()
        self.inner.prune(thread_ids, strategy=strategy)
        for t in thread_ids:
            self._emit_removed(t, before[t], self._ids(t), EventKind.THREAD_PRUNED, strategy)
        self.pipeline.flush()

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async twin of :meth:`prune`."""
        before = {t: await self._aids(t) for t in thread_ids}
        await asyncio.to_thread(self.pipeline.flush)
        if _overrides(self.inner, "aprune"):
            await self.inner.aprune(thread_ids, strategy=strategy)
        else:
            await asyncio.to_thread(self.inner.prune, thread_ids, strategy=strategy)
        for t in thread_ids:
            after = await self._aids(t)
            self._emit_removed(t, before[t], after, EventKind.THREAD_PRUNED, strategy)
        await asyncio.to_thread(self.pipeline.flush)

    def _ids(self, thread_id: str) -> dict[str, set[str]]:
        if pg.is_postgres_saver(self.inner) and not pg.is_async_postgres_saver(self.inner):
            return pg.list_checkpoint_ids(self.inner, thread_id)
        out: dict[str, set[str]] = {}
        for tup in self.inner.list({"configurable": {"thread_id": thread_id}}):
            c = tup.config["configurable"]
            out.setdefault(c.get("checkpoint_ns", ""), set()).add(c["checkpoint_id"])
        return out

    async def _aids(self, thread_id: str) -> dict[str, set[str]]:
        if pg.is_async_postgres_saver(self.inner):
            return await pg.alist_checkpoint_ids(self.inner, thread_id)
        return await asyncio.to_thread(self._ids, thread_id)

    def _emit_removed(
        self,
        thread_id: str,
        before: dict[str, set[str]],
        after: dict[str, set[str]],
        kind: EventKind,
        detail: str,
    ) -> None:
        removed = {ns: sorted(ids - after.get(ns, set())) for ns, ids in before.items()}
        removed = {ns: ids for ns, ids in removed.items() if ids}
        if not removed:
            return
        tid = str(thread_id)
        for ns, ids in removed.items():
            for cid in ids:
                self._seen.pop((tid, ns, cid), None)
        self.pipeline.emit(
            Event(
                kind=kind.value,
                thread_id=tid,
                name=detail,
                payload={"removed": removed, "count": sum(len(v) for v in removed.values())},
            )
        )


class _CopyThreadMixin(ExternalCheckpointer):
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread, in the saver and in the record."""
        src = self._thread_id(source_thread_id)
        dst = self._thread_id(target_thread_id)
        self.pipeline.flush()
        if _overrides(self.inner, "copy_thread"):
            self.inner.copy_thread(source_thread_id, target_thread_id)
        else:
            pg.copy_thread(self.inner, src, dst)
        self.pipeline.emit(_copied(src, dst))
        self.pipeline.flush()

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async twin of :meth:`copy_thread`."""
        src = self._thread_id(source_thread_id)
        dst = self._thread_id(target_thread_id)
        await asyncio.to_thread(self.pipeline.flush)
        if _overrides(self.inner, "acopy_thread"):
            await self.inner.acopy_thread(source_thread_id, target_thread_id)
        elif _overrides(self.inner, "copy_thread"):
            await asyncio.to_thread(self.inner.copy_thread, source_thread_id, target_thread_id)
        elif pg.is_async_postgres_saver(self.inner):
            await pg.acopy_thread(self.inner, src, dst)
        else:
            await asyncio.to_thread(pg.copy_thread, self.inner, src, dst)
        self.pipeline.emit(_copied(src, dst))
        await asyncio.to_thread(self.pipeline.flush)


def _copied(src: str, dst: str) -> Event:
    return Event(
        kind=EventKind.THREAD_COPIED.value,
        thread_id=dst,
        name=src,
        payload={"source_thread_id": src},
    )


class _DeleteForRunsMixin(ExternalCheckpointer):
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes in the saver and in the record."""
        self.pipeline.flush()
        if _overrides(self.inner, "delete_for_runs"):
            before = self._run_ids(run_ids)
            self.inner.delete_for_runs(run_ids)
            removed = before
        else:
            removed = pg.delete_for_runs(self.inner, run_ids)
        self._emit_runs_deleted(removed, run_ids)
        self.pipeline.flush()

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async twin of :meth:`delete_for_runs`."""
        await asyncio.to_thread(self.pipeline.flush)
        if _overrides(self.inner, "adelete_for_runs"):
            removed = await asyncio.to_thread(self._run_ids, run_ids)
            await self.inner.adelete_for_runs(run_ids)
        elif pg.is_async_postgres_saver(self.inner):
            removed = await pg.adelete_for_runs(self.inner, run_ids)
        else:
            removed = await asyncio.to_thread(pg.delete_for_runs, self.inner, run_ids)
        self._emit_runs_deleted(removed, run_ids)
        await asyncio.to_thread(self.pipeline.flush)

    def _run_ids(self, run_ids: Sequence[str]) -> pg.Removed:
        wanted = {str(r) for r in run_ids}
        out: pg.Removed = {}
        for tup in self.inner.list(None):
            if str(tup.metadata.get("run_id")) in wanted:
                c = tup.config["configurable"]
                out.setdefault(c["thread_id"], {}).setdefault(
                    c.get("checkpoint_ns", ""), []
                ).append(c["checkpoint_id"])
        return out

    def _emit_runs_deleted(self, removed: pg.Removed, run_ids: Sequence[str]) -> None:
        for tid, by_ns in removed.items():
            for ns, ids in by_ns.items():
                for cid in ids:
                    self._seen.pop((tid, ns, cid), None)
            self.pipeline.emit(
                Event(
                    kind=EventKind.RUNS_DELETED.value,
                    thread_id=tid,
                    payload={
                        "run_ids": [str(r) for r in run_ids],
                        "removed": {ns: sorted(ids) for ns, ids in by_ns.items()},
                    },
                )
            )


_MIXINS: dict[str, type[ExternalCheckpointer]] = {
    "prune": _PruneMixin,
    "copy_thread": _CopyThreadMixin,
    "delete_for_runs": _DeleteForRunsMixin,
}
_CLASSES: dict[tuple[type, frozenset[str]], type] = {}


def _capabilities_of(inner: BaseCheckpointSaver[Any]) -> frozenset[str]:
    caps = set()
    if _overrides(inner, "prune") or _overrides(inner, "aprune"):
        caps.add("prune")
    postgres = pg.is_postgres_saver(inner)
    for cap in ("copy_thread", "delete_for_runs"):
        if _overrides(inner, cap) or _overrides(inner, "a" + cap) or postgres:
            caps.add(cap)
    return frozenset(caps)


def _class_for(base: type, caps: frozenset[str]) -> type:
    key = (base, caps)
    if key not in _CLASSES:
        if not caps:
            _CLASSES[key] = base
        else:
            bases = tuple(_MIXINS[c] for c in sorted(caps))
            name = f"{base.__name__}[{','.join(sorted(caps))}]"
            cls = type(name, (*bases, base), {"capabilities": caps, "__module__": base.__module__})
            _CLASSES[key] = cls
    return _CLASSES[key]
