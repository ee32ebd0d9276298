"""``lgx``: inspect and verify what langgraph-external recorded.

The commands read the Postgres ledger (the system of record) and the file workspace (its
mirror); none of them changes a recorded event (``lgx sql --write`` runs what it is given;
``lgx replay`` records a new thread).
The queries, filters and readers live in :mod:`langgraph_external.read.inspection` and the
embedded server's management in :mod:`langgraph_external.ledger.embedded`; this package parses
options and prints: :mod:`~langgraph_external.cli.base` holds the application and what every
command shares, one module per command group holds its commands, and this module registers
them on :data:`app` in the order ``lgx --help`` lists them.

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
    lgx log bundle thread-42 -o thread-42.bundle.json && lgx log verify thread-42.bundle.json

Without ``--dsn`` (or ``LGX_DSN``) the embedded PostgreSQL server of the workspace
(``<workspace>/.lgx/pgdata``) is used, exactly as :class:`~langgraph_external.External`
does: started if it is not running, and left running for the next process
(``lgx db stop`` stops it).

Exit codes: ``0`` success; ``1`` a check failed (a verification problem, a missing thread
or checkpoint, a rejected query, the embedded server not running); ``2`` the command could
not run (bad option, ledger unreachable or not set up, workspace unreadable).
"""

from __future__ import annotations

from langgraph_external.cli import (
    db,
    export,
    log,
    policy,
    prune,
    replay,
    restore,
    sql,
    threads,
    verify,
    web,
    worker,
)
from langgraph_external.cli.base import LiteralHelpCommand, app
from langgraph_external.cli.console import EXIT_ERROR, EXIT_OK, EXIT_PROBLEM, CliError

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_PROBLEM", "CliError", "app", "main"]

app.command("setup", cls=LiteralHelpCommand)(db.setup)
app.command("threads", cls=LiteralHelpCommand)(threads.threads)
app.command("show", cls=LiteralHelpCommand)(threads.show)
app.command("verify", cls=LiteralHelpCommand)(verify.verify)
app.command("events", cls=LiteralHelpCommand)(threads.events)
app.command("state", cls=LiteralHelpCommand)(threads.state)
app.command("sql", cls=LiteralHelpCommand)(sql.sql_command)
app.command("repair", cls=LiteralHelpCommand)(verify.repair)
app.command("resolve", cls=LiteralHelpCommand)(verify.resolve)
app.command("worker", cls=LiteralHelpCommand)(worker.worker)
app.command("restore", cls=LiteralHelpCommand)(restore.restore)
app.command("timeline", cls=LiteralHelpCommand)(web.timeline)
app.command("import", cls=LiteralHelpCommand)(restore.import_command)
app.command("prune", cls=LiteralHelpCommand)(prune.prune_command)
app.command("replay", cls=LiteralHelpCommand)(replay.replay_cmd)
app.command("diff", cls=LiteralHelpCommand)(replay.diff_cmd)
app.command("ui", cls=LiteralHelpCommand)(web.ui_command)
app.command("heads", cls=LiteralHelpCommand)(verify.heads)
app.add_typer(db.db_app, name="db")
app.add_typer(policy.policy_app, name="policy")
app.add_typer(export.export_app, name="export")
app.add_typer(log.log_app, name="log")


def main() -> None:
    """Entry point of the ``lgx`` console script."""
    app(prog_name="lgx")
