"""``lgx ui``: a local, read-only web app over the ledger.

Three pages, rendered on the server (Starlette + Jinja2, served by uvicorn; the stylesheet
and the one script ship in the package, nothing is fetched from elsewhere):

- ``/`` — the threads: search by thread id, user, session, tag, status, node, tool,
  error and policy violation (``user:alice tool:lookup_order``), sorted by time,
  duration, tokens or cost, a page at a time;
- ``/thread?id=THREAD`` — one thread: the conversation, the run tree with timing bars,
  each model call's exact prompt and answer, tokens and cost, checkpoints with the state
  change each made, interrupts and resumes, policy violations with their rule, memory
  hits with their scores, and the thread's hash-chain verification (the checks of
  ``lgx verify``);
- ``/compare?a=THREAD&b=THREAD`` (``acp``/``bcp``: a checkpoint of each) — two threads
  or two checkpoints side by side: path, prompts, answers, tool calls and state.

The app only reads: its database sessions run with ``default_transaction_read_only=on``,
it answers GET and HEAD only, and it opens the workspace for reading. It binds to
127.0.0.1 by default and answers only requests addressed to the host it was started on
(a web page elsewhere cannot reach it through DNS rebinding).

Example:
    >>> app = create_app(UiConfig(dsn="postgresql://localhost/app"))  # doctest: +SKIP
    >>> serve(UiConfig(dsn=dsn), port=8765)                            # doctest: +SKIP
"""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import psycopg

from langgraph_external import ledger
from langgraph_external.prices import PriceTable
from langgraph_external.thread_view import build_thread_view, checkpoint_states
from langgraph_external.ui import _queries
from langgraph_external.ui._render import render, thread_context

