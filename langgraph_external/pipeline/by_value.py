"""A capture in a ledger transaction of its own: how a saver the record cannot join is
recorded (:mod:`langgraph_external.record.by_value` packs what it stored).

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> from langgraph_external.pipeline.pipeline import Pipeline
    >>> from langgraph_external.record.capture import Capture
    >>> ledger = InMemoryLedger()
    >>> with Pipeline(ledger, sealing=None) as p:
    ...     store_capture(p, Capture("events", "t"), riders=False)
    ...     [c.kind for c in ledger.captures]
    ['events']
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from langgraph_external.errors import RecordingError
from langgraph_external.pipeline.recovery import recorded
from langgraph_external.pipeline.seal import is_poison
from langgraph_external.record.capture import Capture

if TYPE_CHECKING:
    from langgraph_external.pipeline.pipeline import Pipeline

__all__ = ["store_capture"]


def store_capture(
    pipeline: Pipeline,
    capture: Capture,
    *,
    ns: str = "",
    step: int | None = None,
    checkpoint_id: str | None = None,
    parent_id: str | None = None,
    riders: bool = True,
) -> None:
    """Store ``capture`` in a ledger transaction of its own before returning.

    With ``riders`` it carries the thread's buffered events that precede it, as a capture
    in the saver's transaction does. While the ledger is unavailable it retries every
    ``retry_interval`` (``health()`` shows the call waiting); a strict pipeline raises
    instead. A commit whose reply was lost is looked up before it is tried again, so
    nothing is captured twice.

    Raises:
        RecordingError: the ledger refuses the values (they can never be stored), or it
            is unavailable and the pipeline is strict or closing.
    """
    tid = capture.thread_id
    while True:
        commit = pipeline.open_commit(tid) if riders else None
        try:
            if commit is not None:
                commit.take(
                    capture, ns=ns, step=step, checkpoint_id=checkpoint_id, parent_id=parent_id
                )
            pipeline.call_started(id(capture))
            try:
                pipeline.ledger.capture([capture])
            finally:
                pipeline.call_ended(id(capture))
        except Exception as exc:
            poison = is_poison(exc)
            if commit is not None:  # riders go back (checked first if it may have committed)
                commit.failed(doubtful=not poison)
            if poison:
                raise RecordingError(f"the ledger refused a capture of {tid!r}: {exc}") from exc
            pipeline.failures.add("ledger", exc)
            if _held(pipeline, tid, capture.event_id):
                if commit is None:
                    pipeline.captured_alone(tid, capture.event_id)
                return
            if pipeline.strict or pipeline.buffer.stopping:
                raise RecordingError(
                    f"the record of a stored {capture.kind} of {tid!r} could not be captured: {exc}"
                ) from exc
            time.sleep(pipeline.retry_interval)
            continue
        if commit is not None:
            commit.done()
        else:
            pipeline.captured_alone(tid, capture.event_id)
        return


def _held(pipeline: Pipeline, thread_id: str, event_id: str) -> bool:
    """Whether the ledger holds ``event_id`` (a commit whose reply was lost)."""
    try:
        return event_id in recorded(pipeline.ledger, thread_id, [event_id])
    except Exception:
        return False
