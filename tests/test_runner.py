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


class Deferring(Receiver):
    """A target that, like the workspace's ``state.json``, defers finishing every thread
    it writes: the cursor stays one short until :meth:`settle`; deferred writes are
    overdue at once (``STATE_INTERVAL`` 0)."""

    name = "deferring"

    def __init__(self, ledger: InMemoryLedger) -> None:
        super().__init__(ledger)
        self.pending: set[str] = set()
        self.settled_at: dict[str, int] = {}

    def apply(self, thread_id: str, events: Sequence[Event]) -> None:
        super().apply(thread_id, events)
        with self.lock:
            self.pending.add(thread_id)

    def due(self) -> list[str]:
        with self.lock:
            return sorted(self.pending)

    overdue = due

    def settle(self, threads: Sequence[str] | None = None) -> None:
        with self.lock:
            for tid in list(self.pending if threads is None else threads):
                self.pending.discard(tid)
                self.settled_at[tid] = self.got[tid][-1]

    def settled(self, thread_id: str, position: int) -> int:
        with self.lock:
            return position - 1 if thread_id in self.pending else position


@pytest.mark.parametrize("attempt", range(5))
def test_a_busy_runner_settles_what_it_deferred_without_a_quiet_pass(attempt: int) -> None:
    """A sealing process under steady load never has a pass without new batches: what its
    projection deferred and is overdue is settled in busy passes too, so the cursor of a
    thread that went quiet reaches its head without a flush (the soak's mirror kept whole
    threads held back until exit)."""
    ledger = InMemoryLedger()
    target = Deferring(ledger)
    runner = ProjectionRunner(ledger, [target], linger=0.0, name="deferring")
    burn = threading.Event()
    burner = threading.Thread(target=_burn, args=(burn,), daemon=True)
    burner.start()
    runner.start()
    try:
        runner.hand_over(_sealed(ledger, "quiet", 3 + attempt))
        head = 3 + attempt
        deadline = time.monotonic() + 20
        i = 0
        while time.monotonic() < deadline:
            i += 1
            runner.hand_over(_sealed(ledger, f"busy-{i % 4}", 1))  # never quiet
            time.sleep(0.002)
            lagging = {t for t, _, _ in ledger.lagging("deferring")}
            if target.settled_at.get("quiet") == head and "quiet" not in lagging:
                break
        assert target.settled_at.get("quiet") == head
        assert "quiet" not in {t for t, _, _ in ledger.lagging("deferring")}
    finally:
        burn.set()
        runner.stop()
