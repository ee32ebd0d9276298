"""The checkpointer's record side: a capture per stored checkpoint or writes, or its event.

:class:`CheckpointRecorder` is everything the checkpointer records, and the caches that
needs: which checkpoints this process stored lately, the ``Send`` targets of recent
checkpoints (which node a push task's writes belong to), and the writes of ``Send`` tasks
that arrived before the checkpoint naming their node. The checkpointer itself only
delegates to the wrapped saver and calls in here.

* On the official Postgres saver (the *outbox*), a store becomes a
  :class:`~langgraph_external.pipeline.capture.Capture` — a reference to the saver's rows
  and the thread's waiting events — queued in the saver's own transaction
  (:meth:`CheckpointRecorder.checkpoint_capture`, :meth:`~CheckpointRecorder.writes_capture`);
  nothing is hashed, encrypted or rendered on the app's thread.
* On any other saver, the event is built here by the
  :class:`~langgraph_external.record.checkpoints.RecordBuilder` from the objects the saver
  was given and the exact bytes it serialized (:mod:`.serde_tap`), and goes to the
  pipeline's write-ahead log.

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
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import psycopg
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

from langgraph_external.pipeline.capture import Capture
from langgraph_external.pipeline.pipeline import Commit, Pipeline
from langgraph_external.record.checkpoints import (
    PER_THREAD,
    CheckpointMaterial,
    Lru,
    ParentLookup,
    RecordBuilder,
    WritesMaterial,
    node_of_task_path,
)
from langgraph_external.record.events import Event
from langgraph_external.sources.ports import CaptureInTransaction
from langgraph_external.sources.serde_tap import SerializedValues, capturing
from langgraph_external.upstream import langgraph as _compat

__all__ = ["CheckpointRecorder", "InTransaction", "read_parent"]

_PULL = _compat.TASK_PATH_PULL
_PUSH = _compat.TASK_PATH_PUSH

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


def _no_sends() -> None:
    return None


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
        digest: content address of exact bytes (default: the builder's).
        seal: encrypts exact bytes (``None``: kept in clear).
        lookup_parent: reads a parent checkpoint the caches no longer hold.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        plain_serde: SerializerProtocol,
        digest: Callable[[bytes], str] | None = None,
        seal: Callable[[bytes, bytes], bytes] | None = None,
        lookup_parent: ParentLookup | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.plain = plain_serde
        # other savers: their events are built here, from the saver's own bytes
        self.builder = RecordBuilder(seal=seal, lookup_parent=lookup_parent)
        if digest is not None:
            self.builder.digest = digest
        self._sends: Lru = Lru(PER_THREAD)  # (thread, ns, checkpoint_id) -> Send targets
        self._threads: Lru = Lru()  # threads this process stored checkpoints of, lately
        # other savers: Send-task writes seen before their step's checkpoint (async)
        self._unresolved: dict[tuple[str, str, str | None], list[Event]] = {}
        self._book = threading.Lock()  # puts and writes may arrive from several threads
        pipeline.add_flush_hook(self.drain_unresolved)

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
            for key in [k for k in self._unresolved if k[0] == tid]:
                del self._unresolved[key]

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
    ) -> InTransaction:
        """The capture of one checkpoint, queued in the saver's transaction: a reference,
        nothing computed (no hashing, encryption, canonical JSON or rendering here).
        Use it around the wrapped saver's ``put``."""
        assert ledger is not None  # the outbox is used only with such a ledger
        ns, parent = _where(config)
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
            ch: self.plain.dumps_typed(values[ch])
            for ch in new_versions
            if ch in values and _compat.inline_value_is_primitive(values[ch])
        }
        capture = Capture(
            "checkpoint", tid, ns, cid, parent, changed=list(new_versions), inline=inline or None
        )
        commit = self.pipeline.open_commit(tid)

        def run(cur: Any) -> None:
            ledger.capture_in(
                cur, commit.take(capture, ns=ns, step=step, checkpoint_id=cid, parent_id=parent)
            )

        async def arun(cur: Any) -> None:
            await ledger.acapture_in(
                cur,
                await commit.atake(capture, ns=ns, step=step, checkpoint_id=cid, parent_id=parent),
            )

        box = _compat.Outbox(run, arun)
        return InTransaction(
            box,
            "checkpoint",
            settle=lambda: self._settle_checkpoint(
                commit, box, tid, config, checkpoint, metadata, new_versions
            ),
            failed=lambda exc: commit.failed(doubtful=_doubtful(exc)),
        )

    def _settle_checkpoint(
        self,
        commit: Commit,
        box: _compat.Outbox,
        tid: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> None:
        # done if the capture ran in the saver's transaction, else (a saver subclass
        # that stores elsewhere) the event is built here, durably
        if box.ran:
            commit.done()
            return
        commit.failed()
        with capturing("checkpoint") as cap:
            event = self.checkpoint_event(tid, config, checkpoint, metadata, new_versions, cap)
        self.pipeline.emit(event, durable=True)

    def writes_in_transaction(
        self,
        ledger: CaptureInTransaction | None,
        tid: str,
        config: RunnableConfig,
        writes: Writes,
        task_id: str,
        task_path: str,
    ) -> InTransaction:
        """The capture of one task's writes, queued in the saver's transaction (use it
        around the wrapped saver's ``put_writes``). It carries no buffered events, so it
        needs no commit of the pipeline: the writes' own transaction is its only order."""
        assert ledger is not None  # the outbox is used only with such a ledger
        ns, cid = _where(config)
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

        def run(cur: Any) -> None:
            ledger.capture_row_in(cur, row)

        async def arun(cur: Any) -> None:
            await ledger.acapture_row_in(cur, row)

        box = _compat.Outbox(run, arun)
        return InTransaction(
            box,
            "write",
            settle=lambda: self._settle_writes(
                box, capture.event_id, tid, config, writes, task_id, task_path
            ),
            pipeline=self.pipeline,
        )

    def _settle_writes(
        self,
        box: _compat.Outbox,
        event_id: str,
        tid: str,
        config: RunnableConfig,
        writes: Writes,
        task_id: str,
        task_path: str,
    ) -> None:
        if box.ran:
            self.pipeline.captured_alone(tid, event_id)
            return
        with capturing("write") as cap:  # the saver opened no transaction of its own
            event = self.writes_event(tid, config, writes, task_id, task_path, cap)
        self.pipeline.emit(event, durable=True)

    # -- other savers: events built here -------------------------------------------------
    def checkpoint_event(
        self,
        tid: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        cap: SerializedValues,
    ) -> Event:
        """The checkpoint's event built here, from the objects the saver was given and the
        bytes it serialized (a saver whose transaction the record cannot join). The
        ``Send``-task writes that waited for this checkpoint are emitted first."""
        ns, parent = _where(config)
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        with self._book:
            self._threads.put(tid, None)
            sends = _compat.send_targets(values)
            self._sends.put((tid, ns, checkpoint["id"]), sends)
        self._resolve_waiting(tid, ns, checkpoint["id"])
        with self._book:
            full = self.builder.needs_full(tid, ns, parent)
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
            return self.builder.checkpoint_event(material)

    def writes_event(
        self,
        tid: str,
        config: RunnableConfig,
        writes: Writes,
        task_id: str,
        task_path: str,
        cap: SerializedValues,
    ) -> Event:
        """One task's writes event built here (see :meth:`checkpoint_event`)."""
        ns, cid = _where(config)
        material = WritesMaterial(
            thread_id=tid,
            checkpoint_ns=ns,
            checkpoint_id=cid,
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
            return self.builder.writes_event(material)

    def emit_writes(self, event: Event) -> None:
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

    def drain_unresolved(self) -> None:
        """Emit Send-task writes still waiting for their checkpoint (run ended or failed)."""
        with self._book:
            waiting = [self._named(e) for evs in self._unresolved.values() for e in evs]
            self._unresolved.clear()
        for e in waiting:
            self.pipeline.emit(e)

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

    def _dump(self, value: Any, cap: SerializedValues) -> tuple[str, bytes]:
        hit = cap.get(value)
        if hit is not None:
            return hit
        # the saver stored it without its serializer (inline primitives): encode it here
        return self.plain.dumps_typed(value)


class InTransaction:
    """Around the wrapped saver's call: the capture runs in the transaction the saver
    opens (:data:`~langgraph_external.upstream.langgraph.OUTBOX`), a serializer failure
    becomes a typed error, and afterwards the call is settled (``failed`` on an error).
    With ``pipeline``, the call is one that ``health()`` sees while it lasts.
    (A class, not a generator: it runs around every ``put`` and ``put_writes``.)
    """

    __slots__ = ("box", "failed", "pipeline", "settle", "tap", "token")

    def __init__(
        self,
        box: _compat.Outbox,
        what: str,
        *,
        settle: Callable[[], None],
        failed: Callable[[BaseException], None] | None = None,
        pipeline: Pipeline | None = None,
    ) -> None:
        self.box = box
        self.tap = capturing(what, record=False)
        self.settle = settle
        self.failed = failed
        self.pipeline = pipeline
        self.token: Any = None

    def __enter__(self) -> None:
        self.token = _compat.OUTBOX.set(self.box)
        if self.pipeline is not None:
            self.pipeline.call_started(id(self.box))
        self.tap.__enter__()

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            self.tap.__exit__(typ, exc, tb)  # raises the typed error in place of ``exc``
        except BaseException as err:
            if self.failed is not None:
                self.failed(err)
            raise
        else:
            if exc is not None and self.failed is not None:
                self.failed(exc)
        finally:
            _compat.OUTBOX.reset(self.token)
            if self.pipeline is not None:
                self.pipeline.call_ended(id(self.box))
        if exc is None:
            self.settle()


def _doubtful(exc: BaseException) -> bool:
    """Whether the saver's transaction may have committed although the call failed (the
    connection was lost around its COMMIT): riders are checked before they ride again."""
    return isinstance(exc, psycopg.OperationalError)
