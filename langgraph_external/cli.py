"""``lgx``: inspect and verify what langgraph-external recorded.

The commands read the Postgres ledger (the system of record) and the file workspace (its
mirror); none of them changes a recorded event (``lgx sql --write`` runs what it is given;
``lgx replay`` records a new thread).
The queries, filters and readers live in :mod:`langgraph_external.inspection` and the
embedded server's management in :mod:`langgraph_external.embedded`; this module parses
options and prints.

Example (shell)::

    lgx --dsn postgresql://localhost/app setup
    lgx threads
    lgx show thread-42 --limit 50
    lgx events thread-42 --kind checkpoint --since 2026-12-01
    lgx state thread-42 --checkpoint 1f1edcd4
    lgx sql "select kind, count(*) from events group by kind"
    lgx verify --all
    lgx db start
    lgx timeline thread-42 -o run.html
    lgx ui --port 8765
    lgx export thread-42 -o thread-42.tar.gz && lgx --dsn "$OTHER" import thread-42.tar.gz
    lgx prune --all --keep 10 --older-than 30d --dry-run

Without ``--dsn`` (or ``LGX_DSN``) the embedded PostgreSQL server of the workspace
(``<workspace>/.lgx/pgdata``) is used, exactly as :class:`~langgraph_external.External`
does: started if it is not running, and left running for the next process
(``lgx db stop`` stops it).

Exit codes: ``0`` success; ``1`` a check failed (a verification problem, a missing thread
or checkpoint, a rejected query, the embedded server not running); ``2`` the command could
not run (bad option, ledger unreachable or not set up, workspace unreadable).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, NoReturn

import psycopg
import typer
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from rich.console import Console
from rich.json import JSON
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from langgraph_external import embedded, inspection, ledger
from langgraph_external.crypto import WorkspaceCipher
from langgraph_external.embedded import EmbeddedPostgres
from langgraph_external.errors import ConfigurationError, ExternalError, RestoreError
from langgraph_external.verify import (
    ThreadNotFoundError,
    VerifyResult,
    read_jsonl,
    saver_thread_ids,
    verify_thread,
)
from langgraph_external.workspace import Workspace

EXIT_OK = 0
EXIT_PROBLEM = 1
"""A verification found a problem, or the thread does not exist."""
EXIT_ERROR = 2
"""The command could not run (configuration, connection, missing schema)."""

DEFAULT_WORKSPACE = "./agent_workspace"
_CONNECT_TIMEOUT = 10


class _Stdout(Console):
    """Standard output; a reader that stops early (``| head``) ends the command with 0."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Print; when stdout is not a terminal, long lines are never wrapped."""
        if not self.is_terminal:
            kwargs.setdefault("soft_wrap", True)
        super().print(*objects, **kwargs)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        _silence_stdout()
        raise SystemExit(EXIT_OK)


# emoji=False: ":name:" in a thread id (``lgx-replay:t:1a2b``) is text, never an emoji
out = _Stdout(highlight=False, emoji=False)
err = Console(stderr=True, highlight=False, emoji=False)
_PIPE_WIDTH = 100_000
_piped = _Stdout(highlight=False, emoji=False, width=_PIPE_WIDTH)
"""Prints tables when stdout is not a terminal: as wide as their content, never wrapped."""

app = typer.Typer(
    name="lgx",
    help="Inspect and verify what langgraph-external recorded in Postgres and the workspace.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold a DSN with a password
)


class CliError(Exception):
    """A failure reported as one line on stderr with exit code ``code`` (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class _Settings:
    dsn: str | None
    workspace: str
    schema: str
    _embedded: EmbeddedPostgres | None = field(default=None, repr=False)
    _ws: Workspace | None = field(default=None, repr=False)

    def ws(self) -> Workspace:
        if self._ws is None:
            self._ws = Workspace(self.workspace)
        return self._ws

    def datadir(self) -> Path:
        """The workspace's embedded server directory (the workspace must be local)."""
        ws = self.ws()
        if not ws.is_local:
            raise CliError(f"the workspace {ws.location!r} is not local: it has no embedded server")
        return Path(ws.root) / ".lgx" / "pgdata"

    def resolve_dsn(self, *, create: bool) -> str:
        """The DSN to use; starts the workspace's embedded server when none was given."""
        if self.dsn:
            return self.dsn
        if self._embedded is not None and self._embedded.uri is not None:
            return self._embedded.uri
        ws = self.ws()
        hint = "pass --dsn postgresql://... or set LGX_DSN"
        if not ws.is_local:
            raise CliError(f"no DSN given and the workspace {ws.location!r} is not local: {hint}")
        datadir = self.datadir()
        if not create and not datadir.is_dir():
            raise CliError(
                f"no DSN given and no embedded database at {datadir} (wrong --workspace?): {hint}"
            )
        self._embedded = EmbeddedPostgres(datadir)
        with warnings.catch_warnings():  # platformdirs warns on import without XDG_RUNTIME_DIR
            warnings.simplefilter("ignore")
            return self._embedded.start()

    def close(self) -> None:
        if self._embedded is not None:
            self._embedded.release()
            self._embedded = None


_KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key", envvar="LGX_KEY", help="The deployment key (default: $LGX_KEY or the key file)."
    ),
]
"""The ``--key`` option of the commands that check or write keyed data."""


_PricesOption = Annotated[
    str | None,
    typer.Option(
        "--prices",
        show_default=False,
        help="Price table of models (YAML, JSON or TOML). Default: $LGX_PRICES, else "
        "[tool.langgraph-external.prices] in ./pyproject.toml; without one, costs show "
        "as unknown.",
    ),
]
"""The ``--prices`` option of the commands that show costs."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def _print_data(renderable: Any) -> None:
    """Print a table or JSON: wrapped to the terminal, or unwrapped when piped.

    ``COLUMNS`` in the environment sets the width in both cases.
    """
    if out.is_terminal or os.environ.get("COLUMNS"):
        out.print(renderable)
    else:
        _piped.print(renderable)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


@contextmanager
def _command(ctx: typer.Context) -> Iterator[_Settings]:
    """Run one command body: typed errors become one-line messages, resources are freed."""
    settings: _Settings = ctx.obj
    try:
        yield settings
    except CliError as exc:
        _fail(str(exc), exc.code)
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        _fail(
            f"the ledger schema {settings.schema!r} is not set up in this database: "
            "run `lgx setup` (or check --schema)"
        )
    except ExternalError as exc:  # LedgerUnavailableError, ConfigurationError, ...
        _fail(_one_line(exc))
    except psycopg.Error as exc:
        _fail(f"database error: {_one_line(exc)}")
    except UnicodeEncodeError as exc:  # an argument that is not valid text (lone surrogate)
        _fail(f"an argument is not valid Unicode text: {_one_line(exc)}")
    except BrokenPipeError:  # e.g. `lgx show t --json | head`: stop quietly
        _silence_stdout()
        raise typer.Exit(EXIT_OK) from None
    except OSError as exc:
        _fail(f"workspace error: {_one_line(exc)}")
    finally:
        settings.close()


@contextmanager
def _connect(settings: _Settings, *, create: bool = False) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection in UTC (so timestamps render as they were hashed)."""
    dsn = settings.resolve_dsn(create=create)
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise CliError(f"invalid DSN: {_one_line(exc)}") from exc
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in params:
        kwargs["connect_timeout"] = _CONNECT_TIMEOUT
    conn = ledger.connect(dsn, **kwargs)
    try:
        conn.execute("set time zone 'UTC'")
        yield conn
    finally:
        conn.close()


@app.callback()
def _global(
    ctx: typer.Context,
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            envvar="LGX_DSN",
            show_default=False,
            help="PostgreSQL connection string of the ledger. Without it the embedded "
            "server of the workspace (<workspace>/.lgx/pgdata) is used.",
        ),
    ] = None,
    workspace: Annotated[
        str,
        typer.Option(
            "--workspace", "-w", envvar="LGX_WORKSPACE", help="Workspace directory or fsspec URL."
        ),
    ] = DEFAULT_WORKSPACE,
    schema: Annotated[
        str, typer.Option("--schema", envvar="LGX_SCHEMA", help="Ledger schema name.")
    ] = (ledger.DEFAULT_SCHEMA),
) -> None:
    """Inspect and verify what langgraph-external recorded in Postgres and the workspace."""
    try:
        ledger.validate_schema(schema)
    except ExternalError as exc:
        _fail(_one_line(exc))
    settings = _Settings(dsn=dsn or None, workspace=workspace, schema=schema)
    ctx.obj = settings
    ctx.call_on_close(settings.close)