__all__ = [
    "UiConfig",
    "compare_page",
    "create_app",
    "serve",
    "thread_page",
    "threads_page",
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


@dataclass
class UiConfig:
    """Where the app reads from.

    Attributes:
        dsn: the ledger's database.
        schema: the ledger schema.
        workspace: the workspace (for readable states and the workspace side of the
            verification); ``None`` shows what the ledger alone holds.
        prices: the price table for costs.
    """

    dsn: str
    schema: str = ledger.DEFAULT_SCHEMA
    workspace: Any = None
    prices: PriceTable = field(default_factory=PriceTable)


def read_only_options() -> str:
    """libpq ``options`` of the app's sessions: read-only transactions, UTC."""
    return "-c default_transaction_read_only=on -c timezone=UTC"


class NotFound(LookupError):
    """The thread or checkpoint asked for is not in the ledger."""


# -- data for the pages -------------------------------------------------------------------
def verification(
    conn: psycopg.Connection[Any], cfg: UiConfig, thread_id: str
) -> dict[str, Any] | None:
    """The checks of ``lgx verify THREAD``, reused (not re-implemented) from verify.py."""
    from langgraph_external.verify import ThreadNotFoundError, verify_thread

    if cfg.workspace is None:
        return {
            "ok": None,
            "headline": "not verified (no workspace)",
            "problems": [],
            "note": "Start `lgx ui` with --workspace to run the checks of `lgx verify` here.",
        }
    try:
        res = verify_thread(conn, cfg.workspace, thread_id, cfg.schema)
    except ThreadNotFoundError:
        return None
    except Exception as exc:  # a check that cannot run is shown, not hidden
        return {
            "ok": False,
            "headline": "verification could not run",
            "problems": [f"{type(exc).__name__}: {exc}"],
            "note": "",
        }
    n = res.ledger_events
    headline = (
        f"hash chain verified · {n} event{'s' if n != 1 else ''}"
        if res.ok
        else f"verification failed: {len(res.problems)} problem"
        + ("s" if len(res.problems) != 1 else "")
    )
    return {
        "ok": res.ok,
        "headline": headline,
        "problems": res.problems,
        "note": "The checks of `lgx verify`: the ledger's hash chain, the workspace's copy "
        "and their agreement, the checkpoint index, and the saver's tables.",
    }


def load_thread(
    conn: psycopg.Connection[Any],
    cfg: UiConfig,
    thread_id: str,
    *,
    whole: bool = True,
    verify: bool = True,
) -> dict[str, Any]:
    """The events, view and (``verify``) verification of one thread.

    ``whole``: the envelopes exactly as stored (a standalone page embeds them); else the
    lighter form the view needs (the web app fetches whole events when asked).

    Raises:
        NotFound: the ledger has no events of ``thread_id``.
    """
    if whole:
        envs = ledger.fetch_events(conn, thread_id, cfg.schema)
    else:
        envs = _queries.view_events(conn, cfg.schema, thread_id)
    if not envs:
        raise NotFound(f"thread {thread_id!r} has no events in the ledger")
    states = None
    if cfg.workspace is not None:
        namespaces = {e.get("checkpoint_ns") or "" for e in envs if e["kind"] == "checkpoint"}
        states = checkpoint_states(cfg.workspace, thread_id, namespaces)
    view = build_thread_view(thread_id, envs, prices=cfg.prices, states=states)
    texts, queries = _queries.memory_details(
        conn,
        cfg.schema,
        [str(h.get("memory_id")) for h in view["memory_hits"]],
        [
            str((e.get("payload") or {}).get("search_id"))
            for e in envs
            if e["kind"] == "memory_search"
        ],
    )
    return {
        "envelopes": envs if whole else None,
        "view": view,
        "verification": verification(conn, cfg, thread_id) if verify else None,
        "memory_texts": texts,
        "memory_queries": queries,
    }


def thread_page(
    conn: psycopg.Connection[Any],
    cfg: UiConfig,
    thread_id: str,
    *,
    standalone: bool = False,
    root: str = "",
) -> str:
    """The HTML of one thread's page (``standalone``: one self-contained file, with the
    recorded events and the verification in it; else the page fetches them).

    Raises:
        NotFound: the ledger has no events of ``thread_id``.
    """
    data = load_thread(conn, cfg, thread_id, whole=standalone, verify=standalone)
    return render_thread(data, standalone=standalone, root=root)


def render_thread(
    data: Mapping[str, Any],
    *,
    standalone: bool = False,
    root: str = "",
    title: str | None = None,
) -> str:
    """The HTML of a :func:`load_thread` result (``standalone``: one self-contained file)."""
    view = data["view"]
    where = f"thread {view['thread_id']}"
    tid = urlencode({"id": view["thread_id"]})
    return render(
        "thread.html",
        standalone=standalone,
        root=root,
        title=title or f"lgx — {view['thread_id']}",
        where=where,
        events_url=f"{root}/thread/events.json?{tid}",
        verify_url=f"{root}/thread/verify.json?{tid}",
        row_url=f"{root}/thread/row?{tid}",
        **thread_context(
            view,
            data.get("envelopes"),
            verification=data.get("verification"),
            memory_texts=data.get("memory_texts"),
            memory_queries=data.get("memory_queries"),
        ),
    )


def render_row(data: Mapping[str, Any], row_id: int) -> str | None:
    """The details of one row of a :func:`load_thread` result (an HTML fragment), or
    ``None`` when the thread has no such row."""
    view = data["view"]
    row = next((r for r in view["rows"] if r["id"] == row_id), None)
    if row is None:
        return None
    return render(
        "row.html",
        row=row,
        view=view,
        memory_texts=data.get("memory_texts") or {},
        memory_queries=data.get("memory_queries") or {},
    )


class ThreadCache:
    """The last few threads the app loaded, keyed by their position in the ledger (a thread
    that moved on is loaded again)."""

    def __init__(self, size: int = 4) -> None:
        import threading
        from collections import OrderedDict

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


def threads_page(
    conn: psycopg.Connection[Any],
    cfg: UiConfig,
    q: str = "",
    *,
    sort: str = "time",
    order: str = "desc",
    page: int = 1,
    root: str = "",
    summaries: _queries.Summaries | None = None,
) -> str:
    """The HTML of the threads list."""
    error = None
    try:
        search = _queries.Search.parse(q)
        sort = sort if sort in _queries.SORTS else "time"
        result = _queries.list_threads(
            conn,
            cfg.schema,
            search,
            sort=sort,
            desc=order != "asc",
            page=page,
            prices=cfg.prices,
            summaries=summaries,
        )
    except _queries.SearchError as exc:
        error = str(exc)
        result = _queries.ThreadPage([], 0, 1, 1, sort, order != "asc")

    def url(**changes: Any) -> str:
        params = {"q": q, "sort": result.sort, "order": "desc" if result.desc else "asc"}
        params.update({k: str(v) for k, v in changes.items()})
        return f"{root}/?" + urlencode({k: v for k, v in params.items() if v != ""})

    def search_url(key: str, value: str) -> str:
        return f"{root}/?" + urlencode({"q": shlex.quote(f"{key}:{value}")})

    return render(
        "threads.html",
        root=root,
        title="lgx — threads",
        where=cfg.workspace.location if cfg.workspace is not None else "",
        q=q,
        page=result,
        error=error,
        sorts=_queries.SORTS,
        currency=cfg.prices.currency,
        prices_source=cfg.prices.source,
        sort_url=lambda s: url(sort=s, page=1, order="desc"),
        page_url=lambda n: url(page=n),
        search_url=search_url,
    )


# -- compare ------------------------------------------------------------------------------
def _checkpoint_seq(envs: Sequence[Mapping[str, Any]], wanted: str) -> tuple[int, str]:
    found = [
        e
        for e in envs
        if e["kind"] == "checkpoint"
        and not (e.get("checkpoint_ns") or "")
        and str(e.get("checkpoint_id") or "").startswith(wanted)
    ]
    ids = {str(e["checkpoint_id"]) for e in found}
    if not found:
        raise NotFound(f"checkpoint {wanted!r} is not a root checkpoint of the thread")
    if len(ids) > 1:
        raise NotFound(f"checkpoint prefix {wanted!r} matches {len(ids)} checkpoints")
    return int(found[-1]["seq"]), ids.pop()


def _message_text(m: Mapping[str, Any]) -> list[str]:
    role = str(m.get("role"))
    content = m.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    lines = [
        f"[{role}{' ' + str(m['name']) if m.get('name') else ''}] " + line
        for line in (text or "").splitlines() or [""]
    ]
    for call in m.get("tool_calls") or ():
        lines.append(
            f"[{role}] → {call.get('name')}("
            + json.dumps(call.get("args"), ensure_ascii=False, sort_keys=True)
            + ")"
        )
    return lines


def _prompt_lines(call: Mapping[str, Any] | None) -> list[str]:
    if call is None:
        return []
    return [line for m in call.get("full_messages") or () for line in _message_text(m)]


def _side(
    conn: psycopg.Connection[Any], cfg: UiConfig, thread_id: str, cp: str | None
) -> dict[str, Any]:
    envs = _queries.view_events(conn, cfg.schema, thread_id)
    if not envs:
        raise NotFound(f"thread {thread_id!r} has no events in the ledger")
    cut, cid = (None, None)
    if cp:
        cut, cid = _checkpoint_seq(envs, cp)
        envs = [e for e in envs if int(e["seq"]) <= cut]
    view = build_thread_view(thread_id, envs, prices=cfg.prices)
    # every call's whole prompt (the view keeps only what is new since the previous call)
    by_seq = {int(e["seq"]): e for e in envs}
    for call in view["llm_calls"]:
        env = by_seq.get(int(call.get("seq") or 0)) or {}
        payload = env.get("payload") or {}
        msgs = payload.get("messages")
        if msgs is None:
            msgs = [{"role": "user", "content": t} for t in payload.get("prompts") or ()]
        call["full_messages"] = msgs
    tools = [r for r in view["rows"] if r["kind"] == "tool"]
    from langgraph_external.diff import load_path

    path = [e for s, e in load_path(conn, thread_id, cfg.schema) if cut is None or s <= cut]
    return {
        "thread_id": thread_id,
        "checkpoint_id": cid,
        "view": view,
        "tools": tools,
        "path": path,
        "label": thread_id + (f" @ {cid}" if cid else ""),
    }


def _pairs(a: Sequence[Any], b: Sequence[Any]) -> list[tuple[Any, Any]]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else None, b[i] if i < len(b) else None) for i in range(n)]


