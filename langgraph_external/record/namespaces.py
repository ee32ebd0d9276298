"""Checkpoint namespaces: the one parser of LangGraph's ``checkpoint_ns`` strings.

Inside a node LangGraph names where the node runs by a *task namespace*: the chain of
``node:task_id`` segments from the root graph down to the running task, joined by ``|``
(``"agent:1f0e"`` in the root graph, ``"sub:9a2b|inner:77c1"`` inside a subgraph). A
task's events are recorded with its task id and the namespace of the graph it runs in
(the chain without its last segment), so every source that reads the namespace splits it
here, the same way.

Example:
    >>> where_of({"langgraph_checkpoint_ns": "sub:9a2b|inner:77c1"})
    Where(task_id='77c1', checkpoint_ns='sub:9a2b')
    >>> scope_of("summarize:1f0e|double:9a2b", "add")
    ('summarize', 'double', 'add')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

SEPARATOR = "|"
"""Between the segments of a namespace (one per graph level)."""
TASK_MARK = ":"
"""Between a segment's node name and its task id."""


class Where(NamedTuple):
    """A task's place: its task id (None outside a task) and its graph's namespace."""

    task_id: str | None
    checkpoint_ns: str


def namespace_of(metadata: Mapping[str, Any], configurable: Mapping[str, Any] | None = None) -> str:
    """The task namespace a callback's or a node's ``metadata`` names ("" at the root).

    Falls back to ``configurable["checkpoint_ns"]`` (what a node's own config carries).

    Example:
        >>> namespace_of({}, {"checkpoint_ns": "agent:1f0e"})
        'agent:1f0e'
    """
    ns = metadata.get("langgraph_checkpoint_ns")
    if not ns and configurable is not None:
        ns = configurable.get("checkpoint_ns")
    return str(ns or "")


def split_task(task_ns: str) -> Where:
    """Split a task namespace into the task's id and the namespace it runs in.

    Example:
        >>> split_task("agent:1f0e")
        Where(task_id='1f0e', checkpoint_ns='')
        >>> split_task("")
        Where(task_id=None, checkpoint_ns='')
    """
    if not task_ns:
        return Where(None, "")
    parent, _, last = task_ns.rpartition(SEPARATOR)
    _, mark, task_id = last.partition(TASK_MARK)
    return Where(task_id if mark else None, parent)


def where_of(metadata: Mapping[str, Any], configurable: Mapping[str, Any] | None = None) -> Where:
    """:func:`split_task` of :func:`namespace_of`: where a callback's or node's call runs."""
    return split_task(namespace_of(metadata, configurable))


def parent_of(task_ns: str) -> str:
    """The namespace a task namespace's task runs in (its chain without the last segment).

    Example:
        >>> parent_of("sub:9a2b|inner:77c1")
        'sub:9a2b'
    """
    return task_ns.rpartition(SEPARATOR)[0]


def scope_of(checkpoint_ns: str | None, node: str | None = None) -> tuple[str, ...]:
    """Node names of a namespace, task ids left out, ``node`` appended when given.

    Example:
        >>> scope_of("summarize:1f0e|double:9a2b")
        ('summarize', 'double')
        >>> scope_of("summarize:1f0e", "double")
        ('summarize', 'double')
    """
    names = [p.partition(TASK_MARK)[0] for p in (checkpoint_ns or "").split(SEPARATOR) if p]
    return tuple(names + ([node] if node else []))
