"""The checkpointer's optional capabilities, offered exactly when they work.

LangGraph's conformance suite (and any caller) decides a saver has ``prune``,
``copy_thread`` or ``delete_for_runs`` when the method is overridden, so a wrapper must
not define one its wrapped saver cannot do. :func:`class_for` builds, once per set of
capabilities, a subclass of the checkpointer carrying exactly the mixins below:
``prune`` when the wrapped saver has it, ``copy_thread`` and ``delete_for_runs`` when it
has them or stores in the official Postgres tables (done in SQL,
:mod:`langgraph_external.upstream.saver_ops`). Each records what it removed or copied.

Example:
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> sorted(capabilities_of(InMemorySaver()))
    []
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.events import Event, EventKind
from langgraph_external.record.thread_ids import check_thread_id
from langgraph_external.sources.checkpoint_records import CheckpointRecorder
from langgraph_external.upstream import saver_ops as pg
from langgraph_external.upstream.langgraph import is_async_postgres_saver, is_postgres_saver

__all__ = ["capabilities_of", "class_for", "overrides"]


def overrides(saver: BaseCheckpointSaver[Any], method: str) -> bool:
    """Whether ``saver``'s class implements ``method`` itself (not the base's stub)."""
    impl = getattr(type(saver), method, None)
    return impl is not None and impl is not getattr(BaseCheckpointSaver, method, None)


class _Wrapping:
    """What the mixins use of the checkpointer they are mixed into."""

    inner: BaseCheckpointSaver[Any]
    pipeline: Pipeline
    records: CheckpointRecorder
    reject_nul: bool


class _PruneMixin(_Wrapping):
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune in the wrapped saver and remove the pruned checkpoints' mirrors."""
        before = {t: self._ids(t) for t in thread_ids}
        self.pipeline.flush()
        self.inner.prune(thread_ids, strategy=strategy)
        for t in thread_ids:
            self._pruned(t, before[t], self._ids(t), strategy)
        self.pipeline.flush()

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async twin of :meth:`prune`."""
        before = {t: await self._aids(t) for t in thread_ids}
        await asyncio.to_thread(self.pipeline.flush)
        if overrides(self.inner, "aprune"):
            await self.inner.aprune(thread_ids, strategy=strategy)
        else:
            await asyncio.to_thread(self.inner.prune, thread_ids, strategy=strategy)
        for t in thread_ids:
            self._pruned(t, before[t], await self._aids(t), strategy)
        await asyncio.to_thread(self.pipeline.flush)

    def _ids(self, thread_id: str) -> dict[str, set[str]]:
        if is_postgres_saver(self.inner) and not is_async_postgres_saver(self.inner):
            return pg.list_checkpoint_ids(self.inner, thread_id)
        out: dict[str, set[str]] = {}
        for tup in self.inner.list({"configurable": {"thread_id": thread_id}}):
            c = tup.config["configurable"]
            out.setdefault(c.get("checkpoint_ns", ""), set()).add(c["checkpoint_id"])
        return out

    async def _aids(self, thread_id: str) -> dict[str, set[str]]:
        if is_async_postgres_saver(self.inner):
            return await pg.alist_checkpoint_ids(self.inner, thread_id)
        return await asyncio.to_thread(self._ids, thread_id)

    def _pruned(
        self,
        thread_id: str,
        before: dict[str, set[str]],
        after: dict[str, set[str]],
        strategy: str,
    ) -> None:
        removed = {ns: sorted(ids - after.get(ns, set())) for ns, ids in before.items()}
        removed = {ns: ids for ns, ids in removed.items() if ids}
        if not removed:
            return
        tid = str(thread_id)
        self.records.forget_checkpoints(tid, removed)
        self.pipeline.emit(
            Event(
                kind=EventKind.THREAD_PRUNED.value,
                thread_id=tid,
                name=strategy,
                payload={"removed": removed, "count": sum(len(v) for v in removed.values())},
            )
        )


class _CopyThreadMixin(_Wrapping):
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread, in the saver and in the record."""
        src = check_thread_id(source_thread_id, reject_nul=self.reject_nul)
        dst = check_thread_id(target_thread_id, reject_nul=self.reject_nul)
        self.pipeline.flush()
        if overrides(self.inner, "copy_thread"):
            self.inner.copy_thread(source_thread_id, target_thread_id)
        else:
            pg.copy_thread(self.inner, src, dst)
        self.pipeline.emit(_copied(src, dst))
        self.pipeline.flush()

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async twin of :meth:`copy_thread`."""
        src = check_thread_id(source_thread_id, reject_nul=self.reject_nul)
        dst = check_thread_id(target_thread_id, reject_nul=self.reject_nul)
        await asyncio.to_thread(self.pipeline.flush)
        if overrides(self.inner, "acopy_thread"):
            await self.inner.acopy_thread(source_thread_id, target_thread_id)
        elif overrides(self.inner, "copy_thread"):
            await asyncio.to_thread(self.inner.copy_thread, source_thread_id, target_thread_id)
        elif is_async_postgres_saver(self.inner):
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


class _DeleteForRunsMixin(_Wrapping):
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes in the saver and in the record."""
        self.pipeline.flush()
        if overrides(self.inner, "delete_for_runs"):
            removed = self._run_ids(run_ids)
            self.inner.delete_for_runs(run_ids)
        else:
            removed = pg.delete_for_runs(self.inner, run_ids)
        self._runs_deleted(removed, run_ids)
        self.pipeline.flush()

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async twin of :meth:`delete_for_runs`."""
        await asyncio.to_thread(self.pipeline.flush)
        if overrides(self.inner, "adelete_for_runs"):
            removed = await asyncio.to_thread(self._run_ids, run_ids)
            await self.inner.adelete_for_runs(run_ids)
        elif is_async_postgres_saver(self.inner):
            removed = await pg.adelete_for_runs(self.inner, run_ids)
        else:
            removed = await asyncio.to_thread(pg.delete_for_runs, self.inner, run_ids)
        self._runs_deleted(removed, run_ids)
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

    def _runs_deleted(self, removed: pg.Removed, run_ids: Sequence[str]) -> None:
        for tid, by_ns in removed.items():
            self.records.forget_checkpoints(tid, by_ns)
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


_MIXINS: dict[str, type] = {
    "prune": _PruneMixin,
    "copy_thread": _CopyThreadMixin,
    "delete_for_runs": _DeleteForRunsMixin,
}
_CLASSES: dict[tuple[type, frozenset[str]], type] = {}


def capabilities_of(inner: BaseCheckpointSaver[Any]) -> frozenset[str]:
    """The optional methods a recording wrapper of ``inner`` can offer."""
    postgres = is_postgres_saver(inner)  # copies and deletes runs in SQL, not prunes
    return frozenset(
        cap
        for cap in ("prune", "copy_thread", "delete_for_runs")
        if overrides(inner, cap) or overrides(inner, "a" + cap) or (postgres and cap != "prune")
    )


def class_for(base: type, caps: frozenset[str]) -> type:
    """``base`` with the mixins of ``caps`` (one class per combination, named after it)."""
    key = (base, caps)
    if key not in _CLASSES:
        bases = tuple(_MIXINS[c] for c in sorted(caps))
        name = f"{base.__name__}[{','.join(sorted(caps))}]"
        attrs = {"capabilities": caps, "__module__": base.__module__}
        _CLASSES[key] = type(name, (*bases, base), attrs) if caps else base
    return _CLASSES[key]