def compare_data(
    conn: psycopg.Connection[Any],
    cfg: UiConfig,
    a: str,
    b: str,
    *,
    acp: str | None = None,
    bcp: str | None = None,
) -> dict[str, Any]:
    """Two threads (or checkpoints) side by side: path, prompts, answers, tools, state.

    Paths and states are compared by :mod:`langgraph_external.diff`; model calls and tool
    calls are paired in the order they were made.

    Raises:
        NotFound: a thread or checkpoint is not recorded.
    """
    from langgraph_external import diff

    sa, sb = _side(conn, cfg, a, acp), _side(conn, cfg, b, bcp)
    path = diff.diff_paths(sa["path"], sb["path"])
    state: Any = None
    state_note = ""
    if cfg.workspace is not None:
        try:
            la = diff.load_side(conn, cfg.workspace, diff.Side(a, sa["checkpoint_id"]), cfg.schema)
            lb = diff.load_side(conn, cfg.workspace, diff.Side(b, sb["checkpoint_id"]), cfg.schema)
            state = diff.diff_values(la.values, lb.values)
        except diff.NotFoundError as exc:
            state_note = str(exc)
    else:
        state_note = "The readable states are in the workspace: start `lgx ui --workspace DIR`."
    llm = []
    first_prompt_diff: list[str] | None = None
    for ca, cb in _pairs(sa["view"]["llm_calls"], sb["view"]["llm_calls"]):
        pa, pb = _prompt_lines(ca), _prompt_lines(cb)
        ans_a = [x for m in (ca or {}).get("answer") or () for x in _message_text(m)]
        ans_b = [x for m in (cb or {}).get("answer") or () for x in _message_text(m)]
        same_prompt = pa == pb and ca is not None and cb is not None
        if not same_prompt and first_prompt_diff is None:
            first_prompt_diff = list(
                difflib.unified_diff(pa, pb, sa["label"], sb["label"], lineterm="", n=2)
            )
        llm.append(
            {
                "a": ca,
                "b": cb,
                "same_prompt": same_prompt,
                "same_answer": ans_a == ans_b and ca is not None and cb is not None,
                "answer_a": ans_a,
                "answer_b": ans_b,
            }
        )
    tools = []
    for ta, tb in _pairs(sa["tools"], sb["tools"]):
        da, db = (ta or {}).get("detail") or {}, (tb or {}).get("detail") or {}
        tools.append(
            {
                "a": ta,
                "b": tb,
                "same": ta is not None
                and tb is not None
                and (da.get("tool"), da.get("args"), da.get("result"))
                == (db.get("tool"), db.get("args"), db.get("result")),
            }
        )
    return {
        "a": sa,
        "b": sb,
        "path": path,
        "path_pairs": _shown(_path_rows(path), lambda r: r["op"] == "equal"),
        "llm_shown": _shown(llm, lambda x: x["same_prompt"] and x["same_answer"]),
        "tools_shown": _shown(tools, lambda x: x["same"]),
        "state": state,
        "state_note": state_note,
        "llm": llm,
        "first_prompt_diff": first_prompt_diff,
        "tools": tools,
        "same": path.same
        and (state is None or state.same)
        and all(x["same_prompt"] and x["same_answer"] for x in llm)
        and all(x["same"] for x in tools),
    }


