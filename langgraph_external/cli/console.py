"""What every ``lgx`` command prints with: exit codes, stdout and stderr, the one-line
error, and the formats of times, counts and JSON values.

Example:
    >>> plural(1, "thread"), plural(3, "thread")
    ('1 thread', '3 threads')
    >>> from datetime import datetime, timezone
    >>> format_ts(datetime(2026, 1, 31, 12, 0, 0, 250_000, tzinfo=timezone.utc), precise=True)
    '2026-01-31 12:00:00.250'
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from datetime import datetime, timezone
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from langgraph_external.read import inspection

EXIT_OK = 0
EXIT_PROBLEM = 1
"""A verification found a problem, or the thread does not exist."""
EXIT_ERROR = 2
"""The command could not run (configuration, connection, missing schema)."""


class CliError(Exception):
    """A failure reported as one line on stderr with exit code ``code`` (no traceback).

    Example:
        >>> CliError("no such thread", EXIT_PROBLEM).code
        1
    """

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


class _Stdout(Console):
    """Standard output; a reader that stops early (``| head``) ends the command with 0."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Print; when stdout is not a terminal, long lines are never wrapped."""
        if not self.is_terminal:
            kwargs.setdefault("soft_wrap", True)
        super().print(*objects, **kwargs)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        silence_stdout()
        raise SystemExit(EXIT_OK)


# emoji=False: ":name:" in a thread id (``lgx-replay:t:1a2b``) is text, never an emoji
out = _Stdout(highlight=False, emoji=False)
err = Console(stderr=True, highlight=False, emoji=False)
_piped = _Stdout(highlight=False, emoji=False, width=100_000)
"""Prints tables when stdout is not a terminal: as wide as their content, never wrapped."""


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (its type's name when it has none).

    Example:
        >>> one_line(ValueError("bad\\n   value")), one_line(KeyError())
        ('bad value', 'KeyError')
    """
    return " ".join(str(exc).split()) or type(exc).__name__


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``error: message`` on stderr and end the command with ``code``."""
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def print_data(renderable: Any) -> None:
    """Print a table or JSON: wrapped to the terminal, or unwrapped when piped.

    ``COLUMNS`` in the environment sets the width in both cases.
    """
    if out.is_terminal or os.environ.get("COLUMNS"):
        out.print(renderable)
    else:
        _piped.print(renderable)


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def format_ts(value: datetime | None, *, precise: bool = False) -> str:
    """UTC time for tables: ``2026-01-31 12:00:00`` (milliseconds when ``precise``)."""
    if value is None:
        return ""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.isoformat(sep=" ", timespec="milliseconds" if precise else "seconds")


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun``, with an ``s`` unless the count is one."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def json_default(value: Any) -> Any:
    """``json.dumps``'s fallback: times in ISO 8601, anything else as its text.

    Example:
        >>> json_default(datetime(2026, 1, 31, 12, tzinfo=timezone.utc))
        '2026-01-31T12:00:00+00:00'
    """
    return value.isoformat() if isinstance(value, datetime) else str(value)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_line(value: Any) -> str:
    r"""``value`` as one line of JSON, non-ASCII text kept readable; a lone surrogate (a
    value read back exactly, which UTF-8 cannot encode) written as its JSON escape, so the
    line prints and reads back as the same value.

    Example:
        >>> json_line({"a": "é\udce9"})
        '{"a": "é\\udce9"}'
    """
    text = json.dumps(value, ensure_ascii=False, default=json_default)
    if text.isascii():
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def time_option(value: str | None, option: str) -> datetime | None:
    """The time an option such as ``--since`` names: a duration ago (``5m``, ``1h30m``) or
    an ISO 8601 date or time (UTC when it gives no offset).

    Raises:
        CliError: neither (a usage error: exit 2).
    """
    try:
        return None if value is None else inspection.parse_since(value)
    except ValueError as exc:
        raise CliError(f"{option}: {exc}") from None


def file_progress(label: str) -> tuple[Progress, Any]:
    """A progress bar on stderr (only on a terminal) and its ``(done, total)`` callback."""
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=err, transient=True, disable=not err.is_terminal)
    task = progress.add_task(label, total=None)
    return progress, lambda done, total: progress.update(task, completed=done, total=total)


def spinner(label: str) -> Progress:
    """How long a step has run, on stderr while it runs (only on a terminal)."""
    columns = (TextColumn(label), TimeElapsedColumn())
    return Progress(*columns, console=err, transient=True, disable=not err.is_terminal)