# -- setup -------------------------------------------------------------------------------
@app.command()
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
    from langgraph_external.roles import apply_grants, grant_script

    if roles and not apply:
        with _command(ctx) as s:
            typer.echo(grant_script(s.schema, app_role, capture_only=capture_only), nl=False)
        return
    applied: list[str] = []
    with _command(ctx) as s:
        with _connect(s, create=True) as conn:
            version = ledger.setup(conn, s.schema)
            if roles:
                _saver_setup(conn)
                applied = list(
                    apply_grants(conn, s.schema, app_role, saver=True, capture_only=capture_only)
                )
        datadir = str(s._embedded.datadir) if s._embedded else None
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


def _saver_setup(conn: psycopg.Connection[Any]) -> None:
    """Create the official saver's tables as the owner (the app role cannot)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    PostgresSaver(conn).setup()


# -- threads -----------------------------------------------------------------------------
@app.command()
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
    with _command(ctx) as s, _connect(s) as conn:
        rows, n_total, n_copies = inspection.list_threads(
            conn, s.schema, limit=limit or None, replays=replays
        )
    if replays:
        n_total += n_copies
    if as_json:
        for r in rows:
            typer.echo(json.dumps(r, ensure_ascii=False, default=_json_default))
        return
    hidden = ""
    if n_copies and not replays:
        copies = f"{n_copies} replay cop{'y' if n_copies == 1 else 'ies'}"
        hidden = f"; {copies} not listed (--replays lists them)"
    if not rows:
        out.print("no threads recorded yet" if not hidden else f"no threads listed{hidden}")
        return
    shown = (
        f"{len(rows)} of {_n(n_total, 'thread')}" if n_total > len(rows) else _n(n_total, "thread")
    )
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
            _ts(r["created_at"]),
            _ts(r["updated_at"]),
            str(r["last_seq"]),
            str(r["checkpoints"]),
        ]
        if deleted:
            cells.append(_ts(r["deleted_at"]))
        table.add_row(*cells)
    _print_data(table)


# -- show --------------------------------------------------------------------------------
@app.command()
def show(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread to show.")],
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="How many of the last events (0: all).")
    ] = 20,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the event envelopes as JSON lines.")
    ] = False,
) -> None:
    """Summarize one thread: counts, latest state and its last events."""
    with _command(ctx) as s, _connect(s) as conn:
        ws = s.ws()
        tdir = ws.thread_dir(thread_id)
        thread = (
            conn.cursor(row_factory=dict_row)
            .execute(
                ledger.q(inspection.SELECT_THREAD, s.schema),
                (thread_id,),
            )
            .fetchone()
        )
        in_workspace = ws.exists(f"{tdir}/events.jsonl") or ws.exists(f"{tdir}/thread.json")
        if thread is None and not in_workspace:
            raise CliError(
                f"thread {thread_id!r} not found in the ledger (schema {s.schema}) "
                f"or the workspace {ws.location}",
                EXIT_PROBLEM,
            )
        if as_json:
            envelopes = ledger.fetch_events(conn, thread_id, s.schema)
            if not envelopes:
                envelopes, bad_line = read_jsonl(ws, f"{tdir}/events.jsonl")
                where = "read from the workspace" + (f" up to its {bad_line}" if bad_line else "")
                err.print(f"[yellow]not in the ledger;[/] {escape(where)}", soft_wrap=True)
            for env in envelopes[-limit:] if limit else envelopes:
                typer.echo(json.dumps(env, ensure_ascii=False, default=_json_default))
            return
        rows = (
            conn.cursor(row_factory=dict_row)
            .execute(ledger.q(inspection.SELECT_EVENT_PLACES, s.schema), (thread_id,))
            .fetchall()
        )
        placed = inspection.place_events(rows)
        events = placed[-limit:] if limit else placed
        kinds = conn.execute(
            ledger.q(inspection.SELECT_KIND_COUNTS, s.schema),
            (thread_id,),
        ).fetchall()
        state, state_problem = _read_state(ws, f"{tdir}/state.json")

    out.print(f"[bold]thread[/] {escape(thread_id)}")
    if thread is None:
        out.print("  [yellow]not in the ledger[/] (only in the workspace; run `lgx verify`)")
    else:
        out.print(
            f"  events: {thread['events']}  checkpoints: {thread['checkpoints']}  "
            f"last seq: {thread['last_seq']}"
        )
        out.print(
            f"  created: {_ts(thread['created_at'])} UTC  updated: {_ts(thread['updated_at'])} UTC"
        )
        if thread["deleted_at"] is not None:
            out.print(f"  [yellow]deleted:[/] {_ts(thread['deleted_at'])} UTC")
        if kinds:
            out.print("  kinds: " + escape(", ".join(f"{k} {n}" for k, n in kinds)))
    out.print(f"  workspace: {escape(tdir)}" + ("" if in_workspace else " [yellow](absent)[/]"))
    if state is not None:
        out.print(
            f"[bold]last state[/] (checkpoint {escape(str(state.get('checkpoint_id')))}, "
            f"step {escape(str(state.get('step')))})"
        )
        out.print(JSON(json.dumps(state.get("values", {}), ensure_ascii=False, default=str)))
    elif state_problem:
        out.print(f"[yellow]last state unavailable:[/] {escape(state_problem)}")
    if events:
        label = f"last {len(events)} events" if limit else f"all {len(events)} events"
        _print_data(_events_table(events, f"{label} in step order", status=False))


def _read_state(ws: Workspace, path: str) -> tuple[dict[str, Any] | None, str | None]:
    if not ws.exists(path):
        return None, None
    try:
        data = ws.read_json(path)
    except (OSError, ValueError) as exc:
        return None, f"{path}: {_one_line(exc)}"
    if not isinstance(data, dict):
        return None, f"{path}: not a JSON object"
    return data, None


# -- verify ------------------------------------------------------------------------------
def _verify_one(
    conn: psycopg.Connection[Any],
    ws: Workspace,
    tid: str,
    schema: str,
    cipher: WorkspaceCipher | None = None,
) -> VerifyResult:
    """One thread of ``verify --all``: whatever goes wrong is that thread's problem only."""
    try:
        return verify_thread(conn, ws, tid, schema, cipher=cipher)
    except ThreadNotFoundError:
        return VerifyResult(tid, problems=["only a thread.json in the workspace, no events"])
    except Exception as exc:  # a hostile file must not stop the other threads
        with contextlib.suppress(psycopg.Error):
            conn.rollback()
        return VerifyResult(
            tid, problems=[f"cannot verify: {type(exc).__name__}: {_one_line(exc)}"]
        )


def _verify_key(key: str | None) -> WorkspaceCipher | None:
    """The deployment key for the keyed checks; without one they are skipped (noted)."""
    from langgraph_external.keys import load_key

    try:
        return load_key(key, create=False)
    except ConfigurationError as exc:
        if key:
            raise
        err.print(f"note: {escape(_one_line(exc))}; the keyed checks are skipped")
        return None


def _verify_heads(
    conn: psycopg.Connection[Any], schema: str, path: Path, cipher: WorkspaceCipher | None
) -> VerifyResult:
    """The ``--heads`` snapshot as one more result (it needs the key)."""
    from langgraph_external.verify import heads_problems

    if cipher is None:
        raise CliError("--heads needs the deployment key (--key, LGX_KEY or the key file)")
    try:
        snapshot = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the heads snapshot {path}: {_one_line(exc)}") from exc
    if not isinstance(snapshot, dict):
        raise CliError(f"the heads snapshot {path} is not a JSON object")
    return VerifyResult(
        f"heads snapshot {path}", problems=heads_problems(conn, schema, snapshot, cipher)
    )


