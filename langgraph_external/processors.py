"""Event processors, applied in order before any sink sees an event.

A processor is a plain callable ``(event) -> event``; the default chain is
``[Redact(...), Offload(...), Sequencer(...)]``: secrets are removed first, large
payloads then move to content-addressed artifacts, and only then is the event numbered
and chained, so the hash covers exactly what is stored.

Example:
    >>> seq = Sequencer(lambda ids: {})
    >>> e = seq(Event.new("error", "t"))
    >>> e.seq, e.prev is None, len(e.hash)
    (1, True, 64)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection
from typing import Any, Protocol

from langgraph_external.events import Event, canonical_json, json_safe
from langgraph_external.workspace import sha256_hex

Redactor = Callable[[Any], tuple[Any, int]]
"""Returns ``(redacted_value, number_of_redactions)`` for any JSON-like value."""

PositionLookup = Callable[[Collection[str]], dict[str, tuple[int, str]]]


class Processor(Protocol):
    """One step of the pipeline."""

    def __call__(self, event: Event) -> Event:
        """Return the transformed event."""


def materialize(event: Event) -> Event:
    """Run a deferred builder (see :attr:`Event.build`), so sources stay cheap."""
    if event.build is None:
        return event
    built = event.build(event)
    return built if built.build is None else built.replace(build=None)


class Redact:
    """Apply a redactor to the payload and count what it removed.

    Example:
        >>> r = Redact(lambda v: ({"k": "[REDACTED]"}, 1) if v else (v, 0))
        >>> r(Event.new("error", "t", payload={"k": "secret"})).redactions
        1
    """

    def __init__(self, redactor: Redactor | None) -> None:
        self.redactor = redactor

    def __call__(self, event: Event) -> Event:
        if self.redactor is None:
            return event
        changes: dict[str, Any] = {}
        total = 0
        if event.kind in _STRUCTURAL:
            # references (channel names, versions, addresses) are not content: only the
            # free-form checkpoint metadata is; values are redacted in the readable views
            meta = event.payload.get("metadata")
            if meta:
                redacted, count = self.redactor(meta)
                if count:
                    changes["payload"] = {**event.payload, "metadata": redacted}
                    total += count
        elif event.payload:
            payload, count = self.redactor(event.payload)
            if count:
                changes["payload"], total = payload, total + count
        if event.raw is not None:
            # raw tool responses are text more often than not: redact them as text
            try:
                text = event.raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None:
                redacted, count = self.redactor(text)
                if count:
                    changes["raw"], total = str(redacted).encode("utf-8"), total + count
        if not total:
            return event
        return event.replace(redactions=event.redactions + total, **changes)


_STRUCTURAL = frozenset({"checkpoint", "writes"})


class Offload:
    """Move payloads and raw bytes above ``threshold`` bytes to content-addressed artifacts.

    The event keeps a reference (``{"$artifact": sha256, "size": n}`` for the payload,
    ``artifact`` for raw bytes); the bytes travel as an attachment to
    ``artifacts/<sha256>``. Nothing is truncated.
    """

    def __init__(self, threshold: int = 64 * 1024) -> None:
        self.threshold = threshold

    def __call__(self, event: Event) -> Event:
        changes: dict[str, Any] = {}
        attachments = dict(event.attachments)
        if event.raw is not None and len(event.raw) > self.threshold:
            digest = sha256_hex(event.raw)
            attachments[f"artifacts/{digest}"] = event.raw
            changes["raw"] = None
            changes["artifact"] = digest
        if event.payload and event.kind not in _NEVER_OFFLOAD:
            text = canonical_json(event.payload)
            if len(text) > self.threshold:
                data = json.dumps(event.payload, ensure_ascii=False, default=str).encode()
                digest = sha256_hex(data)
                attachments[f"artifacts/{digest}"] = data
                changes["payload"] = {"$artifact": digest, "size": len(data)}
        if not changes:
            return event
        return event.replace(attachments=attachments, **changes)


# Checkpoint and writes payloads are already references to blobs.
_NEVER_OFFLOAD = frozenset({"checkpoint", "writes"})


class Sequencer:
    """Number events per thread (1, 2, 3, ... without gaps) and chain their hashes.

    The first time a thread is seen, its last position is asked of ``lookup`` (the
    pipeline asks every sink and takes the furthest), so numbering continues across
    processes and restarts.
    """

    def __init__(self, lookup: PositionLookup) -> None:
        self.lookup = lookup
        self._last: dict[str, tuple[int, str | None]] = {}

    def prime(self, thread_ids: Collection[str]) -> None:
        """Load positions for all unknown ``thread_ids`` at once (one lookup per batch)."""
        unknown = [t for t in set(thread_ids) if t not in self._last]
        if not unknown:
            return
        found = self.lookup(unknown)
        for t in unknown:
            self._last[t] = found.get(t, (0, None))

    def forget(self, thread_id: str) -> None:
        """Drop the cached position (the next event asks the sinks again)."""
        self._last.pop(thread_id, None)

    def __call__(self, event: Event) -> Event:
        tid = event.thread_id
        if tid not in self._last:
            self.prime([tid])
        seq, prev = self._last[tid]
        seq += 1
        # hash the form the ledger's jsonb gives back, so both copies verify
        payload = json_safe(event.payload)
        envelope = event.envelope()
        envelope["seq"], envelope["prev"], envelope["payload"] = seq, prev, payload
        del envelope["hash"]
        body = canonical_json(envelope)
        digest = hashlib.sha256(body.encode()).hexdigest()
        # the stored line is the hashed body with the hash in its sorted place (before "kind")
        cut = body.index(',"kind":')
        line = f'{body[:cut]},"hash":"{digest}"{body[cut:]}'
        self._last[tid] = (seq, digest)
        return event.replace(seq=seq, prev=prev, payload=payload, hash=digest, line=line)
