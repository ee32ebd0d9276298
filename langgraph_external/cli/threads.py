"""``lgx threads``, ``lgx show``, ``lgx events``, ``lgx state``: reading what was recorded.

Example (shell)::

    lgx threads
    lgx show thread-42 --limit 50
    lgx events thread-42 --kind checkpoint --since 2026-12-01
    lgx events thread-42 --kind llm --since 1h30m
    lgx state thread-42 --checkpoint 1f1edcd4
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

import typer
from psycopg.rows import dict_row
from rich.json import JSON
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from langgraph_external.cli.base import command, connect
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    CliError,
    err,
    format_ts,
    json_default,
    json_line,
    one_line,
    out,
    plural,
    print_data,
    time_option,
)
from langgraph_external.cli.payloads import FULL_OPTION, expanded, print_offloaded
from langgraph_external.ledger import queries
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.verify import read_jsonl
from langgraph_external.read import inspection
from langgraph_external.record.namespaces import scope_of
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.lines import events_path


def threads(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="Most threads to list (0: all).")
    ] = 50,
    replays: Annotated[
        bool,
        typer.Option("--replays", help=f"Also list replay copies ({inspection.REPLAY_PREFIX}...)."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """List recorded threads, most recently updated first (replay copies with --replays)."""
    with command(ctx) as s, connect(s) as conn:
        rows, n_total, n_copies = inspection.list_threads(
            conn, s.schema, limit=limit or None, replays=replays
        )
    if replays:
        n_total += n_copies
    if as_json:
        for r in rows:
            typer.echo(json.dumps(r, ensure_ascii=False, default=json_default))
        return
    hidden = ""
    if n_copies and not replays:
        copies = f"{n_copies} replay cop{'y' if n_copies == 1 else 'ies'}"
        hidden = f"; {copies} not listed (--replays lists them)"
    if not rows:
        out.print("no threads recorded yet" if not hidden else f"no threads listed{hidden}")
        return
    shown = plural(n_total, "thread")
    if n_total > len(rows):
        shown = f"{len(rows)} of {shown}"
    deleted = any(r["deleted_at"] is not None for r in rows)
    table = Table(caption=f"{shown}{hidden}; times in UTC", caption_justify="left")
    table.add_column("thread_id", overflow="fold", min_width=12)
    table.add_column("created", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("seq", justify="right")
    table.add_column("ckpts", justify="right")
    if deleted:
        table.add_column("deleted", no_wrap=True)
    for r in rows:
        cells: list[str | Text] = [
            Text(r["thread_id"]),
            format_ts(r["created_at"]),
            format_ts(r["updated_at"]),
            str(r["last_seq"]),
            str(r["checkpoints"]),
        ]
        if deleted:
            cells.append(format_ts(r["deleted_at"]))
        table.add_row(*cells)
    print_data(table)


def show(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread to show.")],
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="How many of the last events (0: all).")
    ] = 20,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the event envelopes as JSON lines.")
    ] = False,
    full: FULL_OPTION = False,
) -> None:
    """Summarize one thread: counts, latest state, its last events and their offloaded
    values (first and last part; ``--full``: whole)."""
    with command(ctx) as s, connect(s) as conn:
        ws = s.ws()
        tdir = ws.thread_dir(thread_id)
        cur = conn.cursor(row_factory=dict_row)
        thread = cur.execute(ledger.q(queries.SELECT_THREAD, s.schema), (thread_id,)).fetchone()
        in_workspace = ws.exists(events_path(ws, thread_id)) or ws.exists(f"{tdir}/thread.json")
        if thread is None and not in_workspace:
            raise CliError(
                f"thread {thread_id!r} not found in the ledger (schema {s.schema}) "
                f"or the workspace {ws.location}",
                EXIT_PROBLEM,
            )
        if as_json:
            _echo_envelopes(conn, ws, thread_id, s.schema, limit=limit, full=full)
            return
        places = cur.execute(ledger.q(queries.SELECT_EVENT_PLACES, s.schema), (thread_id,))
        placed = inspection.place_events(places.fetchall())
        events = placed[-limit:] if limit else placed
        seqs = [p.event["seq"] for p in events]
        shown = [  # the payloads of the events shown, for their offloaded values
            ledger.row_to_envelope(r)
            for r in conn.execute(ledger.q(queries.EVENTS_AT, s.schema), (thread_id, seqs))
        ]
        kinds = conn.execute(
            ledger.q(queries.SELECT_KIND_COUNTS, s.schema), (thread_id,)
        ).fetchall()
        state, state_problem = _read_state(ws, f"{tdir}/state.json")

    out.print(f"[bold]thread[/] {escape(thread_id)}")
    _print_ledger_summary(thread, kinds)
    out.print(f"  workspace: {escape(tdir)}" + ("" if in_workspace else " [yellow](absent)[/]"))
    _print_last_state(state, state_problem)
    if events:
        label = f"last {len(events)} events" if limit else f"all {len(events)} events"
        print_data(_events_table(events, f"{label} in step order", status=False))
        print_offloaded(ws, thread_id, shown, full=full)


def _echo_envelopes(
    conn: Any, ws: Workspace, thread_id: str, schema: str, *, limit: int, full: bool
) -> None:
    """``lgx show --json``: the thread's last ``limit`` envelopes, from the ledger (else
    from the workspace, saying so)."""
    envelopes = ledger.fetch_events(conn, thread_id, schema)
    if not envelopes:
        envelopes, bad_line = read_jsonl(ws, events_path(ws, thread_id))
        where = "read from the workspace" + (f" up to its {bad_line}" if bad_line else "")
        err.print(f"[yellow]not in the ledger;[/] {escape(where)}", soft_wrap=True)
    for env in envelopes[-limit:] if limit else envelopes:
        env = expanded(ws, thread_id, env) if full else env
        typer.echo(json_line(env))


def _print_ledger_summary(thread: dict[str, Any] | None, kinds: list[Any]) -> None:
    """The ledger's counts and times of a thread (its row of ``threads``) and its events
    per kind."""
    if thread is None:
        out.print("  [yellow]not in the ledger[/] (only in the workspace; run `lgx verify`)")
        return
    out.print(
        f"  events: {thread['events']}  checkpoints: {thread['checkpoints']}  "
        f"last seq: {thread['last_seq']}"
    )
    out.print(
        f"  created: {format_ts(thread['created_at'])} UTC  "
        f"updated: {format_ts(thread['updated_at'])} UTC"
    )
    if thread["deleted_at"] is not None:
        out.print(f"  [yellow]deleted:[/] {format_ts(thread['deleted_at'])} UTC")
    if kinds:
        out.print("  kinds: " + escape(", ".join(f"{k} {n}" for k, n in kinds)))


def _print_last_state(state: dict[str, Any] | None, problem: str | None) -> None:
    """The thread's ``state.json``: its checkpoint, step and values (or why it cannot be
    read)."""
    if state is not None:
        out.print(
            f"[bold]last state[/] (checkpoint {escape(str(state.get('checkpoint_id')))}, "
            f"step {escape(str(state.get('step')))})"
        )
        out.print(JSON(json.dumps(state.get("values", {}), ensure_ascii=False, default=str)))
    elif problem:
        out.print(f"[yellow]last state unavailable:[/] {escape(problem)}")


def _read_state(ws: Workspace, path: str) -> tuple[dict[str, Any] | None, str | None]:
    if not ws.exists(path):
        return None, None
    try:
        data = ws.read_json(path)
    except (OSError, ValueError) as exc:
        return None, f"{path}: {one_line(exc)}"
    if not isinstance(data, dict):
        return None, f"{path}: not a JSON object"
    return data, None


def events(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread whose events to list.")],
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            "-k",
            help="Only events of this kind, as the kind column prints it (repeatable), or "
            "of a family, the part before the first _ (llm: llm_start and llm_end; tool, "
            "node, run, memory, thread). An unknown kind lists the kinds.",
        ),
    ] = None,
    node: Annotated[
        list[str] | None,
        typer.Option("--node", help="Only events of this node (repeatable)."),
    ] = None,
    name: Annotated[
        list[str] | None,
        typer.Option("--name", help="Only events with this name, e.g. a tool (repeatable)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only events at or after this time: a duration ago (30s, 5m, 2h, 1d, "
            "1h30m) or an ISO 8601 time (UTC if no offset).",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="Only events before this time: a duration ago (5m, 1h30m) or an ISO 8601 "
            "time (UTC if no offset).",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="Only the last N matching events (0: all).")
    ] = 0,
    order: Annotated[
        str | None,
        typer.Option(
            "--order",
            help="step: run by run, step by step (writes with the step that wrote them; the "
            "default of the table); seq: commit order (the default of --json).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the event envelopes as JSON lines.")
    ] = False,
    full: FULL_OPTION = False,
) -> None:
    """List a thread's events from the ledger, filtered by kind, node, name and time, and
    their offloaded values (first and last part; ``--full``: whole).

    The table shows them step by step; ``seq`` is the commit order (the hash chain's),
    ``ts`` when each event happened. Exit code 1 when the thread is not in the ledger; an
    empty match is not an error.
    """
    with command(ctx) as s:
        if order not in (None, "step", "seq"):
            raise CliError(f"--order: {order!r} is not one of step, seq")
        by_step = (order or ("seq" if as_json else "step")) == "step"
        since_at, until_at = time_option(since, "--since"), time_option(until, "--until")
        with connect(s) as conn:
            flt = inspection.EventFilter(
                kinds=_kinds(conn, thread_id, s.schema, kind or []),
                nodes=tuple(node or ()),
                names=tuple(name or ()),
                since=since_at,
                until=until_at,
                limit=limit or None,
            )
            found, context = _matching_events(conn, thread_id, s.schema, flt, by_step=by_step)
        placed = (
            inspection.place_events(found, context)
            if by_step
            else [inspection.Placed(e, 0, e["step"], e["step"]) for e in found]
        )
        ws = s.ws() if full or not as_json else None
        _print_events(thread_id, placed, ws, as_json=as_json, by_step=by_step, full=full)


def _matching_events(
    conn: Any, thread_id: str, schema: str, flt: inspection.EventFilter, *, by_step: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The thread's events ``flt`` matches and, to place them step by step, the thread's
    step context; a thread the ledger does not hold: exit 1."""
    found = inspection.query_events(conn, thread_id, flt, schema)
    if not found and not inspection.thread_in_ledger(conn, thread_id, schema):
        raise CliError(
            f"thread {thread_id!r} not found in the ledger (schema {schema}); "
            "`lgx show` also reads the workspace",
            EXIT_PROBLEM,
        )
    context = inspection.step_context(conn, thread_id, schema) if by_step else None
    return found, context


def _print_events(
    thread_id: str,
    placed: list[inspection.Placed],
    ws: Workspace | None,
    *,
    as_json: bool,
    by_step: bool,
    full: bool,
) -> None:
    """``lgx events``' output: JSON lines, or a table and the offloaded values (``ws``:
    where to read them from; ``None`` when they are not shown)."""
    if as_json:
        for p in placed:
            env = expanded(ws, thread_id, p.event) if ws is not None else p.event
            typer.echo(json_line(env))
        return
    if not placed:
        err.print("no events match", soft_wrap=True)
        return
    label = f"{plural(len(placed), 'event')} in {'step' if by_step else 'commit (seq)'} order"
    print_data(_events_table(placed, label, grouped=by_step))
    if ws is not None:
        print_offloaded(ws, thread_id, [p.event for p in placed], full=full)


def _kinds(conn: Any, thread_id: str, schema: str, requested: Sequence[str]) -> tuple[str, ...]:
    """The kinds ``--kind`` names: the library's kinds and those the thread holds (a
    record made by a newer version), or families of them; an unknown one: exit 2."""
    if not requested:
        return ()
    held = conn.execute(ledger.q(queries.SELECT_KIND_COUNTS, schema), (thread_id,)).fetchall()
    try:
        return inspection.resolve_kinds(requested, [str(r[0]) for r in held])
    except ValueError as exc:
        raise CliError(f"--kind: {exc}") from None


def _events_table(
    placed: Sequence[inspection.Placed], label: str, *, status: bool = True, grouped: bool = True
) -> Table:
    """Events as a table: ``seq`` (commit order) and ``ts`` (when it happened) side by side;
    a rule between steps when ``grouped``; a writes event shows the step that wrote it."""
    caption = (
        f"{label}; seq: the commit order (the hash chain's), ts: when the event happened "
        "(UTC). The two orders differ: an event is committed after it happened, a step's "
        "writes after the step, sometimes after later steps."
    )
    table = Table(caption=caption, caption_justify="left")
    cols = ["seq", "ts (UTC)", "kind", "node", "step", "name"]
    cols += ["status", "ms"] if status else []
    for col in cols:
        table.add_column(
            col, justify="right" if col in ("seq", "step", "ms") else "left", no_wrap=True
        )
    for i, p in enumerate(placed):
        e = p.event
        ts = e["ts"] if isinstance(e["ts"], datetime) else datetime.fromisoformat(e["ts"])
        node = e.get("node") or ""
        ns = str(e.get("checkpoint_ns") or "")
        if ns:  # a subgraph's event: the nodes it runs under
            node = "/".join(scope_of(ns, node))
        cells: list[str | Text] = [
            str(e["seq"]),
            format_ts(ts, precise=True),
            Text(e["kind"]),
            Text(node),
            "" if p.own_step is None else str(p.own_step),
            Text(e.get("name") or ""),
        ]
        if status:
            ms = e.get("duration_ms")
            cells += [Text(e.get("status") or ""), "" if ms is None else f"{ms:.1f}"]
        nxt = placed[i + 1] if i + 1 < len(placed) else None
        boundary = nxt is not None and (nxt.run, nxt.step) != (p.run, p.step)
        table.add_row(*cells, end_section=grouped and boundary)
    return table


def state(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread whose state to print.")],
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            "-c",
            help="A checkpoint id or a unique prefix of one (default: the latest).",
        ),
    ] = None,
    ns: Annotated[
        str, typer.Option("--ns", help="Checkpoint namespace of a subgraph (default: root).")
    ] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the state as JSON.")] = False,
) -> None:
    """Print the readable state of a thread at a checkpoint, from the workspace.

    No database needed. Exit code 1 when the thread or the checkpoint is not there.
    """
    with command(ctx) as s:
        try:
            view = inspection.read_state(s.ws(), thread_id, checkpoint, checkpoint_ns=ns)
        except inspection.NotFoundError as exc:
            raise CliError(str(exc), EXIT_PROBLEM) from exc
        if as_json:
            typer.echo(json.dumps(view.to_dict(), ensure_ascii=False, default=str))
        else:
            _print_state(view)


