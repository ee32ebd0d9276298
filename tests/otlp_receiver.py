"""A stand-in for an OTLP/HTTP traces endpoint, on 127.0.0.1, for the export's fault tests.

``POST /api/public/otel/v1/traces`` (Langfuse's path) with a protobuf
``ExportTraceServiceRequest`` (gzip or not) and Basic auth ``public:secret``, decoded with
the real ``opentelemetry-proto`` classes. Given ``tokens``, it is a plain OTLP collector
instead: ``POST /v1/traces`` with ``Authorization: Bearer <token>``.
Its ``mode`` plays faults: ``"ok"``, ``"500"``, ``"429"``, ``"hang"`` (answers
nothing until the mode changes), ``"down"`` (the port is closed: connections refused).
Every accepted span is kept, and every delivery of each span id is kept too, so a test
can check that a resent span carried identical content.

Example:
    >>> with OtlpReceiver({"pk": "sk"}) as rx:
    ...     rx.base_url.startswith("http://127.0.0.1:")
    True
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

PATH = "/api/public/otel/v1/traces"
OTLP_PATH = "/v1/traces"


@dataclass
class ReceivedSpan:
    """One decoded span (ids as hex, attributes as Python values)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    scope: str
    public_key: str  # or the bearer token
    raw: bytes = field(repr=False, default=b"")
    resource: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def type(self) -> str | None:
        """``langfuse.observation.type``."""
        return self.attributes.get("langfuse.observation.type")

    def json_attr(self, key: str) -> Any:
        """An attribute holding JSON, decoded."""
        value = self.attributes.get(key)
        return json.loads(value) if isinstance(value, str) else value


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    """The receiver: ``keys`` maps public keys to secret keys it accepts."""

    def __init__(
        self, keys: dict[str, str], port: int = 0, *, tokens: tuple[str, ...] = ()
    ) -> None:
        self.keys = dict(keys)
        self.tokens = set(tokens)  # a plain OTLP collector: /v1/traces, bearer tokens
        self.mode = "ok"
        self.requests = 0
        self.accepted_requests = 0
        self.deliveries: dict[str, list[bytes]] = {}  # span id -> each delivery's bytes
        self.spans: dict[str, ReceivedSpan] = {}
        self.lock = threading.Lock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._port = port
        self._start()

    # -- life -----------------------------------------------------------------------------
    def _start(self) -> None:
        rx = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                rx._handle(self)

        server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        server.daemon_threads = True
        server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        """What ``LANGFUSE_BASE_URL`` should be."""
        return f"http://127.0.0.1:{self._port}"

    def set_mode(self, mode: str) -> None:
        """Switch fault mode; ``"down"`` closes the port, anything else opens it again."""
        if mode == "down" and self._server is not None:
            self._release.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        elif mode != "down" and self._server is None:
            self._start()
        if mode != "hang":
            self._release.set()
        else:
            self._release.clear()
        self.mode = mode

    def close(self) -> None:
        """Stop serving."""
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OtlpReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests -------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.requests += 1
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        if self.mode == "hang":
            self._release.wait(120)
            h.close_connection = True
            return
        if h.path != (OTLP_PATH if self.tokens else PATH):
            return self._answer(h, 404, b"not found")
        auth = h.headers.get("Authorization") or ""
        if self.tokens:
            pk = auth.removeprefix("Bearer ")
            if not auth.startswith("Bearer ") or pk not in self.tokens:
                return self._answer(h, 401, b'{"message":"Invalid token"}')
        else:
            try:
                pk, sk = base64.b64decode(auth.removeprefix("Basic ")).decode().split(":", 1)
            except Exception:
                pk, sk = "", ""
            if not auth.startswith("Basic ") or self.keys.get(pk) != sk:
                return self._answer(h, 401, b'{"message":"Invalid credentials"}')
        if self.mode in ("500", "429"):
            return self._answer(h, int(self.mode), b'{"message":"try later"}')
        if h.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        with self.lock:
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    for sp in ss.spans:
                        span = ReceivedSpan(
                            trace_id=sp.trace_id.hex(),
                            span_id=sp.span_id.hex(),
                            parent_id=sp.parent_span_id.hex() or None,
                            name=sp.name,
                            start_ns=sp.start_time_unix_nano,
                            end_ns=sp.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in sp.attributes},
                            status_code=sp.status.code,
                            scope=ss.scope.name,
                            public_key=pk,
                            raw=sp.SerializeToString(deterministic=True),
                            resource={a.key: _value(a.value) for a in rs.resource.attributes},
                        )
                        self.deliveries.setdefault(span.span_id, []).append(span.raw)
                        self.spans[span.span_id] = span
            self.accepted_requests += 1
        self._answer(h, 200, ExportTraceServiceResponse().SerializeToString())

    def _answer(self, h: BaseHTTPRequestHandler, code: int, body: bytes) -> None:
        h.send_response(code)
        h.send_header("Content-Type", "application/x-protobuf")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    # -- questions ------------------------------------------------------------------------
    def wait_for(self, predicate: Any, timeout: float = 60.0) -> bool:
        """Poll until ``predicate(self)`` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self):
                    return True
            time.sleep(0.05)
        return False

    def by_key(self, public_key: str) -> list[ReceivedSpan]:
        """Spans delivered with ``public_key`` (or bearer token)."""
        with self.lock:
            return [s for s in self.spans.values() if s.public_key == public_key]

    def resent_identically(self) -> bool:
        """Every delivery of each span id carried the same bytes."""
        with self.lock:
            return all(len(set(v)) == 1 for v in self.deliveries.values())
