"""Deprecated import path: use :mod:`langgraph_external.ops.restore` (this one goes in 0.3).

It re-exports what ``langgraph_external.restore`` had before the layout change, and warns
on import.
"""

from langgraph_external._moved import warn_moved
from langgraph_external.ops.restore import (
    CheckpointLog,
    RestoredThread,
    RestoreError,
    has_checkpoints,
    iter_checkpoint_ids,
    load_checkpoint,
    read_verified_events,
    restore_recorded,
    restore_thread,
    restore_thread_report,
    verify_thread,
)

__all__ = [
    "CheckpointLog",
    "RestoreError",
    "RestoredThread",
    "has_checkpoints",
    "iter_checkpoint_ids",
    "load_checkpoint",
    "read_verified_events",
    "restore_recorded",
    "restore_thread",
    "restore_thread_report",
    "verify_thread",
]

warn_moved(__name__, "langgraph_external.ops.restore")
