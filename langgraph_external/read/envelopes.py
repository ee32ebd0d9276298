"""Event envelopes as the views read them: their time on the view's axis, and the form a
page embeds them in.

An envelope is one event as ``events.jsonl`` holds it (or the ledger returns it, see
:func:`langgraph_external.ledger.schema.row_to_envelope`): ``seq``, ``ts`` (ISO 8601),
``kind``, ``payload``, ... The thread view, the timeline and the pages of ``lgx ui`` use
these two helpers, so an event sits at the same place and is cut the same way in each.

Example:
    >>> ts_ms("2026-01-31T12:00:00.5+00:00") - ts_ms("2026-01-31T12:00:00+00:00")
    500.0
    >>> cut = embedded_envelope({"seq": 1, "payload": {"text": "x" * 100}}, limit=64)
    >>> sorted(cut), sorted(cut["payload"])
    (['payload', 'seq'], ['$truncated', 'preview'])
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["MAX_EVENT_BYTES", "embedded_envelope", "ts_ms"]

MAX_EVENT_BYTES = 64 * 1024
"""Largest event (as JSON) embedded whole in a page; a larger one is cut and says so."""


def ts_ms(text: str) -> float:
    """An envelope's ``ts`` in milliseconds since the epoch (the views' time axis)."""
    return datetime.fromisoformat(text).timestamp() * 1000.0


def embedded_envelope(env: Mapping[str, Any], limit: int = MAX_EVENT_BYTES) -> dict[str, Any]:
    """An envelope as embedded in a page: whole, or without its payload and raw bytes
    (a preview and a note on how to print it whole) when its JSON exceeds ``limit`` bytes."""
    text = json.dumps(env, ensure_ascii=False, default=str)
    if len(text.encode()) <= limit:
        return dict(env)
    cut = {k: v for k, v in env.items() if k not in ("payload", "raw")}
    cut["payload"] = {
        "$truncated": f"{len(text.encode())} bytes; `lgx events THREAD --json` prints it whole",
        "preview": text[: limit // 2],
    }
    return cut
