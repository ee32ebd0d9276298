"""Deprecated import path: use :mod:`langgraph_external.read.diff` (this one goes in 0.3).

It re-exports what ``langgraph_external.diff`` had before the layout change, and warns
on import.
"""

from langgraph_external._moved import warn_moved
from langgraph_external.read.diff import (
    CallChange,
    CallsDiff,
    Diff,
    LoadedSide,
    MessagesDiff,
    ModelCall,
    PathDiff,
    PathEntry,
    Side,
    StateDiff,
    ToolCall,
    diff_calls,
    diff_messages,
    diff_paths,
    diff_sides,
    diff_values,
    load_calls,
    load_side,
    message_lines,
    parse_side,
    prompt_lines,
    unified_prompt_diff,
)

__all__ = [
    "CallChange",
    "CallsDiff",
    "Diff",
    "LoadedSide",
    "MessagesDiff",
    "ModelCall",
    "PathDiff",
    "PathEntry",
    "Side",
    "StateDiff",
    "ToolCall",
    "diff_calls",
    "diff_messages",
    "diff_paths",
    "diff_sides",
    "diff_values",
    "load_calls",
    "load_side",
    "message_lines",
    "parse_side",
    "prompt_lines",
    "unified_prompt_diff",
]

warn_moved(__name__, "langgraph_external.read.diff")
