"""The audit callback handler (public import path; the implementation is
:mod:`langgraph_external.sources.callbacks`).

``AsyncAuditCallbackHandler`` was the same handler under another name (it never blocks, so
it serves async graphs too): it still imports, with a :class:`DeprecationWarning`, as
:class:`AuditCallbackHandler` until 0.3.

Example:
    >>> from langgraph_external.callbacks import AuditCallbackHandler
"""

from __future__ import annotations

from typing import Any

from langgraph_external._moved import warn_deprecated
from langgraph_external.sources.callbacks import AuditCallbackHandler, prompt_context_hash

__all__ = ["AuditCallbackHandler", "prompt_context_hash"]


def __getattr__(name: str) -> Any:
    if name == "AsyncAuditCallbackHandler":
        warn_deprecated(
            f"{__name__}.AsyncAuditCallbackHandler",
            "use AuditCallbackHandler (the same handler; it serves async graphs too)",
        )
        return AuditCallbackHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
