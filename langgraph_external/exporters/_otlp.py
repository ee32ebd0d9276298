"""OTLP/HTTP delivery of :class:`SpanRecord` batches, with a verdict per batch.

The wire format is built by the OpenTelemetry SDK itself (``ReadableSpan`` with explicit
ids and times, encoded by ``opentelemetry-exporter-otlp-proto-common``). The POST is ours:
unlike the SDK's ``BatchSpanProcessor`` (which drops a batch after a failed export), the
caller learns whether the receiver *accepted* the batch and keeps its cursor otherwise.

Example:
    >>> Verdict.RETRY.value
    'retry'
"""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Mapping, Sequence
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


class Verdict(str, Enum):
    """What became of one POST."""

    ACCEPTED = "accepted"
    RETRY = "retry"  # refused, timed out, 429, 5xx: the same batch will be sent again
    REJECTED = "rejected"  # 401/403/404/400: retrying as-is cannot help; still kept


class Failure(str, Enum):
    """Why a batch was not accepted: one log line per kind, not per attempt."""

    UNREACHABLE = "receiver unreachable"
    TIMEOUT = "receiver did not answer"
    SERVER_ERROR = "receiver error"
    RATE_LIMITED = "receiver busy"
    AUTH = "credentials refused"
    NOT_FOUND = "no OTLP endpoint at this URL"
    TOO_LARGE = "batch too large"
    REFUSED = "batch refused"
    INVALID = "invalid request"


@dataclass(frozen=True)
class Outcome:
    """A verdict with its reason: ``detail`` is one line, ``"<kind>: <reason>"`` (for logs
    and ``health()``); ``failure`` the kind (``None`` when accepted)."""

    verdict: Verdict
    detail: str
    retry_after: float | None = None
    failure: Failure | None = None


@dataclass(frozen=True)
class Hints:
    """What to tell the user when the receiver refuses the credentials or the URL."""

    auth: str = "wrong API key or headers"
    not_found: str = "wrong endpoint or path"


LANGFUSE_HINTS = Hints(
    auth="wrong public/secret key",
    not_found="wrong base URL (no Langfuse OTLP endpoint there)",
)


def encode(
    records: Sequence[SpanRecord],
    *,
    service_version: str | None = None,
    resource_attributes: Mapping[str, str] | None = None,
) -> bytes:
    """The ``ExportTraceServiceRequest`` protobuf bytes of ``records``.

    ``resource_attributes`` are added to ``service.name`` (``langgraph-external``) and
    ``service.version``, e.g. ``openinference.project.name`` (Phoenix's project).
    """
    attrs = {"service.name": "langgraph-external"}
    if service_version:
        attrs["service.version"] = service_version
    attrs.update(resource_attributes or {})
    resource = Resource.create(attrs)
    scope = InstrumentationScope(SCOPE_NAME, service_version)
    spans = []
    sampled = TraceFlags(TraceFlags.SAMPLED)
    for r in records:
        trace = int(r.trace_id, 16)
        ctx = SpanContext(trace, int(r.span_id, 16), is_remote=False, trace_flags=sampled)
        parent = SpanContext(trace, int(r.parent_id, 16), is_remote=False) if r.parent_id else None
        code = StatusCode.ERROR if r.error else StatusCode.OK if r.ok else StatusCode.UNSET
        spans.append(
            ReadableSpan(
                name=r.name,
                context=ctx,
                parent=parent,
                resource=resource,
                attributes=dict(r.attributes),
                kind=SpanKind.INTERNAL,
                status=Status(code, r.error or None),
                start_time=r.start_ns,
                end_time=r.end_ns,
                instrumentation_scope=scope,
            )
        )
    return bytes(encode_spans(spans).SerializeToString())


class OtlpSender:
    """POSTs encoded batches to one OTLP/HTTP traces URL (``url``: the whole of it); never
    raises. ``timeout`` covers connecting and the answer (a hanging server); ``hints``: what
    a 401/403 or a 404 most likely means for this receiver."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        timeout: float = 10.0,
        gzip_body: bool = True,
        verify: bool | str = True,
        proxies: dict[str, str] | None = None,
        hints: Hints = Hints(),
    ) -> None:
        self.url = url
        self.headers = {**headers, "Content-Type": "application/x-protobuf"}
        if gzip_body:
            self.headers["Content-Encoding"] = "gzip"
        self.gzip_body = gzip_body
        self.timeout = timeout
        self.session = requests.Session()
        # per request, so that an explicit value wins over REQUESTS_CA_BUNDLE / *_PROXY
        self.verify = verify
        self.proxies = dict(proxies) if proxies else None
        self.hints = hints

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
            return _failed(
                Verdict.RETRY, Failure.TIMEOUT, f"nothing within {self.timeout:g}s ({self.url})"
            )
        except requests.ConnectionError as exc:
            return _failed(Verdict.RETRY, Failure.UNREACHABLE, f"{_reason(exc)} ({self.url})")
        except requests.RequestException as exc:
            return _failed(Verdict.REJECTED, Failure.INVALID, f"{_reason(exc)} ({self.url})")
        code = resp.status_code
        if 200 <= code < 300:
            return Outcome(Verdict.ACCEPTED, f"HTTP {code}")
        text = " ".join(resp.text[:300].split())
        where = f"HTTP {code} from {self.url}"
        if code == 429 or code >= 500 or code == 408:
            kind = Failure.RATE_LIMITED if code == 429 else Failure.SERVER_ERROR
            after = _retry_after(resp.headers.get("Retry-After"))
            return _failed(Verdict.RETRY, kind, f"{where}: {text}", after)
        if code in (401, 403):
            kind, why = Failure.AUTH, self.hints.auth
        elif code == 404:
            kind, why = Failure.NOT_FOUND, self.hints.not_found
        elif code == 413:
            kind, why = Failure.TOO_LARGE, "batch too large for the server"
        else:
            kind, why = Failure.REFUSED, "refused"
        return _failed(Verdict.REJECTED, kind, f"{where} ({why}): {text}")

    def close(self) -> None:
        """Release the HTTP connections."""
        self.session.close()


def _failed(
    verdict: Verdict, kind: Failure, reason: str, retry_after: float | None = None
) -> Outcome:
    return Outcome(verdict, f"{kind.value}: {reason}", retry_after, kind)


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>:?\s*")


def _reason(exc: BaseException) -> str:
    """The root cause of a ``requests`` error in a few words ("connection refused").

    ``requests`` wraps urllib3's errors, which wrap the socket's: their text repeats the
    URL and holds object addresses that differ on every attempt.
    """
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.strerror and not isinstance(e, requests.RequestException):
            return str(e.strerror).lower()
        for nxt in (getattr(e, "reason", None), e.__cause__, e.__context__, *e.args):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    text = _OBJECT_REPR.sub("", str(exc))
    return text if len(text) < 300 else text[:300] + "…"


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