@app.command()
def verify(
    ctx: typer.Context,
    thread_id: Annotated[
        str | None, typer.Argument(help="The thread to verify.", show_default=False)
    ] = None,
    all_threads: Annotated[
        bool, typer.Option("--all", help="Verify every thread of the ledger and workspace.")
    ] = False,
    key: _KeyOption = None,
    heads: Annotated[
        Path | None,
        typer.Option("--heads", help="Also check a snapshot saved by `lgx heads FILE`."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one result per thread as JSON lines.")
    ] = False,
) -> None:
    """Verify hash chains in the ledger and workspace, and that both hold the same events.

    With the deployment key also: the keyed tag of each thread's head, every exact copy,
    ``state.json`` and the artifacts. Exit code 0 when everything checks out, 1 naming the
    first problem otherwise.
    """
    if (thread_id is None) == (not all_threads):
        _fail("give either a THREAD_ID or --all")
    results: list[VerifyResult] = []
    with _command(ctx) as s, _connect(s) as conn:
        ws = s.ws()
        cipher = _verify_key(key)
        if not all_threads:
            assert thread_id is not None
            try:
                results.append(verify_thread(conn, ws, thread_id, s.schema, cipher=cipher))
            except ThreadNotFoundError as exc:
                raise CliError(str(exc), EXIT_PROBLEM) from exc
        else:
            rows = conn.execute(ledger.q(inspection.SELECT_THREAD_IDS, s.schema)).fetchall()
            ids = sorted({r[0] for r in rows} | set(ws.list_threads()) | saver_thread_ids(conn))
            with Progress(
                TextColumn("verifying"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            ) as progress:
                task = progress.add_task("verify", total=len(ids))
                for tid in ids:
                    results.append(_verify_one(conn, ws, tid, s.schema, cipher))
                    progress.advance(task)
        if heads is not None:
            results.append(_verify_heads(conn, s.schema, heads, cipher))

    snap = [r for r in results if r.thread_id.startswith("heads snapshot ")]
    results = [r for r in results if r not in snap]
    failed = [r for r in [*results, *snap] if not r.ok]
    if as_json:
        for r in [*results, *snap]:
            typer.echo(json.dumps({**dataclasses.asdict(r), "ok": r.ok}, ensure_ascii=False))
        if failed:
            raise typer.Exit(EXIT_PROBLEM)
        return
    shown = results if not all_threads else [r for r in results if not r.ok]
    for r in [*shown, *snap]:
        if r.ok and r in snap:
            out.print(f"[green]OK[/] {escape(r.thread_id)}: every head it saw is still there")
        elif r.ok:
            out.print(
                f"[green]OK[/] {escape(r.thread_id)}: {r.ledger_events} events, "
                "hash chain intact, ledger and workspace agree" + _pending_note(r.pending)
            )
        else:
            out.print(f"[bold red]FAIL[/] {escape(r.thread_id)}: {escape(r.problems[0])}")
            for p in r.problems[1:]:
                out.print(f"     also: {escape(p)}")
            if r.pending:
                out.print(f"     {_pending_note(r.pending).strip(' ;')}")
    if all_threads:
        events = sum(r.ledger_events for r in results)
        pending = sum(r.pending for r in results)
        status = "[green]OK[/]" if not failed else f"[bold red]{len(failed)} failed[/]"
        out.print(
            f"{status}: {_n(len(results), 'thread')}, {_n(events, 'ledger event')} verified"
            + _pending_note(pending)
        )
    if failed:
        raise typer.Exit(EXIT_PROBLEM)


def _pending_note(pending: int) -> str:
    if not pending:
        return ""
    return (
        f"; pending: {_n(pending, 'capture')} committed with the saver, not sealed yet "
        "(a sealer seals them; `lgx worker --status`)"
    )


# -- events ------------------------------------------------------------------------------
def _time_option(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        return inspection.parse_time(value)
    except ValueError:
        raise CliError(
            f"{option}: {value!r} is not an ISO 8601 date or time (e.g. 2026-01-31T12:00:00Z)"
        ) from None


@app.command()
def events(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread whose events to list.")],
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind", "-k", help="Only events of this kind (repeatable).", show_default=False
        ),
    ] = None,
    node: Annotated[
        list[str] | None,
        typer.Option("--node", help="Only events of this node (repeatable).", show_default=False),
    ] = None,
    name: Annotated[
        list[str] | None,
        typer.Option(
            "--name",
            help="Only events with this name, e.g. a tool (repeatable).",
            show_default=False,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only events at or after this ISO time (UTC if no offset).",
            show_default=False,
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="Only events before this ISO time (UTC if no offset).",
            show_default=False,
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
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the event envelopes as JSON lines.")
    ] = False,
) -> None:
    """List a thread's events from the ledger, filtered by kind, node, name and time.

    The table shows them step by step; ``seq`` is the commit order (the hash chain's),
    ``ts`` when each event happened. Exit code 1 when the thread is not in the ledger; an
    empty match is not an error.
    """
    with _command(ctx) as s:
        if order not in (None, "step", "seq"):
            raise CliError(f"--order: {order!r} is not one of step, seq")
        by_step = (order or ("seq" if as_json else "step")) == "step"
        flt = inspection.EventFilter(
            kinds=tuple(kind or ()),
            nodes=tuple(node or ()),
            names=tuple(name or ()),
            since=_time_option(since, "--since"),
            until=_time_option(until, "--until"),
            limit=limit or None,
        )
        with _connect(s) as conn:
            found = inspection.query_events(conn, thread_id, flt, s.schema)
            if not found and not inspection.thread_in_ledger(conn, thread_id, s.schema):
                raise CliError(
                    f"thread {thread_id!r} not found in the ledger (schema {s.schema}); "
                    "`lgx show` also reads the workspace",
                    EXIT_PROBLEM,
                )
            context = inspection.step_context(conn, thread_id, s.schema) if by_step else None
        placed = (
            inspection.place_events(found, context)
            if by_step
            else [inspection.Placed(e, 0, e["step"], e["step"]) for e in found]
        )
        if as_json:
            for p in placed:
                typer.echo(json.dumps(p.event, ensure_ascii=False, default=_json_default))
            return
        if not found:
            err.print("no events match", soft_wrap=True)
            return
        label = f"{_n(len(found), 'event')} in {'step' if by_step else 'commit (seq)'} order"
        _print_data(_events_table(placed, label, grouped=by_step))


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
            node = "/".join(x for x in [*(y.split(":", 1)[0] for y in ns.split("|")), node] if x)
        cells: list[str | Text] = [
            str(e["seq"]),
            _ts(ts, precise=True),
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


# -- state -------------------------------------------------------------------------------
@app.command()
def state(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread whose state to print.")],
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            "-c",
            help="A checkpoint id or a unique prefix of one (default: the latest).",
            show_default=False,
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
    with _command(ctx) as s:
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
    _print_data(JSON(json.dumps(view.values, ensure_ascii=False, default=str)))
    if view.pending_writes:
        out.print(f"[bold]pending writes[/] ({len(view.pending_writes)})")
        for w in view.pending_writes:
            value = json.dumps(w["value"], ensure_ascii=False, default=str)
            out.print(
                f"  {escape(str(w['node']))} → {escape(str(w['channel']))}: {escape(value)}",
                soft_wrap=True,
            )


# -- sql ---------------------------------------------------------------------------------
class _QueryFailed(Exception):
    """The server rejected a statement of the user's SQL (the session is still usable)."""


def _sql_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return "\\x" + data[:32].hex() + ("…" if len(data) > 32 else "")
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _sql_json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no NaN or Infinity: PostgreSQL's spelling, as for numeric
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def _json_keys(columns: Sequence[str]) -> list[str]:
    """Column names as JSON keys; a repeated name gets ``_2``, ``_3``, ... appended."""
    seen: dict[str, int] = {}
    keys = []
    for c in columns:
        seen[c] = seen.get(c, 0) + 1
        keys.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
    return keys


def _run_sql(conn: psycopg.Connection[Any], query: str, *, as_json: bool) -> None:
    """Run the user's SQL and print every result.

    Raises:
        _QueryFailed: the server rejected a statement.
    """
    try:
        results = inspection.run_query(conn, query)
    except psycopg.Error as exc:
        if conn.closed or conn.broken:
            raise  # the connection is gone: the command cannot run
        raise _QueryFailed(_sql_error(exc)) from exc
    for res in results:
        if not res.columns:
            err.print(escape(res.status or "OK"), soft_wrap=True)
            continue
        if as_json:
            keys = _json_keys(res.columns)
            for row in res.rows:
                record = {k: _sql_json_value(v) for k, v in zip(keys, row, strict=True)}
                typer.echo(json.dumps(record, ensure_ascii=False, default=_json_default))
            continue
        table = Table(caption=f"({_n(len(res.rows), 'row')})", caption_justify="left")
        for i, c in enumerate(res.columns):
            numbers = [r[i] for r in res.rows if r[i] is not None]
            numeric = bool(numbers) and all(
                isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in numbers
            )
            table.add_column(Text(c), no_wrap=True, justify="right" if numeric else "left")
        for row in res.rows:
            table.add_row(*(Text(_sql_cell(v)) for v in row))
        _print_data(table)


def _sql_error(exc: psycopg.Error) -> str:
    diag = exc.diag
    message = _one_line(Exception(diag.message_primary)) if diag.message_primary else ""
    text = f"query failed: {message or _one_line(exc)}"
    if diag.sqlstate:
        text += f" (SQLSTATE {diag.sqlstate})"
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        text += "; `lgx sql` is read-only unless you pass --write"
    elif diag.message_hint:
        text += f"; hint: {_one_line(Exception(diag.message_hint))}"
    return text


def _read_line(prompt: str, *, tty: bool) -> str | None:
    """One line of input, or ``None`` at end of input."""
    if tty:
        try:
            return input(prompt)
        except EOFError:
            err.print()
            return None
    err.print(prompt, end="")
    line = sys.stdin.readline()
    return None if line == "" else line.rstrip("\n")


def _repl(conn: psycopg.Connection[Any], s: _Settings, *, as_json: bool, write: bool) -> None:
    """A read-eval-print loop: statements end with ``;``; ``\\q`` or end of input quits."""
    tty = sys.stdin.isatty()
    if tty:
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401 - line editing and history for input()
    mode = "read-write" if write else "read-only"
    err.print(
        f"lgx sql ({mode}, schema {escape(s.schema)} first on the search path). End statements "
        "with ';'. \\examples prints example queries, \\q quits.",
        soft_wrap=True,
    )
    buffer: list[str] = []
    while True:
        try:
            line = _read_line("lgx=> " if not buffer else "lgx-> ", tty=tty)
        except KeyboardInterrupt:  # like psql: drop the statement being typed
            err.print()
            buffer.clear()
            continue
        if line is None:
            return
        command = line.strip()
        if not buffer and command in ("\\q", "\\quit", "quit", "exit"):
            return
        if not buffer and command == "\\examples":
            typer.echo(inspection.example_queries(s.schema), nl=False)
            continue
        if not buffer and not command:
            continue
        buffer.append(line)
        if command.endswith(";"):
            query = "\n".join(buffer)
            buffer.clear()
            try:
                _run_sql(conn, query, as_json=as_json)
            except _QueryFailed as exc:
                err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
            except KeyboardInterrupt:  # psycopg has cancelled the query; the session goes on
                err.print("[yellow]cancelled[/]")


@app.command(name="sql")
def sql_command(
    ctx: typer.Context,
    query: Annotated[
        str | None,
        typer.Argument(
            help="SQL to run ('-' reads it from stdin). Without it: a prompt in a terminal, "
            "else the SQL piped on stdin.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON lines.")] = False,
    write: Annotated[
        bool,
        typer.Option("--write", help="Allow statements that change data (default: read-only)."),
    ] = False,
    interactive: Annotated[
        bool,
        typer.Option("--interactive", "-i", help="Prompt for statements even without a terminal."),
    ] = False,
    examples: Annotated[
        bool, typer.Option("--examples", help="Print example queries instead (no database needed).")
    ] = False,
    thread_id: Annotated[
        str | None,
        typer.Option(
            "--thread",
            help="Thread id to put in the examples (implies --examples).",
            show_default=False,
        ),
    ] = None,
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            help="Node name to put in the examples (implies --examples).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run SQL against the ledger and print the rows (or print example queries).

    Read-only unless --write; the ledger schema comes first on the search path.

    Exit code 1 when the server rejects the query, 2 when the ledger cannot be reached.
    """
    s: _Settings = ctx.obj
    if examples or thread_id is not None or node is not None:
        if query is not None or interactive:
            _fail("--examples prints the examples; it takes no QUERY and no --interactive")
        typer.echo(
            inspection.example_queries(s.schema, thread_id or "thread-42", node or "agent"),
            nl=False,
        )
        return
    if query == "-" or (query is None and not interactive and not sys.stdin.isatty()):
        query = sys.stdin.read()
        if not query.strip():
            _fail(
                "no SQL given: pass a QUERY, pipe SQL on stdin, or run in a terminal for a "
                "prompt (`lgx sql --examples` prints example queries)"
            )
    with _command(ctx) as s, _connect(s) as conn:
        inspection.prepare_session(conn, s.schema, read_only=not write)
        if query is None:
            _repl(conn, s, as_json=as_json, write=write)
            return
        try:
            _run_sql(conn, query, as_json=as_json)
        except _QueryFailed as exc:
            raise CliError(str(exc), EXIT_PROBLEM) from exc


# -- db ----------------------------------------------------------------------------------
db_app = typer.Typer(
    name="db",
    help="Manage the embedded PostgreSQL server of the workspace (<workspace>/.lgx/pgdata).",
    no_args_is_help=True,
)
app.add_typer(db_app, name="db")


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
        lines.append(
            "  removed stale pids of processes that no longer exist: "
            + ", ".join(str(p) for p in st.stale_removed)
        )
    return lines


@db_app.command("status")
def db_status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Say whether the embedded server runs (exit 0) or not (exit 1); clean stale pids."""
    with _command(ctx) as s:
        st = embedded.server_status(s.datadir())
        sealing: dict[str, Any] | None = None
        if st.running and st.uri is not None:
            try:
                sealing = _sealing_status(st.uri, s.schema, s.ws())
            except (ExternalError, psycopg.Error):
                sealing = None  # no ledger set up in it yet
    if as_json:
        typer.echo(json.dumps({**st.to_dict(), "sealing": sealing}, default=str))
    else:
        for line in _status_lines(st):
            out.print(line, soft_wrap=True)
        for line in _sealing_lines(sealing) if sealing is not None else []:
            out.print("  " + line, soft_wrap=True)
    if not st.running:
        raise typer.Exit(EXIT_PROBLEM)


@db_app.command("start")
def db_start(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Start the embedded server (or find it running) and print its URL; it keeps running."""
    with _command(ctx) as s:
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


@db_app.command("stop")
def db_stop(
    ctx: typer.Context,
    force: Annotated[
        bool, typer.Option("--force", help="Stop it even if live processes still use it.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Stop the embedded server; clean stale pids first. Exit 1 if still in use (no --force)."""
    with _command(ctx) as s:
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
        out.print(
            "removed stale pids of processes that no longer exist: "
            + ", ".join(str(p) for p in res.status.stale_removed),
            soft_wrap=True,
        )
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


@db_app.command("url")
def db_url(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help='Print {"uri": ...} as JSON.')] = False,
) -> None:
    """Print the URL of the running embedded server (exit 1 if it is not running)."""
    with _command(ctx) as s:
        st = embedded.server_status(s.datadir())
        if not st.running or st.uri is None:
            raise CliError(
                f"the embedded server in {st.datadir} is not running: `lgx db start` starts it",
                EXIT_PROBLEM,
            )
    typer.echo(json.dumps({"uri": st.uri}) if as_json else st.uri)


# -- repair ------------------------------------------------------------------------------
@app.command()
def repair(
    ctx: typer.Context,
    rebuild: Annotated[
        list[str] | None,
        typer.Option(
            "--rebuild",
            help="Delete this thread's workspace files and rebuild them from the ledger "
            "(repeatable).",
            show_default=False,
        ),
    ] = None,
    key: _KeyOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Record what is missing and bring the workspace up to the ledger.

    Replays write-ahead logs left by dead processes, records checkpoints and task writes
    the official saver holds without their events, retries quarantined threads, and
    mirrors every thread the workspace is behind on. Idempotent. Exit 1 if something
    could not be brought up to date.
    """
    from langgraph_external.keys import load_key
    from langgraph_external.repair import repair as run_repair

    with _command(ctx) as s:
        dsn = s.resolve_dsn(create=False)
        with Progress(TextColumn("repairing"), TimeElapsedColumn(), console=err, transient=True):
            report = run_repair(
                dsn=dsn,
                workspace=s.ws(),
                schema=s.schema,
                cipher=load_key(key, create=False),
                rebuild=rebuild or (),
            )
    if as_json:
        typer.echo(json.dumps({**report.__dict__, "ok": report.ok}))
    else:
        out.print(
            f"replayed {_n(report.wal_events_replayed, 'logged event')}, recorded "
            f"{_n(report.checkpoints_recovered, 'missing checkpoint')} and "
            f"{_n(report.writes_recovered, 'missing task write')}, mirrored "
            f"{_n(report.threads_projected, 'thread')} the workspace was behind on"
            + (
                f", rebuilt {', '.join(map(escape, report.threads_rebuilt))}"
                if report.threads_rebuilt
                else ""
            )
        )
        for p in report.problems:
            out.print(f"[bold red]problem:[/] {escape(p)}")
    if not report.ok:
        raise typer.Exit(EXIT_PROBLEM)


# -- worker ------------------------------------------------------------------------------
@app.command()
def worker(
    ctx: typer.Context,
    key: _KeyOption = None,
    no_workspace: Annotated[
        bool, typer.Option("--no-workspace", help="Seal only; do not mirror a workspace.")
    ] = False,
    langfuse: Annotated[
        bool,
        typer.Option("--langfuse", help="Also export to Langfuse (LANGFUSE_* variables)."),
    ] = False,
    once: Annotated[
        bool, typer.Option("--once", help="Seal and mirror what is waiting, then exit.")
    ] = False,
    status: Annotated[
        bool, typer.Option("--status", help="Print how far sealing is behind, then exit.")
    ] = False,
    redaction: Annotated[
        str,
        typer.Option("--redaction", help="Redaction of readable views: standard, strict, off."),
    ] = "standard",
    poll_interval: Annotated[
        float, typer.Option("--poll", help="Seconds between looks when no NOTIFY wakes it.")
    ] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="--status as JSON.")] = False,
) -> None:
    """Seal captures, mirror the workspace and export, for every app on this database.

    Apps started with `External(..., sealing="worker")` only capture (one statement in
    the saver's transaction); run one or more workers beside them. They share the work
    per thread, wake on NOTIFY, poll as a fallback, and stop on SIGTERM or Ctrl-C after
    sealing what they hold. See docs/architecture.md for a systemd unit and a container.
    """
    from langgraph_external.assembly import resolve_redactor
    from langgraph_external.keys import load_key
    from langgraph_external.worker import WorkerConfig, run_worker, tune_gc

    with _command(ctx) as s:
        dsn = s.resolve_dsn(create=False)
        if status:
            info = _sealing_status(dsn, s.schema, None if no_workspace else s.ws())
            if as_json:
                typer.echo(json.dumps(info, default=str))
            else:
                for line in _sealing_lines(info):
                    out.print(line, soft_wrap=True)
            return
        exports: list[Any] = []
        if langfuse:
            from langgraph_external.exporters.langfuse import LangfuseExport

            exports.append(LangfuseExport().resolved())
        config = WorkerConfig(
            dsn=dsn,
            schema=s.schema,
            workspace=None if no_workspace else s.ws().location,
            cipher=load_key(key, create=False),
            redactor=resolve_redactor(redaction),
            exports=exports,
            poll_interval=poll_interval,
        )
        if not once:
            err.print(
                f"lgx worker: sealing {escape(s.schema)}"
                + ("" if no_workspace else f", mirroring {escape(s.ws().location)}")
                + (", exporting to Langfuse" if langfuse else "")
                + " (Ctrl-C to stop)",
                soft_wrap=True,
            )
        tune_gc()
        code = run_worker(config, once=once)
    if code:
        raise typer.Exit(EXIT_PROBLEM)


def _sealing_status(dsn: str, schema: str, ws: Workspace | None) -> dict[str, Any]:
    """Captures waiting for a sealer and how far the workspace mirror is behind."""
    from langgraph_external.sinks.postgres import PostgresLedger
    from langgraph_external.sinks.workspace import WorkspaceProjection

    store = PostgresLedger(dsn, schema)
    try:
        info = store.pending()
        oldest = info.pop("oldest")
        info["oldest_seconds"] = (
            round((datetime.now(timezone.utc) - oldest).total_seconds(), 3) if oldest else 0.0
        )
        if ws is not None:
            name = WorkspaceProjection(ws).name
            info["workspace_behind_threads"] = len(store.lagging(name, limit=100_000))
    finally:
        store.close()
    return info


def _sealing_lines(info: dict[str, Any]) -> list[str]:
    lines = [
        f"captures waiting for a sealer: {info['captures']} of {_n(info['threads'], 'thread')}"
        + (f", oldest {info['oldest_seconds']:.1f} s" if info["captures"] else "")
    ]
    if info.get("behind_running_transactions"):
        lines.append(
            f"  {info['behind_running_transactions']} not sealable yet: a transaction older"
            " than them is still running"
        )
    if "workspace_behind_threads" in info:
        lines.append(f"workspace mirror behind on {_n(info['workspace_behind_threads'], 'thread')}")
    return lines


# -- helpers -----------------------------------------------------------------------------
@app.command()
def restore(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="Thread id to restore from the workspace.")],
    as_thread: Annotated[
        str | None, typer.Option("--as", help="Restore under this thread id instead.")
    ] = None,
    key: _KeyOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Rebuild a thread's checkpoints from the workspace into the official Postgres tables.

    For a lost or wiped database: the workspace copy is verified first (every value
    against its address, the ``events.jsonl`` hash chain, complete lines; nothing is
    written on a mismatch, exit code 1), then decoded and written, in one transaction,
    as the rows the official ``PostgresSaver`` would write (with ``--as``: one by one
    through the recording checkpointer); the target thread must not have checkpoints yet.
    The restore is recorded as a ``thread_restored`` event, so ``lgx show`` and
    ``lgx verify`` see it.
    """
    from langgraph_external.crypto import DecryptionError
    from langgraph_external.external import External
    from langgraph_external.restore import has_checkpoints, restore_recorded

    target = as_thread or thread_id
    with _command(ctx) as s:
        ws = s.ws()
        try:
            if not has_checkpoints(ws, thread_id):
                raise CliError(
                    f"thread {thread_id!r} has no checkpoints in the workspace", EXIT_PROBLEM
                )
            dsn = s.resolve_dsn(create=True)
            with External(dsn=dsn, workspace=ws.location, schema=s.schema, key=key or None) as ext:
                if ext.checkpointer.get_tuple({"configurable": {"thread_id": target}}):
                    raise CliError(
                        f"thread {target!r} already has checkpoints; use --as NEW_ID",
                        EXIT_PROBLEM,
                    )
                with Progress(
                    TextColumn("restoring"),
                    TimeElapsedColumn(),
                    console=err,
                    transient=True,
                    disable=not err.is_terminal,
                ):
                    done = restore_recorded(ext, thread_id, target_thread_id=target)
        except (RestoreError, DecryptionError) as exc:
            raise CliError(f"restore refused: {_one_line(exc)}", EXIT_PROBLEM) from exc
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "thread_id": thread_id,
                        "target_thread_id": target,
                        "checkpoints": done.checkpoints,
                        "last_checkpoint_id": done.last_checkpoint_id,
                    },
                    ensure_ascii=False,
                )
            )
            return
        out.print(
            f"restored {_n(done.checkpoints, 'checkpoint')} of {escape(thread_id)} as "
            f"{escape(target)} (last checkpoint {escape(str(done.last_checkpoint_id))}); "
            "recorded as thread_restored"
        )


def _ts(value: datetime | None, *, precise: bool = False) -> str:
    """UTC time for tables: ``2026-01-31 12:00:00`` (milliseconds when ``precise``)."""
    if value is None:
        return ""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.isoformat(sep=" ", timespec="milliseconds" if precise else "seconds")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def main() -> None:
    """Entry point of the ``lgx`` console script."""
    app(prog_name="lgx")


# -- lgx policy ---------------------------------------------------------------------------
policy_app = typer.Typer(
    name="policy",
    help="Check a transition policy against a graph, or draw it (no database needed).",
    no_args_is_help=True,
)
app.add_typer(policy_app, name="policy")


_MaxBytes = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        envvar="LGX_POLICY_MAX_BYTES",
        min=1,
        show_default=False,
        help="Largest policy file accepted, in bytes (default 262144, 256 KiB); "
        "a larger one is refused unread.",
    ),
]


def _load_policy_and_graph(
    policy_file: Path, graph_ref: str | None, max_bytes: int | None = None
) -> tuple[Any, Any]:
    """The policy, and the graph named ``module:attr`` (a builder or compiled graph).

    Any bad policy file is a :class:`PolicyError` (exit 1, one message, no traceback);
    a graph that cannot be loaded exits 2.
    """
    import dataclasses
    import importlib

    from langgraph_external.guards import DEFAULT_LIMITS, PolicyError, TransitionPolicy

    limits = DEFAULT_LIMITS
    if max_bytes is not None:
        limits = dataclasses.replace(limits, max_bytes=max_bytes)
    try:
        policy = TransitionPolicy.from_file(policy_file, limits=limits)
    except PolicyError as exc:
        # a file that cannot be read means the check could not run; an invalid one failed it
        raise CliError(str(exc), EXIT_ERROR if exc.unreadable else EXIT_PROBLEM) from exc
    except Exception as exc:  # a loader bug must still not print a traceback
        raise CliError(
            f"cannot load the policy {policy_file}: {type(exc).__name__}: {_one_line(exc)[:200]}"
        ) from exc
    if graph_ref is None:
        return policy, None
    module_name, _, attr = graph_ref.partition(":")
    if not module_name or not attr:
        raise CliError(f"--graph must look like module:attribute, not {graph_ref!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules next to the policy
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        if callable(obj) and not hasattr(obj, "get_graph") and not hasattr(obj, "branches"):
            obj = obj()  # a factory such as build_graph()
    except Exception as exc:  # the user's module may raise anything on import
        raise CliError(
            f"cannot load the graph {graph_ref!r}: {type(exc).__name__}: {_one_line(exc)}"
        ) from exc
    return policy, obj


@policy_app.command("check")
def policy_check(
    ctx: typer.Context,
    policy_file: Annotated[Path, typer.Argument(help="Policy file (.yaml, .yml or .json).")],
    graph: Annotated[
        str | None,
        typer.Option(
            "--graph",
            help="The graph as module:attribute (a StateGraph, a compiled graph or a "
            "function returning one). Without it only the policy file is validated.",
        ),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail the check too.")] = (
        False
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    max_bytes: _MaxBytes = None,
) -> None:
    """Validate a policy file and compare it with a graph; exit 1 when the check fails."""
    with _command(ctx):
        policy, obj = _load_policy_and_graph(policy_file, graph, max_bytes)
        if obj is None:
            if as_json:
                typer.echo(json.dumps({"policy": policy.name, "policy_hash": policy.hash}))
            else:
                out.print(f"{escape(str(policy_file))}: valid (sha256 {policy.hash[:12]})")
            return
        try:
            report = policy.check(obj)
        except TypeError as exc:
            raise CliError(_one_line(exc)) from exc
        if as_json:
            typer.echo(json.dumps(report.to_dict(), indent=2))
        else:
            out.print(escape(report.text()), soft_wrap=True)
        if not report.passed(strict=strict):
            raise typer.Exit(EXIT_PROBLEM)


@policy_app.command("mermaid")
def policy_mermaid(
    ctx: typer.Context,
    policy_file: Annotated[Path, typer.Argument(help="Policy file (.yaml, .yml or .json).")],
    graph: Annotated[
        str | None,
        typer.Option("--graph", help="Overlay this graph (module:attribute)."),
    ] = None,
    max_bytes: _MaxBytes = None,
) -> None:
    """Print a Mermaid flowchart of the policy (vs the graph when --graph is given)."""
    with _command(ctx):
        policy, obj = _load_policy_and_graph(policy_file, graph, max_bytes)
        typer.echo(policy.mermaid(obj))


# -- lgx timeline -------------------------------------------------------------------------
@app.command()
def timeline(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread to draw.")],
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="HTML file to write ('-': stdout). Default: THREAD.html.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as JSON.")
    ] = False,
    prices: _PricesOption = None,
) -> None:
    """Write a thread's record as one self-contained HTML page (the view of `lgx ui`).

    The run tree with labelled timing bars (node runs, model and tool calls, memory
    reads, policy violations with their rule, interrupts, resumes, checkpoints), the
    conversation, each model call's prompt and answer with tokens and cost, the state
    each checkpoint changed, and the thread's verification. Reads the ledger (the
    workspace's events.jsonl when the ledger lacks the thread). Exit 1: no such thread.
    """
    from langgraph_external import ui
    from langgraph_external.prices import load_prices
    from langgraph_external.thread_view import checkpoint_states
    from langgraph_external.timeline import build_timeline, render_timeline
    from langgraph_external.workspace import encode_thread_id

    with _command(ctx) as s:
        table = load_prices(prices)
        envelopes, source = _thread_envelopes(s, thread_id)
        if not envelopes:
            raise CliError(f"thread {thread_id!r} has no recorded events", EXIT_PROBLEM)
        data = build_timeline(thread_id, envelopes)
        ws = _readable_workspace(s)
        if source == "ledger":
            cfg = ui.UiConfig(dsn="", schema=s.schema, workspace=ws, prices=table)
            with _connect(s) as conn:
                page = ui.render_thread(ui.load_thread(conn, cfg, thread_id), standalone=True)
        else:
            namespaces = {e.get("checkpoint_ns") or "" for e in envelopes}
            states = checkpoint_states(ws, thread_id, namespaces) if ws is not None else None
            page = render_timeline(data, prices=table, states=states)
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
            f"{_n(info['events'], 'event')}, "
            f"{_n(info['items'], 'item')} in {_n(len(info['lanes']), 'lane')} (from the {source})",
            soft_wrap=True,
        )


