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
import builtins
import contextvars
import inspect
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
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
from langgraph_external.capture import Capture
from langgraph_external.checkpointers import _postgres_ops as pg
from langgraph_external.errors import (
    ConfigurationError,
    InvalidCheckpointIdError,
    InvalidFilterError,
    SerializationError,
)
from langgraph_external.events import Event, EventKind
from langgraph_external.ledger import DEFAULT_SCHEMA
from langgraph_external.pipeline import Commit, Pipeline
from langgraph_external.records import (
    PER_THREAD,
    CheckpointMaterial,
    Lru,
    RecordBuilder,
    WritesMaterial,
    node_of_task_path,
)
from langgraph_external.thread_ids import check_thread_id
from langgraph_external.workspace import Workspace, sha256_hex

__all__ = ["ExternalCheckpointer", "untapped_serde"]

_PULL = _compat.TASK_PATH_PULL
_PUSH = _compat.TASK_PATH_PUSH
_LRU = 2048
_PER_THREAD = 32  # checkpoints of one (thread, namespace) the caches above keep
_COMMIT_ATTEMPTS = 50


class _Capture:
    """What the wrapped saver serialized during one call, by object identity
    (``record=False``: only whether serializing failed, for a typed error)."""

    __slots__ = ("failed", "record", "seen")

    def __init__(self, record: bool = True) -> None:
        self.seen: dict[int, tuple[Any, tuple[str, bytes]]] = {}
        self.failed: BaseException | None = None
        self.record = record

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
        if cap is not None and cap.record:
            cap.seen[id(obj)] = (obj, out)
        return out

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def untapped_serde(serde: SerializerProtocol) -> SerializerProtocol:
    """The serializer a recording checkpointer's tap wraps (``serde`` itself otherwise)."""
    return serde.inner if isinstance(serde, _TapSerde) else serde


