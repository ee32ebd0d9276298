"""What the sources read from a run's config: its metadata keys and the task running.

Example:
    >>> graph_context()["thread_id"] == NO_THREAD  # outside a graph
    True
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config

from langgraph_external.record.namespaces import where_of
from langgraph_external.record.thread_ids import check_thread_id

__all__ = ["NO_THREAD", "POLICY_HASH_KEY", "TAGS_KEY", "USER_ID_KEY", "graph_context"]

POLICY_HASH_KEY = "lgx_policy_hash"
"""Config metadata key carrying the content hash of the transition policy of a run."""

USER_ID_KEY = "langfuse_user_id"
"""Config metadata key of the run's user id (``External.config(user_id=...)``)."""

TAGS_KEY = "langfuse_tags"
"""Config metadata key of the run's tags (``External.config(tags=...)``)."""

NO_THREAD = "_no_thread"
"""Thread id recorded for runs invoked without ``configurable.thread_id``."""


def graph_context() -> dict[str, Any]:
    """Thread, node, step, task, namespace and checkpoint of the graph task running this
    code (``{"thread_id": NO_THREAD}`` outside a graph).

    Raises:
        InvalidThreadIdError: the graph's thread id cannot be recorded.
    """
    try:
        config = get_config()
    except RuntimeError:  # not inside a runnable
        return {"thread_id": NO_THREAD}
    md = config.get("metadata") or {}
    conf = config.get("configurable") or {}
    task_id, checkpoint_ns = where_of(md)
    return {
        "thread_id": check_thread_id(conf.get("thread_id") or md.get("thread_id") or NO_THREAD),
        "node": md.get("langgraph_node"),
        "step": md.get("langgraph_step"),
        "task_id": task_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": conf.get("checkpoint_id"),
    }
