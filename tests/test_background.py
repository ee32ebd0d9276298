"""The background-thread primitive every loop of ours runs on: started again when it
died, never after it was asked to stop, and stopped without waiting out its nap."""

from __future__ import annotations

import threading
import time

import pytest

from langgraph_external.pipeline.background import BackgroundThread, Deadline
from tests.graphs import cpu_burner


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_that_died_is_started_again_but_not_once_it_was_asked_to_stop() -> None:
    runs: list[int] = []
    stop = threading.Event()

    def loop() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("the first run dies")  # (never expected of our loops)
        stop.wait()

    bg = BackgroundThread("test-dies", loop, wake=stop.set).start()
    first = bg.thread
    assert first is not None
    first.join(5)
    assert not bg.alive and bg.revive() and bg.alive and bg.thread is not first
    assert not bg.revive()  # alive: nothing to do
    assert bg.stop(timeout=5) and not bg.alive
    assert not bg.revive() and len(runs) == 2  # stopping: never started again


def test_stop_wakes_a_waiting_loop_at_once_while_both_cores_are_busy() -> None:
    """Stop sets the flag the loop reads, then wakes it under the loop's own lock: a
    loop between its look at the flag and its wait is never left to nap it out."""
    with cpu_burner():
        for _ in range(200):
            waiter = _Waiter()
            started = time.monotonic()
            assert waiter.bg.stop(timeout=10)
            assert time.monotonic() - started < 5


class _Waiter:
    """A loop that naps 30 s at a time until its thread is stopping."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.bg = BackgroundThread("test-stop", self.loop, wake=self.wake)
        self.bg.start()

    def loop(self) -> None:
        with self.cv:
            while not self.bg.stopping:
                self.cv.wait(30)  # a missed wake-up would hang here for 30 s

    def wake(self) -> None:
        with self.cv:
            self.cv.notify_all()


def test_a_deadline_counts_down_and_none_means_no_limit() -> None:
    assert Deadline(None).left() is None and not Deadline(None).passed()
    d = Deadline(0.05)
    assert 0 < (d.left() or 0) <= 0.05 and not d.passed()
    time.sleep(0.06)
    assert d.left() == 0.0 and d.passed()
