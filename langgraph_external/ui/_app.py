"""The web app of ``lgx ui``: Starlette routes over the pages, served by uvicorn."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import psycopg

from langgraph_external.ledger import schema as ledger
from langgraph_external.read.offloaded import DIGEST, value_at
from langgraph_external.ui import _queries
from langgraph_external.ui._config import NotFound, UiConfig, read_only_options
from langgraph_external.ui._pages import (
    compare_html,
    compare_page,
    load_thread,
    render_row,
    render_thread,
    thread_page,
    threads_page,
    verification,
)
from langgraph_external.workspace.files import encode_thread_id

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = [
    "ARTIFACT_CSP",
    "ARTIFACT_TYPES",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "SECURITY_HEADERS",
    "ThreadCache",
    "artifact_path",
    "create_app",
    "serve",
    "unstorable_parameter",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


ARTIFACT_TYPES = {
    "text": "text/plain; charset=utf-8",
    "json": "application/json",
    "bytes": "text/plain; charset=utf-8",
}
"""The media type ``/artifact`` serves each kind of artifact as: never one a browser renders
as a page (a fetched web page in a tool result is shown as its text)."""


ARTIFACT_CSP = (
    "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox"
)
"""The Content-Security-Policy of ``/artifact``: stricter than the pages' (nothing runs)."""


def unstorable_parameter(params: Iterable[tuple[str, str]]) -> str | None:
    """Why a request's query cannot be answered, or ``None``: every page hands its
    parameters (thread ids, checkpoint ids, search terms) to PostgreSQL as text, which
    cannot hold NUL, nor text that is not valid Unicode.

    Example:
        >>> unstorable_parameter([("q", "error:\\x00")])
        "parameter 'q' contains NUL (U+0000), which PostgreSQL text cannot hold"
        >>> unstorable_parameter([("id", "thread-42")]) is None
        True
    """
    for key, value in params:
        for text in (key, value):
            if "\x00" in text:
                return f"parameter {key!r} contains NUL (U+0000), which PostgreSQL text cannot hold"
            if not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    return f"parameter {key!r} is not valid Unicode text"
    return None


def artifact_path(text: str | None) -> list[str | int] | None:
    """The ``at`` parameter of ``/artifact``: the path of a value in an older record's whole
    payload (``None``: not given).

    Raises:
        ValueError: ``text`` is not a JSON list of keys and indexes (at most 64).

    Example:
        >>> artifact_path('["messages",0,"content"]'), artifact_path(None)
        (['messages', 0, 'content'], None)
    """
    if text is None:
        return None
    path = json.loads(text)
    if not isinstance(path, list) or len(path) > 64:
        raise ValueError("not a list of at most 64 keys and indexes")
    if not all(isinstance(k, str) or type(k) is int for k in path):
        raise ValueError("a key is a string, an index an integer")
    return path


class ThreadCache:
    """The last few threads the app loaded, keyed by their position in the ledger (a thread
    that moved on is loaded again)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self.items: OrderedDict[tuple[str, Any], dict[str, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, conn: psycopg.Connection[Any], cfg: UiConfig, thread_id: str) -> dict[str, Any]:
        """The :func:`load_thread` result (without the whole events) of ``thread_id``.

        Raises:
            NotFound: the ledger has no events of ``thread_id``.
        """
        key = (thread_id, _queries.thread_row(conn, cfg.schema, thread_id).get("last_seq"))
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        data = load_thread(conn, cfg, thread_id, whole=False, verify=False)
        with self.lock:
            self.items[key] = data
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return data


@dataclass
class _AppState:
    """What the routes of one app share: where they read, their connection pool, and what
    they keep between requests."""

    cfg: UiConfig
    pool: ConnectionPool[Any]
    summaries: _queries.Summaries
    cache: ThreadCache = field(default_factory=ThreadCache)
    verified: dict[tuple[str, Any], dict[str, Any]] = field(default_factory=dict)
    """``verification`` results, per thread position."""


def create_app(cfg: UiConfig, *, allowed_hosts: Sequence[str] = ()) -> Any:
    """The Starlette application (GET and HEAD only, read-only database sessions).

    Args:
        cfg: where to read from.
        allowed_hosts: host names requests may be addressed to (besides 127.0.0.1,
            localhost and ::1).
    """
    from psycopg_pool import ConnectionPool
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    pool: ConnectionPool[Any] = ConnectionPool(
        cfg.dsn,
        min_size=1,
        max_size=4,
        open=False,
        kwargs={"autocommit": True, "options": read_only_options()},
    )
    state = _AppState(cfg, pool, _queries.Summaries(cfg.workspace))
    hosts = ["127.0.0.1", "localhost", "[::1]", "::1", *allowed_hosts]
    return Starlette(
        routes=_routes(state),
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
            Middleware(_refuse_unstorable, cfg=cfg),
        ],
        lifespan=_lifespan(state),
    )


def _routes(state: _AppState) -> list[Any]:
    """The app's routes: every page and data endpoint answers GET and HEAD."""
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    get = ["GET", "HEAD"]
    return [
        Route("/", partial(_threads, state), methods=get),
        Route("/thread", partial(_thread, state), methods=get),
        Route("/thread/timeline.html", partial(_timeline, state), methods=get),
        Route("/thread/events.json", partial(_events, state), methods=get),
        Route("/thread/verify.json", partial(_verify, state), methods=get),
        Route("/thread/row", partial(_row, state), methods=get),
        Route("/compare", partial(_compare, state), methods=get),
        Route("/artifact", partial(_artifact, state), methods=get),
        Mount("/static", StaticFiles(packages=[("langgraph_external.ui", "static")])),
    ]


