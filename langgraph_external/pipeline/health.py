"""What ``health()`` says about the capturing side and wherever sealing runs.

Example:
    >>> recording_health({"delivered": 1, "quarantined": {}, "failures": []}, None, False)
    {'delivered': 1, 'quarantined': {}, 'failures': []}
"""

from __future__ import annotations

import time
from typing import Any

from langgraph_external.pipeline.backend import ReportsHealth, SealingBackend
from langgraph_external.pipeline.buffer import EventBuffer
from langgraph_external.pipeline.failures import Failures

__all__ = ["STALL_AFTER", "capture_health", "recording_health"]

STALL_AFTER = 5.0
"""Seconds a database call may take before ``health()`` reports the database as failing
(a server that is frozen or unreachable does not fail calls, it stops answering)."""


def capture_health(
    buffer: EventBuffer, waits: list[float], failures: Failures, quarantined: dict[str, str]
) -> dict[str, Any]:
    """The capturing side's health (under the buffer's lock): ``waits`` are when the
    database calls in flight besides the buffer's commits began (the flusher's capture,
    sources' calls)."""
    now = time.monotonic()
    started = min((t for t in [*waits, *buffer.waits()] if t), default=None)
    wait = now - started if started else 0.0
    oldest, down_since = buffer.oldest(), buffer.ledger_down_since
    return {
        "delivered": buffer.delivered,
        "captured": buffer.delivered,
        "buffered": buffer.count + buffer.storing,
        "oldest_buffered_seconds": round(now - oldest, 3) if oldest is not None else 0.0,
        "ledger_wait_seconds": round(wait, 3),
        "ledger_down_seconds": round(now - down_since, 3) if down_since else 0.0,
        "failures": failures.as_dicts(),
        # down, or not answering within the bound wherever the app waits on it
        "failing": ["ledger"] if down_since or wait > STALL_AFTER else [],
        "quarantined": dict(quarantined),
    }


def recording_health(
    out: dict[str, Any], sealing: SealingBackend | None, shares_failures: bool
) -> dict[str, Any]:
    """``out`` (the capturing side's health) completed with ``sealing``'s.
    ``shares_failures``: the sealing service records into the same failures."""
    if not isinstance(sealing, ReportsHealth):
        return out
    try:
        sealed = sealing.health()
    except Exception as exc:
        sealed = {"error": f"{type(exc).__name__}: {exc}"}
    out["sealing"] = sealed
    out["projection_lag_commits"] = sealed.get("projection_lag_batches", 0)
    if not shares_failures:
        out["failures"] = out["failures"] + list(sealed.get("failures") or [])
        # events the sealer could not record (deferred processing failed there)
        out["record_failures"] = out.get("record_failures", 0) + int(
            sealed.get("record_failures") or 0
        )
    out["quarantined"] = {**out["quarantined"], **(sealed.get("quarantined") or {})}
    if (
        sealed.get("sealer_down_seconds")  # it cannot reach the same database
        or (sealed.get("sealer_wait_seconds") or 0) > STALL_AFTER
    ):
        out["failing"] = sorted({*out["failing"], "ledger"})
    if sealed.get("helper_down"):
        out["failing"] = sorted({*out["failing"], "sealer"})
    return out
