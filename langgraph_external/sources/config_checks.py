"""What the checkpointer refuses before the wrapped saver sees it.

A thread id, checkpoint id or namespace the record (or PostgreSQL text) cannot hold, and a
``list`` filter no stored metadata can match, are refused with a typed error here rather
than by the saver's database driver: the error is typed and nothing is stored.

Example:
    >>> checked_ids({"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}})
    't-1'
    >>> try:
    ...     check_filter({"k": float("nan")})
    ... except InvalidFilterError as exc:
    ...     print(exc)
    filter holds NaN or an infinity, which JSON cannot
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from langgraph_external.errors import InvalidCheckpointIdError, InvalidFilterError
from langgraph_external.record.thread_ids import check_thread_id

__all__ = ["check_filter", "checked_ids"]


def checked_ids(config: RunnableConfig, *, reject_nul: bool = True, thread: bool = True) -> str:
    """The config's thread id, after checking it and its checkpoint id and namespace.

    ``thread=False``: a missing thread id is allowed (``""`` comes back).

    Raises:
        InvalidThreadIdError: the thread id cannot be recorded.
        InvalidCheckpointIdError: the checkpoint id or namespace cannot be stored.
    """
    conf = config.get("configurable") or {}
    tid = (
        check_thread_id(conf.get("thread_id"), reject_nul=reject_nul)
        if thread or "thread_id" in conf
        else ""
    )
    for key in ("checkpoint_ns", "checkpoint_id"):
        value = conf.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidCheckpointIdError(f"{key} must be a str, got {type(value).__name__}")
        if reject_nul and "\x00" in value:
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


def check_filter(flt: Any, *, reject_nul: bool = True) -> None:
    """Refuse a filter no stored metadata can match (the database would fail untyped).

    Raises:
        InvalidFilterError: not a dict, or it holds a value JSON metadata cannot.
    """
    if flt is None:
        return
    if not isinstance(flt, dict):
        raise InvalidFilterError(f"filter must be a dict, got {type(flt).__name__}")
    try:
        problem = _filter_problem(flt, reject_nul)
    except RecursionError:
        problem = "is nested too deeply"
    if problem is not None:
        raise InvalidFilterError(f"filter {problem}")


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
        return next(filter(None, (_filter_problem(v, reject_nul) for v in value)), None)
    return None
