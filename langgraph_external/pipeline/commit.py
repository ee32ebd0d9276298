"""One capture riding someone else's transaction (the saver's): :class:`Commit`.

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> from langgraph_external.pipeline.pipeline import Pipeline
    >>> with Pipeline(InMemoryLedger()) as p:
    ...     c = p.open_commit("t")
    ...     cap = c.take(Capture("events", "t"), ns="", step=None, checkpoint_id=None)
    ...     c.failed()
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from langgraph_external.pipeline.buffer import Entry
from langgraph_external.record.capture import Capture

if TYPE_CHECKING:
    from langgraph_external.pipeline.pipeline import Pipeline

__all__ = ["Commit"]


class Commit:
    """One capture riding someone else's transaction (the saver's).

    The checkpointer opens it around the saver's ``put`` (``Pipeline.open_commit``):
    :meth:`take` (inside the transaction) gives the capture the thread's buffered events
    that precede it; :meth:`done` or :meth:`failed` settles it once the saver returned.
    """

    __slots__ = ("_settled", "capture", "pipeline", "riders", "step", "thread_id")

    def __init__(self, pipeline: Pipeline, thread_id: str) -> None:
        self.pipeline = pipeline
        self.thread_id = thread_id
        self.capture: Capture | None = None
        self.step: int | None = None
        self.riders: list[Entry] = []  # the buffered entries this capture carries
        self._settled = False
        buffer = pipeline.buffer
        with buffer.cv:  # the flusher leaves the thread to this commit until it settles
            buffer.open_commit(id(self), thread_id)

    def take(
        self,
        capture: Capture,
        *,
        ns: str,
        step: int | None,
        checkpoint_id: str | None,
        parent_id: str | None = None,
        riders: bool = True,
    ) -> Capture:
        """Give ``capture`` the buffered events that precede it (call once, inside the
        transaction) and return it.

        A checkpoint's capture waits, first, for the flusher's capture of the thread's
        earlier events and for any other capture of the thread in flight that carries
        events (a subgraph's checkpoint beside the parent's): both commit before it, so
        the order they are sealed in — commit order — is the order they were taken in.
        """
        self.step = step
        if not riders:
            self.capture = capture
            return capture
        p = self.pipeline
        if p.is_doubtful(self.thread_id):
            p.resolve_doubts(self.thread_id)  # before riders are picked again
        with p.buffer.cv:
            while not self._try_take(capture, (ns, step, checkpoint_id, parent_id)):
                p.buffer.cv.wait(0.05)
        return capture

    async def atake(
        self,
        capture: Capture,
        *,
        ns: str,
        step: int | None,
        checkpoint_id: str | None,
        parent_id: str | None = None,
    ) -> Capture:
        """:meth:`take` for a transaction on an event loop: it waits without blocking the
        loop (the capture it waits for may be another task of the same loop)."""
        p = self.pipeline
        self.step = step
        if p.is_doubtful(self.thread_id):
            await asyncio.to_thread(p.resolve_doubts, self.thread_id)
        while True:
            with p.buffer.cv:
                if self._try_take(capture, (ns, step, checkpoint_id, parent_id)):
                    return capture
            await asyncio.sleep(0.001)

    def _try_take(
        self, capture: Capture, at: tuple[str, int | None, str | None, str | None]
    ) -> bool:
        taken = self.pipeline.buffer.try_take(self.thread_id, *at)
        if taken is None:
            return False
        self.riders = taken
        capture.riders = [en.event for en in taken]
        self.capture = self.pipeline.buffer.riding(capture)
        return True

    def done(self) -> None:
        """The transaction committed: the capture (and its riders) are recorded."""
        if self._settled:
            return
        self._settled = True
        self.pipeline.captured(
            [self.capture] if self.capture is not None else [], self.riders, commit=self
        )

    def failed(self, *, doubtful: bool = False) -> None:
        """The transaction did not commit: riders go back to the buffer.

        ``doubtful``: the failure may have come after the server committed (a connection
        lost around the COMMIT); the riders are checked against the ledger before they
        are captured again, so none is recorded twice.
        """
        if self._settled:
            return
        self._settled = True
        buffer = self.pipeline.buffer
        with buffer.cv:
            if doubtful and self.riders and self.capture is not None:
                buffer.doubt(
                    self.thread_id,
                    [(self.capture.event_id, {en.event.event_id for en in self.riders})],
                )
            buffer.close_commit(id(self), self.thread_id, self.riders)
            buffer.rebuffer(self.thread_id, self.riders)
            buffer.cv.notify_all()
