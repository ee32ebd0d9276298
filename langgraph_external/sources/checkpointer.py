"""``RecordingSaver``: a saver that records every checkpoint it stores into a pipeline
(the public :class:`~langgraph_external.checkpointers.ExternalCheckpointer` is this saver
with the constructor that can also build the pipeline).

It wraps any :class:`~langgraph.checkpoint.base.BaseCheckpointSaver` (the official
Postgres saver, ``InMemorySaver``, ``SqliteSaver``, ...). Reads and versioning are the
wrapped saver's; every ``put``/``put_writes`` is recorded by its
:class:`~langgraph_external.sources.checkpoint_records.CheckpointRecorder`: on the
official Postgres saver a capture commits in the saver's own transaction, on other savers
the event (exact serde bytes, metadata, parent, which task wrote what) is built from what
the saver serialized and is in the pipeline's write-ahead log before the call returns.

Optional capabilities are offered exactly when they work
(:mod:`langgraph_external.sources.capabilities`): ``prune`` when the wrapped saver has it,
``copy_thread`` and ``delete_for_runs`` when it has them or stores in the official
Postgres tables (implemented in SQL).

Example:
    >>> import tempfile
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> with Pipeline(InMemoryLedger(), spool_dir=tempfile.mkdtemp()) as pipeline:
    ...     saver = RecordingSaver(InMemorySaver(), pipeline=pipeline)
    ...     sorted(saver.capabilities)
    []
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Self, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.events import Event, EventKind
from langgraph_external.record.thread_ids import check_thread_id
from langgraph_external.sources.capabilities import capabilities_of, class_for, overrides
from langgraph_external.sources.checkpoint_records import CheckpointRecorder, read_parent
from langgraph_external.sources.config_checks import check_filter, checked_ids
from langgraph_external.sources.ports import CaptureInTransaction
from langgraph_external.sources.serde_tap import SerdeTap, capturing, untapped_serde
from langgraph_external.upstream import langgraph as _compat

__all__ = ["RecordingSaver", "untapped_serde"]


class RecordingSaver(BaseCheckpointSaver[Any]):
    """Wrap ``inner`` so every checkpoint and write it stores is recorded in ``pipeline``.

    Args:
        inner: the saver that stores and serves checkpoints.
        pipeline: where events go (``External`` builds one; so does a standalone
            :class:`~langgraph_external.checkpointers.ExternalCheckpointer`).
        reject_nul: refuse thread ids containing NUL (PostgreSQL text cannot hold it).
        outbox: capture in the wrapped saver's own transaction (``None``: when it
            stores in the ledger's database).

    The instance's class is a subclass of the class called that carries exactly the
    optional methods that work for ``inner`` (see :attr:`capabilities`).
    """

    capabilities: ClassVar[frozenset[str]] = frozenset()
    _made_as: type[RecordingSaver]

    def __new__(cls, inner: BaseCheckpointSaver[Any], *args: Any, **kwargs: Any) -> Any:
        saver: RecordingSaver = super().__new__(class_for(cls, capabilities_of(inner)))
        saver._made_as = cls  # what with_allowlist builds again
        return saver

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        *,
        pipeline: Pipeline,
        reject_nul: bool = True,
        outbox: bool | None = None,
    ) -> None:
        if not isinstance(inner, BaseCheckpointSaver):
            raise TypeError(f"inner must be a BaseCheckpointSaver, got {type(inner).__name__}")
        # no super().__init__: serde is the inner saver's (see the property below)
        if not isinstance(inner.serde, SerdeTap):
            inner.serde = SerdeTap(inner.serde)
        self.inner = inner
        self.pipeline = pipeline
        self.reject_nul = reject_nul
        # the pipeline's ledger when a capture can join the saver's transaction
        ledger = pipeline.ledger
        self._ledger: CaptureInTransaction | None = (
            ledger if isinstance(ledger, CaptureInTransaction) else None
        )
        self.records = CheckpointRecorder(
            pipeline,
            plain_serde=untapped_serde(inner.serde),
            cipher=pipeline.cipher,
            lookup_parent=read_parent(inner),
        )
        self._task_path_arg = "task_path" in inspect.signature(inner.put_writes).parameters
        self._async_native = {
            m: overrides(inner, m)
            for m in ("aget_tuple", "alist", "aput", "aput_writes", "adelete_thread")
        }
        # None: decided on first write (the async saver can only be asked asynchronously)
        self.outbox: bool | None = None if outbox is None else self._use_outbox(outbox)

    def _use_outbox(self, wanted: bool) -> bool:
        return wanted and self._ledger is not None and _compat.install_outbox(self.inner)

    def _decide_outbox(self) -> bool:
        if self.outbox is None:
            ledger = self._ledger
            same = ledger is not None and _compat.same_database(self.inner, ledger.dsn)
            self.outbox = self._use_outbox(same)
        return self.outbox

    async def _adecide_outbox(self) -> bool:
        if self.outbox is None:
            ledger = self._ledger
            same = ledger is not None and await _compat.asame_database(self.inner, ledger.dsn)
            self.outbox = self._use_outbox(same)
        return self.outbox

    def close(self) -> None:
        """Flush what is recorded (the pipeline is its builder's to close)."""
        self.pipeline.flush()

    def __enter__(self) -> Self:
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
        self.records.plain = untapped_serde(value)

    @property
    def config_specs(self) -> list[Any]:
        """The wrapped saver's configuration specs."""
        return list(self.inner.config_specs)

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The wrapped saver's versioning (string versions for the Postgres savers)."""
        return self.inner.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Any) -> Self:
        """Wrap the wrapped saver's allow-listed clone; share this recorder's pipeline."""
        tap = self.inner.serde
        self.inner.serde = untapped_serde(tap)
        try:
            inner = self.inner.with_allowlist(extra_allowlist)
        finally:
            self.inner.serde = tap
        if inner is self.inner:
            return self
        # the class called (its capabilities those of the new inner saver)
        clone = self._made_as(
            inner, pipeline=self.pipeline, reject_nul=self.reject_nul, outbox=self.outbox
        )
        return cast(Self, clone)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Delegated to the wrapped saver (after checking the thread id)."""
        tid = checked_ids(config, reject_nul=self.reject_nul)
        with self._call():
            tup = self.inner.get_tuple(config)
        return self._saw(tid, tup)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Delegated to the wrapped saver (after checking the ids it is given)."""
        self._check_list_args(config, filter, before)
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Delegated to the wrapped saver (in a worker thread if it is sync-only)."""
        tid = checked_ids(config, reject_nul=self.reject_nul)
        with self._call():
            tup = await self._ainner("get_tuple", config)
        return self._saw(tid, tup)

    @contextmanager
    def _call(self) -> Iterator[None]:
        # health(): a database that does not answer
        key = object()
        self.pipeline.call_started(id(key))
        try:
            yield
        finally:
            self.pipeline.call_ended(id(key))

    async def _ainner(self, name: str, *args: Any) -> Any:
        # the wrapped saver's own async twin of ``name``, else ``name`` in a worker thread
        if self._async_native["a" + name]:
            return await getattr(self.inner, "a" + name)(*args)
        return await asyncio.to_thread(getattr(self.inner, name), *args)

    def _saw(self, tid: str, tup: CheckpointTuple | None) -> CheckpointTuple | None:
        if tup is not None:
            self.records.saw(tid, tup, remember=not self.outbox)
        return tup

    def _check_list_args(
        self, config: RunnableConfig | None, flt: Any, before: RunnableConfig | None
    ) -> None:
        for given in (config, before):
            if given is not None:
                checked_ids(given, reject_nul=self.reject_nul, thread=False)
        check_filter(flt, reject_nul=self.reject_nul)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Delegated to the wrapped saver (in a worker thread if it is sync-only)."""
        self._check_list_args(config, filter, before)
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
        if overrides(self.inner, "aget_delta_channel_history") or self._async_native["aget_tuple"]:
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
        and the event is sealed from those rows after commit; on other savers what the
        saver is given is captured by value, with the waiting events, in a ledger
        transaction committed *before* the saver stores it (a store that fails then is
        recorded as failed), and sealed the same way.
        """
        tid = checked_ids(config, reject_nul=self.reject_nul)
        args = (config, checkpoint, metadata, new_versions)
        if not self._decide_outbox():
            # recorded first: a process killed after the saver's commit loses nothing
            with capturing("checkpoint") as cap:
                self.records.checkpoint_by_value(tid, *args, cap)
                with self.records.storing(tid, config, "checkpoint", checkpoint["id"]):
                    return self.inner.put(*args)
        # the open commit is the call health() sees
        with self.records.checkpoint_in_transaction(self._ledger, tid, *args):
            return self.inner.put(*args)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put`."""
        tid = checked_ids(config, reject_nul=self.reject_nul)
        await self.pipeline.wait_for_room(tid)  # back-pressure without blocking the loop
        args = (config, checkpoint, metadata, new_versions)
        if not await self._adecide_outbox():
            with capturing("checkpoint") as cap:
                await asyncio.to_thread(self.records.checkpoint_by_value, tid, *args, cap)
                with self.records.storing(tid, config, "checkpoint", checkpoint["id"]):
                    return await self._ainner("put", *args)
        with self.records.checkpoint_in_transaction(self._ledger, tid, *args):
            return await self._ainner("put", *args)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store through the wrapped saver; its capture commits with the writes."""
        tid = checked_ids(config, reject_nul=self.reject_nul)
        args = self._writes_args(config, writes, task_id, task_path)
        what = (config, writes, task_id, task_path)
        if not self._decide_outbox():
            with capturing("write") as cap:
                self.records.writes_by_value(tid, *what, cap)
                with self.records.storing(tid, config, "writes", str(task_id)):
                    self.inner.put_writes(*args)
            return
        with self.records.writes_in_transaction(self._ledger, tid, *what):
            self.inner.put_writes(*args)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        tid = checked_ids(config, reject_nul=self.reject_nul)
        await self.pipeline.wait_for_room()
        args = self._writes_args(config, writes, task_id, task_path)
        what = (config, writes, task_id, task_path)
        if not await self._adecide_outbox():
            with capturing("write") as cap:
                await asyncio.to_thread(self.records.writes_by_value, tid, *what, cap)
                with self.records.storing(tid, config, "writes", str(task_id)):
                    await self._ainner("put_writes", *args)
            return
        with self.records.writes_in_transaction(self._ledger, tid, *what):
            await self._ainner("put_writes", *args)

    def _writes_args(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, path: str
    ) -> tuple[Any, ...]:
        # the saver gets task_path only if its signature declares it (as LangGraph does)
        return (config, writes, task_id, path) if self._task_path_arg else (config, writes, task_id)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread in the saver, the ledger and the workspace; leave a tombstone."""
        tid = check_thread_id(thread_id, reject_nul=self.reject_nul)
        self.pipeline.flush()
        self.inner.delete_thread(thread_id)
        self._deleted(tid)
        self.pipeline.flush()

    async def adelete_thread(self, thread_id: str) -> None:
        """Async twin of :meth:`delete_thread`."""
        tid = check_thread_id(thread_id, reject_nul=self.reject_nul)
        await asyncio.to_thread(self.pipeline.flush)
        await self._ainner("delete_thread", thread_id)
        self._deleted(tid)
        await asyncio.to_thread(self.pipeline.flush)

    def _deleted(self, tid: str) -> None:
        self.records.forget(tid)
        self.pipeline.emit(
            Event(
                kind=EventKind.THREAD_DELETED.value,
                thread_id=tid,
                status="deleted",
                payload={"thread_id": tid},
            )
        )

    def checkpointed(self, thread_id: str) -> bool:
        """Whether this checkpointer stored (and recorded) a checkpoint of ``thread_id``
        lately: the thread's state is in the record, so an audit handler of the same
        pipeline may name it instead of rendering it again (see ``AuditCallbackHandler``).
        """
        return self.records.checkpointed(thread_id)
