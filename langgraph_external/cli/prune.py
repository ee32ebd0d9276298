"""``lgx prune``: remove old checkpoints from the saver's tables, the ledger's index and the
workspace (no event is deleted).

Example (shell)::

    lgx prune --all --keep 10 --older-than 30d --dry-run
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from langgraph_external.cli.base import command, connect
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    CliError,
    fail,
    file_progress,
    plural,
    print_data,
)
from langgraph_external.options import Options
from langgraph_external.settings import Settings
from langgraph_external.upstream.saver_ops import SAVER_TABLES

if TYPE_CHECKING:
    from langgraph_external.ops.prune import PrunePlan


def prune_command(
    ctx: typer.Context,
    thread_ids: Annotated[list[str] | None, typer.Argument(help="Threads to prune.")] = None,
    all_threads: Annotated[
        bool, typer.Option("--all", help="Every thread in the saver's tables.")
    ] = False,
    keep: Annotated[
        int | None,
        typer.Option("--keep", help="Checkpoints to keep per namespace (latest first)."),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Only remove checkpoints older than this age "
            "(30d, 12h, 90m, 45s, 2w) or ISO time.",
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
    from langgraph_external.assembly import assemble  # lazy: LangGraph, 0.5 s
    from langgraph_external.ops import prune as pruning  # lazy: the saver's statements, 3 ms

    if bool(thread_ids) == all_threads:
        fail("give THREAD_ID... or --all")
    if keep is None and older_than is None:
        fail("give --keep N, --older-than AGE, or both")
    if keep is not None and keep < 1:
        fail("--keep must be at least 1 (to drop a whole thread, delete it)")
    with command(ctx) as s:
        cutoff = pruning.parse_age(older_than) if older_than is not None else None
        dsn = s.resolve_dsn(create=False)
        with connect(s) as conn:
            row = conn.execute(SAVER_TABLES).fetchone()
            if row is None or row[0] is None:
                raise CliError("no official checkpoint tables in this database")
            known = set(pruning.saver_threads(conn))
        missing = [t for t in thread_ids or () if t not in known]
        if missing:
            raise CliError(
                f"thread {missing[0]!r} has no checkpoints in the saver's tables", EXIT_PROBLEM
            )
        progress, advance = file_progress("pruning")
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
            settings = Settings.resolve(workspace=s.ws(), dsn=dsn, options=Options(schema=s.schema))
            rec = assemble(settings)
            try:
                rec.pipeline.catch_up()
            finally:
                rec.close()
    _print_plans(plans, dry_run=dry_run, as_json=as_json)


def _print_plans(plans: list[PrunePlan], *, dry_run: bool, as_json: bool) -> None:
    """One line of JSON per plan, or a table of what each thread lost and kept."""
    if as_json:
        for p in plans:
            typer.echo(json.dumps(p.to_dict(), ensure_ascii=False))
        return
    verb = "would remove" if dry_run else "removed"
    table = Table(
        caption=f"{verb} {plural(sum(p.removed for p in plans), 'checkpoint')}",
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
    print_data(table)
