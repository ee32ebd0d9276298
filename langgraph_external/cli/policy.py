"""``lgx policy``: check a transition policy against a graph, or draw it (no database needed).

Example (shell)::

    lgx policy check policy.yaml --graph app:builder
    lgx policy mermaid policy.yaml
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from langgraph_external.cli.base import LiteralHelpCommand, LiteralHelpGroup, command
from langgraph_external.cli.console import (
    EXIT_ERROR,
    EXIT_PROBLEM,
    CliError,
    one_line,
    out,
)
from langgraph_external.cli.graphs import load_graph

policy_app = typer.Typer(
    cls=LiteralHelpGroup,
    name="policy",
    help="Check a transition policy against a graph, or draw it (no database needed).",
    no_args_is_help=True,
)


_MaxBytes = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        envvar="LGX_POLICY_MAX_BYTES",
        min=1,
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
    from langgraph_external.guards import (  # lazy: LangGraph, 0.5 s
        DEFAULT_LIMITS,
        PolicyError,
        TransitionPolicy,
    )

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
            f"cannot load the policy {policy_file}: {type(exc).__name__}: {one_line(exc)[:200]}"
        ) from exc
    return policy, None if graph_ref is None else load_graph(graph_ref)


@policy_app.command("check", cls=LiteralHelpCommand)
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
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail the check too.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    max_bytes: _MaxBytes = None,
) -> None:
    """Validate a policy file and compare it with a graph; exit 1 when the check fails."""
    with command(ctx):
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
            raise CliError(one_line(exc)) from exc
        if as_json:
            typer.echo(json.dumps(report.to_dict(), indent=2))
        else:
            out.print(escape(report.text()), soft_wrap=True)
        if not report.passed(strict=strict):
            raise typer.Exit(EXIT_PROBLEM)


@policy_app.command("mermaid", cls=LiteralHelpCommand)
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
    with command(ctx):
        policy, obj = _load_policy_and_graph(policy_file, graph, max_bytes)
        typer.echo(policy.mermaid(obj))