def _readable_workspace(s: _Settings) -> Workspace | None:
    """The workspace when it exists (a local one that is not there is left out)."""
    ws = s.ws()
    if ws.is_local and not Path(ws.root).is_dir():
        return None
    return ws


def _thread_envelopes(s: _Settings, thread_id: str) -> tuple[list[dict[str, Any]], str]:
    """A thread's envelopes from the ledger, else from the workspace's events.jsonl."""
    with _connect(s) as conn:
        envelopes = ledger.fetch_events(conn, thread_id, s.schema)
    if envelopes:
        return envelopes, "ledger"
    envelopes, _ = read_jsonl(s.ws(), f"{s.ws().thread_dir(thread_id)}/events.jsonl")
    return envelopes, "workspace"


# -- lgx export / lgx import --------------------------------------------------------------
class _DefaultCommandGroup(TyperGroup):
    """A group whose first argument, when it names no subcommand, goes to ``thread``.

    So ``lgx export THREAD -o FILE`` works next to ``lgx export langfuse ...``; a thread
    named like a subcommand is exported with ``lgx export thread NAME``.
    """

    default_command = "thread"

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


export_app = typer.Typer(
    name="export",
    cls=_DefaultCommandGroup,
    help="Export what was recorded: `lgx export THREAD -o FILE` writes a thread archive; "
    "`lgx export langfuse` sends the record to Langfuse, `lgx export otlp` to Phoenix or "
    "any OpenTelemetry collector.",
    no_args_is_help=True,
)
app.add_typer(export_app, name="export")