def _print_state(view: inspection.StateView) -> None:
    latest = " (latest)" if view.latest else ""
    out.print(f"[bold]thread[/] {escape(view.thread_id)}", soft_wrap=True)
    out.print(
        f"  checkpoint: {escape(view.checkpoint_id)}{latest}"
        + (f"  namespace: {escape(view.checkpoint_ns)}" if view.checkpoint_ns else ""),
        soft_wrap=True,
    )
    out.print(
        f"  step: {view.step}  source: {escape(str(view.source))}  "
        f"written by: {escape(', '.join(view.nodes) or '-')}",
        soft_wrap=True,
    )
    out.print(f"  parent: {escape(str(view.parent_checkpoint_id or '-'))}", soft_wrap=True)
    if view.ts:
        out.print(f"  time: {escape(view.ts)}", soft_wrap=True)
    out.print("[bold]values[/]")
    print_data(JSON(json.dumps(view.values, ensure_ascii=False, default=str)))
    if view.pending_writes:
        out.print(f"[bold]pending writes[/] ({len(view.pending_writes)})")
        for w in view.pending_writes:
            value = json.dumps(w["value"], ensure_ascii=False, default=str)
            out.print(
                f"  {escape(str(w['node']))} → {escape(str(w['channel']))}: {escape(value)}",
                soft_wrap=True,
            )