def _overrides(saver: BaseCheckpointSaver[Any], method: str) -> bool:
    impl = getattr(type(saver), method, None)
    return impl is not None and impl is not getattr(BaseCheckpointSaver, method, None)


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
                serde=untapped_serde(inner.serde),
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
        self.saver_blob_refs = saver_blob_refs  # kept for callers; the sealer decides now
        if outbox is not None:
            self.outbox = self._use_outbox(outbox)
        self._plain = untapped_serde(inner.serde)  # serializes values the saver keeps inline
        # other savers: their events are built here, from the saver's own bytes
        self._builder = RecordBuilder(self._digest, self._seal, self._parent_of)
        self._sends: Lru = Lru(PER_THREAD)  # (thread, ns, checkpoint_id) -> Send targets
        self._threads: Lru = Lru()  # threads this process stored checkpoints of, lately
        # other savers: Send-task writes seen before their step's checkpoint (async)
        self._unresolved: dict[tuple[str, str, str | None], list[Event]] = {}
        pipeline.add_flush_hook(self._drain_unresolved)
        self._book = threading.Lock()  # puts and writes may arrive from several threads

    def _use_outbox(self, wanted: bool) -> bool:
        in_tx = hasattr(self.pipeline.ledger, "capture_in")
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
        self.inner.serde = untapped_serde(tap)
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
        key = object()
        self.pipeline.call_started(id(key))  # health(): a database that does not answer
        try:
            tup = self.inner.get_tuple(config)
        finally:
            self.pipeline.call_ended(id(key))
        return self._saw(tid, config, tup)

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
        key = object()
        self.pipeline.call_started(id(key))  # health(): a database that does not answer
        try:
            if self._async_native["aget_tuple"]:
                tup = await self.inner.aget_tuple(config)
            else:
                tup = await asyncio.to_thread(self.inner.get_tuple, config)
        finally:
            self.pipeline.call_ended(id(key))
        return self._saw(tid, config, tup)

    def _saw(
        self, tid: str, config: RunnableConfig, tup: CheckpointTuple | None
    ) -> CheckpointTuple | None:
        """Remember what a read proves: the checkpoint is stored; its versions_seen and
        Sends (which node a push task of the next step runs)."""
        ns = config["configurable"].get("checkpoint_ns", "") or ""
        if tup is None:
            return tup
        cp = tup.checkpoint
        ns = tup.config["configurable"].get("checkpoint_ns", "") or ""
        step = (tup.metadata or {}).get("step")
        self.pipeline.note_committed(tid, ns, step if isinstance(step, int) else None, cp["id"])
        sends = _compat.send_targets(cp["channel_values"])
        with self._book:
            self._sends.put((tid, ns, cp["id"]), sends)
            if not self.outbox:
                self._builder.remember(tid, ns, cp["id"], cp["versions_seen"], sends)
        return tup

    def _parent_of(
        self, tid: str, ns: str, cid: str
    ) -> tuple[Mapping[str, Any], builtins.list[str | None]] | None:
        """A parent checkpoint the builder no longer remembers, read from the saver."""
        tup = self.inner.get_tuple(
            {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
        )
        if tup is None:
            return None
        return dict(tup.checkpoint["versions_seen"]), _compat.send_targets(
            tup.checkpoint["channel_values"]
        )

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
        """Store through the wrapped saver; the checkpoint's capture commits with it.

        On the official Postgres saver one more statement joins the saver's own
        transaction — a reference to the rows it writes and the thread's waiting events —
        and the event is sealed from those rows after commit; on other savers the event is
        built here and is in the write-ahead log before this returns.
        """
        tid = self._checked_ids(config)
        if not self._decide_outbox():
            with _capturing("checkpoint") as cap:
                next_config = self.inner.put(config, checkpoint, metadata, new_versions)
            self.pipeline.emit(
                self._local_event(tid, config, checkpoint, metadata, new_versions, cap),
                durable=True,
            )
            return next_config
        commit, box = self._checkpoint_capture(tid, config, checkpoint, metadata, new_versions)
        token = _compat.OUTBOX.set(box)  # the open commit is the call health() sees
        try:
            with _capturing("checkpoint", record=False):
                next_config = self.inner.put(config, checkpoint, metadata, new_versions)
        except BaseException as exc:
            commit.failed(doubtful=_doubtful(exc))
            raise
        finally:
            _compat.OUTBOX.reset(token)
        self._settle(commit, box, tid, config, checkpoint, metadata, new_versions)
        return next_config

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
        args = (config, checkpoint, metadata, new_versions)
        if not await self._adecide_outbox():
            with _capturing("checkpoint") as cap:
                next_config = await self._inner_aput(*args)
            event = self._local_event(tid, config, checkpoint, metadata, new_versions, cap)
            await asyncio.to_thread(self.pipeline.emit, event, durable=True)
            return next_config
        commit, box = self._checkpoint_capture(tid, config, checkpoint, metadata, new_versions)
        token = _compat.OUTBOX.set(box)  # the open commit is the call health() sees
        try:
            with _capturing("checkpoint", record=False):
                next_config = await self._inner_aput(*args)
        except BaseException as exc:
            commit.failed(doubtful=_doubtful(exc))
            raise
        finally:
            _compat.OUTBOX.reset(token)
        self._settle(commit, box, tid, config, checkpoint, metadata, new_versions)
        return next_config

    async def _inner_aput(self, *args: Any) -> RunnableConfig:
        if self._async_native["aput"]:
            return await self.inner.aput(*args)
        return await asyncio.to_thread(self.inner.put, *args)

    def _checkpoint_capture(
        self,
        tid: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[Commit, _compat.Outbox]:
        """The capture of one checkpoint, queued in the saver's transaction: a reference,
        nothing computed (no hashing, encryption, canonical JSON or rendering here)."""
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "") or ""
        parent = conf.get("checkpoint_id")
        cid = checkpoint["id"]
        step = metadata.get("step")
        step = step if isinstance(step, int) else None
        sends = _compat.send_targets(checkpoint["channel_values"])
        with self._book:  # which node a later Send task runs (its writes name it)
            self._threads.put(tid, None)
            if sends:  # else no task names this checkpoint's packets (the sealer checks)
                self._sends.put((tid, ns, cid), sends)
        values = checkpoint["channel_values"]
        inline = {
            ch: self._plain.dumps_typed(values[ch])
            for ch in new_versions
            if ch in values and _compat.inline_value_is_primitive(values[ch])
        }
        capture = Capture(
            "checkpoint", tid, ns, cid, parent, changed=list(new_versions), inline=inline or None
        )
        commit = self.pipeline.open_commit(tid)
        ledger = self.pipeline.ledger

        def run(cur: Any) -> None:
            ledger.capture_in(  # type: ignore[attr-defined]
                cur, commit.take(capture, ns=ns, step=step, checkpoint_id=cid, parent_id=parent)
            )

        async def arun(cur: Any) -> None:
            await ledger.acapture_in(  # type: ignore[attr-defined]
                cur,
                await commit.atake(capture, ns=ns, step=step, checkpoint_id=cid, parent_id=parent),
            )

        return commit, _compat.Outbox(run, arun)

    def _settle(
        self,
        commit: Commit,
        box: _compat.Outbox,
        tid: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> None:
        if box.ran:
            commit.done()
            return
        # the saver opened no transaction of its own (a subclass that stores elsewhere):
        # record the checkpoint durably here, from what it was given
        commit.failed()
        with _capturing("checkpoint") as cap:
            event = self._local_event(tid, config, checkpoint, metadata, new_versions, cap)
        self.pipeline.emit(event, durable=True)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store through the wrapped saver; its capture commits with the writes."""
        tid = self._checked_ids(config)
        args = self._writes_args(config, writes, task_id, task_path)
        if not self._decide_outbox():
            with _capturing("write") as cap:
                self.inner.put_writes(*args)
            self._emit_writes(self._local_writes(tid, config, writes, task_id, task_path, cap))
            return
        box, event_id = self._writes_capture(tid, config, writes, task_id, task_path)
        token = _compat.OUTBOX.set(box)
        key = id(box)
        self.pipeline.call_started(key)
        try:
            with _capturing("write", record=False):
                self.inner.put_writes(*args)
        finally:
            _compat.OUTBOX.reset(token)
            self.pipeline.call_ended(key)
        self._settle_writes(box, event_id, tid, config, writes, task_id, task_path)

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
        if not await self._adecide_outbox():
            with _capturing("write") as cap:
                await self._inner_aput_writes(*args)
            self._emit_writes(self._local_writes(tid, config, writes, task_id, task_path, cap))
            return
        box, event_id = self._writes_capture(tid, config, writes, task_id, task_path)
        token = _compat.OUTBOX.set(box)
        key = id(box)
        self.pipeline.call_started(key)
        try:
            with _capturing("write", record=False):
                await self._inner_aput_writes(*args)
        finally:
            _compat.OUTBOX.reset(token)
            self.pipeline.call_ended(key)
        self._settle_writes(box, event_id, tid, config, writes, task_id, task_path)

    async def _inner_aput_writes(self, *args: Any) -> None:
        if self._async_native["aput_writes"]:
            await self.inner.aput_writes(*args)
        else:
            await asyncio.to_thread(self.inner.put_writes, *args)

    def _writes_capture(
        self,
        tid: str,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> tuple[_compat.Outbox, str]:
        """The capture of one task's writes, queued in the saver's transaction, and the id
        of its event. It carries
        no buffered events, so it needs no commit of the pipeline: the writes' own
        transaction is its only order (their events are not ordered against others')."""
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "") or ""
        cid = conf.get("checkpoint_id")
        if task_path.startswith(_PULL):
            node = node_of_task_path(task_path, _no_sends)
        else:
            with self._book:
                node = node_of_task_path(task_path, lambda: self._sends.get((tid, ns, cid)))
        capture = Capture(
            "writes",
            tid,
            ns,
            cid,
            task_id=str(task_id),
            task_path=task_path,
            node=node,
            idx=[WRITES_IDX_MAP.get(ch, i) for i, (ch, _) in enumerate(writes)],
        )
        row = capture.row()
        ledger = self.pipeline.ledger

        def run(cur: Any) -> None:
            ledger.capture_row_in(cur, row)  # type: ignore[attr-defined]

        async def arun(cur: Any) -> None:
            await ledger.acapture_row_in(cur, row)  # type: ignore[attr-defined]

        return _compat.Outbox(run, arun), capture.event_id

    def _settle_writes(
        self,
        box: _compat.Outbox,
        event_id: str,
        tid: str,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        if box.ran:
            self.pipeline.captured_alone(tid, event_id)
            return
        with _capturing("write") as cap:  # the saver opened no transaction of its own
            event = self._local_writes(tid, config, writes, task_id, task_path, cap)
        self.pipeline.emit(event, durable=True)

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

    def _local_event(
        self,
        tid: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        cap: _Capture,
    ) -> Event:
        """The checkpoint's event built here, from the objects the saver was given and the
        bytes it serialized (a saver whose transaction the record cannot join)."""
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "") or ""
        parent = conf.get("checkpoint_id")
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        with self._book:
            self._threads.put(tid, None)
            sends = _compat.send_targets(values)
            self._sends.put((tid, ns, checkpoint["id"]), sends)
        self._resolve_waiting(tid, ns, checkpoint["id"])
        with self._book:
            full = self._builder.needs_full(tid, ns, parent)
            wanted = versions if full else new_versions
            material = CheckpointMaterial(
                thread_id=tid,
                checkpoint_ns=ns,
                checkpoint_id=checkpoint["id"],
                parent_id=parent,
                checkpoint=checkpoint,
                metadata=get_serializable_checkpoint_metadata(config, metadata),
                changed=list(new_versions),
                values={ch: self._dump(values[ch], cap) if ch in values else None for ch in wanted},
                sends=sends,
            )
            return self._builder.checkpoint_event(material)

    def _local_writes(
        self,
        tid: str,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        cap: _Capture,
    ) -> Event:
        """One task's writes event built here (see :meth:`_local_event`)."""
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "") or ""
        material = WritesMaterial(
            thread_id=tid,
            checkpoint_ns=ns,
            checkpoint_id=conf.get("checkpoint_id"),
            task_id=str(task_id),
            task_path=task_path,
            writes=[
                (WRITES_IDX_MAP.get(ch, i), ch, *self._dump(value, cap))
                for i, (ch, value) in enumerate(writes)
            ],
        )
        with self._book:
            material.node = node_of_task_path(
                task_path, lambda: self._sends.get((tid, ns, material.checkpoint_id))
            )
            return self._builder.writes_event(material)

    def _emit_writes(self, event: Event) -> None:
        """Emit a writes event built here; a ``Send`` task's writes that arrived before
        the checkpoint naming its node (``durability="async"``) wait for that checkpoint."""
        key = (event.thread_id, event.checkpoint_ns, event.checkpoint_id)
        with self._book:
            if (
                event.node is None
                and event.payload["task_path"].startswith(_PUSH)
                and key not in self._sends
            ):
                self._unresolved.setdefault(key, []).append(event)
                return
        self.pipeline.emit(event)

    def _resolve_waiting(self, tid: str, ns: str, cid: str) -> None:
        """Emit the Send-task writes that waited for checkpoint ``cid`` (now named)."""
        with self._book:
            waiting = self._unresolved.pop((tid, ns, cid), [])
            named = [self._named(e) for e in waiting]
        for e in named:
            self.pipeline.emit(e)

    def _named(self, event: Event) -> Event:
        node = node_of_task_path(
            event.payload["task_path"],
            lambda: self._sends.get((event.thread_id, event.checkpoint_ns, event.checkpoint_id)),
        )
        return event.replace(node=node, name=node) if node else event

    def _drain_unresolved(self) -> None:
        """Emit Send-task writes still waiting for their checkpoint (run ended or failed)."""
        with self._book:
            waiting = [self._named(e) for evs in self._unresolved.values() for e in evs]
            self._unresolved.clear()
        for e in waiting:
            self.pipeline.emit(e)

    def _dump(self, value: Any, cap: _Capture) -> tuple[str, bytes]:
        hit = cap.get(value)
        if hit is not None:
            return hit
        # the saver stored it without its serializer (inline primitives): encode it here
        return untapped_serde(self.serde).dumps_typed(value)

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
            self._sends.forget_thread(tid)
            self._builder.forget(tid)
            for key in [k for k in self._unresolved if k[0] == tid]:
                del self._unresolved[key]


class _capturing:
    """Capture what the wrapped saver serializes inside the block (see :class:`_TapSerde`).

    A serializer failure inside the saver becomes a :class:`SerializationError`.
    (A class, not a generator: it runs around every ``put`` and ``put_writes``.)
    """

    __slots__ = ("cap", "token", "what")

    def __init__(self, what: str, *, record: bool = True) -> None:
        self.what = what
        self.cap = _Capture(record)
        self.token: Any = None

    def __enter__(self) -> _Capture:
        self.token = _CAPTURE.set(self.cap)
        return self.cap

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> None:
        _CAPTURE.reset(self.token)
        if exc is None or not isinstance(exc, Exception):
            return
        err = _serialization_error(self.cap, exc, self.what)
        if err is not exc:
            raise err from exc


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


def _no_sends() -> None:
    return None


def _doubtful(exc: BaseException) -> bool:
    """Whether the saver's transaction may have committed although the call failed (the
    connection was lost around its COMMIT): riders are checked before they ride again."""
    return isinstance(exc, psycopg.OperationalError)


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
        with self._book:
            for ns, ids in removed.items():
                self._builder.forget_checkpoints(tid, ns, ids)
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
            with self._book:
                for ns, ids in by_ns.items():
                    self._builder.forget_checkpoints(tid, ns, ids)
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
