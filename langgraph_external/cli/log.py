"""``lgx log``: the signed log of head moves — keys, heads, bundles, proofs, checks.

Example (shell)::

    lgx log key                          # the verifier key to publish
    lgx log bundle thread-42 -o thread-42.bundle.json
    lgx log verify thread-42.bundle.json --trust "$(cat published.key)"   # offline
    lgx log head -o head-monday.txt      # keep a head; a week later:
    lgx log prove head-monday.txt -o consistency.json
    lgx log verify consistency.json --trust "$(cat published.key)"
    lgx log check --trust "$(cat published.key)"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from langgraph_external.cli.base import KeyOption, LiteralHelpCommand, LiteralHelpGroup, command
from langgraph_external.cli.base import connect as connect_db
from langgraph_external.cli.console import EXIT_PROBLEM, CliError, err, out, plural
from langgraph_external.errors import ConfigurationError
from langgraph_external.proof import audit, heads
from langgraph_external.proof.keys import load_signer, rotate_signer
from langgraph_external.proof.verify import (
    CONSISTENCY_FORMAT,
    VerifierKey,
    parse_key,
    verify_bundle,
    verify_consistency_file,
)
from langgraph_external.record.keys import load_key

log_app = typer.Typer(
    cls=LiteralHelpGroup,
    name="log",
    help="The signed log of head moves: keys, signed heads, bundles and proofs an auditor "
    "verifies without the database or the deployment key.",
    no_args_is_help=True,
)

SigningKeyOption = Annotated[
    str | None,
    typer.Option(
        "--signing-key",
        envvar="LGX_SIGNING_KEY_FILE",
        help="The log's signing key file (default ~/.config/langgraph-external/signing.key).",
    ),
]
TrustOption = Annotated[
    list[str] | None,
    typer.Option(
        "--trust",
        help="A published verifier key to trust (repeat for rotated keys). Default: the "
        "key of this machine's signing key file.",
    ),
]


def _trusted(trust: list[str] | None, signing_key: str | None) -> list[VerifierKey]:
    if trust:
        try:
            return [parse_key(t) for t in trust]
        except ValueError as exc:
            raise CliError(f"--trust: {exc}") from None
    try:
        return [load_signer(signing_key, create=False).verifier]
    except ConfigurationError as exc:
        raise CliError(f"{exc}; or give the published key with --trust") from None


def _write(text: str, output: Path | None, what: str) -> None:
    if output is None:
        typer.echo(text, nl=not text.endswith("\n"))
        return
    output.write_text(text)
    err.print(f"wrote {what} to {escape(str(output))}")


@log_app.command("key", cls=LiteralHelpCommand)
def key_command(signing_key: SigningKeyOption = None) -> None:
    """Print the verifier key to publish (the signing key is created if there is none).

    Auditors verify bundles and heads with it alone. Publish it where the deployment
    cannot change it unseen (a web page, a contract, a transparency log of your own).
    """
    try:
        typer.echo(load_signer(signing_key).verifier.text)
    except ConfigurationError as exc:
        raise CliError(str(exc)) from None


@log_app.command("sign", cls=LiteralHelpCommand)
def sign_command(ctx: typer.Context, signing_key: SigningKeyOption = None) -> None:
    """Sign the log's head now (sealers sign every few seconds while they seal)."""
    with command(ctx) as s, connect_db(s) as conn:
        head = heads.sign_head(conn, s.schema, [load_signer(signing_key, create=False)])
        typer.echo(head.note, nl=False)


@log_app.command("head", cls=LiteralHelpCommand)
def head_command(
    ctx: typer.Context,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the head to this file.")
    ] = None,
) -> None:
    """Print the newest signed head. Keep one now and then: `lgx log prove` later shows
    the log only grew since."""
    with command(ctx) as s, connect_db(s) as conn:
        head = audit.trusted_head(conn, s.schema)
        _write(head.note, output, f"the head of {head.head.size} leaves")


