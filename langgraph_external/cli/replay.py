"""``lgx replay`` and ``lgx diff``: run a recorded thread again, and compare threads,
checkpoints or runs.

Example (shell)::

    lgx replay thread-42 --app app:builder
    lgx diff thread-42 thread-43
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from langgraph_external.cli.base import command, connect
from langgraph_external.cli.console import (
    EXIT_ERROR,
    EXIT_PROBLEM,
    CliError,
    out,
    spinner,
)
from langgraph_external.cli.graphs import load_app
from langgraph_external.read import inspection


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
    from langgraph_external.replay import replay  # lazy: LangGraph, 0.5 s

    with command(ctx) as s:
        dsn = s.resolve_dsn(create=False)
        with s.external(dsn) as ext:
            graph = load_app(app_ref, ext.checkpointer)
            try:
                with spinner("replaying"):
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


def diff_cmd(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(help="THREAD, THREAD@CHECKPOINT or run:RUN_ID.")],
    b: Annotated[str | None, typer.Argument(help="The other side (default: A's thread).")] = None,
    checkpoint: Annotated[
        list[str] | None,
        typer.Option("--checkpoint", help="Checkpoint of A, then of B (repeatable, max 2)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
) -> None:
    """Compare two threads, checkpoints or runs: node path, model and tool calls (the
    unified diff of the first prompt that differs) and state.

    Exit codes: 0 the same; 1 they differ; 2 they cannot be compared (a thread, checkpoint
    or run that is not recorded, an ambiguous checkpoint prefix, a bad argument).
    """
    from langgraph_external.read import diff  # lazy: 13 ms

    cps = list(checkpoint or [])
    with command(ctx) as s:
        if len(cps) > 2:
            raise CliError("--checkpoint is given at most twice (A, then B)")
        side_a = diff.parse_side(a, cps[0] if cps else None)
        if b is None and side_a.thread_id is None:
            raise CliError("give B, or two checkpoints of A's thread")
        side_b = diff.parse_side(b or str(side_a.thread_id), cps[1] if len(cps) > 1 else None)
        with connect(s) as conn:
            try:
                result = diff.diff_sides(conn, s.ws(), side_a, side_b, s.schema)
            except inspection.NotFoundError as exc:  # nothing to compare: not "differs"
                raise CliError(str(exc), EXIT_ERROR) from exc
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
    else:
        for line in result.lines():
            out.print(escape(line), soft_wrap=True)
    if not result.same:
        raise typer.Exit(EXIT_PROBLEM)
