"""The audit callback handler (public import path; the implementation is
:mod:`langgraph_external.sources.callbacks`).

Example:
    >>> from langgraph_external.callbacks import AuditCallbackHandler
"""

from langgraph_external.sources.callbacks import (
    AsyncAuditCallbackHandler,
    AuditCallbackHandler,
    prompt_context_hash,
)

__all__ = ["AsyncAuditCallbackHandler", "AuditCallbackHandler", "prompt_context_hash"]
