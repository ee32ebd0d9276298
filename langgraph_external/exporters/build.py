"""The one place exports are resolved and exporters built, for the app's own process
(``External(..., sealing="thread")``) and for a sealing process (the app's helper,
``lgx worker``).

Example:
    >>> from langgraph_external.exporters import OtlpExport
    >>> [c.cursor for c in resolve_exports(OtlpExport(endpoint="http://collector:4318"))]
    ['otlp']
"""

from __future__ import annotations

from collections.abc import Sequence

from langgraph_external.errors import ConfigurationError
from langgraph_external.exporters.langfuse import LangfuseExport, LangfuseExporter
from langgraph_external.exporters.otlp import OtlpExport, OtlpExporter

__all__ = ["build_exporters", "resolve_exports"]

ExportSpec = OtlpExport | LangfuseExport


def resolve_exports(export: ExportSpec | Sequence[ExportSpec] | None) -> tuple[OtlpExport, ...]:
    """``export`` (one, several or none) resolved against the environment, now: a
    missing key or URL is a :class:`ConfigurationError` here, not at the first run.

    Raises:
        ConfigurationError: not an export configuration, a missing key or URL, or two
            exports sharing a cursor.
    """
    given = [export] if isinstance(export, (OtlpExport, LangfuseExport)) else list(export or [])
    configs: list[OtlpExport] = []
    for item in given:
        if isinstance(item, LangfuseExport):
            item = item.to_otlp()
        if not isinstance(item, OtlpExport):
            raise ConfigurationError(
                "export= takes an OtlpExport or a LangfuseExport (or a list of them)"
            )
        configs.append(item.resolved())
    names = [str(c.cursor) for c in configs]
    if len(set(names)) != len(names):
        raise ConfigurationError(
            f"two exports share a cursor ({', '.join(names)}): give each its own cursor="
        )
    return tuple(configs)


def build_exporters(configs: Sequence[OtlpExport], dsn: str, schema: str) -> list[OtlpExporter]:
    """One exporter per resolved configuration (a :class:`LangfuseExporter` for the
    ``langfuse`` preset), not yet attached to a sealer."""
    return [
        (LangfuseExporter if c.preset == "langfuse" else OtlpExporter)(c, dsn, schema)
        for c in configs
    ]
