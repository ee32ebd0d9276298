"""The one reader of the workspace's JSON-lines files: ``events.jsonl`` and the checkpoint
logs (``checkpoints/<ns>.jsonl``), and of the same format in a thread archive.

A line is one JSON object; blank lines are skipped; a line that is not a complete JSON
object (torn by a crash, or edited) is a :class:`BadLine`, which names its line number.
Callers decide what a bad line means: verifying stops there and reports it, restoring
refuses the whole thread, a look-up for a namespace skips it (``skip_bad``).

Every object is returned with its exact bytes too: the hash chain of ``events.jsonl`` is
checked against the text the recorder hashed.

Example:
    >>> [(n, doc) for n, _, doc in parse_lines(b'{"seq": 1}\\n\\n{"seq": 2}\\n')]
    [(1, {'seq': 1}), (3, {'seq': 2})]
    >>> try:
    ...     list(parse_lines(b'{"seq": 1}\\n{"se'))
    ... except BadLine as exc:
    ...     print(exc.lineno, exc.reason)
    2 not JSON
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # the workspace's file operations; this module needs only its methods
    from langgraph_external.workspace.files import Workspace

__all__ = [
    "EVENTS_FILE",
    "BadLine",
    "events_path",
    "parse_json",
    "parse_lines",
    "read_file",
    "read_lines",
]

EVENTS_FILE = "events.jsonl"
"""A thread's events, one envelope per line, in ``seq`` order (under its thread folder)."""


def events_path(ws: Workspace, thread_id: str) -> str:
    """Where the workspace keeps ``thread_id``'s ``events.jsonl``.

    Example:
        >>> from langgraph_external.workspace.files import Workspace
        >>> events_path(Workspace("memory://lgx-doc-lines"), "t").endswith("/t/events.jsonl")
        True
    """
    return f"{ws.thread_dir(thread_id)}/{EVENTS_FILE}"


class BadLine(ValueError):
    """A line that is not a complete JSON object.

    Attributes:
        lineno: its line number (1-based).
        reason: ``"not JSON"`` or ``"not a JSON object"``.
        error: the parser's error (``None`` for valid JSON that is not an object).
    """

    def __init__(self, lineno: int, error: ValueError | None) -> None:
        self.lineno = lineno
        self.error = error
        self.reason = "not JSON" if error is not None else "not a JSON object"
        detail = f" ({error})" if error is not None else ""
        super().__init__(f"line {lineno} is {self.reason}{detail}")


def parse_json(raw: bytes | str) -> Any:
    """One JSON text: orjson, or (what it refuses: ``NaN``, integers past 64 bits, a
    lone surrogate) the standard library's reading of it.

    Example:
        >>> parse_json(b'{"a": 1}'), parse_json('[NaN]')
        ({'a': 1}, [nan])
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def parse_lines(
    lines: bytes | Iterable[bytes], *, skip_bad: bool = False
) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """``(line number, exact line, object)`` of every non-blank line, in order.

    Args:
        lines: a whole file's bytes, or its lines (an open binary file).
        skip_bad: skip lines that are not JSON objects instead of raising.

    Raises:
        BadLine: at the first line that is not a complete JSON object (unless
            ``skip_bad``); the lines before it have been yielded.
    """
    source = lines.splitlines() if isinstance(lines, bytes) else lines
    for n, raw in enumerate(source, 1):
        if not raw.strip():
            continue
        try:
            doc = parse_json(raw)
        except ValueError as exc:
            if skip_bad:
                continue
            raise BadLine(n, exc) from exc
        if isinstance(doc, dict):
            yield n, raw.rstrip(b"\r\n"), doc
        elif not skip_bad:
            raise BadLine(n, None)


def read_lines(
    ws: Workspace, path: str, *, skip_bad: bool = False
) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """:func:`parse_lines` of the workspace file ``path`` (read whole; missing: raises
    ``FileNotFoundError``)."""
    return parse_lines(ws.read_bytes(path), skip_bad=skip_bad)


def read_file(ws: Workspace, path: str) -> tuple[list[dict[str, Any]], BadLine | None]:
    """The objects of the workspace file ``path`` up to the first bad line, and that line
    (``None``: the file is whole). A missing file holds none.

    Streams the file: a long thread is never held as bytes and objects at once.
    """
    objects: list[dict[str, Any]] = []
    if not ws.exists(path):
        return objects, None
    with ws.fs.open(path, "rb") as f:
        try:
            objects.extend(doc for _, _, doc in parse_lines(f))
        except BadLine as bad:
            return objects, bad
    return objects, None
