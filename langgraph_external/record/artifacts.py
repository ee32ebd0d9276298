"""Large values of a payload, offloaded to content-addressed artifacts — and back.

A payload over the offload threshold keeps its shape: only its large *values* move to
``artifacts/<sha256>``, each replaced by a reference that still shows the value's first
and last part — ``{"$artifact": sha256, "size": n, "as": "text"|"json", "head": …,
"tail": …}`` — so a tool result of a fetched web page reads as its beginning and end
wherever the record is shown, and the fields that identify and route an event (user,
session, tags, names, ids, status, …: :data:`KEPT_KEYS`) are never offloaded. A text
value's artifact is the text itself (UTF-8); any other value's is its JSON.
:func:`expand` puts the exact values back (replay, exports, the thread view). Records
written before this shape offloaded a whole payload as ``{"$artifact", "size"}``; both
read back the same way.

Example:
    >>> payload = {"name": "fetch", "result": "x" * 50_000, "user_id": "bob"}
    >>> small, files = offload_values(payload, 16_384)
    >>> small["user_id"], small["result"]["size"], small["result"]["head"][:3]
    ('bob', 50000, 'xxx')
    >>> expand(small, lambda digest: files[digest]) == payload
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from langgraph_external.record.escapes import MARK, is_marked, restore_marked

__all__ = [
    "HEAD_CHARS",
    "KEPT_KEYS",
    "TAIL_CHARS",
    "artifact_digests",
    "expand",
    "is_ref",
    "offload_values",
]

HEAD_CHARS = 2000
"""Characters of an offloaded value kept inline at its start."""
TAIL_CHARS = 500
"""Characters of an offloaded value kept inline at its end."""

KEPT_KEYS = frozenset(
    {
        "user_id",
        "session_id",
        "langfuse_user_id",
        "langfuse_session_id",
        "langfuse_tags",
        "tags",
        "name",
        "names",
        "id",
        "ids",
        "run_id",
        "thread_id",
        "tool_call_id",
        "status",
        "model",
        "metadata",
        "type",
        "role",
        "error_type",
    }
)
"""Payload members that identify or route an event: never offloaded, whatever their size."""


def _dumps(value: Any) -> bytes:
    """JSON of ``value`` (orjson; the standard library for what it refuses)."""
    try:
        return orjson.dumps(value, default=str)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")


def _text_bytes(value: str) -> bytes:
    """UTF-8 of ``value`` as the record holds text: NUL made visible (PostgreSQL text
    cannot hold it: ``artifact_text`` reads these bytes), lone surrogates escaped."""
    return value.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace")


def is_ref(value: Any) -> bool:
    """Whether ``value`` is an artifact reference (of a value, or a whole old payload)."""
    return isinstance(value, Mapping) and isinstance(value.get("$artifact"), str)


def _ref(value: Any, files: dict[str, bytes]) -> dict[str, Any]:
    if isinstance(value, str):
        text = value.replace("\x00", "\\u0000")  # the head and tail as the bytes hold it
        data, kind = _text_bytes(value), "text"
    else:
        data, kind = _dumps(value), "json"
        text = data.decode("utf-8", "replace")
    digest = hashlib.sha256(data).hexdigest()
    files[digest] = data
    return {
        "$artifact": digest,
        "size": len(data),
        "as": kind,
        "head": text[:HEAD_CHARS],
        "tail": text[-TAIL_CHARS:] if len(text) > HEAD_CHARS + TAIL_CHARS else "",
    }


def _shrink(value: Any, part: int, files: dict[str, bytes]) -> Any:
    """``value`` with every string over ``part`` bytes offloaded (containers walked)."""
    if isinstance(value, str):
        return (
            _ref(value, files)
            if len(value) * 4 > part and len(_text_bytes(value)) > part
            else value
        )
    if isinstance(value, Mapping):
        return {k: v if k in KEPT_KEYS else _shrink(v, part, files) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shrink(v, part, files) for v in value]
    return value


def offload_values(
    payload: Mapping[str, Any], threshold: int
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``payload`` within ``threshold`` bytes of JSON, and the artifacts it now names.

    Strings over a quarter of the threshold go first (each keeps its head and tail);
    if the payload is still too large, its largest members go whole, largest first —
    never one of :data:`KEPT_KEYS`. A payload within the threshold comes back as is.
    """
    files: dict[str, bytes] = {}
    if len(_dumps(payload)) <= threshold:
        return dict(payload), files
    out = _shrink(payload, max(threshold // 4, 1), files)
    sizes = sorted(
        ((len(_dumps(v)), k) for k, v in out.items() if k not in KEPT_KEYS and not is_ref(v)),
        reverse=True,
    )
    for _size, key in sizes:
        if len(_dumps(out)) <= threshold:
            break
        out[key] = _ref(out[key], files)
    return out, files


def expand(value: Any, fetch: Callable[[str], bytes | None], *, unescape: bool = True) -> Any:
    r"""``value`` with every artifact reference replaced by the value it names, and every
    marked value (text recorded escaped, :mod:`~langgraph_external.record.escapes`)
    turned back into the original.

    ``fetch(digest)`` gives an artifact's bytes (``None``: not at hand — the reference
    stays). A whole payload offloaded by an older version (``{"$artifact", "size"}``)
    comes back as the payload it was. ``unescape=False`` keeps marked values marked (for
    a view that must stay valid UTF-8, such as an export).

    Example:
        >>> expand({"out": {"$escaped": "a\\u0000", "as": "text"}, "s": "\\u0000"}, {}.get)
        {'out': 'a\x00', 's': '\\u0000'}
    """
    if isinstance(value, Mapping):
        if is_marked(value):
            inner = value[MARK]
            if value.get("as") == "object" and isinstance(inner, Mapping):
                inner = {k: expand(v, fetch, unescape=unescape) for k, v in inner.items()}
            else:
                inner = expand(inner, fetch, unescape=unescape)
            return restore_marked(value, inner) if unescape else {**value, MARK: inner}
        if is_ref(value):
            data = fetch(str(value["$artifact"]))
            if data is None:
                return dict(value)
            if value.get("as") == "text":
                return data.decode("utf-8", "replace")
            try:
                loaded = json.loads(data)
            except ValueError:
                return dict(value)
            # a member offloaded whole can hold the references of its own large strings
            return expand(loaded, fetch, unescape=unescape)
        return {k: expand(v, fetch, unescape=unescape) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, fetch, unescape=unescape) for v in value]
    return value


def artifact_digests(value: Any) -> list[str]:
    """The digests of every artifact ``value`` names, in order (``[]``: none).

    Example:
        >>> artifact_digests({"a": [{"$artifact": "d1", "size": 3}], "b": 1})
        ['d1']
    """
    if isinstance(value, Mapping):
        if is_ref(value):
            return [str(value["$artifact"])]
        return [d for v in value.values() for d in artifact_digests(v)]
    if isinstance(value, list):
        return [d for v in value for d in artifact_digests(v)]
    return []
