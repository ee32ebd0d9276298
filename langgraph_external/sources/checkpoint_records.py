"""The checkpointer's record side: a capture per stored checkpoint or writes, or its event.

:class:`CheckpointRecorder` is everything the checkpointer records, and the caches that
needs: which checkpoints this process stored lately, the ``Send`` targets of recent
checkpoints (which node a push task's writes belong to), and what recent checkpoints
proved (``versions_seen``). The checkpointer itself only delegates to the wrapped saver
and calls in here. Either way a store becomes one
:class:`~langgraph_external.record.capture.Capture`, and the sealer builds the event:

* On the official Postgres saver (the *outbox*) the capture is a reference to the
  saver's rows and the thread's waiting events, queued in the saver's own transaction
  (:meth:`CheckpointRecorder.checkpoint_in_transaction`,
  :meth:`~CheckpointRecorder.writes_in_transaction`).
* On any other saver it carries what the saver stored *by value* — the exact bytes it
  serialized (:mod:`.serde_tap`), packed and encrypted
  (:mod:`~langgraph_external.record.by_value`) — in a ledger transaction of its own,
  committed before ``put`` returns (:meth:`CheckpointRecorder.checkpoint_by_value`).

Nothing is hashed, rendered or redacted on the app's thread for either.

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> from langgraph_external.pipeline.pipeline import Pipeline
    >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    >>> with Pipeline(InMemoryLedger()) as p:
    ...     rec = CheckpointRecorder(p, plain_serde=JsonPlusSerializer())
    ...     rec.checkpointed("t-1")
    False
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external.pipeline.by_value import store_capture
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.by_value import checkpoint_capture, writes_capture
from langgraph_external.record.capture import Capture
from langgraph_external.record.checkpoints import (
    PER_THREAD,
    CheckpointMaterial,
    Lru,
    ParentLookup,
    RecordBuilder,
    WritesMaterial,
    node_of_task_path,
)
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event
from langgraph_external.sources.captured_put import CapturedPut, CheckpointPut, WritesPut
from langgraph_external.sources.ports import CaptureInTransaction
from langgraph_external.sources.serde_tap import SerializedValues
from langgraph_external.upstream import langgraph as _compat

__all__ = ["CheckpointRecorder", "read_parent"]

Writes = Sequence[tuple[str, Any]]


def read_parent(saver: BaseCheckpointSaver[Any]) -> ParentLookup:
    """A :data:`~langgraph_external.record.checkpoints.ParentLookup` reading ``saver``: the
    ``versions_seen`` and ``Send`` targets of a parent the caches no longer hold."""

    def lookup(tid: str, ns: str, cid: str) -> tuple[Mapping[str, Any], list[str | None]] | None:
        tup = saver.get_tuple(
            {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
        )
        if tup is None:
            return None
        return dict(tup.checkpoint["versions_seen"]), _compat.send_targets(
            tup.checkpoint["channel_values"]
        )

    return lookup


def _where(config: RunnableConfig) -> tuple[str, str | None]:
    conf = config["configurable"]
    return conf.get("checkpoint_ns", "") or "", conf.get("checkpoint_id")


class CheckpointRecorder:
    """Records what a checkpointer stores, into ``pipeline``; owns the caches it needs.

    Args:
        pipeline: where captures and events go.
        plain_serde: the saver's own serializer (not the tap): encodes the values the
            official saver keeps inline in its JSON row, and values another saver
            stored without serializing them.
        cipher: encrypts by-value captures until they are sealed (``None``: packed in
            clear, as the sealed record then keeps exact copies).
        lookup_parent: reads a parent checkpoint the caches no longer hold.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        plain_serde: SerializerProtocol,
        cipher: WorkspaceCipher | None = None,
        lookup_parent: ParentLookup | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.plain = plain_serde
        # what recent checkpoints proved (``versions_seen``, Send targets): by-value
        # captures carry their parent's, so the sealer needs no read of this saver
        self.builder = RecordBuilder(lookup_parent=lookup_parent)
        self._sends: Lru = Lru(PER_THREAD)  # (thread, ns, checkpoint_id) -> Send targets
        self._threads: Lru = Lru()  # threads this process stored checkpoints of, lately
        # other savers: checkpoints this process captured by value (their children carry
        # only the changed channels)
        self._by_value: Lru = Lru(PER_THREAD)
        self._cipher = cipher
        self._book = threading.Lock()  # puts and writes may arrive from several threads

    # -- what reads and deletions prove --------------------------------------------------
    def saw(self, tid: str, tup: CheckpointTuple, *, remember: bool) -> None:
        """Remember what a read proves: the checkpoint is stored; its Sends (which node
        a push task of the next step runs) and, with ``remember`` (events built here),
        its ``versions_seen``."""
        cp = tup.checkpoint
        ns = tup.config["configurable"].get("checkpoint_ns", "") or ""
        step = (tup.metadata or {}).get("step")
        self.pipeline.note_committed(tid, ns, step if isinstance(step, int) else None, cp["id"])
        sends = _compat.send_targets(cp["channel_values"])
        with self._book:
            self._sends.put((tid, ns, cp["id"]), sends)
            if remember:
                self.builder.remember(tid, ns, cp["id"], cp["versions_seen"], sends)

    def checkpointed(self, thread_id: str) -> bool:
        """Whether a checkpoint of ``thread_id`` was stored (and recorded) here lately."""
        with self._book:
            return thread_id in self._threads

    def forget(self, tid: str) -> None:
        """Drop everything remembered of a deleted thread (its waiting writes too)."""
        with self._book:
            self._threads.pop(tid, None)
            self._sends.forget_thread(tid)
            self.builder.forget(tid)
            self._by_value.forget_thread(tid)

    def forget_checkpoints(self, tid: str, by_ns: Mapping[str, Collection[str]]) -> None:
        """Drop what is remembered of removed checkpoints (pruned, runs deleted)."""
        with self._book:
            for ns, ids in by_ns.items():
                self.builder.forget_checkpoints(tid, ns, ids)

    # -- the outbox: captures in the saver's transaction ---------------------------------
    def checkpoint_in_transaction(
        self,
        ledger: CaptureInTransaction | None,
        tid: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> CapturedPut:
        """The capture of one checkpoint, queued in the saver's transaction: a reference,
        nothing computed (no hashing, encryption, canonical JSON or rendering here).
        Use it around the wrapped saver's ``put``."""
        assert ledger is not None  # the outbox is used only with such a ledger
        ns, parent = _where(config)
        cid = checkpoint["id"]
        step = metadata.get("step")
        sends = _compat.send_targets(checkpoint["channel_values"])
        with self._book:  # which node a later Send task runs (its writes name it)
            self._threads.put(tid, None)
            if sends:  # else no task names this checkpoint's packets (the sealer checks)
                self._sends.put((tid, ns, cid), sends)
        values = checkpoint["channel_values"]
        inline = {
            ch: self.plain.dumps_typed(values[ch])
            for ch in new_versions
            if ch in values and _compat.inline_value_is_primitive(values[ch])
        }
        capture = Capture(
            "checkpoint", tid, ns, cid, parent, changed=list(new_versions), inline=inline or None
        )
        return CheckpointPut(
            ledger,
            capture,
            self.pipeline,
            step=step if isinstance(step, int) else None,
            by_value=lambda cap: self.checkpoint_by_value(
                tid, config, checkpoint, metadata, new_versions, cap
            ),
        )

    def writes_in_transaction(
        self,
        ledger: CaptureInTransaction | None,
        tid: str,
        config: RunnableConfig,
        writes: Writes,
        task_id: str,
        task_path: str,
    ) -> CapturedPut:
        """The capture of one task's writes, queued in the saver's transaction (use it
        around the wrapped saver's ``put_writes``). It carries no buffered events, so it
        needs no commit of the pipeline: the writes' own transaction is its only order."""
        assert ledger is not None  # the outbox is used only with such a ledger
        ns, cid = _where(config)
        node = node_of_task_path(task_path, lambda: self._sent(tid, ns, cid))
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
        return WritesPut(
            ledger,
            capture,
            self.pipeline,
            by_value=lambda cap: self.writes_by_value(tid, config, writes, task_id, task_path, cap),
        )

    # -- other savers: captured by value -----------------------------------------------
    def checkpoint_by_value(
        self,
        tid: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        cap: SerializedValues,
    ) -> None:
        """Capture a stored checkpoint by value (a saver whose transaction the record
        cannot join), with the thread's waiting events, in a ledger transaction of its
        own before this returns. The exact bytes are the ones the saver serialized;
        nothing is hashed, rendered or redacted here: the sealer builds the event."""
        ns, parent = _where(config)
        cid = checkpoint["id"]
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        sends = _compat.send_targets(values)
        step = metadata.get("step")
        with self._book:
            self._threads.put(tid, None)
            self._sends.put((tid, ns, cid), sends)
            # the parent's references are in the ledger when this process captured it
            # (sealed first: commit order); else every channel is carried
            partial = parent is None or (tid, ns, parent) in self._by_value
            parent_seen, parent_sends = self.builder.proved(tid, ns, parent)
            self.builder.remember(tid, ns, cid, checkpoint["versions_seen"], sends)
            self._by_value.put((tid, ns, cid), None)
        lookup = self.builder.lookup_parent
        if parent is not None and lookup is not None and None in (parent_seen, parent_sends):
            found = lookup(tid, ns, parent)  # a parent neither stored nor read here lately
            if found is not None:
                parent_seen = dict(found[0]) if parent_seen is None else parent_seen
                parent_sends = list(found[1]) if parent_sends is None else parent_sends
        wanted = new_versions if partial else versions
        material = CheckpointMaterial(
            thread_id=tid,
            checkpoint_ns=ns,
            checkpoint_id=cid,
            parent_id=parent,
            checkpoint=checkpoint,
            metadata=get_serializable_checkpoint_metadata(config, metadata),
            changed=list(new_versions),
            # serialized here, before the saver stores: the saver's tap is handed these bytes
            values={
                ch: cap.dump(self.plain, values[ch]) if ch in values else None for ch in wanted
            },
            parent_seen=parent_seen,
            parent_sends=parent_sends,
            sends=sends,
        )
        capture = checkpoint_capture(material, self._cipher, partial=partial)
        store_capture(
            self.pipeline,
            capture,
            ns=ns,
            step=step if isinstance(step, int) else None,
            checkpoint_id=cid,
            parent_id=parent,
        )

    def writes_by_value(
        self,
        tid: str,
        config: RunnableConfig,
        writes: Writes,
        task_id: str,
        task_path: str,
        cap: SerializedValues,
    ) -> None:
        """Capture one task's stored writes by value (see :meth:`checkpoint_by_value`).
        A ``Send`` task whose checkpoint is not stored yet is named by the sealer."""
        ns, cid = _where(config)
        node = node_of_task_path(task_path, lambda: self._sent(tid, ns, cid))
        material = WritesMaterial(
            thread_id=tid,
            checkpoint_ns=ns,
            checkpoint_id=cid,
            task_id=str(task_id),
            task_path=task_path,
            writes=[
                (WRITES_IDX_MAP.get(ch, i), ch, *cap.dump(self.plain, value))
                for i, (ch, value) in enumerate(writes)
            ],
            node=node,
        )
        store_capture(self.pipeline, writes_capture(material, self._cipher), riders=False)

    @contextmanager
    def storing(self, tid: str, config: RunnableConfig, what: str, ident: str) -> Iterator[None]:
        """Around the saver's store of something captured by value already: a store that
        fails is recorded (an ``error`` event naming it), and the error goes on."""
        try:
            yield
        except Exception as exc:
            ns, cid = _where(config)
            is_cp = what == "checkpoint"
            self.pipeline.emit(
                Event.new(
                    "error",
                    tid,
                    status="not_stored",
                    name=f"{what}_not_stored",
                    checkpoint_ns=ns,
                    checkpoint_id=ident if is_cp else cid,
                    task_id=None if is_cp else ident,
                    payload={
                        "error": f"{type(exc).__name__}: {exc}"[:2000],
                        "capture": what,
                        "note": f"this {what} was recorded, then the saver failed to store it",
                    },
                )
            )
            raise

    def _sent(self, tid: str, ns: str, cid: str | None) -> Any:
        # the Send targets of a checkpoint: which node a push task's writes belong to
        with self._book:
            return self._sends.get((tid, ns, cid))
