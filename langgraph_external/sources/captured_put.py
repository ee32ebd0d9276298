"""One object per recorded ``put`` / ``put_writes`` on the official Postgres saver: the
capture row it adds to the saver's own transaction, and how the call is settled after.

Read it top to bottom, from :meth:`ExternalCheckpointer.put
<langgraph_external.sources.checkpointer.ExternalCheckpointer.put>` to the INSERT::

    with recorder.checkpoint_in_transaction(...):   # a CheckpointPut (this module)
        inner.put(...)                              # the official saver opens
                                                    #   _cursor(pipeline=True), runs its
                                                    #   statements, then, in the same
                                                    #   transaction (upstream.langgraph),
        put.run(cur)                                # -> commit.take(capture): the riders
                                                    # -> ledger.capture_in(cur, row): INSERT
    # on leaving the block: done (committed) or failed (riders back to the buffer)

A put whose saver opened no transaction of its own (a subclass that stores elsewhere)
did not run the statement (``ran`` is false): it is captured by value instead, before the
call returns.

Example:
    >>> put = WritesPut.__new__(WritesPut)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from langgraph_external.pipeline.pipeline import Commit, Pipeline
from langgraph_external.record.capture import Capture
from langgraph_external.sources.ports import CaptureInTransaction
from langgraph_external.sources.serde_tap import capturing
from langgraph_external.upstream import langgraph as _compat

__all__ = ["CapturedPut", "CheckpointPut", "WritesPut"]


class CapturedPut:
    """Around the wrapped saver's call: while it runs, this object is the statement the
    saver's transaction runs last (:data:`~langgraph_external.upstream.langgraph.OUTBOX`);
    a serializer failure becomes a typed error; afterwards the call is settled.
    (A class, not a generator: it runs around every ``put`` and ``put_writes``.)
    """

    __slots__ = ("_calls", "_tap", "_token", "capture", "ledger", "ran")

    what = "checkpoint"

    def __init__(
        self,
        ledger: CaptureInTransaction,
        capture: Capture,
        *,
        calls: Pipeline | None = None,
    ) -> None:
        self.ledger = ledger
        self.capture = capture
        self.ran = False  # set by the saver's cursor when it ran :meth:`run`
        self._calls = calls  # a pipeline whose health() sees this call while it lasts
        self._tap = capturing(self.what, record=False)
        self._token: Any = None

    # -- inside the saver's transaction ------------------------------------------------
    def row(self) -> Sequence[Any]:
        """The capture's row (called once, inside the transaction)."""
        return self.capture.row()

    def run(self, cur: Any) -> None:
        """Queue the capture on the saver's cursor: it commits with the saver's rows."""
        self.ledger.capture_in(cur, self.row())

    async def arun(self, cur: Any) -> None:
        """:meth:`run` on the async saver's cursor."""
        await self.ledger.acapture_in(cur, await self.arow())

    async def arow(self) -> Sequence[Any]:
        """:meth:`row` on an event loop."""
        return self.row()

    # -- around the call -------------------------------------------------------------------
    def __enter__(self) -> CapturedPut:
        self._token = _compat.OUTBOX.set(self)
        if self._calls is not None:
            self._calls.call_started(id(self))
        self._tap.__enter__()
        return self

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            self._tap.__exit__(typ, exc, tb)  # raises the typed error in place of ``exc``
        except BaseException as err:
            self.failed(err)
            raise
        else:
            if exc is not None:
                self.failed(exc)
        finally:
            _compat.OUTBOX.reset(self._token)
            if self._calls is not None:
                self._calls.call_ended(id(self))
        if exc is None:
            self.done()

    def done(self) -> None:
        """The call returned: the capture committed with it (or, if the saver ran no
        transaction, is captured another way)."""

    def failed(self, exc: BaseException) -> None:
        """The call raised ``exc``: nothing of it committed (or it is in doubt)."""


class CheckpointPut(CapturedPut):
    """A checkpoint's capture: it carries the thread's buffered events that precede it
    (:class:`~langgraph_external.pipeline.commit.Commit` takes them, inside the
    transaction, in commit order)."""

    __slots__ = ("by_value", "commit", "step")

    def __init__(
        self,
        ledger: CaptureInTransaction,
        capture: Capture,
        pipeline: Pipeline,
        *,
        step: int | None,
        by_value: Callable[[Any], None],
    ) -> None:
        super().__init__(ledger, capture)
        self.step = step
        self.by_value = by_value
        self.commit: Commit = pipeline.open_commit(capture.thread_id)

    def row(self) -> Sequence[Any]:
        return self.commit.take(self.capture, **self._where()).row()

    async def arow(self) -> Sequence[Any]:
        return (await self.commit.atake(self.capture, **self._where())).row()

    def _where(self) -> dict[str, Any]:
        c = self.capture
        return {
            "ns": c.checkpoint_ns,
            "step": self.step,
            "checkpoint_id": c.checkpoint_id,
            "parent_id": c.parent_id,
        }

    def done(self) -> None:
        if self.ran:
            self.commit.done()
            return
        self.commit.failed()
        with capturing("checkpoint") as cap:  # a saver subclass that stores elsewhere
            self.by_value(cap)

    def failed(self, exc: BaseException) -> None:
        # a connection lost around the COMMIT may have committed: riders are checked
        # against the ledger before they ride again
        self.commit.failed(doubtful=isinstance(exc, psycopg.OperationalError))


class WritesPut(CapturedPut):
    """A task's writes: no buffered events ride it, so it needs no commit of the pipeline
    (the writes' own transaction is its only order); its row is built before the call."""

    __slots__ = ("_row", "by_value", "pipeline")

    what = "write"

    def __init__(
        self,
        ledger: CaptureInTransaction,
        capture: Capture,
        pipeline: Pipeline,
        *,
        by_value: Callable[[Any], None],
    ) -> None:
        super().__init__(ledger, capture, calls=pipeline)  # (a checkpoint's commit is its call)
        self.pipeline = pipeline
        self.by_value = by_value
        self._row = capture.row()

    def row(self) -> Sequence[Any]:
        return self._row

    def done(self) -> None:
        if self.ran:
            self.pipeline.captured_alone(self.capture.thread_id, self.capture.event_id)
            return
        with capturing("write") as cap:  # the saver opened no transaction of its own
            self.by_value(cap)
