"""Visits of a run's earlier invocations, read back from the thread's checkpoints.

A run paused by an interrupt may be resumed by another process, which has none of the
first process's memory. What every saver keeps for every graph is the checkpoint
history, and a checkpoint proves which nodes ran in the step that produced it: their
``versions_seen`` entry changed. Counting those changes back to the run's start (the
checkpoint saved for its input, ``metadata.source == "input"``) gives the visits made
before this invocation, with any saver, in any process.

Limits, documented in ``docs/guards.md``: ``Send`` tasks do not touch ``versions_seen``
(they are not counted here), and ``durability="exit"`` keeps one checkpoint per
invocation (a node counts once per earlier invocation).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from langgraph_external.upstream.langgraph import SEEN_NOT_A_NODE, checkpointer_of

logger = logging.getLogger("langgraph_external.guards")

_NOT_NODES = frozenset({"__input__", "__start__"}) | SEEN_NOT_A_NODE


def ran_in_step(older: Mapping[str, Any], newer: Mapping[str, Any]) -> set[str]:
    """Nodes that ran in the step that turned checkpoint ``older`` into ``newer``.

    Example:
        >>> a = {"versions_seen": {"work": {"x": 1}}}
        >>> b = {"versions_seen": {"work": {"x": 2}, "done": {"x": 2}}}
        >>> sorted(ran_in_step(a, b))
        ['done', 'work']
    """
    old = older.get("versions_seen") or {}
    new = newer.get("versions_seen") or {}
    return {n for n, seen in new.items() if n not in _NOT_NODES and seen != old.get(n)}


def count_visits(history: Iterable[Any]) -> Counter[str]:
    """Visits per node in the current run, from checkpoint tuples listed newest first."""
    counts: Counter[str] = Counter()
    newer: Any = None
    for item in history:
        if newer is not None:
            counts.update(ran_in_step(item.checkpoint, newer.checkpoint))
        if (item.metadata or {}).get("source") == "input":
            break
        newer = item
    return counts


def _root_config(config: RunnableConfig) -> RunnableConfig | None:
    conf = config.get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None:
        return None
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def earlier_visits(config: RunnableConfig) -> Counter[str]:
    """Visits per node made by earlier invocations of the run this task belongs to."""
    saver, root = checkpointer_of(config), _root_config(config)
    if saver is None or root is None:
        return Counter()
    try:
        return count_visits(saver.list(root))  # savers list newest first
    except NotImplementedError:  # an async-only saver in a sync run
        logger.debug("visit counts not restored: the saver has no sync list()")
        return Counter()


async def aearlier_visits(config: RunnableConfig) -> Counter[str]:
    """Async twin of :func:`earlier_visits`."""
    saver, root = checkpointer_of(config), _root_config(config)
    if saver is None or root is None:
        return Counter()
    try:
        items = [item async for item in _anewest_first(saver.alist(root))]
    except NotImplementedError:  # a sync-only saver in an async run
        return earlier_visits(config)
    return count_visits(items)


async def _anewest_first(items: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for item in items:
        yield item
        if (item.metadata or {}).get("source") == "input":
            return
