"""Restore threads from the workspace's exact copies into a saver.

Decoding the workspace's checkpoint logs gives back the values the saver holds, so a
thread can be restored into any saver (after a database loss, or to move it) without
the original database. Everything is verified first
(:func:`~langgraph_external.workspace.checkpoint_log.verify_thread`) and decoded before the
first write (:mod:`langgraph_external.ops.decode`); :func:`restore_recorded` also records
the restore.

Example:
    >>> from langgraph_external import Workspace
    >>> ws = Workspace("memory://lgx-restore-doc")
    >>> list(iter_checkpoint_ids(ws, "no-such-thread"))
    []
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external.errors import RestoreError
from langgraph_external.ops.decode import (
    RestoredThread,
    decode_all,
    load_checkpoint,
    put_all,
    put_all_atomic,
)
from langgraph_external.record.checkpoints import names_old_folder
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event, EventKind
from langgraph_external.upstream import langgraph as _compat
from langgraph_external.workspace.checkpoint_log import (
    CheckpointLog,
    has_checkpoints,
    iter_checkpoint_ids,
    read_verified_events,
    read_verified_records,
    verify_thread,
    verify_thread_records,
)
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.lines import events_path

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
    raw = _compat.stores_serializer_bytes(saver) and serde is saver.serde
    plan = decode_all(ws, thread_id, logs, serde, raw=raw)
    return put_all_atomic(plan, saver, target_thread_id or thread_id, raw=raw)


def _record_back(
    ledger: Any,
    target: str,
    records: Sequence[tuple[dict[str, Any], str]],
    held: tuple[int, str] | None,
) -> None:
    """A ledger that lost the thread gets its verified record back as it was (same seq,
    same hashes); one that still holds it must end where the workspace ends."""
    envelopes = [env for env, _ in records]
    if held is None and envelopes:
        # with their canonical lines, so the ledger stores a run of them in one statement
        keys = Event.new("error", target).envelope().keys()
        ledger.append(
            [
                Event.from_envelope(env, line=ln if env.keys() == keys else None)
                for env, ln in records
            ],
            # a record of the old folder names keeps them (it names its files there)
            legacy_names=[target] if names_old_folder(envelopes, target) else [],
        )
    elif envelopes and held != (envelopes[-1]["seq"], envelopes[-1]["hash"]):
        raise RestoreError(
            f"the ledger's record of thread {target!r} ends at seq {held[0] if held else 0}"
            f", the workspace's at seq {envelopes[-1]['seq']}: they are different "
            "records; restore under another id"
        )


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
    logs, verified = verify_thread_records(ws, thread_id, ext.cipher)
    plan = decode_all(ws, thread_id, logs, recording.serde)
    ledger = pipeline.ledger
    held = ledger.positions([target]).get(target)
    if target == thread_id:
        records = verified if verified is not None else read_verified_records(ws, thread_id)
        _record_back(ledger, target, records, held)
        # the record has these checkpoints already: write them past the recorder
        result = put_all_atomic(plan, recording.inner, target)
    else:
        if held is not None or ws.exists(events_path(ws, target)):
            raise RestoreError(f"thread {target!r} is already recorded; pick an unused id")
        result = put_all(plan, recording, target)
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