def _file_progress(label: str) -> tuple[Progress, Any]:
    """A progress bar on stderr (only on a terminal) and its ``(done, total)`` callback."""
    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = progress.add_task(label, total=None)
    return progress, lambda done, total: progress.update(task, completed=done, total=total)


@export_app.command("thread")
def export_thread_command(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread to export.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Archive to write (default: THREAD.tar.gz).", show_default=False
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Write a thread's ledger events and workspace folder as one .tar.gz (with hashes).

    Exit 1: the thread is not in the ledger, or its workspace mirror is behind.
    """
    from langgraph_external.errors import ArchiveError
    from langgraph_external.transfer import export_thread, report_dict
    from langgraph_external.workspace import encode_thread_id

    target = output or Path(f"{encode_thread_id(thread_id)}.tar.gz")
    with _command(ctx) as s, _connect(s) as conn:
        progress, advance = _file_progress("exporting")
        try:
            with progress:
                report = export_thread(
                    conn, s.ws(), thread_id, target, schema=s.schema, progress=advance
                )
        except ArchiveError as exc:
            raise CliError(str(exc), EXIT_PROBLEM) from exc
    if as_json:
        typer.echo(json.dumps(report_dict(report), ensure_ascii=False))
    else:
        out.print(
            f"exported {escape(thread_id)}: {_n(report.events, 'event')}, "
            f"{_n(report.files, 'workspace file')} to {escape(report.path)} "
            f"({report.bytes} bytes, sha256 {report.sha256})",
            soft_wrap=True,
        )


@app.command(name="import")
def import_command(
    ctx: typer.Context,
    archive: Annotated[Path, typer.Argument(help="An archive written by `lgx export`.")],
    key: Annotated[
        str | None,
        typer.Option("--key", envvar="LGX_WORKSPACE_KEY", help="Key of an encrypted workspace."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Import a thread archive into this ledger, saver tables and workspace.

    Everything is verified first (file hashes, hash chain, checkpoint copies); the
    thread must be new here. Nothing is written unless all of it is. Exit 1: damaged or
    altered archive, or the thread already exists.
    """
    from langgraph_external.crypto import DecryptionError, WorkspaceCipher
    from langgraph_external.errors import ArchiveError, ImportConflictError
    from langgraph_external.transfer import import_thread, report_dict

    with _command(ctx) as s:
        if not archive.is_file():
            raise CliError(f"no archive at {archive}")
        dsn = s.resolve_dsn(create=True)
        progress, advance = _file_progress("importing")
        try:
            with progress:
                report = import_thread(
                    dsn,
                    s.ws(),
                    archive,
                    schema=s.schema,
                    cipher=WorkspaceCipher(key) if key else None,
                    progress=advance,
                )
        except (ArchiveError, ImportConflictError, RestoreError, DecryptionError) as exc:
            raise CliError(f"import refused: {_one_line(exc)}", EXIT_PROBLEM) from exc
    if as_json:
        typer.echo(json.dumps(report_dict(report), ensure_ascii=False))
    else:
        out.print(
            f"imported {escape(report.thread_id)}: {_n(report.events, 'event')}, "
            f"{_n(report.checkpoints, 'checkpoint')}, {_n(report.files, 'workspace file')}",
            soft_wrap=True,
        )


# -- lgx prune ----------------------------------------------------------------------------
@app.command(name="prune")
def prune_command(
    ctx: typer.Context,
    thread_ids: Annotated[
        list[str] | None, typer.Argument(help="Threads to prune.", show_default=False)
    ] = None,
    all_threads: Annotated[
        bool, typer.Option("--all", help="Every thread in the saver's tables.")
    ] = False,
    keep: Annotated[
        int | None,
        typer.Option(
            "--keep", help="Checkpoints to keep per namespace (latest first).", show_default=False
        ),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Only remove checkpoints older than this age "
            "(30d, 12h, 90m, 45s, 2w) or ISO time.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be removed; change nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one plan per thread as JSON.")
    ] = False,
) -> None:
    """Remove old checkpoints from the saver's tables, the ledger's index and the workspace.

    Keeps the latest --keep (default 1 with --older-than) of each namespace, and the
    ancestors delta channels are rebuilt from. Records a thread_pruned event; no event
    is deleted. Exit 1: a named thread has no checkpoints.
    """
    from langgraph_external import prune as pruning
    from langgraph_external.assembly import assemble

    if bool(thread_ids) == all_threads:
        _fail("give THREAD_ID... or --all")
    if keep is None and older_than is None:
        _fail("give --keep N, --older-than AGE, or both")
    if keep is not None and keep < 1:
        _fail("--keep must be at least 1 (to drop a whole thread, delete it)")
    with _command(ctx) as s:
        cutoff = pruning.parse_age(older_than) if older_than is not None else None
        dsn = s.resolve_dsn(create=False)
        with _connect(s) as conn:
            from langgraph_external.repair import SAVER_TABLES

            row = conn.execute(SAVER_TABLES).fetchone()
            if row is None or row[0] is None:
                raise CliError("no official checkpoint tables in this database")
            known = set(pruning.saver_threads(conn))
        missing = [t for t in thread_ids or () if t not in known]
        if missing:
            raise CliError(
                f"thread {missing[0]!r} has no checkpoints in the saver's tables", EXIT_PROBLEM
            )
        progress, advance = _file_progress("pruning")
        with progress:
            plans = pruning.prune(
                dsn,
                None if all_threads else thread_ids,
                keep=keep or 1,
                older_than=cutoff,
                schema=s.schema,
                dry_run=dry_run,
                progress=advance,
            )
        if any(p.pruned for p in plans):  # the workspace applies the thread_pruned events
            rec = assemble(workspace=s.ws(), dsn=dsn, schema=s.schema)
            try:
                rec.pipeline.catch_up()
            finally:
                rec.close()
    if as_json:
        for p in plans:
            typer.echo(json.dumps(p.to_dict(), ensure_ascii=False))
        return
    verb = "would remove" if dry_run else "removed"
    table = Table(
        caption=f"{verb} {_n(sum(p.removed for p in plans), 'checkpoint')}",
        caption_justify="left",
    )
    for col in ("thread_id", "checkpoints", verb, "kept", "kept for ancestry", "blobs freed"):
        table.add_column(col, justify="left" if col == "thread_id" else "right", no_wrap=True)
    for p in plans:
        table.add_row(
            Text(p.thread_id),
            str(p.total),
            str(p.removed),
            str(sum(len(v) for v in p.keep.values())),
            str(sum(len(v) for v in p.kept_for_ancestry.values())),
            str(p.blobs),
        )
    _print_data(table)


