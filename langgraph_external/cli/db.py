"""``lgx setup`` and ``lgx db``: the ledger schema (and the append-only role's grants), and the
embedded PostgreSQL server of the workspace.

Example (shell)::

    lgx --dsn postgresql://localhost/app setup
    lgx db start && lgx db status && lgx db stop
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import psycopg
import typer
from rich.markup import escape

from langgraph_external.cli.base import LiteralHelpCommand, LiteralHelpGroup, command, connect
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    CliError,
    err,
    out,
)
from langgraph_external.cli.worker import sealing_lines, sealing_status
from langgraph_external.errors import ExternalError
from langgraph_external.ledger import embedded
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.roles import apply_grants, grant_script


def setup(
    ctx: typer.Context,
    roles: Annotated[
        bool,
        typer.Option(
            "--roles",
            help="Print the grants of an append-only application role (see --apply).",
        ),
    ] = False,
    app_role: Annotated[
        str, typer.Option("--app-role", help="The application's role (must exist).")
    ] = "lgx_app",
    apply: Annotated[
        bool, typer.Option("--apply", help="With --roles: set up, then apply the grants.")
    ] = False,
    capture_only: Annotated[
        bool,
        typer.Option(
            "--capture-only",
            help="With --roles: the role only captures (apps with sealing='worker'; "
            "`lgx worker` runs as a role with the full grants).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Create the ledger schema (or bring it up to date) and print its version.

    With ``--roles``: print the SQL that gives ``--app-role`` append-only rights on the
    ledger (``--apply`` runs it, as the schema owner, after creating the ledger and the
    official saver's tables). See docs/security.md.
    """
    if roles and not apply:
        with command(ctx) as s:
            typer.echo(grant_script(s.schema, app_role, capture_only=capture_only), nl=False)
        return
    applied: list[str] = []
    with command(ctx) as s:
        with connect(s, create=True) as conn:
            version = ledger.setup(conn, s.schema)
            if roles:
                from langgraph.checkpoint.postgres import PostgresSaver  # lazy: --roles only

                from langgraph_external.assembly import setup_saver  # lazy: LangGraph, 0.5 s

                setup_saver(PostgresSaver(conn).setup)  # as the owner (the app role cannot)
                applied = list(
                    apply_grants(conn, s.schema, app_role, saver=True, capture_only=capture_only)
                )
        datadir = str(s.embedded_datadir) if s.embedded_datadir else None
        if as_json:
            out_json: dict[str, Any] = {"schema": s.schema, "version": version, "embedded": datadir}
            if roles:
                out_json["granted"] = {"role": app_role, "statements": len(applied)}
            typer.echo(json.dumps(out_json))
            return
        where = f" (embedded server in {datadir})" if datadir else ""
        out.print(
            f"ledger schema [bold]{escape(s.schema)}[/] is at version {version}{escape(where)}"
        )
        if roles:
            out.print(f"granted {escape(app_role)} append-only rights ({len(applied)} statements)")


db_app = typer.Typer(
    cls=LiteralHelpGroup,
    name="db",
    help="Manage the embedded PostgreSQL server of the workspace (<workspace>/.lgx/pgdata).",
    no_args_is_help=True,
)


def _status_lines(st: embedded.ServerStatus) -> list[str]:
    lines = []
    if st.running:
        lines.append(f"[green]running[/] (pid {st.pid}, {escape(st.state or 'state unknown')})")
        lines.append(f"  url: {escape(st.uri or '?')}")
        if st.started_at:
            lines.append(f"  started: {escape(st.started_at)}")
    else:
        what = "not running" if st.initialized else "not running (no database created yet)"
        lines.append(f"[yellow]{what}[/]")
    lines.append(f"  data directory: {escape(st.datadir)}")
    if st.handles:
        lines.append("  used by processes: " + ", ".join(str(p) for p in st.handles))
    if st.running:
        lines.append("  it keeps running between processes until `lgx db stop`")
    if st.stale:
        lines.append(
            f"  [yellow]left by a crash:[/] {escape(st.stale)}; the next start (or "
            "`lgx db stop`) cleans it up"
        )
    if st.stale_removed:
        lines.append("  " + _stale_removed(st.stale_removed))
    return lines


def _stale_removed(pids: list[int]) -> str:
    return "removed stale pids of processes that no longer exist: " + ", ".join(map(str, pids))


@db_app.command("status", cls=LiteralHelpCommand)
def db_status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Say whether the embedded server runs (exit 0) or not (exit 1); clean stale pids."""
    with command(ctx) as s:
        st = embedded.server_status(s.datadir())
        sealing: dict[str, Any] | None = None
        if st.running and st.uri is not None:
            try:
                sealing = sealing_status(st.uri, s.schema, s.ws())
            except (ExternalError, psycopg.Error):
                sealing = None  # no ledger set up in it yet
    if as_json:
        typer.echo(json.dumps({**st.to_dict(), "sealing": sealing}, default=str))
    else:
        for line in _status_lines(st):
            out.print(line, soft_wrap=True)
        for line in sealing_lines(sealing) if sealing is not None else []:
            out.print("  " + line, soft_wrap=True)
    if not st.running:
        raise typer.Exit(EXIT_PROBLEM)


@db_app.command("start", cls=LiteralHelpCommand)
def db_start(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Start the embedded server (or find it running) and print its URL; it keeps running."""
    with command(ctx) as s:
        st = embedded.start_detached(s.datadir())
    if as_json:
        typer.echo(json.dumps(st.to_dict()))
        return
    typer.echo(st.uri)  # stdout holds only the URL: `export LGX_DSN=$(lgx db start)`
    err.print(
        f"embedded PostgreSQL running in {escape(st.datadir)} (pid {st.pid}); "
        "it keeps running until `lgx db stop`",
        soft_wrap=True,
    )


@db_app.command("stop", cls=LiteralHelpCommand)
def db_stop(
    ctx: typer.Context,
    force: Annotated[
        bool, typer.Option("--force", help="Stop it even if live processes still use it.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Stop the embedded server; clean stale pids first. Exit 1 if still in use (no --force)."""
    with command(ctx) as s:
        res = embedded.stop_server(s.datadir(), force=force)
    if as_json:
        typer.echo(json.dumps(res.to_dict()))
    elif res.stopped:
        out.print(f"stopped the embedded server in {escape(res.status.datadir)}", soft_wrap=True)
    elif not res.was_running:
        out.print(f"not running ({escape(res.status.datadir)})", soft_wrap=True)
    if res.cleaned and not as_json:
        out.print(f"cleaned up what a crash left: {escape(res.cleaned)}", soft_wrap=True)
    if res.status.stale_removed and not as_json:
        out.print(_stale_removed(res.status.stale_removed), soft_wrap=True)
    if res.refused_for:
        if not as_json:
            pids = ", ".join(str(p) for p in res.refused_for)
            err.print(
                f"[bold red]error:[/] still used by live processes {pids}; not stopped "
                "(wait for them, or pass --force)",
                soft_wrap=True,
            )
        if not res.stopped:
            raise typer.Exit(EXIT_PROBLEM)


@db_app.command("url", cls=LiteralHelpCommand)
def db_url(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help='Print {"uri": ...} as JSON.')] = False,
) -> None:
    """Print the URL of the running embedded server (exit 1 if it is not running)."""
    with command(ctx) as s:
        st = embedded.server_status(s.datadir())
        if not st.running or st.uri is None:
            raise CliError(
                f"the embedded server in {st.datadir} is not running: `lgx db start` starts it",
                EXIT_PROBLEM,
            )
    typer.echo(json.dumps({"uri": st.uri}) if as_json else st.uri)
