"""The drop-in checkpointer (the public import path; the recording itself is
:mod:`langgraph_external.sources.checkpointer`).

Example:
    >>> from langgraph_external.checkpointers import ExternalCheckpointer
"""

from langgraph_external.checkpointers.external_checkpointer import ExternalCheckpointer
from langgraph_external.sources.serde_tap import untapped_serde

__all__ = ["ExternalCheckpointer", "untapped_serde"]
