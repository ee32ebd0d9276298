"""``lgx verify``, ``lgx heads``, ``lgx repair``: checking the record and bringing it up to date.

Example (shell)::

    lgx heads heads.json
    lgx verify --all --heads heads.json
    lgx repair
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer
from rich.markup import escape

from langgraph_external.cli.base import KeyOption, command, connect
from langgraph_external.cli.console import (
    EXIT_PROBLEM,
    CliError,
    err,
    fail,
    file_progress,
    one_line,
    out,
    plural,
    spinner,
)
from langgraph_external.errors import ConfigurationError, ExternalError
from langgraph_external.ledger import queries
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.failures import resolve_record_failure
from langgraph_external.ops.verify import (
    ThreadNotFoundError,
    VerifyResult,
    heads_problems,
    heads_under_key,
    saver_thread_ids,
    snapshot_heads,
    verify_thread,
)
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.keys import (
    KEY_VARIABLE,
    OLD_KEY_VARIABLE,
    default_key_file,
    load_key,
)
from langgraph_external.workspace.files import Workspace

_GIVE_KEY = (
    "give the key that wrote the record with --key KEY, $LGX_KEY, or the key file "
    "($LGX_KEY_FILE, default ~/.config/langgraph-external/key)"
)


def _verify_key(key: str | None) -> WorkspaceCipher | None:
    """The deployment key for the keyed checks; without one they are skipped (noted)."""
    try:
        return load_key(key, create=False)
    except ConfigurationError as exc:
        if key:
            raise
        err.print(
            f"note: {escape(one_line(exc))}; the keyed checks are skipped (head tags, exact "
            f"copies, state.json): {escape(_GIVE_KEY)}",
            soft_wrap=True,
        )
        return None


def _key_result(
    conn: psycopg.Connection[Any], schema: str, cipher: WorkspaceCipher, key: str | None
) -> VerifyResult | None:
    """A problem of its own when ``cipher`` is not the key that wrote the record: no
    tagged head carries its tag (tampering fails the tags of the threads it touched)."""
    seen, matching = heads_under_key(conn, schema, cipher)
    if not seen or matching:
        return None
    source = (
        "--key or $LGX_KEY"
        if key
        else f"${OLD_KEY_VARIABLE} (deprecated: set ${KEY_VARIABLE})"
        if os.environ.get(OLD_KEY_VARIABLE)
        else f"the key file {default_key_file()}"
    )
    heads = "the one thread head" if seen == 1 else f"the {seen} newest thread heads"
    return VerifyResult(
        "deployment key",
        problems=[
            f"the deployment key is missing or different: {heads} that carry a keyed tag do "
            f"not carry the tag of the key given (key id {cipher.key_id}, from {source}), so "
            f"the keyed checks (head tags, exact copies, state.json) were not made; "
            f"{_GIVE_KEY}. (If it is that key, every head was rewritten since.)"
        ],
    )


def _verify_heads(
    conn: psycopg.Connection[Any], schema: str, path: Path, cipher: WorkspaceCipher | None
) -> VerifyResult:
    """The ``--heads`` snapshot as one more result (it needs the key)."""
    if cipher is None:
        raise CliError("--heads needs the deployment key (--key, LGX_KEY or the key file)")
    try:
        snapshot = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the heads snapshot {path}: {one_line(exc)}") from exc
    if not isinstance(snapshot, dict):
        raise CliError(f"the heads snapshot {path} is not a JSON object")
    return VerifyResult(
        f"heads snapshot {path}", problems=heads_problems(conn, schema, snapshot, cipher)
    )


def verify(
    ctx: typer.Context,
    thread_id: Annotated[str | None, typer.Argument(help="The thread to verify.")] = None,
    all_threads: Annotated[
        bool, typer.Option("--all", help="Verify every thread of the ledger and workspace.")
    ] = False,
    key: KeyOption = None,
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
        fail("give either a THREAD_ID or --all")
    extra: list[VerifyResult] = []  # the key's and the heads snapshot's, after the threads
    with command(ctx) as s, connect(s) as conn:
        ws = s.ws()
        given = cipher = _verify_key(key)
        wrong_key = _key_result(conn, s.schema, given, key) if given is not None else None
        if wrong_key is not None:
            extra.append(wrong_key)
            cipher = None  # the unkeyed checks still run
        copies = cipher is not None  # encrypted under keyed addresses: the key's to check
        if all_threads:
            results = _verify_every_thread(conn, ws, s.schema, cipher, copies)
        else:
            assert thread_id is not None
            try:
                results = [
                    verify_thread(conn, ws, thread_id, s.schema, cipher=cipher, copies=copies)
                ]
            except ThreadNotFoundError as exc:
                raise CliError(str(exc), EXIT_PROBLEM) from exc
        if heads is not None:
            extra.append(_verify_heads(conn, s.schema, heads, given))
    if as_json:
        for r in [*results, *extra]:
            typer.echo(json.dumps({**dataclasses.asdict(r), "ok": r.ok}, ensure_ascii=False))
    else:
        _print_results(results, extra, all_threads=all_threads, keyed=cipher is not None)
    if not all(r.ok for r in [*results, *extra]):
        raise typer.Exit(EXIT_PROBLEM)


def _verify_every_thread(
    conn: psycopg.Connection[Any],
    ws: Workspace,
    schema: str,
    cipher: WorkspaceCipher | None,
    copies: bool,
) -> list[VerifyResult]:
    """``verify --all``: every thread the ledger, the workspace or the saver's tables
    hold, with a progress bar; whatever goes wrong is that thread's problem only."""
    results: list[VerifyResult] = []
    rows = conn.execute(ledger.q(queries.SELECT_THREAD_IDS, schema)).fetchall()
    ids = sorted({r[0] for r in rows} | set(ws.list_threads()) | saver_thread_ids(conn))
    progress, advance = file_progress("verifying")
    with progress:
        for n, tid in enumerate(ids, 1):
            try:
                result = verify_thread(conn, ws, tid, schema, cipher=cipher, copies=copies)
            except ThreadNotFoundError:
                result = VerifyResult(
                    tid, problems=["only a thread.json in the workspace, no events"]
                )
            except Exception as exc:  # a hostile file must not stop the other threads
                with contextlib.suppress(psycopg.Error):
                    conn.rollback()
                why = f"{type(exc).__name__}: {one_line(exc)}"
                result = VerifyResult(tid, problems=[f"cannot verify: {why}"])
            results.append(result)
            advance(n, len(ids))
    return results