_ThreadsArg = Annotated[
    list[str] | None, typer.Argument(help="Threads to export (default: every thread behind).")
]
_SinceOpt = Annotated[
    str | None, typer.Option("--since", help="Only threads updated since (ISO 8601).")
]
_AllOpt = Annotated[bool, typer.Option("--all", help="Visit every thread (not only those behind).")]
_FollowOpt = Annotated[
    bool, typer.Option("--follow", help="Keep exporting as threads are recorded (Ctrl-C stops).")
]
_ResendOpt = Annotated[
    bool, typer.Option("--resend", help="Send the chosen threads again from their first event.")
]
_JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


@export_app.command("langfuse")
def export_langfuse(
    ctx: typer.Context,
    thread_ids: _ThreadsArg = None,
    since: _SinceOpt = None,
    all_threads: _AllOpt = False,
    follow: _FollowOpt = False,
    resend: _ResendOpt = False,
    as_json: _JsonOpt = False,
) -> None:
    """Send recorded threads to Langfuse (keys and URL from LANGFUSE_* variables).

    Every thread's observations after its Langfuse cursor are sent; the cursor moves only
    when Langfuse accepted them, and ids are derived from the record, so running it again
    sends nothing new. Several exporters may run at once (one per thread at a time).
    Exit 1 if a thread could not be brought up to date (Langfuse down, keys refused).
    """
    from langgraph_external.exporters.otlp import OtlpExport

    _run_export(
        ctx,
        lambda: OtlpExport(preset="langfuse"),
        thread_ids,
        since,
        all_threads,
        follow,
        resend,
        as_json,
    )


