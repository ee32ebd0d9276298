"""Recorded values as span attributes: JSON text, or a preview and the record's address.

A span backend keeps attributes of bounded size; the ledger keeps everything. A value
larger than :attr:`MapperOptions.max_value_bytes` becomes its first characters plus where
the whole value is in the workspace (the ``events.jsonl`` line, or the artifact an
offloaded payload went to), so a reader can always reach it. Pure: no I/O.

Example:
    >>> from langgraph_external.record.events import Event
    >>> v = SpanValues("t", MapperOptions(max_value_bytes=10, preview_chars=3))
    >>> e = Event(kind="tool_end", thread_id="t", seq=7)
    >>> v.value({"a": 1}, e, "output")
    '{"a":1}'
    >>> v.value("x" * 20, e, "output")
    '{"artifact":"threads/t/events.jsonl#seq=7","preview":"xxx","size":20,"truncated":true}'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langgraph_external.record.artifacts import artifact_digests, expand, is_ref
from langgraph_external.record.events import Event
from langgraph_external.record.locations import artifact_relpath, events_relpath

__all__ = ["MapperOptions", "SpanValues", "json_text"]

_OFFLOADED_KEPT = 10_000


@dataclass
class MapperOptions:
    """How values are rendered into attributes."""

    max_value_bytes: int = 256 * 1024
    """A value whose JSON is larger becomes a preview plus its address in the workspace."""
    preview_chars: int = 2000
    environment: str | None = None
    release: str | None = None
    semconv: bool = False
    """Also the OpenInference, OpenTelemetry GenAI and our own (``lgx.*``) attributes."""


def json_text(value: Any) -> str:
    """Compact JSON with sorted keys (the same value always gives the same text).

    Example:
        >>> json_text({"b": 1, "a": "é"})
        '{"a":"é","b":1}'
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, sort_keys=True)


@dataclass
class SpanValues:
    """Renders one thread's values; remembers which events' payloads were offloaded."""

    thread_id: str
    options: MapperOptions = field(default_factory=MapperOptions)
    offloaded: dict[str, str] = field(default_factory=dict)  # event id -> artifact digest
    legacy: bool = False  # the thread keeps its folder of the old rule (see locations)

    def expand(self, e: Event) -> Event:
        """An event whose payload was offloaded to an artifact, with the payload back."""
        p = e.payload
        named = artifact_digests(p)
        if not named:
            return e
        # marked (escaped) text stays marked: a span's text must be valid UTF-8
        full = expand(p, lambda digest: e.attachments.get(f"artifacts/{digest}"), unescape=False)
        if full == p:
            return e
        self.offloaded[e.event_id] = named[0]
        while len(self.offloaded) > _OFFLOADED_KEPT:
            self.offloaded.pop(next(iter(self.offloaded)))
        return e.replace(payload=full if isinstance(full, dict) else {"value": full})

    def forget(self) -> None:
        """Forget the offloaded payloads of earlier traces."""
        self.offloaded.clear()

    def artifact_path(self, digest: str) -> str:
        """Where an artifact of the thread is, relative to the workspace root."""
        return artifact_relpath(self.thread_id, digest, legacy=self.legacy)

    def value(self, value: Any, e: Event, part: str) -> str | None:
        """JSON of ``value``; a preview plus the workspace address when it is too large."""
        if value is None:
            return None
        chars = self.options.preview_chars
        if is_ref(value):
            digest = str(value["$artifact"])
            body = e.attachments.get(f"artifacts/{digest}")
            head = body[:chars].decode("utf-8", "replace") if body else value.get("head")
            preview = str(head or "")[:chars]
            return _preview(preview, value.get("size"), self.artifact_path(digest))
        text = value if isinstance(value, str) else json_text(value)
        if len(text.encode("utf-8", "replace")) <= self.options.max_value_bytes:
            return text
        where = self.artifact_path(e.artifact) if e.artifact and part == "raw" else self._where(e)
        return _preview(text[:chars], len(text), where)

    def clip(self, text: str, e: Event) -> str:
        """``text``, or its first characters and the record's address when too large."""
        if len(text.encode("utf-8", "replace")) <= self.options.max_value_bytes:
            return text
        return (
            f"{text[: self.options.preview_chars]}… [truncated: {len(text)} characters;"
            f" the whole value is in {self._where(e)}]"
        )

    def _where(self, e: Event) -> str:
        """Where the whole of an event's value is: its artifact, else its line."""
        if e.event_id in self.offloaded:
            return self.artifact_path(self.offloaded[e.event_id])
        return f"{events_relpath(self.thread_id, legacy=self.legacy)}#seq={e.seq}"


def _preview(preview: str, size: Any, artifact: str) -> str:
    """A value too large for a span: its first characters, its size, where the whole is."""
    return json_text({"preview": preview, "truncated": True, "size": size, "artifact": artifact})
