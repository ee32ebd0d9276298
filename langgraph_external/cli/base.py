"""The ``lgx`` application and what every command shares: the global options, the settings
they make, how a command body runs (typed errors become one-line messages) and how it
connects to the ledger.

The commands live in one module per command group and are registered on :data:`app` by
:mod:`langgraph_external.cli`.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import psycopg
import typer
from psycopg.conninfo import conninfo_to_dict
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from langgraph_external._moved import REMOVED_IN
from langgraph_external.cli.console import (
    EXIT_OK,
    CliError,
    err,
    fail,
    one_line,
    silence_stdout,
)
from langgraph_external.errors import ExternalError
from langgraph_external.ledger import queries
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.embedded import EmbeddedPostgres
from langgraph_external.options import Options
from langgraph_external.record.keys import KEY_VARIABLE, OLD_KEY_VARIABLE
from langgraph_external.workspace.files import Workspace

if TYPE_CHECKING:
    from langgraph_external.external import External

DEFAULT_WORKSPACE = "./agent_workspace"
_CONNECT_TIMEOUT = 10

_COLON = re.compile(r":(?=\S)")


def literal_markup(text: str) -> str:
    """Rich markup that prints ``text`` as written: ``[...]`` is not a style, ``:name:``
    not an emoji (each colon ends a text segment, and emoji codes are read per segment).

    Example:
        >>> from rich.text import Text
        >>> text = "lgx-replay:THREAD:ID, [tool.x]"
        >>> Text.from_markup(literal_markup(text)).plain == text
        True
    """
    return _COLON.sub(":[none][/none]", escape(text))


class _LiteralHelp:
    """Help printed as written: the CLI library reads help texts as rich markup (``[x]`` a
    style, ``:thread:`` an emoji), so a command's and its options' texts (and, for a group,
    its commands' summaries) are made :func:`literal_markup` while the help is printed."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        if getattr(self, "rich_markup_mode", None) != "rich":
            super().format_help(ctx, formatter)  # type: ignore[misc]
            return
        saved: list[tuple[Any, str, Any]] = []
        subcommands = getattr(self, "commands", {}).values()
        for obj in [self, *getattr(self, "params", []), *subcommands]:
            for attr in ("help", "short_help"):
                value = getattr(obj, attr, None)
                if isinstance(value, str):
                    saved.append((obj, attr, value))
                    setattr(obj, attr, literal_markup(value))
        try:
            super().format_help(ctx, formatter)  # type: ignore[misc]
        finally:
            for obj, attr, value in saved:
                setattr(obj, attr, value)


class LiteralHelpCommand(_LiteralHelp, TyperCommand):
    """A command whose help prints as written (``cls=`` of every ``lgx`` command)."""


class LiteralHelpGroup(_LiteralHelp, TyperGroup):
    """A command group whose help prints as written (``cls=`` of ``lgx`` and its groups)."""


app = typer.Typer(
    cls=LiteralHelpGroup,
    name="lgx",
    help="Inspect and verify what langgraph-external recorded in Postgres and the workspace.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold a DSN with a password
)


@dataclass
class Settings:
    """The global options of one ``lgx`` run, and the resources they lead to.

    Example:
        >>> s = Settings(dsn="postgresql://db/app", workspace="./ws", schema="audit")
        >>> s.resolve_dsn(create=False)
        'postgresql://db/app'
    """

    dsn: str | None
    workspace: str
    schema: str
    _embedded: EmbeddedPostgres | None = field(default=None, repr=False)
    _ws: Workspace | None = field(default=None, repr=False)

    def ws(self) -> Workspace:
        """The workspace (opened on first use)."""
        if self._ws is None:
            self._ws = Workspace(self.workspace)
        return self._ws

    def datadir(self) -> Path:
        """The workspace's embedded server directory (the workspace must be local)."""
        ws = self.ws()
        if not ws.is_local:
            raise CliError(f"the workspace {ws.location!r} is not local: it has no embedded server")
        return Path(ws.root) / ".lgx" / "pgdata"

    @property
    def embedded_datadir(self) -> Path | None:
        """The data directory of the embedded server this run started, if it started one."""
        return self._embedded.datadir if self._embedded is not None else None

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

    def readable_workspace(self) -> Workspace | None:
        """The workspace when it exists (a local one that is not there is left out)."""
        ws = self.ws()
        return None if ws.is_local and not Path(ws.root).is_dir() else ws

    def external(self, dsn: str, key: str | None = None) -> External:
        """``External`` over this run's ledger (``dsn``), workspace, schema and ``key``."""
        from langgraph_external.external import External  # lazy: LangGraph, 0.5 s

        options = Options(schema=self.schema)
        return External(dsn=dsn, workspace=self.ws().location, key=key or None, options=options)

    def close(self) -> None:
        """Release the embedded server this run used (it keeps running for the next)."""
        if self._embedded is not None:
            self._embedded.release()
            self._embedded = None


KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key", envvar="LGX_KEY", help="The deployment key (default: $LGX_KEY or the key file)."
    ),
]
"""The ``--key`` option of the commands that check or write keyed data."""


PricesOption = Annotated[
    str | None,
    typer.Option(
        "--prices",
        help="Price table of models (YAML, JSON or TOML). Default: $LGX_PRICES, else "
        "[tool.langgraph-external.prices] in ./pyproject.toml; without one, costs show "
        "as unknown.",
    ),
]
"""The ``--prices`` option of the commands that show costs."""


@contextmanager
def command(ctx: typer.Context) -> Iterator[Settings]:
    """Run one command body: typed errors become one-line messages, resources are freed."""
    settings: Settings = ctx.obj
    try:
        yield settings
    except CliError as exc:
        fail(str(exc), exc.code)
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        fail(
            f"the ledger schema {settings.schema!r} is not set up in this database: "
            "run `lgx setup` (or check --schema)"
        )
    except ExternalError as exc:  # LedgerUnavailableError, ConfigurationError, ...
        fail(one_line(exc))
    except psycopg.Error as exc:
        fail(f"database error: {one_line(exc)}")
    except UnicodeEncodeError as exc:  # an argument that is not valid text (lone surrogate)
        fail(f"an argument is not valid Unicode text: {one_line(exc)}")
    except BrokenPipeError:  # e.g. `lgx show t --json | head`: stop quietly
        silence_stdout()
        raise typer.Exit(EXIT_OK) from None
    except OSError as exc:
        fail(f"workspace error: {one_line(exc)}")
    finally:
        settings.close()


@contextmanager
def connect(settings: Settings, *, create: bool = False) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection in UTC (so timestamps render as they were hashed)."""
    dsn = settings.resolve_dsn(create=create)
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise CliError(f"invalid DSN: {one_line(exc)}") from exc
    timeout = {} if "connect_timeout" in params else {"connect_timeout": _CONNECT_TIMEOUT}
    conn = ledger.connect(dsn, autocommit=True, **timeout)
    try:
        conn.execute(queries.SET_TIME_ZONE_UTC)
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
        fail(one_line(exc))
    if os.environ.get(OLD_KEY_VARIABLE) and not os.environ.get(KEY_VARIABLE):
        # the library's DeprecationWarning is not shown outside __main__: say it here
        err.print(
            f"note: ${OLD_KEY_VARIABLE} is deprecated and no longer read from "
            f"langgraph-external {REMOVED_IN}: set ${KEY_VARIABLE} (the same key) instead",
            soft_wrap=True,
        )
    settings = Settings(dsn=dsn or None, workspace=workspace, schema=schema)
    ctx.obj = settings
    ctx.call_on_close(settings.close)