def _lifespan(state: _AppState) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """Open the pool when the server starts (and warm the summaries), close it at the end."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        state.pool.open(wait=True, timeout=30)
        threading.Thread(target=_warm, args=(state,), name="lgx-ui-warm", daemon=True).start()
        try:
            yield
        finally:
            state.pool.close()

    return lifespan


def _warm(state: _AppState) -> None:
    """Every thread's summary, before the first list asks for it."""
    try:
        with state.pool.connection() as conn:
            state.summaries.refresh(conn, state.cfg.schema)
    except Exception:  # the first request reports what is wrong
        pass


def _refuse_unstorable(app: Any, cfg: UiConfig) -> Any:
    """Bad query text is a 400 for every page, before any page reads the ledger."""
    from starlette.datastructures import QueryParams

    async def checked(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            params = QueryParams(scope.get("query_string") or b"")
            problem = unstorable_parameter(params.multi_items())
            if problem is not None:
                await _not_found(cfg, problem, 400)(scope, receive, send)
                return
        await app(scope, receive, send)

    return checked


# -- responses (Starlette is imported where one is made: `lgx timeline` renders pages through
# this package and never needs it) --------------------------------------------------------
def _secured(resp: Response) -> Response:
    resp.headers.update(SECURITY_HEADERS)
    return resp


def _html(text: str, status: int = 200) -> Response:
    from starlette.responses import HTMLResponse

    return _secured(HTMLResponse(text, status_code=status))


def _json(data: Any, status: int = 200) -> Response:
    from starlette.responses import JSONResponse

    return _secured(JSONResponse(data, status))


def _plain(message: str, status: int) -> Response:
    from starlette.responses import PlainTextResponse

    return _secured(PlainTextResponse(message + "\n", status_code=status))


def _not_found(cfg: UiConfig, message: str, status: int = 404) -> Response:
    title = "lgx — not found" if status == 404 else "lgx — bad request"
    return _html(compare_html(cfg, title=title, error=message), status)


def _threads(state: _AppState, request: Request) -> Response:
    p = request.query_params
    try:
        page = max(1, int(p.get("page", "1")))
    except ValueError:
        page = 1
    with state.pool.connection() as conn:
        text = threads_page(
            conn,
            state.cfg,
            p.get("q", ""),
            sort=p.get("sort", "time"),
            order=p.get("order", "desc"),
            page=page,
            summaries=state.summaries,
        )
    return _html(text)


def _thread(state: _AppState, request: Request) -> Response:
    tid = request.query_params.get("id", "")
    try:
        with state.pool.connection() as conn:
            data = state.cache.get(conn, state.cfg, tid)
        if "html" not in data:  # rendered once per thread position too
            data["html"] = render_thread(data)
        return _html(data["html"])
    except NotFound as exc:
        return _not_found(state.cfg, str(exc))


def _row(state: _AppState, request: Request) -> Response:
    tid = request.query_params.get("id", "")
    try:
        wanted = int(request.query_params.get("row", ""))
        with state.pool.connection() as conn:
            text = render_row(state.cache.get(conn, state.cfg, tid), wanted)
    except (NotFound, ValueError):
        text = None
    return _html(text) if text is not None else _not_found(state.cfg, "no such row")


def _timeline(state: _AppState, request: Request) -> Response:
    tid = request.query_params.get("id", "")
    try:
        with state.pool.connection() as conn:
            text = thread_page(conn, state.cfg, tid, standalone=True)
    except NotFound as exc:
        return _not_found(state.cfg, str(exc))
    resp = _html(text)
    resp.headers["content-disposition"] = f'attachment; filename="{encode_thread_id(tid)}.html"'
    return resp


def _compare(state: _AppState, request: Request) -> Response:
    p = request.query_params
    with state.pool.connection() as conn:
        text = compare_page(
            conn,
            state.cfg,
            p.get("a", ""),
            p.get("b", ""),
            acp=p.get("acp", ""),
            bcp=p.get("bcp", ""),
        )
    return _html(text)


def _events(state: _AppState, request: Request) -> Response:
    tid = request.query_params.get("id", "")
    wanted = request.query_params.get("seq")
    try:
        seqs = [int(x) for x in wanted.split(",") if x] if wanted else None
    except ValueError:
        return _json({"error": "seq is a list of numbers"}, 400)
    with state.pool.connection() as conn:
        if seqs is None:
            envs = ledger.fetch_events(conn, tid, state.cfg.schema)
        else:
            envs = _queries.events_at(conn, state.cfg.schema, tid, seqs[:1000])
    if not envs:
        return _json({"error": f"thread {tid!r} has no such events"}, 404)
    return _json(envs)


def _verify(state: _AppState, request: Request) -> Response:
    tid = request.query_params.get("id", "")
    verified = state.verified
    with state.pool.connection() as conn:
        key = (tid, _queries.thread_row(conn, state.cfg.schema, tid).get("last_seq"))
        result = verified.get(key)
        if result is None:
            result = verification(conn, state.cfg, tid)
            if result is not None and key[1] is not None:
                verified[key] = result
                while len(verified) > 64:
                    verified.pop(next(iter(verified)))
    if result is None:
        return _json({"error": f"thread {tid!r} is not recorded"}, 404)
    return _json(result)


def _artifact(state: _AppState, request: Request) -> Response:
    """The whole of an offloaded value: an artifact the thread's record names, as text."""
    cfg = state.cfg
    tid = request.query_params.get("thread", "")
    sha = request.query_params.get("sha", "").lower()
    if not DIGEST.fullmatch(sha):
        return _plain("sha: an artifact is named by 64 lowercase hex digits (its sha256)", 400)
    try:
        at = artifact_path(request.query_params.get("at"))
    except ValueError:
        return _plain("at: a JSON list of keys and indexes (the value's path)", 400)
    if cfg.workspace is None:
        return _plain("the artifacts are in the workspace: start `lgx ui --workspace DIR`", 404)
    try:
        with state.pool.connection() as conn:
            kind = state.cache.get(conn, cfg, tid)["artifacts"].get(sha)
    except NotFound as exc:
        return _plain(str(exc), 404)
    if kind is None:
        return _plain(f"the record of thread {tid!r} names no artifact {sha}", 404)
    try:
        data = cfg.workspace.read_bytes(cfg.workspace.artifact_path(tid, sha))
    except (OSError, ValueError):
        return _plain(f"artifact {sha} of thread {tid!r} is not in the workspace", 404)
    if at is not None:  # one value of an older record's whole payload
        found = value_at(data, at) if kind == "json" else None
        if found is None:
            return _plain(f"artifact {sha} holds no value at {at!r}", 404)
        data, kind = found
    return _artifact_response(data, kind, sha)


def _artifact_response(data: bytes, kind: str, sha: str) -> Response:
    """An artifact's bytes, served as text or JSON under :data:`ARTIFACT_CSP`."""
    from starlette.responses import Response

    resp = _secured(Response(data, media_type=ARTIFACT_TYPES[kind]))
    # never a page: no script, no form, no plugin, even if a browser sniffed it as one
    resp.headers["content-security-policy"] = ARTIFACT_CSP
    ext = "json" if kind == "json" else "txt"
    resp.headers["content-disposition"] = f'inline; filename="{sha}.{ext}"'
    return resp


def serve(
    cfg: UiConfig,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    log_level: str = "warning",
    ready: Any = None,
) -> None:
    """Serve the app with uvicorn until interrupted (Ctrl-C).

    ``ready``: called with the bound URL once the server listens (port 0 picks a free
    port).
    """
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    # bound to every interface on purpose: any Host header; else only this host's names
    extra = ["*"] if host in ("0.0.0.0", "::") else [host]
    app = create_app(cfg, allowed_hosts=extra)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}/"
    if ready is not None:

        def announce() -> None:  # once uvicorn says it has started
            while not server.started and not server.should_exit:
                time.sleep(0.02)
            if server.started:
                ready(url)

        threading.Thread(target=announce, name="lgx-ui-ready", daemon=True).start()
    server.run(sockets=[sock])