def _print_results(
    results: list[VerifyResult],
    snap: list[VerifyResult],
    *,
    all_threads: bool,
    keyed: bool,
) -> None:
    """Each thread's result (with ``--all``: the failed ones and a total), then the key's
    and the heads snapshot's (``snap``)."""
    failed = [r for r in [*results, *snap] if not r.ok]
    shown = results if not all_threads else [r for r in results if not r.ok]
    for r in [*shown, *snap]:
        if r.ok and r in snap:
            out.print(f"[green]OK[/] {escape(r.thread_id)}: every head it saw is still there")
        elif r.ok:
            out.print(
                f"[green]OK[/] {escape(r.thread_id)}: {r.ledger_events} events, "
                "hash chain intact, ledger and workspace agree"
                + ("" if keyed else " (without the keyed checks)")
                + _pending_note(r.pending)
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
            f"{status}: {plural(len(results), 'thread')}, {plural(events, 'ledger event')} verified"
            + _pending_note(pending)
        )


def _pending_note(pending: int) -> str:
    if not pending:
        return ""
    return (
        f"; pending: {plural(pending, 'capture')} committed with the saver, not sealed yet "
        "(a sealer seals them; `lgx worker --status`)"
    )


def resolve(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread.")],
    seq: Annotated[int, typer.Argument(help="The seq of its record_failed event.")],
    note: Annotated[
        str, typer.Option("--note", help="Why the failure is accounted for (recorded).")
    ],
    key: KeyOption = None,
) -> None:
    """Record that a recording failure of a thread is accounted for.

    An event the record could not hold (a redactor of the app's that raised, say) is
    replaced in the thread's chain by a record_failed event, and lgx verify fails the
    thread until someone says why that is acceptable: this appends a
    record_failure_resolved event naming the failure and the note. The failure stays in
    the chain. Exit 1 if SEQ is not an unresolved record_failed event.
    """

    with command(ctx) as s:
        dsn = s.resolve_dsn(create=False)
        try:
            with s.external(dsn, key) as ext:
                resolve_record_failure(ext, thread_id, seq, note)
        except ExternalError as exc:
            raise CliError(one_line(exc), EXIT_PROBLEM) from exc
    out.print(f"resolved the record failure at seq {seq} of {escape(thread_id)}")


def repair(
    ctx: typer.Context,
    rebuild: Annotated[
        list[str] | None,
        typer.Option(
            "--rebuild",
            help="Delete this thread's workspace files and rebuild them from the ledger "
            "(repeatable).",
        ),
    ] = None,
    key: KeyOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Record what is missing and bring the workspace up to the ledger.

    Replays write-ahead logs left by dead processes, records checkpoints and task writes
    the official saver holds without their events, retries quarantined threads, and
    mirrors every thread the workspace is behind on. Idempotent. Exit 1 if something
    could not be brought up to date.
    """
    from langgraph_external.ops.repair import repair as run_repair  # lazy: LangGraph, 0.5 s

    with command(ctx) as s:
        dsn = s.resolve_dsn(create=False)
        with spinner("repairing"):
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
        rebuilt = ", ".join(map(escape, report.threads_rebuilt))
        out.print(
            f"replayed {plural(report.wal_events_replayed, 'logged event')}, recorded "
            f"{plural(report.checkpoints_recovered, 'missing checkpoint')} and "
            f"{plural(report.writes_recovered, 'missing task write')}, mirrored "
            f"{plural(report.threads_projected, 'thread')} the workspace was behind on"
            + (f", rebuilt {rebuilt}" if report.threads_rebuilt else "")
        )
        for p in report.problems:
            out.print(f"[bold red]problem:[/] {escape(p)}")
    if not report.ok:
        raise typer.Exit(EXIT_PROBLEM)


def heads(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Where to write the snapshot (JSON).")],
    key: KeyOption = None,
) -> None:
    """Save a keyed snapshot of every thread's head (keep it outside the database).

    ``lgx verify --all --heads FILE`` later finds any thread that is gone or no longer
    holds that head (an old backup restored, a record rewritten). Take one periodically.
    """
    with command(ctx) as s, connect(s) as conn:
        snapshot = snapshot_heads(conn, s.schema, load_key(key, create=False))
        file.write_text(json.dumps(snapshot, indent=1) + "\n")
    out.print(
        f"saved the heads of {plural(len(snapshot['heads']), 'thread')} to {escape(str(file))}"
    )
