"""Offloaded values as readers show them: first and last part, size, where the whole is.

A payload's large values are recorded as artifact references
(:mod:`~langgraph_external.record.artifacts`: ``{"$artifact", "size", "as", "head",
"tail"}``; records made before that hold a whole payload as ``{"$artifact", "size"}``).
The views show a reference as its head … tail, marked as shortened, with its size; the
whole value is one click (``lgx ui``'s ``/artifact`` route) or one flag (``lgx events
--full``) away. This module is what they share: the text of a reference, the references
a value holds (with where), the artifacts a thread's record names, and the exact values
put back from a workspace.

A whole payload of an older record is read back when a thread is loaded
(:func:`with_whole_payloads`): the views then read its fields as they read any payload's,
and each value today's offload step would have moved is shown the same way, by a
reference *into* the payload's artifact (``"$in"``: its path there; :func:`value_at`
gives the value at that path).

Example:
    >>> ref = {"$artifact": "ab" * 32, "size": 9000, "as": "text", "head": "<b>", "tail": "end"}
    >>> s = shortened(ref)
    >>> s["digest"], s["size"], s["kind"], s["head"], s["tail"], s["whole_payload"]
    ('abab…', 9000, 'text', '<b>', 'end', False)
    >>> shown_text(ref, marker="[…{size} bytes…]")
    '<b>[…9,000 bytes…]end'
    >>> [(p, r["size"]) for p, r in references({"result": ref, "n": 1})]
    [('result', 9000)]
    >>> shown = pointed({"name": "fetch", "result": "x" * 70_000}, "cd" * 32)
    >>> shown["name"], shown["result"]["$in"], shown["result"]["size"]
    ('fetch', ['result'], 70000)
    >>> value_at(b'{"result": "abc"}', ["result"])
    (b'abc', 'text')
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from langgraph_external.record.artifacts import expand, is_ref, offload_values

__all__ = [
    "DIGEST",
    "SHOWN_WHOLE",
    "expand_from",
    "is_whole_payload",
    "named_artifacts",
    "pointed",
    "references",
    "shortened",
    "shown_text",
    "value_at",
    "with_whole_payloads",
    "workspace_fetch",
]

DIGEST = re.compile(r"[0-9a-f]{64}")
"""What an artifact's name is: the sha256 of its content, in lowercase hex."""

SHOWN_WHOLE = 64 * 1024
"""The offload threshold the views apply to an older record's whole payload read back:
the values the offload step would move today are shown shortened (it moves strings over a
quarter of it, then the largest members until the payload fits)."""


def is_whole_payload(value: Any) -> bool:
    """Whether ``value`` is an older record's reference to its whole payload (no ``as``)."""
    return is_ref(value) and not value.get("as")


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
    elif isinstance(value, (Mapping, list, tuple)):
        for k, v in value.items() if isinstance(value, Mapping) else enumerate(value):
            yield from references(v, f"{path}.{k}" if path else str(k))


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
                # a reference into an older whole payload: the artifact is that payload
                out[digest] = "json" if "$in" in ref else str(ref.get("as") or "json")
    return out


def workspace_fetch(ws: Any, thread_id: str) -> Callable[[str], bytes | None]:
    """``fetch(digest)``: the bytes of an artifact of ``thread_id`` in workspace ``ws``
    (``None``: not a digest, or not there)."""

    def fetch(digest: str) -> bytes | None:
        if not DIGEST.fullmatch(digest):
            return None
        try:
            return bytes(ws.read_bytes(ws.artifact_path(thread_id, digest)))
        except (OSError, ValueError):
            return None

    return fetch


def expand_from(ws: Any, thread_id: str, value: Any) -> Any:
    """``value`` with every reference replaced by the exact value in workspace ``ws``
    (a reference whose artifact is not there stays as it is)."""
    return expand(value, workspace_fetch(ws, thread_id))


def _point(value: Any, digest: str, path: list[str | int]) -> Any:
    if is_ref(value):
        return {**value, "$artifact": digest, "$in": path}
    if isinstance(value, Mapping):
        return {k: _point(v, digest, [*path, str(k)]) for k, v in value.items()}
    if isinstance(value, list):
        return [_point(v, digest, [*path, i]) for i, v in enumerate(value)]
    return value


def pointed(payload: Mapping[str, Any], digest: str, threshold: int = SHOWN_WHOLE) -> Any:
    """An older record's whole ``payload`` (read back from artifact ``digest``) as the
    views show it: each value the offload step would move today (``threshold``) becomes
    a reference with its head and tail, into the payload's artifact (``"$in"``: its path)."""
    small, _files = offload_values(payload, threshold)
    return _point(small, digest, [])


def with_whole_payloads(
    envelopes: Iterable[Mapping[str, Any]], fetch: Callable[[str], bytes | None]
) -> list[Mapping[str, Any]]:
    """``envelopes`` with each whole payload of an older record read back (``fetch(digest)``
    gives an artifact's bytes) and :func:`pointed`; a payload whose artifact is missing
    or unreadable stays the reference it is."""
    out: list[Mapping[str, Any]] = []
    for env in envelopes:
        ref = env.get("payload")
        if isinstance(ref, Mapping) and is_whole_payload(ref):
            digest = str(ref["$artifact"])
            data = fetch(digest)
            try:
                loaded = json.loads(data) if data is not None else None
            except ValueError:
                loaded = None
            if isinstance(loaded, Mapping):
                env = {**env, "payload": pointed(loaded, digest)}
        out.append(env)
    return out


def value_at(data: bytes, path: Sequence[Any]) -> tuple[bytes, str] | None:
    """The value at ``path`` in the JSON ``data`` (an older whole payload), as its bytes
    and kind (``text``: a string, as UTF-8; else ``json``), or ``None`` (no such value)."""
    try:
        value: Any = json.loads(data)
    except ValueError:
        return None
    for key in path:
        found = (isinstance(value, Mapping) and isinstance(key, str) and key in value) or (
            isinstance(value, list) and type(key) is int and 0 <= key < len(value)
        )
        if not found:
            return None
        value = value[key]
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace"), "text"
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "backslashreplace"), "json"
