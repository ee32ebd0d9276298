"""Offloaded values as readers show them: first and last part, size, where the whole is.

A payload's large values are recorded as artifact references
(:mod:`~langgraph_external.record.artifacts`: ``{"$artifact", "size", "as", "head",
"tail"}``; records made before that hold a whole payload as ``{"$artifact", "size"}``).
The views show a reference as its head … tail, marked as shortened, with its size; the
whole value is one click (``lgx ui``'s ``/artifact`` route) or one flag (``lgx events
--full``) away. This module is what they share: the text of a reference, the references
a value holds (with where), the artifacts a thread's record names, and the exact values
put back from a workspace.

Example:
    >>> ref = {"$artifact": "ab" * 32, "size": 9000, "as": "text", "head": "<b>", "tail": "end"}
    >>> s = shortened(ref)
    >>> s["digest"], s["size"], s["kind"], s["head"], s["tail"], s["whole_payload"]
    ('abab…', 9000, 'text', '<b>', 'end', False)
    >>> shown_text(ref, marker="[…{size} bytes…]")
    '<b>[…9,000 bytes…]end'
    >>> [(p, r["size"]) for p, r in references({"result": ref, "n": 1})]
    [('result', 9000)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from langgraph_external.record.artifacts import expand, is_ref

__all__ = [
    "DIGEST",
    "expand_from",
    "named_artifacts",
    "references",
    "shortened",
    "shown_text",
]

DIGEST = re.compile(r"[0-9a-f]{64}")
"""What an artifact's name is: the sha256 of its content, in lowercase hex."""


def shortened(ref: Mapping[str, Any]) -> dict[str, Any]:
    """What a view shows of a reference: digest, size, kind (``text``, ``json``; ``payload``
    for a whole payload of an older record), head and tail.

    ``digest`` is cut for reading; the whole is ``ref["$artifact"]``.
    """
    kind = ref.get("as")
    return {
        "digest": str(ref.get("$artifact"))[:4] + "…",
        "size": ref.get("size"),
        "kind": str(kind) if kind else "payload",
        "head": str(ref.get("head") or ""),
        "tail": str(ref.get("tail") or ""),
        "whole_payload": not kind,
    }


def shown_text(ref: Mapping[str, Any], marker: str = "\n… [shortened: {size} bytes] …\n") -> str:
    """A reference as one text: its head, ``marker`` (``{size}``, ``{digest}`` filled in),
    its tail."""
    s = shortened(ref)
    size = f"{s['size']:,}" if isinstance(s["size"], int) else "?"
    return s["head"] + marker.format(size=size, digest=str(ref.get("$artifact"))) + s["tail"]


def references(value: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every artifact reference in ``value``, with its path (``messages.0.content``)."""
    if is_ref(value):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from references(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from references(v, f"{path}.{i}" if path else str(i))


def named_artifacts(envelopes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The artifacts a thread's events name: digest -> kind (``text``, ``json``, or
    ``bytes`` for a raw response or an older whole payload)."""
    out: dict[str, str] = {}
    for env in envelopes:
        raw = env.get("artifact")
        if isinstance(raw, str) and DIGEST.fullmatch(raw):
            out.setdefault(raw, "bytes")
        for _path, ref in references(env.get("payload")):
            digest = str(ref["$artifact"])
            if DIGEST.fullmatch(digest) and out.get(digest, "bytes") == "bytes":
                out[digest] = str(ref.get("as") or "json")
    return out


def expand_from(ws: Any, thread_id: str, value: Any) -> Any:
    """``value`` with every reference replaced by the exact value in workspace ``ws``
    (a reference whose artifact is not there stays as it is)."""

    def fetch(digest: str) -> bytes | None:
        if not DIGEST.fullmatch(digest):
            return None
        try:
            return bytes(ws.read_bytes(ws.artifact_path(thread_id, digest)))
        except (OSError, ValueError):
            return None

    return expand(value, fetch)
