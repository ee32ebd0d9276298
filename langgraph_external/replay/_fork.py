"""Where a replay starts: the recorded checkpoint it starts from, and the thread forked
there (checkpoints and writes copied with their ids, so the tasks that run next have the
recorded ids)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph_external.read.inspection import AmbiguousCheckpointError, NotFoundError

if TYPE_CHECKING:
    from langgraph_external.replay._run import SyncOrAsync


def resolve_checkpoint(events: Sequence[Mapping[str, Any]], wanted: str) -> Mapping[str, Any]:
    """The root checkpoint event whose id is ``wanted`` or starts with it.

    Raises:
        NotFoundError: none does.
        AmbiguousCheckpointError: the prefix matches several.
    """
    roots = [e for e in events if e["kind"] == "checkpoint" and not e.get("checkpoint_ns")]
    found = [e for e in roots if str(e.get("checkpoint_id") or "").startswith(wanted)]
    exact = [e for e in found if e.get("checkpoint_id") == wanted]
    if exact or len(found) == 1:
        return (exact or found)[0]
    if not found:
        raise NotFoundError(f"checkpoint {wanted!r} is not in the record of the thread")
    raise AmbiguousCheckpointError(
        f"checkpoint prefix {wanted!r} matches {len(found)} checkpoints; give more characters"
    )


async def fork(calls: SyncOrAsync, saver: Any, source: str, target: str, upto: str) -> None:
    """Copy the checkpoints (every namespace) and writes of ``source`` up to ``upto``
    into ``target``, ids kept: task ids derive from checkpoint ids, so the tasks that run
    next have the recorded ids and namespaces. The writes recorded against ``upto``
    itself are left out: they are the next step's results, which the replay re-runs.
    ``calls``: the saver's methods or their async twins."""
    tuples = await calls.collect(saver, "list", {"configurable": {"thread_id": source}})
    for t in sorted(
        (t for t in tuples if t.checkpoint["id"] <= upto), key=lambda t: t.checkpoint["id"]
    ):  # parents first
        conf: dict[str, Any] = {
            "thread_id": target,
            "checkpoint_ns": t.config["configurable"].get("checkpoint_ns", ""),
        }
        if t.parent_config:
            conf["checkpoint_id"] = t.parent_config["configurable"]["checkpoint_id"]
        versions = dict(t.checkpoint["channel_versions"])
        stored = await calls.call(
            saver, "put", {"configurable": conf}, t.checkpoint, t.metadata, versions
        )
        if t.checkpoint["id"] == upto:
            continue  # its writes are the next step's results
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in t.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            await calls.call(saver, "put_writes", stored, writes, task_id)