COMPARE_ROWS = 100
"""Pairs shown per section of the compare page (every difference is counted)."""


def _shown(pairs: list[dict[str, Any]], same: Any) -> dict[str, Any]:
    """The first :data:`COMPARE_ROWS` pairs (and the first that differs, if later), with
    the count of those left out and of how many of them differ."""
    shown = pairs[:COMPARE_ROWS]
    first = next((i for i, p in enumerate(pairs) if not same(p)), None)
    if first is not None and first >= COMPARE_ROWS:
        shown = [*shown, {**pairs[first], "index": first}]
    for i, p in enumerate(pairs[:COMPARE_ROWS]):
        p["index"] = i
    late = 1 if first is not None and first >= COMPARE_ROWS else 0
    rest = pairs[COMPARE_ROWS:]
    return {
        "pairs": shown,
        "more": len(rest) - late,
        "more_differ": sum(1 for p in rest if not same(p)) - late,
    }


def _path_rows(p: Any) -> list[dict[str, Any]]:
    rows = []
    for op in p.ops:
        for x, y in _pairs(op["a"], op["b"]):
            rows.append({"op": op["op"], "a": x, "b": y})
    return rows


def compare_page(
    conn: psycopg.Connection[Any] | None,
    cfg: UiConfig,
    a: str = "",
    b: str = "",
    *,
    acp: str = "",
    bcp: str = "",
    root: str = "",
) -> str:
    """The HTML of the compare page (a form until both sides are given)."""
    data = None
    error = None
    if conn is not None and a and (b or bcp):
        try:
            data = compare_data(conn, cfg, a, b or a, acp=acp or None, bcp=bcp or None)
        except NotFound as exc:
            error = str(exc)
    return render(
        "compare.html",
        root=root,
        title="lgx — compare",
        where="",
        a=a,
        b=b,
        acp=acp,
        bcp=bcp,
        c=data,
        error=error,
        currency=cfg.prices.currency,
    )