@log_app.command("bundle", cls=LiteralHelpCommand)
def bundle_command(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="The thread to bundle.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the bundle to this file.")
    ] = None,
    values: Annotated[
        bool,
        typer.Option(
            "--values",
            help="Include the exact checkpoint bytes (the app's unredacted state: only for "
            "who may see it) with the salts that open their commitments.",
        ),
    ] = False,
    key: KeyOption = None,
) -> None:
    """Export a thread as one self-contained bundle an auditor verifies offline.

    It holds the thread's events as hashed, the log leaf of its newest head that the
    newest signed head covers, the inclusion proof and the signed head.
    """
    with command(ctx) as s, connect_db(s) as conn:
        cipher = load_key(key, create=False) if values else None
        bundle = audit.export_bundle(conn, s.schema, thread_id, cipher=cipher, values=values)
        text = json.dumps(bundle, indent=1, ensure_ascii=False) + "\n"
    _write(text, output, f"a bundle of {plural(len(bundle['events']), 'event')}")


@log_app.command("prove", cls=LiteralHelpCommand)
def prove_command(
    ctx: typer.Context,
    earlier: Annotated[Path, typer.Argument(help="A signed head kept earlier (a file).")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the proof to this file.")
    ] = None,
) -> None:
    """Prove that the newest signed head extends one kept earlier (a consistency proof)."""
    with command(ctx) as s, connect_db(s) as conn:
        try:
            old = earlier.read_text()
        except OSError as exc:
            raise CliError(f"cannot read {earlier}: {exc}") from None
        doc = audit.consistency_document(conn, s.schema, old)
    _write(json.dumps(doc, indent=1) + "\n", output, "the consistency proof")


@log_app.command("verify", cls=LiteralHelpCommand)
def verify_command(
    file: Annotated[Path, typer.Argument(help="A bundle or a consistency proof.")],
    trust: TrustOption = None,
    origin: Annotated[
        str | None, typer.Option("--origin", help="The log the heads must be of.")
    ] = None,
    signing_key: SigningKeyOption = None,
) -> None:
    """Verify a bundle or a consistency proof offline: no database, no deployment key.

    The same checks as the standalone verifier (langgraph_external/proof/verify.py),
    which runs with only the standard library and `cryptography`.
    """
    keys = _trusted(trust, signing_key)
    try:
        doc = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {file}: {exc}") from None
    if not isinstance(doc, dict):
        raise CliError(f"{file} is not a JSON object")
    check = verify_consistency_file if doc.get("format") == CONSISTENCY_FORMAT else verify_bundle
    verdict = check(doc, keys, origin)
    (out if verdict.ok else err).print(escape(verdict.report()), soft_wrap=True)
    if not verdict.ok:
        raise typer.Exit(EXIT_PROBLEM)


@log_app.command("check", cls=LiteralHelpCommand)
def check_command(
    ctx: typer.Context, trust: TrustOption = None, signing_key: SigningKeyOption = None
) -> None:
    """Check the ledger against its newest trusted signed head: the log still hashes to
    the signed root, and no thread it covers was cut back, deleted or replaced."""
    keys = _trusted(trust, signing_key)
    with command(ctx) as s, connect_db(s) as conn:
        found = audit.check_log(conn, s.schema, keys)
    if found.head is not None:
        out.print(
            f"signed head: {found.head.size} leaves ({escape(found.head.time or '?')}); "
            f"checked {found.leaves} leaves of {plural(found.threads, 'thread')}"
        )
    for p in found.problems:
        err.print(f"problem: {escape(p)}", soft_wrap=True)
    if found.problems:
        raise typer.Exit(EXIT_PROBLEM)
    out.print("the record matches its signed log")


@log_app.command("rotate", cls=LiteralHelpCommand)
def rotate_command(ctx: typer.Context, signing_key: SigningKeyOption = None) -> None:
    """Start a new signing key. The head signed now carries the old and the new key's
    signatures (whoever trusts the old key learns the new one from it); heads signed
    before stay verifiable with the old published key, kept beside the new file."""
    with command(ctx) as s, connect_db(s) as conn:
        try:
            old, new, kept = rotate_signer(signing_key)
        except ConfigurationError as exc:
            raise CliError(str(exc)) from None
        heads.sign_head(conn, s.schema, [old, new])
    err.print(f"the old key is kept in {escape(str(kept))}")
    typer.echo(new.verifier.text)
