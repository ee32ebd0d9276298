"""``lgx restore`` and ``lgx import``: bring a thread back from a workspace or an archive.

Example (shell)::

    lgx restore thread-42 --as thread-42-restored
    lgx --dsn "$OTHER" import thread-42.tar.gz
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from langgraph_external.cli.base import KeyOption, command
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    CliError,
    file_progress,
    one_line,
    out,
    plural,
    spinner,
)
from langgraph_external.errors import ArchiveError, ImportConflictError, RestoreError
from langgraph_external.record.crypto import DecryptionError, WorkspaceCipher


def restore(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="Thread id to restore from the workspace.")],
    as_thread: Annotated[
        str | None, typer.Option("--as", help="Restore under this thread id instead.")
    ] = None,
    key: KeyOption = None,
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
    from langgraph_external.ops.restore import has_checkpoints, restore_recorded  # lazy: 0.5 s

    target = as_thread or thread_id
    with command(ctx) as s:
        ws = s.ws()
        try:
            if not has_checkpoints(ws, thread_id):
                raise CliError(
                    f"thread {thread_id!r} has no checkpoints in the workspace", EXIT_PROBLEM
                )
            dsn = s.resolve_dsn(create=True)
            with s.external(dsn, key) as ext:
                if ext.checkpointer.get_tuple({"configurable": {"thread_id": target}}):
                    raise CliError(
                        f"thread {target!r} already has checkpoints; use --as NEW_ID",
                        EXIT_PROBLEM,
                    )
                with spinner("restoring"):
                    done = restore_recorded(ext, thread_id, target_thread_id=target)
        except (RestoreError, DecryptionError) as exc:
            raise CliError(f"restore refused: {one_line(exc)}", EXIT_PROBLEM) from exc
        if as_json:
            report = {"thread_id": thread_id, "target_thread_id": target, **asdict(done)}
            typer.echo(json.dumps(report, ensure_ascii=False))
            return
        out.print(
            f"restored {plural(done.checkpoints, 'checkpoint')} of {escape(thread_id)} as "
            f"{escape(target)} (last checkpoint {escape(str(done.last_checkpoint_id))}); "
            "recorded as thread_restored"
        )


def import_command(
    ctx: typer.Context,
    archive: Annotated[Path, typer.Argument(help="An archive written by `lgx export`.")],
    key: KeyOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Import a thread archive into this ledger, saver tables and workspace.

    Everything is verified first (file hashes, hash chain, checkpoint copies); the
    thread must be new here. Nothing is written unless all of it is. Exit 1: damaged or
    altered archive, or the thread already exists.
    """
    from langgraph_external.ops.transfer import import_thread, report_dict  # lazy: tarfile, 5 ms

    with command(ctx) as s:
        if not archive.is_file():
            raise CliError(f"no archive at {archive}")
        dsn = s.resolve_dsn(create=True)
        progress, advance = file_progress("importing")
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
            raise CliError(f"import refused: {one_line(exc)}", EXIT_PROBLEM) from exc
    if as_json:
        typer.echo(json.dumps(report_dict(report), ensure_ascii=False))
    else:
        out.print(
            f"imported {escape(report.thread_id)}: {plural(report.events, 'event')}, "
            f"{plural(report.checkpoints, 'checkpoint')}, {plural(report.files, 'workspace file')}",
            soft_wrap=True,
        )
