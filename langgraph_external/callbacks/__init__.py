"""The audit callback handler (public import path; the implementation is
:mod:`langgraph_external.sources.callbacks`).

``AsyncAuditCallbackHandler`` was the same handler under another name (it never blocks, so
it serves async graphs too): it still imports, with a :class:`DeprecationWarning`, as
:class:`AuditCallbackHandler` until 0.3.

Example:
    >>> from langgraph_external.callbacks import AuditCallbackHandler
"""

from __future__ import annotations

from langgraph_external._moved import deprecated_names
from langgraph_external.sources.callbacks import (
    DEPRECATED_NAMES,
    AuditCallbackHandler,
    prompt_context_hash,
)

__all__ = ["AuditCallbackHandler", "prompt_context_hash"]


__getattr__ = deprecated_names(__name__, DEPRECATED_NAMES)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
