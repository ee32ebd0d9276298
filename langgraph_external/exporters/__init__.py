"""Exporters: views of the ledger in other systems (Langfuse).

Example:
    >>> from langgraph_external.exporters import LangfuseExport
    >>> LangfuseExport(public_key="pk", secret_key="sk", base_url="https://lf.example").timeout
    10.0
"""

from langgraph_external.exporters._langfuse_map import span_id_for_run, trace_id_for_run
from langgraph_external.exporters.langfuse import (
    ExportReport,
    LangfuseExport,
    LangfuseExporter,
    trace_context_for_run,
)

__all__ = [
    "ExportReport",
    "LangfuseExport",
    "LangfuseExporter",
    "span_id_for_run",
    "trace_context_for_run",
    "trace_id_for_run",
]