@export_app.command("otlp")
def export_otlp(
    ctx: typer.Context,
    thread_ids: _ThreadsArg = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            help="The receiver's base URL (default: the preset's, or the environment's: "
            "PHOENIX_COLLECTOR_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT).",
        ),
    ] = None,
    preset: Annotated[
        str, typer.Option("--preset", help="otlp (any collector), phoenix or langfuse.")
    ] = "otlp",
    path: Annotated[
        str | None, typer.Option("--path", help="The traces path (default: the preset's).")
    ] = None,
    headers: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", help="A request header, KEY=VALUE (repeatable)."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key", help="Sent as 'Authorization: Bearer KEY' (or $LGX_OTLP_API_KEY)."
        ),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option("--project", help="The Phoenix project (openinference.project.name)."),
    ] = None,
    cursor: Annotated[
        str | None,
        typer.Option("--cursor", help="This export's cursor name (default: the preset's)."),
    ] = None,
    since: _SinceOpt = None,
    all_threads: _AllOpt = False,
    follow: _FollowOpt = False,
    resend: _ResendOpt = False,
    as_json: _JsonOpt = False,
) -> None:
    """Send recorded threads as OpenTelemetry traces (Phoenix, any OTLP/HTTP collector).

    Spans carry the OpenInference and OpenTelemetry GenAI attributes (and Langfuse's),
    so Phoenix shows chat messages, tool calls and token counts, and GenAI-aware backends
    (Jaeger, Tempo, Honeycomb, Datadog) read them too. The cursor (one per --cursor name)
    moves only when the receiver accepted the spans; running it again sends nothing new.
    Exit 1 if a thread could not be brought up to date (receiver down, refused).
    """
    from langgraph_external.exporters.otlp import OtlpExport, parse_headers

    def config() -> OtlpExport:
        parsed: dict[str, str] | None = None
        for item in headers or []:
            parsed = {**(parsed or {}), **parse_headers(item)}
        return OtlpExport(
            preset=preset,
            endpoint=endpoint,
            path=path,
            headers=parsed,
            api_key=api_key or os.environ.get("LGX_OTLP_API_KEY") or None,
            project=project,
            cursor=cursor,
        )

    _run_export(ctx, config, thread_ids, since, all_threads, follow, resend, as_json)


