"""``lgx export``: a thread archive (``lgx export THREAD -o FILE``), or the record sent to
Langfuse (``lgx export langfuse``) or any OpenTelemetry collector (``lgx export otlp``).

Example (shell)::

    lgx export thread-42 -o thread-42.tar.gz
    lgx export otlp --preset phoenix --follow
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from langgraph_external.cli.base import LiteralHelpCommand, LiteralHelpGroup, command, connect
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    CliError,
    err,
    file_progress,
    out,
    plural,
    time_option,
)
from langgraph_external.errors import ArchiveError
from langgraph_external.workspace.files import encode_thread_id

if TYPE_CHECKING:
    from langgraph_external.exporters.otlp import ExportReport, OtlpExporter


class _DefaultCommandGroup(LiteralHelpGroup):
    """A group whose first argument, when it names no subcommand, goes to ``thread``
    (``lgx export THREAD``; a thread named like a subcommand: ``lgx export thread NAME``)."""

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


@export_app.command("thread", cls=LiteralHelpCommand)
def export_thread_command(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread to export.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Archive to write (default: THREAD.tar.gz)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Write a thread's ledger events and workspace folder as one .tar.gz (with hashes).

    Exit 1: the thread is not in the ledger, or its workspace mirror is behind.
    """
    from langgraph_external.ops.transfer import export_thread, report_dict  # lazy: tarfile, 5 ms

    target = output or Path(f"{encode_thread_id(thread_id)}.tar.gz")
    with command(ctx) as s, connect(s) as conn:
        progress, advance = file_progress("exporting")
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
            f"exported {escape(thread_id)}: {plural(report.events, 'event')}, "
            f"{plural(report.files, 'workspace file')} to {escape(report.path)} "
            f"({report.bytes} bytes, sha256 {report.sha256})",
            soft_wrap=True,
        )


_ThreadsArg = Annotated[
    list[str] | None, typer.Argument(help="Threads to export (default: every thread behind).")
]
_SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Only threads updated since this time: a duration ago (30s, 5m, 2h, 1d, "
        "1h30m) or an ISO 8601 time (UTC if no offset).",
    ),
]
_AllOpt = Annotated[bool, typer.Option("--all", help="Visit every thread (not only those behind).")]
_FollowOpt = Annotated[
    bool, typer.Option("--follow", help="Keep exporting as threads are recorded (Ctrl-C stops).")
]
_ResendOpt = Annotated[
    bool, typer.Option("--resend", help="Send the chosen threads again from their first event.")
]
_JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


@export_app.command("langfuse", cls=LiteralHelpCommand)
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
    from langgraph_external.exporters.otlp import OtlpExport  # lazy: OTLP encoding, 15 ms

    config = partial(OtlpExport, preset="langfuse")
    _run_export(ctx, config, thread_ids, since, all_threads, follow, resend, as_json)


@export_app.command("otlp", cls=LiteralHelpCommand)
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
    from langgraph_external.exporters.otlp import OtlpExport, parse_headers  # lazy: 15 ms

    def config() -> OtlpExport:
        parsed = {k: v for h in headers or () for k, v in parse_headers(h).items()}
        return OtlpExport(
            preset=preset,
            endpoint=endpoint,
            path=path,
            headers=parsed if headers else None,
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
    from langgraph_external.exporters.langfuse import LangfuseExporter  # lazy: OTLP, 15 ms
    from langgraph_external.exporters.otlp import OtlpExporter  # lazy: OTLP encoding, 15 ms

    with command(ctx) as s:
        since_at = time_option(since, "--since")  # a bad one: exit 2, before anything runs
        config = make_config().resolved()  # a bad option: exit 2 with the reason
        dsn = s.resolve_dsn(create=False)
        cls = LangfuseExporter if config.preset == "langfuse" else OtlpExporter
        exporter = cls(config, dsn, s.schema)
        try:
            if follow:
                _follow(exporter, as_json)
                return
            report, total = _backfill(exporter, thread_ids or (), since_at, all_threads, resend)
        finally:
            exporter.close()
    _print_report(exporter, report, total, as_json)
    if report.behind:
        raise typer.Exit(EXIT_PROBLEM)


def _follow(exporter: OtlpExporter, as_json: bool) -> None:
    """Send what the ledger receives until Ctrl-C or SIGTERM, then say how many spans."""
    stop = threading.Event()
    err.print(f"following the ledger into {escape(exporter.url)} (Ctrl-C stops)")
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
        else f"sent {plural(exporter.spans_sent, 'span')}"
    )


def _backfill(
    exporter: OtlpExporter,
    thread_ids: Sequence[str],
    since_at: datetime | None,
    all_threads: bool,
    resend: bool,
) -> tuple[ExportReport, int]:
    """Bring the chosen threads up to date (``resend``: from their start), with a progress
    bar; the report and how many events were behind."""
    if resend:
        chosen = [t for t, _, _ in exporter.threads(thread_ids, since=since_at, all_threads=True)]
        exporter.resend(chosen)
    todo = exporter.threads(thread_ids, since=since_at, all_threads=all_threads)
    missing = sorted(set(thread_ids) - {t for t, _, _ in todo})
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
        report = exporter.export([t for t, _, _ in todo], on_thread=lambda *_: bar.advance(task))
    return report, total


def _print_report(exporter: OtlpExporter, report: ExportReport, total: int, as_json: bool) -> None:
    """What the export sent, and which threads are still behind and why."""
    if as_json:
        doc = {**report.__dict__, "events_behind": total, "ok": not report.behind}
        typer.echo(json.dumps(doc, ensure_ascii=False))
    elif not report.behind and not report.threads:
        out.print(f"nothing new to send to {escape(exporter.url)}: every thread is up to date")
    elif not report.behind:
        out.print(
            f"{plural(report.spans, 'span')} sent to {escape(exporter.url)}"
            f" ({plural(report.threads, 'thread')} up to date)"
        )
    else:
        # "sent of total" is computed from the same two counts, so it cannot contradict
        # itself: what was accepted in this run, and what the ledger still holds unsent
        whole = report.spans + report.spans_waiting
        out.print(
            f"{report.spans} of {plural(whole, 'span')} sent; {escape(report.reason or 'not sent')}"
        )
        for tid, why in sorted(report.behind.items()):
            waiting = plural(report.waiting.get(tid, 0), "span")
            line = f"[bold red]behind:[/] {escape(tid)}: {waiting} waiting"
            if why != report.reason:
                line += f" ({escape(why)})"
            out.print(line)
        out.print(
            "nothing is dropped: the spans wait in the ledger; run the command again once "
            "the receiver takes them"
        )
