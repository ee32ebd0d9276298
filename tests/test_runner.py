"""The one projection runner (pipeline/runner.py) under every view of the ledger: the
workspace mirror and each exporter are targets of the same class, with the same
retries, quarantine and waiting. These tests drive it with a target that stands in for a
receiver (an exporter's) against the in-memory ledger."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from langgraph_external.ledger.memory import InMemoryLedger
from langgraph_external.pipeline.runner import ProjectionRunner, TargetStalled
from langgraph_external.record.events import Event


def _sealed(ledger: InMemoryLedger, tid: str, n: int) -> list[Event]:
    """``n`` more sealed events of ``tid`` in ``ledger`` (chained), as a sealer hands them over."""
    head = ledger.positions([tid]).get(tid, (0, ""))[0]
    events = [
        Event.new("node_end", tid, payload={"i": head + i}).replace(
            seq=head + i, hash=f"h{head + i}", prev=f"h{head + i - 1}" if head + i > 1 else None
        )
        for i in range(1, n + 1)
    ]
    ledger.append(events)
    return events


class Receiver:
    """A projection target standing in for a remote receiver: it refuses ``down`` batches
    (every thread waits), and cannot take thread ``poison`` at all."""

    name = "receiver"
    label = "receiver"

    def __init__(self, ledger: InMemoryLedger, down: int = 0, poison: str | None = None) -> None:
        self.ledger = ledger
        self.down = down
        self.poison = poison
        self.backoff = 0.0
        self.got: dict[str, list[int]] = {}
        self.lock = threading.Lock()

    def position(self, thread_id: str) -> int:
        with self.lock:
            got = self.got.get(thread_id)
            return got[-1] if got else 0

    def apply(self, thread_id: str, events: Sequence[Event]) -> None:
        if thread_id == self.poison:
            raise ValueError("a value the receiver cannot take")
        with self.lock:
            if self.down:
                self.down -= 1
                self.backoff = 0.01
                raise TargetStalled("receiver unreachable")
            self.backoff = 0.0
            self.got.setdefault(thread_id, []).extend(e.seq or 0 for e in events)

    def close(self) -> None:
        pass


def _burn(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1_000_003


@pytest.mark.parametrize("attempt", range(20))
def test_a_receiver_that_is_down_loses_nothing_and_every_thread_catches_up(attempt: int) -> None:
    # crossing threads (sealer hand-over, runner, flush) while another thread burns CPU
    ledger = InMemoryLedger()
    target = Receiver(ledger, down=3)
    runner = ProjectionRunner(
        ledger, [target], retry_interval=0.01, linger=0.0, fresh=False, track=True, name="rx"
    )
    burn = threading.Event()
    burner = threading.Thread(target=_burn, args=(burn,), daemon=True)
    burner.start()
    try:
        runner.start()
        for round_ in range(5):
            for tid in ("a", "b", "c"):
                runner.hand_over(_sealed(ledger, tid, 1 + (round_ + attempt) % 3))
        assert runner.flush(timeout=20)
    finally:
        burn.set()
        runner.stop()
    for tid in ("a", "b", "c"):
        head = ledger.positions([tid])[tid][0]
        assert target.got[tid] == list(range(1, head + 1))  # every event once, in order
    assert ledger.lagging("receiver") == []  # the cursors hold every thread's head
    assert runner.threads_behind() == 0


def test_a_thread_the_target_cannot_take_is_set_aside_and_the_others_go_on() -> None:
    ledger = InMemoryLedger()
    target = Receiver(ledger, poison="bad")
    runner = ProjectionRunner(ledger, [target], retry_interval=0.01, linger=0.0, fresh=False)
    runner.start()
    try:
        for tid in ("ok1", "bad", "ok2"):
            runner.hand_over(_sealed(ledger, tid, 3))
        assert runner.settle(timeout=10)
    finally:
        runner.stop()
    assert target.got == {"ok1": [1, 2, 3], "ok2": [1, 2, 3]}
    assert list(runner.quarantined) == ["receiver:bad"]
    assert "ValueError" in runner.quarantined["receiver:bad"]
    # recorded in the ledger with its error: no longer lagging, `lgx repair` retries it
    assert [t for t, _, _ in ledger.lagging("receiver")] == []


def test_follow_runs_on_the_callers_thread_until_told_to_stop() -> None:
    ledger = InMemoryLedger()
    target = Receiver(ledger)
    _sealed(ledger, "t", 4)  # sealed by another process: found by the lagging scan
    runner = ProjectionRunner(ledger, [target], poll_interval=0.05, fresh=False)
    stop = threading.Event()
    follower = threading.Thread(target=runner.follow, args=(stop,), daemon=True)
    follower.start()
    deadline = time.monotonic() + 10
    while target.got.get("t") != [1, 2, 3, 4] and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    follower.join(5)
    assert not follower.is_alive()
    assert target.got["t"] == [1, 2, 3, 4]
