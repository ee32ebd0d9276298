"""The drop-in checkpointer (public import path; the implementation is
:mod:`langgraph_external.sources.checkpointer`).

Example:
    >>> from langgraph_external.checkpointers import ExternalCheckpointer
"""

from langgraph_external.sources.checkpointer import ExternalCheckpointer, untapped_serde

__all__ = ["ExternalCheckpointer", "untapped_serde"]
