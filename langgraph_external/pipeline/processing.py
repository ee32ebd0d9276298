"""What runs on a source's event before it is captured, and where: the processors
(``materialize → Redact → normalize → Offload``) on the caller's thread, or — deferred —
only a snapshot there and the rest in the sealer.

Deferring (``defer``) is for a pipeline whose sealer runs these very processors: the
app's own helper process or threads. The caller's thread then runs the event's deferred
builder and copies its values (:func:`~langgraph_external.record.capture.snapshot`), and
the capture carries the event encrypted with the deployment key until the sealer
redacts, normalizes and offloads it. An event whose values are not plain data is
processed at once, as without ``defer`` (processing it again in the sealer changes
nothing: the built-in processors give the same event twice). Not deferred when
``strict`` (a processor's failure must reach the caller), without a deployment key
(``Pipeline(encrypt=False)`` passes none: no AES-GCM in such a process), or with
processors of the app's own (they may not allow running twice).

Example:
    >>> from langgraph_external.pipeline.failures import Failures
    >>> p = EventProcessing(Failures(), redactor=lambda v: (v, 0))
    >>> p.deferred, p.process(Event.new("error", "t", payload={"x": 1.0})).payload
    (False, {'x': 1})
"""

from __future__ import annotations

from collections.abc import Sequence

from langgraph_external.pipeline.failures import Failures
from langgraph_external.record.capture import snapshot
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event
from langgraph_external.record.processors import (
    Offload,
    Processor,
    Redact,
    Redactor,
    materialize,
    normalize,
    run_all,
)

__all__ = ["EventProcessing", "build_processors"]


def build_processors(
    *,
    redactor: Redactor | None = None,
    offload_threshold: int = 64 * 1024,
    extra: Sequence[Processor] = (),
) -> list[Processor]:
    """The processors every event runs through, wherever it is processed (the app's
    thread, its sealer in a helper process or a thread, ``lgx worker``): the one place
    they are built, so a setting means the same in every sealing mode.

    Example:
        >>> [getattr(p, "__name__", type(p).__name__) for p in build_processors()]
        ['materialize', 'Redact', 'normalize', 'Offload']
    """
    return [materialize, Redact(redactor), *extra, normalize, Offload(offload_threshold)]


class EventProcessing:
    """The processors of a pipeline, and whether they wait for the sealer (see above)."""

    def __init__(
        self,
        failures: Failures,
        *,
        redactor: Redactor | None = None,
        offload_threshold: int = 64 * 1024,
        extra_processors: Sequence[Processor] = (),
        strict: bool = False,
        cipher: WorkspaceCipher | None = None,
        defer: bool = False,
    ) -> None:
        self.failures = failures
        self.strict = strict
        self.processors = build_processors(
            redactor=redactor, offload_threshold=offload_threshold, extra=extra_processors
        )
        self.deferred = defer and not strict and cipher is not None and not extra_processors
        self._rest = self.processors[1:]  # what a deferred event still needs

    def process(self, event: Event) -> Event:
        """``event`` processed (:func:`run_all`), or snapshotted when deferred."""
        failed = self.failures.unrecorded
        if not self.deferred:
            return run_all(event, self.processors, strict=self.strict, failed=failed)
        if event.build is not None:
            event = run_all(event, (materialize,), failed=failed)
        snap = snapshot(event)
        if snap is not None:
            return snap
        return run_all(event, self._rest, failed=failed)

    def finish(self, events: Sequence[Event]) -> list[Event]:
        """Deferred events processed here: before anything is written outside the
        ledger (the write-ahead log of what outlived a close, the quarantine)."""
        if not self.deferred:
            return list(events)
        return [run_all(e, self._rest, failed=self.failures.unrecorded) for e in events]
