"""The offloaded values of the events ``lgx show`` and ``lgx events`` print.

A payload's large values are recorded as artifact references (their first and last part,
their size); the whole values are files of the workspace
(``threads/<thread>/artifacts/<sha256>``). Without ``--full`` each is printed as its head
… tail with its size and where the whole is; with ``--full`` the whole value, read from
the workspace (``--json --full``: the envelopes with every value put back).

Example (shell)::

    lgx events thread-42 --kind tool_end          # head … tail, size, artifact path
    lgx events thread-42 --kind tool_end --full   # the whole tool results
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from langgraph_external.cli.console import json_default, out
from langgraph_external.read.offloaded import expand_from, references, shortened
from langgraph_external.record.escapes import MARK
from langgraph_external.workspace.files import Workspace

__all__ = ["FULL_OPTION", "expanded", "print_offloaded"]

FULL_OPTION = Annotated[
    bool,
    typer.Option(
        "--full",
        help="Print offloaded values whole, read from the workspace's artifacts (without "
        "it: their first and last part, size and artifact path).",
    ),
]


ESCAPED_NOTE = (
    "  (text recorded escaped, as it held what PostgreSQL cannot: \\\\ is a backslash, "
    "\\u0000 a NUL, \\udXXX a lone surrogate; --json --full gives it back exactly)"
)


def expanded(ws: Workspace, thread_id: str, env: Mapping[str, Any]) -> dict[str, Any]:
    """``env`` with every offloaded value of its payload put back (``--json --full``)."""
    return {**env, "payload": expand_from(ws, thread_id, env.get("payload"))}


def _whole(ws: Workspace, path: str, kind: str) -> str | None:
    try:
        data = ws.read_bytes(path)
    except (OSError, ValueError):
        return None
    if kind == "text":
        return data.decode("utf-8", "replace")
    try:
        return json.dumps(json.loads(data), ensure_ascii=False, indent=2, default=json_default)
    except ValueError:
        return data.decode("utf-8", "replace")


def print_offloaded(
    ws: Workspace, thread_id: str, envelopes: Iterable[Mapping[str, Any]], *, full: bool
) -> int:
    """Print each offloaded value of ``envelopes`` once (a value an event names at several
    places, or an earlier event named, is not printed again); returns how many values."""
    printed: dict[str, Any] = {}  # digest -> the seq it was printed at
    for env in envelopes:
        paths: dict[str, list[str]] = {}
        refs: dict[str, Mapping[str, Any]] = {}
        for path, ref in references(env.get("payload")):
            digest = str(ref["$artifact"])
            paths.setdefault(digest, []).append(path or "payload")
            refs.setdefault(digest, ref)
        for digest, ref in refs.items():
            if not printed:
                out.print(
                    "[bold]offloaded values[/] (whole, from the workspace)"
                    if full
                    else "[bold]offloaded values[/] (first and last part; --full prints them whole)"
                )
            s = shortened(ref)
            where = ws.artifact_path(thread_id, digest)
            size = f"{s['size']:,}" if isinstance(s["size"], int) else "?"
            out.print(
                f"seq {env.get('seq')} {escape(str(env.get('kind')))} "
                f"{escape(', '.join(paths[digest]))}: {size} bytes ({s['kind']}) in "
                f"{escape(where)}",
                soft_wrap=True,
            )
            if digest in printed:
                out.print(f"  (the value printed at seq {printed[digest]} above)")
                continue
            if any(p == MARK or p.endswith("." + MARK) for p in paths[digest]):
                out.print(ESCAPED_NOTE)
            printed[digest] = env.get("seq")
            if full:
                whole = _whole(ws, where, s["kind"])
                if whole is None:
                    out.print("  [yellow]not in the workspace[/] (run `lgx verify`)")
                else:
                    out.print(Text(whole), soft_wrap=True)
            elif s["whole_payload"]:
                out.print("  (a whole payload, recorded before values were offloaded one by one)")
            else:
                out.print(Text(s["head"]), soft_wrap=True)
                out.print(f"[dim]… shortened: {size} bytes in all …[/]")
                if s["tail"]:
                    out.print(Text(s["tail"]), soft_wrap=True)
    return len(printed)
