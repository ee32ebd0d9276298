"""Exporters: views of the ledger in trace backends (Langfuse, Phoenix, any OTLP collector).

Example:
    >>> from langgraph_external.exporters import LangfuseExport, OtlpExport
    >>> LangfuseExport(public_key="pk", secret_key="sk", base_url="https://lf.example").timeout
    10.0
    >>> OtlpExport(preset="otlp", endpoint="http://collector:4318").resolved().url
    'http://collector:4318/v1/traces'
"""

from langgraph_external.exporters._langfuse_map import span_id_for_run, trace_id_for_run
from langgraph_external.exporters.langfuse import LangfuseExport, LangfuseExporter
from langgraph_external.exporters.otlp import (
    PRESETS,
    ExportReport,
    OtlpExport,
    OtlpExporter,
    trace_context_for_run,
)

__all__ = [
    "PRESETS",
    "ExportReport",
    "LangfuseExport",
    "LangfuseExporter",
    "OtlpExport",
    "OtlpExporter",
    "span_id_for_run",
    "trace_context_for_run",
    "trace_id_for_run",
]
