"""``lgx worker``: seal captures, mirror the workspace and export, for every app on a database.

Example (shell)::

    lgx --dsn postgresql://lgx_worker@db/app worker
    lgx --dsn postgresql://lgx_worker@db/app worker --status
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone
from typing import Annotated, Any

import typer
from rich.markup import escape

from langgraph_external.cli.base import KeyOption, command
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    err,
    out,
    plural,
)
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.ops.verify import threads_mirror_behind
from langgraph_external.options import Options
from langgraph_external.settings import Settings
from langgraph_external.workspace.files import Workspace


def worker(
    ctx: typer.Context,
    key: KeyOption = None,
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
    offload_threshold: Annotated[
        int,
        typer.Option(
            "--offload-threshold",
            help="Payloads larger than this many bytes become artifacts (the apps' "
            "offload_threshold: a worker seals their checkpoints).",
        ),
    ] = 64 * 1024,
    poll_interval: Annotated[
        float, typer.Option("--poll", help="Seconds between looks when no NOTIFY wakes it.")
    ] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="--status as JSON.")] = False,
    sign_interval: Annotated[
        float | None,
        typer.Option(
            "--sign-interval",
            help="Seconds between signed heads of the log while anything is sealed; 0: "
            "none (default: $LGX_SIGN_INTERVAL, else 5).",
        ),
    ] = None,
    signing_key: Annotated[
        str | None,
        typer.Option(
            "--signing-key",
            envvar="LGX_SIGNING_KEY_FILE",
            help="The log's signing key file (default ~/.config/langgraph-external/"
            "signing.key, created on first use).",
        ),
    ] = None,
) -> None:
    """Seal captures, mirror the workspace and export, for every app on this database.

    Apps started with `External(..., sealing="worker")` only capture (one statement in
    the saver's transaction); run one or more workers beside them. They share the work
    per thread, wake on NOTIFY, poll as a fallback, and stop on SIGTERM or Ctrl-C after
    sealing what they hold. See docs/architecture.md for a systemd unit and a container.
    """
    from langgraph_external.processes.worker import run_worker, tune_gc  # lazy: 11 ms

    with command(ctx) as s:
        dsn = s.resolve_dsn(create=False)
        if status:
            _print_status(sealing_status(dsn, s.schema, None if no_workspace else s.ws()), as_json)
            return
        exports: tuple[Any, ...] = ()
        if langfuse:
            from langgraph_external.exporters.build import resolve_exports  # lazy: opt-in
            from langgraph_external.exporters.langfuse import LangfuseExport  # lazy: opt-in

            exports = resolve_exports(LangfuseExport())
        config = Settings.resolve(
            dsn=dsn,
            workspace=None if no_workspace else s.ws(),
            key=key,
            create_key=False,
            redaction=redaction,
            options=Options(schema=s.schema, offload_threshold=offload_threshold),
            sealing="worker",
            exports=exports,
            poll_interval=poll_interval,
            sign_interval=sign_interval,
            signing_key_file=signing_key,
        )
        if not once:
            _announce(s.schema, None if no_workspace else s.ws().location, langfuse=langfuse)
        tune_gc()
        code = run_worker(config, once=once)
    if code:
        raise typer.Exit(EXIT_PROBLEM)


def _print_status(info: dict[str, Any], as_json: bool) -> None:
    """``lgx worker --status``: :func:`sealing_status` as JSON, or as lines."""
    if as_json:
        typer.echo(json.dumps(info, default=str))
    else:
        for line in sealing_lines(info):
            out.print(line, soft_wrap=True)


def _announce(schema: str, workspace: str | None, *, langfuse: bool) -> None:
    """What a worker that keeps running does, on stderr."""
    err.print(
        f"lgx worker: sealing {escape(schema)}"
        + ("" if workspace is None else f", mirroring {escape(workspace)}")
        + (", exporting to Langfuse" if langfuse else "")
        + " (Ctrl-C to stop)",
        soft_wrap=True,
    )


def sealing_status(dsn: str, schema: str, ws: Workspace | None) -> dict[str, Any]:
    """Captures waiting for a sealer and on how many threads the workspace mirror is behind
    the ledger (``lgx worker --status``, ``lgx db status``).

    The mirror is read as ``lgx verify`` reads it — its files, not the projection's
    cursors (:func:`~langgraph_external.ops.verify.threads_mirror_behind`) — so the two
    agree: a cursor lost or reset over complete files is not "behind", files removed or
    cut under an up-to-date cursor are.
    """
    with contextlib.closing(PostgresLedger(dsn, schema)) as store:
        info = store.pending()
    oldest = info.pop("oldest")
    info["oldest_seconds"] = (
        round((datetime.now(timezone.utc) - oldest).total_seconds(), 3) if oldest else 0.0
    )
    if ws is not None:
        with ledger.connect(dsn) as conn:
            info["workspace_behind_threads"] = len(threads_mirror_behind(conn, ws, schema))
    return info


def sealing_lines(info: dict[str, Any]) -> list[str]:
    """:func:`sealing_status` as lines of text (rich markup)."""
    lines = [
        f"captures waiting for a sealer: {info['captures']} of {plural(info['threads'], 'thread')}"
        + (f", oldest {info['oldest_seconds']:.1f} s" if info["captures"] else "")
    ]
    if info.get("behind_running_transactions"):
        lines.append(
            f"  {info['behind_running_transactions']} not sealable yet: a transaction older"
            " than them is still running"
        )
    if "workspace_behind_threads" in info:
        lines.append(
            f"workspace mirror behind on {plural(info['workspace_behind_threads'], 'thread')}"
        )
    return lines
