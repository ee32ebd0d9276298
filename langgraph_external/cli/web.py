"""``lgx ui`` and ``lgx timeline``: the record as web pages (a local app, or one HTML file).

Both need the ``ui`` extra (``pip install 'langgraph-external[ui]'``); without it they end
with that one line (exit 2), and every other command works as before.

Example (shell)::

    lgx timeline thread-42 -o run.html
    lgx ui --port 8765
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from langgraph_external.cli.base import PricesOption, Settings, command, connect
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    CliError,
    err,
    one_line,
    out,
    plural,
)
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.verify import read_jsonl
from langgraph_external.read import inspection
from langgraph_external.workspace.files import encode_thread_id
from langgraph_external.workspace.lines import events_path


def timeline(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread to draw.")],
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="HTML file to write ('-': stdout). Default: THREAD.html, the id spelled "
            "as workspace folders are (sp-A: sp-!a.html).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as JSON.")
    ] = False,
    prices: PricesOption = None,
) -> None:
    """Write a thread's record as one self-contained HTML page (the view of `lgx ui`).

    The run tree with labelled timing bars (node runs, model and tool calls, memory
    reads, policy violations with their rule, interrupts, resumes, checkpoints), the
    conversation, each model call's prompt and answer with tokens and cost, the state
    each checkpoint changed, and the thread's verification. Reads the ledger (the
    workspace's events.jsonl when the ledger lacks the thread). Exit 1: no such thread.
    Needs the ui extra: pip install 'langgraph-external[ui]'.
    """
    from langgraph_external.read.prices import load_prices  # lazy: 11 ms
    from langgraph_external.read.thread_view import checkpoint_states  # lazy: 28 ms

    with command(ctx) as s:
        # inside the command: without the ui extra, a one-line error (MissingExtraError)
        from langgraph_external import ui  # lazy: the web app, 80 ms
        from langgraph_external.ui.timeline import build_timeline, render_timeline  # lazy: 31 ms

        table = load_prices(prices)
        envelopes, source = _thread_envelopes(s, thread_id)
        if not envelopes:
            raise CliError(f"thread {thread_id!r} has no recorded events", EXIT_PROBLEM)
        data = build_timeline(thread_id, envelopes)
        ws = s.readable_workspace()
        if source == "ledger":
            cfg = ui.UiConfig(dsn="", schema=s.schema, workspace=ws, prices=table)
            with connect(s) as conn:
                page = ui.render_thread(ui.load_thread(conn, cfg, thread_id), standalone=True)
        else:
            namespaces = {e.get("checkpoint_ns") or "" for e in envelopes}
            states = checkpoint_states(ws, thread_id, namespaces) if ws is not None else None
            page = render_timeline(data, prices=table, states=states, workspace=ws)
        target = output or f"{encode_thread_id(thread_id)}.html"
        if target == "-":
            sys.stdout.write(page)
            return
        Path(target).write_text(page, encoding="utf-8")
    info = {
        "path": str(Path(target).resolve()),
        "thread_id": thread_id,
        "source": source,
        "events": data["events"],
        "items": len(data["items"]),
        "lanes": [lane["label"] for lane in data["lanes"]],
        "bytes": len(page.encode()),
    }
    if as_json:
        typer.echo(json.dumps(info, ensure_ascii=False))
    else:
        out.print(
            f"wrote {escape(info['path'])}: thread {escape(thread_id)}, "
            f"{plural(info['events'], 'event')}, "
            f"{plural(info['items'], 'item')} in {plural(len(info['lanes']), 'lane')} "
            f"(from the {source})",
            soft_wrap=True,
        )


def _thread_envelopes(s: Settings, thread_id: str) -> tuple[list[dict[str, Any]], str]:
    """A thread's envelopes from the ledger, else from the workspace's events.jsonl."""
    with connect(s) as conn:
        envelopes = ledger.fetch_events(conn, thread_id, s.schema)
    if envelopes:
        return envelopes, "ledger"
    envelopes, _ = read_jsonl(s.ws(), events_path(s.ws(), thread_id))
    return envelopes, "workspace"


def ui_command(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on (another than 127.0.0.1 exposes the record to the network).",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0: any).")] = 8765,
    prices: PricesOption = None,
) -> None:
    """Browse the record in a local, read-only web app (threads, thread view, compare).

    Serves http://127.0.0.1:8765/ until Ctrl-C. Its database sessions are read-only; it
    answers GET only and needs nothing from the network (its assets ship in the package).
    Needs the ui extra: pip install 'langgraph-external[ui]'.
    """
    from langgraph_external.read.prices import load_prices  # lazy: 11 ms

    with command(ctx) as s:
        # inside the command: without the ui extra, a one-line error (MissingExtraError)
        from langgraph_external import ui  # lazy: the web app, 80 ms

        table = load_prices(prices)
        with connect(s) as conn:  # fails early and clearly when the ledger is unreachable
            inspection.thread_in_ledger(conn, "", s.schema)
        cfg = ui.UiConfig(
            dsn=s.resolve_dsn(create=False),
            schema=s.schema,
            workspace=s.readable_workspace(),
            prices=table,
        )

        def ready(url: str) -> None:
            err.print(f"lgx ui: serving {escape(url)} (read-only; Ctrl-C stops)", soft_wrap=True)

        try:
            ui.serve(cfg, host=host, port=port, ready=ready)
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {one_line(exc)}") from exc
