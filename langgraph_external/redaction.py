"""Deprecated import path: use :mod:`langgraph_external.record.redaction` (this one goes in 0.3).

It re-exports what ``langgraph_external.redaction`` had before the layout change, and warns
on import.
"""

from langgraph_external._moved import warn_moved
from langgraph_external.record.redaction import (
    DEFAULT_SENSITIVE_KEYS,
    LEVELS,
    Level,
    Redactor,
    TextRedactor,
    as_redactor,
    luhn_valid,
    redact_at,
    redact_text,
)

__all__ = [
    "DEFAULT_SENSITIVE_KEYS",
    "LEVELS",
    "Level",
    "Redactor",
    "TextRedactor",
    "as_redactor",
    "luhn_valid",
    "redact_at",
    "redact_text",
]

warn_moved(__name__, "langgraph_external.record.redaction")