def _run_export(
    ctx: typer.Context,
    make_config: Callable[[], Any],
    thread_ids: list[str] | None,
    since: str | None,
    all_threads: bool,
    follow: bool,
    resend: bool,
    as_json: bool,
) -> None:
    """``lgx export langfuse`` / ``lgx export otlp``: back-fill, or follow."""
    import signal
    import threading

    from langgraph_external.exporters.langfuse import LangfuseExporter
    from langgraph_external.exporters.otlp import OtlpExporter

    with _command(ctx) as s:
        config = make_config().resolved()  # a bad option: exit 2 with the reason
        dsn = s.resolve_dsn(create=False)
        cls = LangfuseExporter if config.preset == "langfuse" else OtlpExporter
        exporter = cls(config, dsn, s.schema)
        try:
            if follow:
                stop = threading.Event()
                err.print(f"following the ledger into {exporter.url} (Ctrl-C stops)")
                with contextlib.suppress(KeyboardInterrupt):
                    # SIGTERM stops it like Ctrl-C. Not ``stop.set()`` in the handler: a
                    # handler runs between two bytecodes of the main thread, possibly inside
                    # ``stop.wait()`` holding the event's lock, and set() would wait for
                    # that lock forever (seen: one exporter in ~600 never exited)
                    signal.signal(signal.SIGTERM, signal.default_int_handler)
                    exporter.follow(stop)
                typer.echo(
                    json.dumps({"spans": exporter.spans_sent})
                    if as_json
                    else f"sent {_n(exporter.spans_sent, 'span')}"
                )
                return
            since_at = _time_option(since, "--since")
            if resend:
                chosen = [
                    t
                    for t, _, _ in exporter.threads(
                        thread_ids or (), since=since_at, all_threads=True
                    )
                ]
                exporter.resend(chosen)
            todo = exporter.threads(thread_ids or (), since=since_at, all_threads=all_threads)
            missing = sorted(set(thread_ids or ()) - {t for t, _, _ in todo})
            if missing:
                raise CliError(f"no such thread: {', '.join(missing)}", EXIT_PROBLEM)
            total = sum(max(0, head - done) for _, head, done in todo)
            with Progress(
                TextColumn(f"exporting to {exporter.label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("threads"),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task("export", total=len(todo))
                report = exporter.export(
                    [t for t, _, _ in todo], on_thread=lambda *_: bar.advance(task)
                )
        finally:
            exporter.close()
    if as_json:
        typer.echo(
            json.dumps(
                {**report.__dict__, "events_behind": total, "ok": not report.behind},
                ensure_ascii=False,
            )
        )
    elif not report.behind and not report.threads:
        out.print(f"nothing new to send to {escape(exporter.url)}: every thread is up to date")
    elif not report.behind:
        out.print(
            f"{_n(report.spans, 'span')} sent to {escape(exporter.url)}"
            f" ({_n(report.threads, 'thread')} up to date)"
        )
    else:
        # "sent of total" is computed from the same two counts, so it cannot contradict
        # itself: what was accepted in this run, and what the ledger still holds unsent
        whole = report.spans + report.spans_waiting
        out.print(
            f"{report.spans} of {_n(whole, 'span')} sent; {escape(report.reason or 'not sent')}"
        )
        for tid, why in sorted(report.behind.items()):
            waiting = _n(report.waiting.get(tid, 0), "span")
            line = f"[bold red]behind:[/] {escape(tid)}: {waiting} waiting"
            if why != report.reason:
                line += f" ({escape(why)})"
            out.print(line)
        out.print(
            "nothing is dropped: the spans wait in the ledger; run the command again once "
            "the receiver takes them"
        )
    if report.behind:
        raise typer.Exit(EXIT_PROBLEM)


if __name__ == "__main__":  # pragma: no cover
    main()


# -- replay and diff (langgraph_external.replay, langgraph_external.diff) -------------------
@app.command("replay")
def replay_cmd(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The recorded thread.")],
    app_ref: Annotated[
        str,
        typer.Option("--app", help="The graph as module:attribute (builder, graph or factory)."),
    ],
    into: Annotated[
        str | None,
        typer.Option(
            "--into",
            help="Id of the new thread (default: lgx-replay:THREAD:RANDOM, deleted after the "
            "comparison unless --keep); a thread named here is kept.",
        ),
    ] = None,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep",
            help="Keep the replay's thread (a replay copy: hidden from `lgx threads` without "
            "--replays, never sent to Langfuse).",
        ),
    ] = False,
    mode: Annotated[str, typer.Option("--mode", help="recorded or regression.")] = "recorded",
    tools: Annotated[str, typer.Option("--tools", help="recorded or live.")] = "recorded",
    checkpoint: Annotated[
        str | None, typer.Option("--checkpoint", help="Start from this checkpoint (id or prefix).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run a recorded thread again into a new thread; exit 1 if it diverged.

    recorded: the app's code runs, every model and tool call is answered from the record.
    regression: the model runs live, tools stay recorded (or --tools live).
    Each divergence is printed with its before/after (the unified diff of the first prompt
    that differs). The new thread is deleted after the comparison unless --keep or --into.
    """
    from langgraph_external.external import External
    from langgraph_external.replay import replay
    from langgraph_external.replay._app import load_app

    with _command(ctx) as s:
        dsn = s.resolve_dsn(create=False)
        with External(dsn=dsn, workspace=s.workspace, schema=s.schema) as ext:
            graph = load_app(app_ref, ext.checkpointer)
            try:
                with Progress(
                    TextColumn("replaying"), TimeElapsedColumn(), console=err, transient=True
                ):
                    report = replay(
                        graph,
                        thread_id,
                        ext=ext,
                        mode=mode,
                        tools=tools,
                        into=into,
                        checkpoint_id=checkpoint,
                        keep=True if keep else None,
                    )
            except inspection.NotFoundError as exc:
                raise CliError(str(exc), EXIT_PROBLEM) from exc
    if as_json:
        typer.echo(json.dumps(report.to_dict()))
    else:
        for line in report.lines():
            if line.startswith("diverged: "):
                out.print(f"[bold red]diverged:[/] {escape(line[10:])}", soft_wrap=True)
            else:
                out.print(escape(line), soft_wrap=True)
    if report.diverged:
        raise typer.Exit(EXIT_PROBLEM)


@app.command("diff")
def diff_cmd(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(help="THREAD, THREAD@CHECKPOINT or run:RUN_ID.")],
    b: Annotated[
        str | None, typer.Argument(help="The other side (default: A's thread).", show_default=False)
    ] = None,
    checkpoint: Annotated[
        list[str] | None,
        typer.Option("--checkpoint", help="Checkpoint of A, then of B (repeatable, max 2)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
) -> None:
    """Compare two threads, checkpoints or runs: node path, model and tool calls (the
    unified diff of the first prompt that differs) and state; exit 1 if they differ."""
    from langgraph_external import diff

    cps = list(checkpoint or [])
    with _command(ctx) as s:
        if len(cps) > 2:
            raise CliError("--checkpoint is given at most twice (A, then B)")
        side_a = diff.parse_side(a, cps[0] if cps else None)
        if b is None and side_a.thread_id is None:
            raise CliError("give B, or two checkpoints of A's thread")
        side_b = diff.parse_side(b or str(side_a.thread_id), cps[1] if len(cps) > 1 else None)
        with _connect(s) as conn:
            try:
                result = diff.diff_sides(conn, s.ws(), side_a, side_b, s.schema)
            except inspection.NotFoundError as exc:
                raise CliError(str(exc), EXIT_PROBLEM) from exc
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
    else:
        for line in result.lines():
            out.print(escape(line), soft_wrap=True)
    if not result.same:
        raise typer.Exit(EXIT_PROBLEM)


# -- lgx ui ------------------------------------------------------------------------------
@app.command("ui")
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
    prices: _PricesOption = None,
) -> None:
    """Browse the record in a local, read-only web app (threads, thread view, compare).

    Serves http://127.0.0.1:8765/ until Ctrl-C. Its database sessions are read-only; it
    answers GET only and needs nothing from the network (its assets ship in the package).
    """
    from langgraph_external import ui
    from langgraph_external.prices import load_prices

    with _command(ctx) as s:
        table = load_prices(prices)
        with _connect(s) as conn:  # fails early and clearly when the ledger is unreachable
            inspection.thread_in_ledger(conn, "", s.schema)
        cfg = ui.UiConfig(
            dsn=s.resolve_dsn(create=False),
            schema=s.schema,
            workspace=_readable_workspace(s),
            prices=table,
        )

        def ready(url: str) -> None:
            err.print(f"lgx ui: serving {escape(url)} (read-only; Ctrl-C stops)", soft_wrap=True)

        try:
            ui.serve(cfg, host=host, port=port, ready=ready)
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {_one_line(exc)}") from exc


# -- heads -------------------------------------------------------------------------------
@app.command()
def heads(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Where to write the snapshot (JSON).")],
    key: _KeyOption = None,
) -> None:
    """Save a keyed snapshot of every thread's head (keep it outside the database).

    ``lgx verify --all --heads FILE`` later finds any thread that is gone or no longer
    holds that head (an old backup restored, a record rewritten). Take one periodically.
    """
    from langgraph_external.keys import load_key
    from langgraph_external.verify import snapshot_heads

    with _command(ctx) as s, _connect(s) as conn:
        snapshot = snapshot_heads(conn, s.schema, load_key(key, create=False))
        file.write_text(json.dumps(snapshot, indent=1) + "\n")
    out.print(f"saved the heads of {_n(len(snapshot['heads']), 'thread')} to {escape(str(file))}")
