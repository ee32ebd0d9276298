"""The configuration of an OTLP export: presets, the environment, headers.

:class:`OtlpExport` is the whole configuration: a plain, picklable dataclass that
:meth:`~OtlpExport.to_dict`/:meth:`~OtlpExport.from_dict` turn into JSON data and back,
completed from the environment by :meth:`~OtlpExport.resolved` — so another process
(a sidecar, a worker) builds the same exporter from it.

Presets:

* ``langfuse``: Langfuse's endpoint (``<base>/api/public/otel/v1/traces``), Basic auth
  with the project's keys, Langfuse's attributes only (what ``langfuse=True`` sends);
* ``phoenix``: Arize Phoenix (``<base>/v1/traces``, default ``http://localhost:6006``),
  an optional API key, the ``openinference.project.name`` of ``project``;
* ``otlp``: any OTLP/HTTP collector (``<base>/v1/traces``, default
  ``http://localhost:4318``), headers of your choice.

``phoenix`` and ``otlp`` spans carry Langfuse's attributes, the OpenInference ones, the
OpenTelemetry GenAI ones (``gen_ai.*``) and ours (``lgx.*``).

Example:
    >>> cfg = OtlpExport(preset="phoenix", endpoint="http://127.0.0.1:6006", project="agents")
    >>> cfg.resolved().url
    'http://127.0.0.1:6006/v1/traces'
    >>> OtlpExport.from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

from langgraph_external.errors import ConfigurationError

__all__ = ["PRESETS", "OtlpExport", "parse_headers"]


@dataclass(frozen=True)
class _Preset:
    path: str
    endpoint: str | None  # default base URL (None: required)
    semconv: bool


PRESETS: dict[str, _Preset] = {
    "langfuse": _Preset("/api/public/otel/v1/traces", None, semconv=False),
    "phoenix": _Preset("/v1/traces", "http://localhost:6006", semconv=True),
    "otlp": _Preset("/v1/traces", "http://localhost:4318", semconv=True),
}
"""What each preset sets: the traces path, the default endpoint, the attribute dialects."""

_CURSOR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$")
_RESERVED_CURSORS = frozenset({"workspace"})


@dataclass(frozen=True)
class OtlpExport:
    """Where and how to export the ledger as OTLP traces.

    Unset values are read from the environment by :meth:`resolved`, per preset:
    ``langfuse``: ``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY``, ``LANGFUSE_BASE_URL``
    (or ``LANGFUSE_HOST``), ``LANGFUSE_TRACING_ENVIRONMENT``, ``LANGFUSE_RELEASE``;
    ``phoenix``: ``PHOENIX_COLLECTOR_ENDPOINT``, ``PHOENIX_API_KEY``,
    ``PHOENIX_PROJECT_NAME``, ``PHOENIX_CLIENT_HEADERS``; ``otlp``:
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the whole URL) or
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL), ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or
    ``OTEL_EXPORTER_OTLP_HEADERS`` (``key=value,key2=value2``).

    Args:
        preset: ``"langfuse"``, ``"phoenix"`` or ``"otlp"``.
        endpoint: the receiver's base URL (``http://127.0.0.1:6006``).
        path: the traces path under ``endpoint`` (default: the preset's; ``""`` when
            ``endpoint`` is already the whole URL).
        headers: sent with every request (e.g. ``{"x-honeycomb-team": "..."}``).
        api_key: sent as ``Authorization: Bearer <api_key>``.
        public_key, secret_key: Langfuse's project keys (Basic auth).
        project: the Phoenix project (resource attribute ``openinference.project.name``).
        cursor: the name of this export's cursor in ``projection_cursors`` (default: the
            preset's name). Two exports to different receivers need different cursors.
        semantic_conventions: also send the OpenInference, GenAI and ``lgx.*``
            attributes (default: ``False`` for ``langfuse``, else ``True``).
        max_payload_bytes: an input, output or raw result whose JSON is larger is sent
            as a preview plus its address in the workspace (each value gets a third).
        timeout: seconds to connect and to wait for an answer.
        batch_spans: most spans per POST.
        gzip: compress request bodies.
        verify: TLS verification (``True``, ``False``, or a CA bundle path).
        proxies: ``{"https": "http://proxy:3128"}``; ``HTTPS_PROXY`` works too.
        environment, release: Langfuse environment and release of every trace.
        poll_interval: seconds between scans for threads written by other processes.
        linger: seconds the live exporter waits after a commit to batch what follows.
        backoff_max: most seconds between retries while the receiver is unreachable.
    """

    preset: str = "otlp"
    endpoint: str | None = None
    path: str | None = None
    headers: dict[str, str] | None = None
    api_key: str | None = None
    public_key: str | None = None
    secret_key: str | None = None
    project: str | None = None
    cursor: str | None = None
    semantic_conventions: bool | None = None
    max_payload_bytes: int = 256 * 1024
    timeout: float = 10.0
    batch_spans: int = 200
    gzip: bool = True
    verify: bool | str = True
    proxies: dict[str, str] | None = None
    environment: str | None = None
    release: str | None = None
    poll_interval: float = 1.0
    linger: float = 0.5
    backoff_max: float = 30.0

    # -- plain data ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The configuration as JSON data (secrets included: keep it where keys live)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OtlpExport:
        """Rebuild a configuration from :meth:`to_dict`'s data.

        Raises:
            ConfigurationError: a key that is not an option.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigurationError(f"unknown OTLP export option(s): {', '.join(unknown)}")
        return cls(**dict(data))

    # -- resolution ---------------------------------------------------------------------
    def resolved(self, environ: Mapping[str, str] | None = None) -> OtlpExport:
        """This configuration completed from the environment and checked.

        Raises:
            ConfigurationError: an unknown preset, a missing key or URL, or an invalid value.
        """
        env = os.environ if environ is None else environ
        preset = PRESETS.get(self.preset)
        if preset is None:
            raise ConfigurationError(
                f"unknown OTLP preset {self.preset!r}: choose one of {', '.join(PRESETS)}"
            )
        cfg = _FROM_ENV.get(self.preset, _otlp_from_env)(self, env)
        cfg = replace(
            cfg,
            endpoint=cfg.endpoint or preset.endpoint,
            path=preset.path if cfg.path is None else cfg.path,
            cursor=cfg.cursor or cfg.preset,
            semantic_conventions=(
                preset.semconv if cfg.semantic_conventions is None else cfg.semantic_conventions
            ),
        )
        what = "Langfuse base_url" if cfg.preset == "langfuse" else "OTLP endpoint"
        if not cfg.endpoint:
            raise ConfigurationError(f"{cfg.preset} export needs an endpoint")
        if not cfg.endpoint.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"{what} must start with http:// or https://, not {cfg.endpoint!r}"
            )
        if cfg.path and not cfg.path.startswith("/"):
            raise ConfigurationError(f"the OTLP path must start with '/', not {cfg.path!r}")
        assert cfg.cursor is not None
        if not _CURSOR_NAME.match(cfg.cursor) or cfg.cursor in _RESERVED_CURSORS:
            raise ConfigurationError(
                f"cursor {cfg.cursor!r}: letters, digits, '_', '.', ':', '-' (not 'workspace')"
            )
        if cfg.max_payload_bytes < 1024:
            raise ConfigurationError("max_payload_bytes must be at least 1024")
        if cfg.batch_spans < 1 or cfg.timeout <= 0:
            raise ConfigurationError("batch_spans must be >= 1 and timeout > 0")
        return cfg

    @property
    def url(self) -> str:
        """Where batches are POSTed (of a :meth:`resolved` configuration)."""
        return (self.endpoint or "").rstrip("/") + (self.path or "")

    def request_headers(self) -> dict[str, str]:
        """The headers of every POST: authentication and ``headers``."""
        out = dict(self.headers or {})
        if self.preset == "langfuse" or (self.public_key and self.secret_key):
            pair = f"{self.public_key}:{self.secret_key}".encode()
            out["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
            out["x-langfuse-public-key"] = str(self.public_key)
            out["x-langfuse-sdk-name"] = "langgraph-external"
        elif self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out

    def resource_attributes(self) -> dict[str, str]:
        """Resource attributes besides ``service.*`` (Phoenix's project)."""
        return {"openinference.project.name": self.project} if self.project else {}

    @property
    def command(self) -> str:
        """The ``lgx`` command that sends what this export left behind."""
        if self.preset == "langfuse":
            return "lgx export langfuse"
        cmd = f"lgx export otlp --preset {self.preset} --endpoint {self.endpoint}"
        return cmd + (f" --cursor {self.cursor}" if self.cursor != self.preset else "")


def _langfuse_from_env(cfg: OtlpExport, env: Mapping[str, str]) -> OtlpExport:
    cfg = replace(
        cfg,
        public_key=cfg.public_key or env.get("LANGFUSE_PUBLIC_KEY"),
        secret_key=cfg.secret_key or env.get("LANGFUSE_SECRET_KEY"),
        endpoint=cfg.endpoint or env.get("LANGFUSE_BASE_URL") or env.get("LANGFUSE_HOST"),
        environment=cfg.environment or env.get("LANGFUSE_TRACING_ENVIRONMENT"),
        release=cfg.release or env.get("LANGFUSE_RELEASE"),
    )
    missing = [
        name
        for name, value in (
            ("public_key (LANGFUSE_PUBLIC_KEY)", cfg.public_key),
            ("secret_key (LANGFUSE_SECRET_KEY)", cfg.secret_key),
            ("base_url (LANGFUSE_BASE_URL or LANGFUSE_HOST)", cfg.endpoint),
        )
        if not value
    ]
    if missing:
        raise ConfigurationError("Langfuse export needs " + ", ".join(missing))
    return cfg


def _phoenix_from_env(cfg: OtlpExport, env: Mapping[str, str]) -> OtlpExport:
    endpoint, path = cfg.endpoint, cfg.path
    if endpoint is None and env.get("PHOENIX_COLLECTOR_ENDPOINT"):
        endpoint = env["PHOENIX_COLLECTOR_ENDPOINT"].rstrip("/")
        if endpoint.endswith("/v1/traces") and path is None:
            path = ""  # Phoenix's clients accept the whole URL there too
    headers = cfg.headers
    if headers is None and env.get("PHOENIX_CLIENT_HEADERS"):
        headers = parse_headers(env["PHOENIX_CLIENT_HEADERS"])
    return replace(
        cfg,
        endpoint=endpoint,
        path=path,
        headers=headers,
        api_key=cfg.api_key or env.get("PHOENIX_API_KEY") or None,
        project=cfg.project or env.get("PHOENIX_PROJECT_NAME") or None,
    )


def _otlp_from_env(cfg: OtlpExport, env: Mapping[str, str]) -> OtlpExport:
    endpoint, path = cfg.endpoint, cfg.path
    if endpoint is None:
        if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
            path = "" if path is None else path  # the whole URL, as the OTel SDKs use it
        elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    headers = cfg.headers
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS")
    if headers is None and raw:
        headers = parse_headers(raw)
    return replace(cfg, endpoint=endpoint, path=path, headers=headers)


_FROM_ENV = {"langfuse": _langfuse_from_env, "phoenix": _phoenix_from_env}
"""How a preset reads the environment (unset values only); any other: as ``otlp``."""


def parse_headers(text: str) -> dict[str, str]:
    """``key=value,key2=value2`` (values URL-encoded, as ``OTEL_EXPORTER_OTLP_HEADERS``).

    Example:
        >>> parse_headers("api-key=a%20b, x-team=blue")
        {'api-key': 'a b', 'x-team': 'blue'}

    Raises:
        ConfigurationError: an item without ``=``.
    """
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"a header must be key=value, not {item.strip()!r}")
        out[unquote(key.strip())] = unquote(value.strip())
    return out
