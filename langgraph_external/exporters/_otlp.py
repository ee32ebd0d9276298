"""OTLP/HTTP delivery of :class:`SpanRecord` batches to Langfuse, with a verdict per batch.

The wire format is built by the OpenTelemetry SDK itself (``ReadableSpan`` with explicit
ids and times, encoded by ``opentelemetry-exporter-otlp-proto-common``). The POST is ours:
unlike the SDK's ``BatchSpanProcessor`` (which drops a batch after a failed export), the
caller learns whether the receiver *accepted* the batch and keeps its cursor otherwise.

Example:
    >>> Verdict.RETRY.value
    'retry'
"""

from __future__ import annotations

import base64
import gzip
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import requests
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from langgraph_external.exporters._langfuse_map import SpanRecord

logger = logging.getLogger("langgraph_external")

SCOPE_NAME = "langgraph-external"
TRACES_PATH = "/api/public/otel/v1/traces"


class Verdict(str, Enum):
    """What became of one POST."""

    ACCEPTED = "accepted"
    RETRY = "retry"  # refused, timed out, 429, 5xx: the same batch will be sent again
    REJECTED = "rejected"  # 401/403/404/400: retrying as-is cannot help; still kept


@dataclass(frozen=True)
class Outcome:
    """A verdict with its reason (for logs and ``health()``)."""

    verdict: Verdict
    detail: str
    retry_after: float | None = None


def encode(records: Sequence[SpanRecord], *, service_version: str | None = None) -> bytes:
    """The ``ExportTraceServiceRequest`` protobuf bytes of ``records``."""
    attrs = {"service.name": "langgraph-external"}
    if service_version:
        attrs["service.version"] = service_version
    resource = Resource.create(attrs)
    scope = InstrumentationScope(SCOPE_NAME, service_version)
    spans = []
    for r in records:
        ctx = SpanContext(
            int(r.trace_id, 16),
            int(r.span_id, 16),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        parent = (
            SpanContext(int(r.trace_id, 16), int(r.parent_id, 16), is_remote=False)
            if r.parent_id
            else None
        )
        status = Status(StatusCode.ERROR, r.error) if r.error else Status(StatusCode.UNSET)
        spans.append(
            ReadableSpan(
                name=r.name,
                context=ctx,
                parent=parent,
                resource=resource,
                attributes=dict(r.attributes),
                kind=SpanKind.INTERNAL,
                status=status,
                start_time=r.start_ns,
                end_time=r.end_ns,
                instrumentation_scope=scope,
            )
        )
    return bytes(encode_spans(spans).SerializeToString())


class OtlpSender:
    """POSTs encoded batches to ``<base_url>/api/public/otel/v1/traces``.

    Args:
        base_url: the Langfuse host (``https://langfuse.example.com``).
        public_key, secret_key: the project's API keys (Basic auth).
        timeout: seconds for connecting and for the answer (a hanging server).
        gzip_body: compress bodies (what the Langfuse SDK does by default).
        verify: TLS verification: ``True``, ``False`` or a CA bundle path.
        proxies: ``requests`` proxies mapping (``HTTPS_PROXY`` is honoured anyway).
    """

    def __init__(
        self,
        base_url: str,
        public_key: str,
        secret_key: str,
        *,
        timeout: float = 10.0,
        gzip_body: bool = True,
        verify: bool | str = True,
        proxies: dict[str, str] | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + TRACES_PATH
        token = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode("ascii")
        self.headers = {
            "Authorization": f"Basic {token}",
            "Content-Type": "application/x-protobuf",
            "x-langfuse-public-key": public_key,
            "x-langfuse-sdk-name": "langgraph-external",
        }
        if gzip_body:
            self.headers["Content-Encoding"] = "gzip"
        self.gzip_body = gzip_body
        self.timeout = timeout
        self.session = requests.Session()
        # per request, so that an explicit value wins over REQUESTS_CA_BUNDLE / *_PROXY
        self.verify = verify
        self.proxies = dict(proxies) if proxies else None

    def send(self, body: bytes) -> Outcome:
        """POST one encoded batch; never raises."""
        data = gzip.compress(body, mtime=0) if self.gzip_body else body
        try:
            resp = self.session.post(
                self.url,
                data=data,
                headers=self.headers,
                timeout=self.timeout,
                verify=self.verify,
                proxies=self.proxies,
            )
        except requests.Timeout:
            return Outcome(Verdict.RETRY, f"no answer from {self.url} within {self.timeout}s")
        except requests.ConnectionError as exc:
            return Outcome(Verdict.RETRY, f"cannot connect to {self.url}: {_short(exc)}")
        except requests.RequestException as exc:
            return Outcome(Verdict.REJECTED, f"invalid request to {self.url}: {_short(exc)}")
        code = resp.status_code
        if 200 <= code < 300:
            return Outcome(Verdict.ACCEPTED, f"HTTP {code}")
        text = resp.text[:300].strip()
        if code == 429 or code >= 500 or code == 408:
            after = _retry_after(resp.headers.get("Retry-After"))
            return Outcome(Verdict.RETRY, f"HTTP {code} from {self.url}: {text}", after)
        if code in (401, 403):
            why = "wrong public/secret key"
        elif code == 404:
            why = "wrong base URL (no Langfuse OTLP endpoint there)"
        elif code == 413:
            why = "batch too large for the server"
        else:
            why = "refused"
        return Outcome(Verdict.REJECTED, f"HTTP {code} from {self.url} ({why}): {text}")

    def close(self) -> None:
        """Release the HTTP connections."""
        self.session.close()


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 300 else text[:300] + "…"
