"""Thread ids: one check, applied by every source before it records anything.

The checkpointer, the audit callback handler, the audited store, the transition guard and
the Mem0 adapter all file what they record under a thread id, which becomes a ``text``
value in PostgreSQL and a directory name in the workspace. An id that cannot be stored
(a lone surrogate such as ``"\\ud800"``, NUL, an empty string, a non-text value) is refused
with :class:`~langgraph_external.errors.InvalidThreadIdError` *before* anything is buffered
or written: a recording that took it in could never commit it, and would retry it forever.

Example:
    >>> check_thread_id("thread-42")
    'thread-42'
    >>> check_thread_id(7)
    '7'
    >>> check_thread_id("\\ud800")
    Traceback (most recent call last):
      ...
    langgraph_external.errors.InvalidThreadIdError: thread id '\\ud800' is not valid Unicode text
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph_external.errors import InvalidThreadIdError

__all__ = ["check_thread_id"]


def check_thread_id(value: Any, *, reject_nul: bool = True) -> str:
    """``value`` as the text every source records it under, or a typed refusal.

    Args:
        value: a thread id as a config carries it: a ``str``, an ``int`` or a UUID.
        reject_nul: refuse NUL (PostgreSQL ``text`` cannot hold it); only a checkpointer
            that records nowhere in PostgreSQL turns this off.

    Returns:
        ``str(value)``.

    Raises:
        InvalidThreadIdError: another type (``bool`` included), an empty id, NUL, or text
            that is not valid Unicode (lone surrogates cannot be encoded as UTF-8).

    Example:
        >>> check_thread_id("")
        Traceback (most recent call last):
          ...
        langgraph_external.errors.InvalidThreadIdError: thread id must not be empty
    """
    if not isinstance(value, (str, int, uuid.UUID)) or isinstance(value, bool):
        raise InvalidThreadIdError(
            f"thread id must be a str (or an int or UUID), got {type(value).__name__}"
        )
    tid = str(value)
    if tid == "":
        raise InvalidThreadIdError("thread id must not be empty")
    if reject_nul and "\x00" in tid:
        raise InvalidThreadIdError(
            f"thread id {tid[:80]!r} contains NUL, which PostgreSQL text cannot store"
        )
    if not tid.isascii():  # called for every recorded event: skip the copy for plain ids
        try:
            tid.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidThreadIdError(f"thread id {tid[:80]!r} is not valid Unicode text") from exc
    return tid
