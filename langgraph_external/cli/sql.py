"""``lgx sql``: run SQL against the ledger (read-only unless ``--write``), or a prompt.

Example (shell)::

    lgx sql "select kind, count(*) from events group by kind"
    lgx sql --examples --thread thread-42
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any

import psycopg
import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from langgraph_external.cli.base import Settings, command, connect
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    CliError,
    err,
    fail,
    json_default,
    one_line,
    plural,
    print_data,
)
from langgraph_external.read import inspection


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
    """Run the user's SQL and print every result; :class:`_QueryFailed` if the server rejects
    a statement."""
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
                typer.echo(json.dumps(record, ensure_ascii=False, default=json_default))
            continue
        table = Table(caption=f"({plural(len(res.rows), 'row')})", caption_justify="left")
        for i, c in enumerate(res.columns):
            numbers = [r[i] for r in res.rows if r[i] is not None]
            numeric = bool(numbers) and all(
                isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in numbers
            )
            table.add_column(Text(c), no_wrap=True, justify="right" if numeric else "left")
        for row in res.rows:
            table.add_row(*(Text(_sql_cell(v)) for v in row))
        print_data(table)


def _sql_error(exc: psycopg.Error) -> str:
    diag = exc.diag
    message = one_line(Exception(diag.message_primary)) if diag.message_primary else ""
    text = f"query failed: {message or one_line(exc)}"
    if diag.sqlstate:
        text += f" (SQLSTATE {diag.sqlstate})"
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        text += "; `lgx sql` is read-only unless you pass --write"
    elif diag.message_hint:
        text += f"; hint: {one_line(Exception(diag.message_hint))}"
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


def _repl(conn: psycopg.Connection[Any], s: Settings, *, as_json: bool, write: bool) -> None:
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


def sql_command(
    ctx: typer.Context,
    query: Annotated[
        str | None,
        typer.Argument(
            help="SQL to run ('-' reads it from stdin). Without it: a prompt in a terminal, "
            "else the SQL piped on stdin."
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
        typer.Option("--thread", help="Thread id to put in the examples (implies --examples)."),
    ] = None,
    node: Annotated[
        str | None,
        typer.Option("--node", help="Node name to put in the examples (implies --examples)."),
    ] = None,
) -> None:
    """Run SQL against the ledger and print the rows (or print example queries).

    Read-only unless --write; the ledger schema comes first on the search path.

    Exit code 1 when the server rejects the query, 2 when the ledger cannot be reached.
    """
    s: Settings = ctx.obj
    if examples or thread_id is not None or node is not None:
        if query is not None or interactive:
            fail("--examples prints the examples; it takes no QUERY and no --interactive")
        typer.echo(
            inspection.example_queries(s.schema, thread_id or "thread-42", node or "agent"),
            nl=False,
        )
        return
    if query == "-" or (query is None and not interactive and not sys.stdin.isatty()):
        query = sys.stdin.read()
        if not query.strip():
            fail(
                "no SQL given: pass a QUERY, pipe SQL on stdin, or run in a terminal for a "
                "prompt (`lgx sql --examples` prints example queries)"
            )
    with command(ctx) as s, connect(s) as conn:
        inspection.prepare_session(conn, s.schema, read_only=not write)
        if query is None:
            _repl(conn, s, as_json=as_json, write=write)
            return
        try:
            _run_sql(conn, query, as_json=as_json)
        except _QueryFailed as exc:
            raise CliError(str(exc), EXIT_PROBLEM) from exc