# -- the app ------------------------------------------------------------------------------
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
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    cache = ThreadCache()
    summaries = _queries.Summaries()
    verified: dict[tuple[str, Any], dict[str, Any]] = {}  # per thread position
    pool: ConnectionPool[Any] = ConnectionPool(
        cfg.dsn,
        min_size=1,
        max_size=4,
        open=False,
        kwargs={"autocommit": True, "options": read_only_options()},
    )

    def headers(resp: Response) -> Response:
        resp.headers.update(SECURITY_HEADERS)
        return resp

    def html(text: str, status: int = 200) -> Response:
        return headers(HTMLResponse(text, status_code=status))

    def not_found(message: str) -> Response:
        return html(
            render(
                "compare.html",
                title="lgx — not found",
                where="",
                a="",
                b="",
                acp="",
                bcp="",
                c=None,
                error=message,
                currency=cfg.prices.currency,
                root="",
            ),
            404,
        )

    def threads(request: Request) -> Response:
        p = request.query_params
        try:
            page = max(1, int(p.get("page", "1")))
        except ValueError:
            page = 1
        with pool.connection() as conn:
            text = threads_page(
                conn,
                cfg,
                p.get("q", ""),
                sort=p.get("sort", "time"),
                order=p.get("order", "desc"),
                page=page,
                summaries=summaries,
            )
        return html(text)

    def thread(request: Request) -> Response:
        tid = request.query_params.get("id", "")
        try:
            with pool.connection() as conn:
                return html(render_thread(cache.get(conn, cfg, tid)))
        except NotFound as exc:
            return not_found(str(exc))

    def row(request: Request) -> Response:
        tid = request.query_params.get("id", "")
        try:
            wanted = int(request.query_params.get("row", ""))
            with pool.connection() as conn:
                text = render_row(cache.get(conn, cfg, tid), wanted)
        except (NotFound, ValueError):
            text = None
        return html(text) if text is not None else not_found("no such row")

    def timeline(request: Request) -> Response:
        from langgraph_external.workspace import encode_thread_id

        tid = request.query_params.get("id", "")
        try:
            with pool.connection() as conn:
                text = thread_page(conn, cfg, tid, standalone=True)
        except NotFound as exc:
            return not_found(str(exc))
        resp = html(text)
        resp.headers["content-disposition"] = f'attachment; filename="{encode_thread_id(tid)}.html"'
        return resp

    def events(request: Request) -> Response:
        tid = request.query_params.get("id", "")
        wanted = request.query_params.get("seq")
        try:
            seqs = [int(x) for x in wanted.split(",") if x] if wanted else None
        except ValueError:
            return headers(JSONResponse({"error": "seq is a list of numbers"}, 400))
        with pool.connection() as conn:
            if seqs is None:
                envs = ledger.fetch_events(conn, tid, cfg.schema)
            else:
                envs = _queries.events_at(conn, cfg.schema, tid, seqs[:1000])
        if not envs:
            return headers(JSONResponse({"error": f"thread {tid!r} has no such events"}, 404))
        return headers(JSONResponse(envs))

    def verify(request: Request) -> Response:
        tid = request.query_params.get("id", "")
        with pool.connection() as conn:
            key = (tid, _queries.thread_row(conn, cfg.schema, tid).get("last_seq"))
            result = verified.get(key)
            if result is None:
                result = verification(conn, cfg, tid)
                if result is not None and key[1] is not None:
                    verified[key] = result
                    while len(verified) > 64:
                        verified.pop(next(iter(verified)))
        if result is None:
            return headers(JSONResponse({"error": f"thread {tid!r} is not recorded"}, 404))
        return headers(JSONResponse(result))

    def compare(request: Request) -> Response:
        p = request.query_params
        with pool.connection() as conn:
            text = compare_page(
                conn,
                cfg,
                p.get("a", ""),
                p.get("b", ""),
                acp=p.get("acp", ""),
                bcp=p.get("bcp", ""),
            )
        return html(text)

    from contextlib import asynccontextmanager

    def warm() -> None:  # every thread's summary, before the first list asks for it
        try:
            with pool.connection() as conn:
                summaries.refresh(conn, cfg.schema)
        except Exception:  # the first request reports what is wrong
            pass

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        import threading

        pool.open(wait=True, timeout=30)
        threading.Thread(target=warm, name="lgx-ui-warm", daemon=True).start()
        try:
            yield
        finally:
            pool.close()

    get = ["GET", "HEAD"]
    routes = [
        Route("/", threads, methods=get),
        Route("/thread", thread, methods=get),
        Route("/thread/timeline.html", timeline, methods=get),
        Route("/thread/events.json", events, methods=get),
        Route("/thread/verify.json", verify, methods=get),
        Route("/thread/row", row, methods=get),
        Route("/compare", compare, methods=get),
        Mount("/static", StaticFiles(packages=[("langgraph_external.ui", "static")])),
    ]
    hosts = ["127.0.0.1", "localhost", "[::1]", "::1", *allowed_hosts]
    return Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
        lifespan=lifespan,
    )


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
    import socket
    import threading
    import time

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
