"""The pages of ``lgx ui`` and what they read: a thread, the threads list, a comparison.

Functions take an open connection (read-only sessions: :func:`read_only_options`) and a
:class:`UiConfig`; they return HTML. :func:`load_thread` is shared by the web app and
``lgx timeline``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import psycopg

from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.verify import ThreadNotFoundError, verify_thread
from langgraph_external.read.offloaded import named_artifacts
from langgraph_external.read.thread_view import build_thread_view, checkpoint_states
from langgraph_external.record.locations import thread_relpath
from langgraph_external.ui import _queries
from langgraph_external.ui._compare import compare_data
from langgraph_external.ui._config import NotFound, UiConfig, read_only_options
from langgraph_external.ui._render import render, thread_context

__all__ = [
    "NotFound",
    "UiConfig",
    "compare_page",
    "load_thread",
    "read_only_options",
    "render_row",
    "render_thread",
    "thread_page",
    "threads_page",
    "verification",
]


def verification(
    conn: psycopg.Connection[Any], cfg: UiConfig, thread_id: str
) -> dict[str, Any] | None:
    """The checks of ``lgx verify THREAD``, reused (not re-implemented) from verify.py."""
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
    n = res.ledger_events if res.ok else len(res.problems)
    what = "hash chain verified · {} event" if res.ok else "verification failed: {} problem"
    headline = what.format(n) + ("s" if n != 1 else "")
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
    """The events, view and (``verify``) verification of one thread, and the artifacts its
    record names (digest -> kind: what ``/artifact`` may serve).

    ``whole``: the envelopes exactly as stored (a standalone page embeds them); else the
    lighter form the view needs (the web app fetches whole events when asked). The view
    reads an older record's whole payloads back from the workspace (:func:`loaded`).

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
    legacy = thread_id in ledger.legacy_named(conn, [thread_id], cfg.schema)
    if cfg.workspace is not None:
        cfg.workspace.folders.file_under(thread_id, legacy=legacy)  # the ledger's word
        namespaces = {e.get("checkpoint_ns") or "" for e in envs if e["kind"] == "checkpoint"}
        states = checkpoint_states(cfg.workspace, thread_id, namespaces)
    readable = _queries.read_back(cfg.workspace, thread_id, envs)
    view = build_thread_view(thread_id, readable, prices=cfg.prices, states=states)
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
        "folder": thread_relpath(thread_id, legacy=legacy),
        "view": view,
        "artifacts": named_artifacts(envs),
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
    tid = urlencode({"id": view["thread_id"]})
    return render(
        "thread.html",
        standalone=standalone,
        root=root,
        title=title or f"lgx — {view['thread_id']}",
        where=f"thread {view['thread_id']}",
        events_url=f"{root}/thread/events.json?{tid}",
        verify_url=f"{root}/thread/verify.json?{tid}",
        row_url=f"{root}/thread/row?{tid}",
        folder=data.get("folder"),
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
            workspace=cfg.workspace,
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
    return compare_html(cfg, root=root, a=a, b=b, acp=acp, bcp=bcp, c=data, error=error)


def compare_html(cfg: UiConfig, *, title: str = "lgx — compare", **values: Any) -> str:
    """The compare page's template with ``values`` (the form empty unless given); the web
    app answers a request it cannot answer with it too."""
    empty = {"where": "", "a": "", "b": "", "acp": "", "bcp": "", "c": None, "error": None}
    return render("compare.html", title=title, currency=cfg.prices.currency, **empty | values)
