"""The event pipeline: numbering, hash chain, riding commits, outages, the write-ahead log,
quarantine, projections."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from langgraph_external import Event, Workspace, verify_chain
from langgraph_external.errors import LedgerUnavailableError, RecordingError
from langgraph_external.ledger.memory import InMemoryLedger
from langgraph_external.ledger.postgres import LockedPass
from langgraph_external.pipeline.backend import FlushRequest
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.pipeline.service import SealingService
from langgraph_external.record.artifacts import expand
from langgraph_external.record.capture import Capture
from langgraph_external.record.locations import sha256_hex
from langgraph_external.workspace.projection import WorkspaceProjection


class FlakyLedger(InMemoryLedger):
    """Refuses everything while ``down`` is set, like a database that went away."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    def _check(self) -> None:
        if self.down:
            raise LedgerUnavailableError("server closed the connection unexpectedly")

    def capture(self, captures: Sequence[Capture]) -> None:
        self.calls += 1
        self._check()
        super().capture(captures)

    def append(self, events: Sequence[Event]) -> None:
        self.calls += 1
        self._check()
        super().append(events)

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        self._check()
        return super().positions(thread_ids)

    def recorded(self, thread_id: str, event_ids: Collection[str]) -> set[str]:
        self._check()
        return super().recorded(thread_id, event_ids)

    def horizon(self) -> str:
        self._check()
        return super().horizon()


class LostReplyLedger(InMemoryLedger):
    """Commits a capture, then loses the reply once: the client cannot tell it committed."""

    def __init__(self) -> None:
        super().__init__()
        self.lose_next = True

    def capture(self, captures: Sequence[Capture]) -> None:
        super().capture(captures)
        if self.lose_next:
            self.lose_next = False
            raise LedgerUnavailableError("server closed the connection unexpectedly")


class DataError(Exception):
    """Stands for psycopg's DataError: the server refuses a value (SQLSTATE class 22)."""

    sqlstate = "22021"


class PickyLedger(InMemoryLedger):
    """Refuses any batch holding the ``poison`` thread's bad value."""

    def append(self, events: Sequence[Event]) -> None:
        if any(e.thread_id == "poison" and "bad" in e.payload for e in events):
            raise DataError("invalid byte sequence for encoding UTF8")
        super().append(events)


def _envs(ledger: InMemoryLedger, tid: str) -> list[dict]:
    return [e.envelope() for e in ledger.events if e.thread_id == tid]


def test_events_are_numbered_per_thread_without_gaps_and_chained(spool_dir: Path) -> None:
    ledger = InMemoryLedger()
    with Pipeline(ledger, spool_dir=spool_dir) as p:
        for i in range(300):
            p.emit(Event.new("node_start", f"t{i % 3}", payload={"i": i}))
    for tid in ("t0", "t1", "t2"):
        envs = _envs(ledger, tid)
        assert [e["seq"] for e in envs] == list(range(1, 101))
        assert [e["payload"]["i"] for e in envs] == list(range(int(tid[1]), 300, 3))
        verify_chain(envs)


def test_tampering_breaks_the_chain(spool_dir: Path) -> None:
    ledger = InMemoryLedger()
    with Pipeline(ledger, spool_dir=spool_dir) as p:
        for i in range(5):
            p.emit(Event.new("tool_end", "t", payload={"result": i}))
    envs = _envs(ledger, "t")
    envs[2]["payload"] = {"result": 999}
    with pytest.raises(ValueError, match="seq 3"):
        verify_chain(envs)
    envs = _envs(ledger, "t")
    del envs[1]
    with pytest.raises(ValueError, match="gap"):
        verify_chain(envs)


def test_numbering_continues_after_a_restart(spool_dir: Path) -> None:
    ledger = InMemoryLedger()
    for _ in range(2):
        with Pipeline(ledger, spool_dir=spool_dir) as p:
            for _ in range(3):
                p.emit(Event.new("run_start", "t"))
    envs = _envs(ledger, "t")
    assert [e["seq"] for e in envs] == [1, 2, 3, 4, 5, 6]
    verify_chain(envs)


def test_two_writers_on_one_thread_never_interleave_or_leave_gaps(spool_dir: Path) -> None:
    """Two pipelines (two processes) recording the same thread id at once."""
    ledger = InMemoryLedger()
    a = Pipeline(ledger, spool_dir=spool_dir / "a", linger=0.0)
    b = Pipeline(ledger, spool_dir=spool_dir / "b", linger=0.0)

    def produce(p: Pipeline, who: str) -> None:
        for i in range(200):
            p.emit(Event.new("node_end", "shared", payload={"who": who, "i": i}))

    threads = [threading.Thread(target=produce, args=(p, w)) for p, w in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a.close()
    b.close()
    envs = _envs(ledger, "shared")
    assert [e["seq"] for e in envs] == list(range(1, 401))
    verify_chain(envs)
    for who in "ab":  # each writer's own order is kept
        assert [e["payload"]["i"] for e in envs if e["payload"]["who"] == who] == list(range(200))


def test_a_ledger_outage_keeps_events_buffered_and_loses_nothing(spool_dir: Path) -> None:
    ledger = FlakyLedger()
    p = Pipeline(ledger, spool_dir=spool_dir, retry_interval=0.05)
    p.emit(Event.new("run_start", "t"))
    assert p.flush()
    ledger.down = True
    for i in range(20):
        p.emit(Event.new("node_end", "t", payload={"i": i}))
    assert not p.flush(timeout=0.5)  # cannot finish while the ledger is down
    health = p.health()
    assert health["failing"] == ["ledger"] and health["buffered"] == 20
    assert p.failures and "server closed" in p.failures[0].error
    ledger.down = False
    p.emit(Event.new("run_end", "t"))
    assert p.flush()
    p.close()
    assert [e.seq for e in ledger.events] == list(range(1, 23))
    assert [e.payload.get("i") for e in ledger.events[1:21]] == list(range(20))
    verify_chain(_envs(ledger, "t"))


def test_a_thread_first_seen_while_the_ledger_is_down_is_recorded_when_it_is_back(
    spool_dir: Path,
) -> None:
    # the flusher must look the new thread's head up and cannot: it retries (it used to
    # die, leaving every later event to the write-ahead log at close)
    ledger = FlakyLedger()
    p = Pipeline(ledger, spool_dir=spool_dir, retry_interval=0.05)
    ledger.down = True
    for i in range(5):
        p.emit(Event.new("node_end", "new", payload={"i": i}))
    assert not p.flush(timeout=0.5)
    assert p.health()["buffered"] == 5
    ledger.down = False
    p.emit(Event.new("node_end", "other"))
    assert p.flush(timeout=10)
    p.close()
    assert [e.payload.get("i") for e in ledger.events if e.thread_id == "new"] == list(range(5))
    verify_chain(_envs(ledger, "new"))
    assert len(_envs(ledger, "other")) == 1


def test_events_that_outlive_a_close_are_replayed_by_the_next_start(spool_dir: Path) -> None:
    ledger = FlakyLedger()
    ledger.down = True
    p = Pipeline(ledger, spool_dir=spool_dir, retry_interval=0.05)
    for i in range(5):
        p.emit(Event.new("node_end", "t", payload={"i": i}))
    p.close(timeout=0.5)
    assert ledger.events == []
    assert list((spool_dir / "wal").rglob("*.wal"))  # on disk, fsynced
    ledger.down = False
    with Pipeline(ledger, spool_dir=spool_dir) as p2:
        p2.emit(Event.new("node_end", "t", payload={"i": 5}))
    assert [e.payload["i"] for e in ledger.events] == [0, 1, 2, 3, 4, 5]
    assert [e.seq for e in ledger.events] == [1, 2, 3, 4, 5, 6]
    assert not list((spool_dir / "wal").rglob("*.wal"))


def test_replaying_the_log_after_the_commit_records_nothing_twice(spool_dir: Path) -> None:
    """A crash between the ledger commit and the log's deletion: replay must skip."""
    ledger = InMemoryLedger()
    with Pipeline(ledger, spool_dir=spool_dir) as p:
        p.emit(Event.new("checkpoint", "t", payload={"n": 1}), durable=True)
        p.flush()
        # what a crash right now would leave: the log file still holding the event
        kept = [f.read_bytes() for f in (spool_dir / "wal").rglob("*.wal")]
    assert kept and all(kept)
    orphan = spool_dir / "wal" / "memory" / "00000000000000000001-1-dead.wal"
    orphan.write_bytes(kept[0])
    with Pipeline(ledger, spool_dir=spool_dir) as p2:
        p2.flush()
    assert [e.seq for e in ledger.events] == [1]
    assert not orphan.exists()


def test_strict_mode_records_before_returning_and_raises_when_it_cannot(spool_dir: Path) -> None:
    ledger = FlakyLedger()
    p = Pipeline(ledger, spool_dir=spool_dir, strict=True, retry_interval=0.05)
    p.emit(Event.new("tool_end", "t"))
    # captured (durable in the ledger) before emit returned, no flush needed; sealed after
    assert [e.kind for c in ledger.captures for e in c.riders] + [
        e.kind for e in ledger.events
    ] == ["tool_end"]
    ledger.down = True
    with pytest.raises(RecordingError, match="server closed"):
        p.emit(Event.new("tool_error", "t"))
    ledger.down = False
    p.emit(Event.new("tool_end", "t"))
    p.close()
    assert [e.kind for e in ledger.events] == ["tool_end", "tool_error", "tool_end"]
    assert [e.seq for e in ledger.events] == [1, 2, 3]


def test_a_full_buffer_applies_back_pressure_and_drops_nothing(spool_dir: Path) -> None:
    ledger = FlakyLedger()
    ledger.down = True
    p = Pipeline(ledger, spool_dir=spool_dir, max_buffered=10, retry_interval=0.05)
    done = threading.Event()

    def produce() -> None:
        for _ in range(30):
            p.emit(Event.new("node_end", "t"))
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    assert not done.wait(0.5)  # blocked: the buffer is full and the ledger down
    assert p.health()["buffered"] == 10
    ledger.down = False
    producer.join(timeout=10)
    p.close()
    assert [e.seq for e in ledger.events] == list(range(1, 31))


def test_a_commit_whose_reply_was_lost_is_not_recorded_twice(spool_dir: Path) -> None:
    ledger = LostReplyLedger()
    p = Pipeline(ledger, spool_dir=spool_dir, retry_interval=0.05)
    for i in range(5):
        p.emit(Event.new("node_end", "t", payload={"i": i}))
    assert p.flush(30)
    p.emit(Event.new("node_end", "t", payload={"i": 5}))
    p.close()
    assert [e.payload["i"] for e in ledger.events] == list(range(6))
    assert [e.seq for e in ledger.events] == list(range(1, 7))
    verify_chain(_envs(ledger, "t"))


def test_back_pressure_never_blocks_an_event_loop(spool_dir: Path) -> None:
    """On a thread running an event loop emit never waits; async producers await room."""
    ledger = FlakyLedger()
    ledger.down = True
    p = Pipeline(ledger, spool_dir=spool_dir, max_buffered=5, retry_interval=0.05)
    rescued = threading.Event()

    def rescue() -> None:  # only a blocked loop would still be waiting by then
        rescued.set()
        ledger.down = False

    watchdog = threading.Timer(60.0, rescue)
    watchdog.start()

    async def app() -> None:
        ticks = 0
        stop = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        beat = asyncio.create_task(heartbeat())
        for _ in range(8):  # more than max_buffered, on the loop's thread
            p.emit(Event.new("node_end", "t"))
        assert not rescued.is_set()  # returned with the ledger down: the loop never waited
        assert p.health()["buffered"] == 8
        waiter = asyncio.create_task(p.wait_for_room())
        seen = ticks
        while ticks < seen + 20:  # the loop runs other tasks while the waiter waits
            await asyncio.sleep(0.001)
        assert not waiter.done()  # no room while the ledger is down
        ledger.down = False
        await asyncio.wait_for(waiter, 60)  # room once the ledger is back
        stop.set()
        await beat

    try:
        asyncio.run(app())
    finally:
        watchdog.cancel()
        ledger.down = False
        p.close()
    assert not rescued.is_set()
    assert [e.seq for e in ledger.events] == list(range(1, 9))


def test_a_value_the_ledger_refuses_is_set_aside_and_other_threads_go_on(
    spool_dir: Path,
) -> None:
    ledger = PickyLedger()
    with Pipeline(ledger, spool_dir=spool_dir) as p:
        for i in range(8):
            p.emit(Event.new("node_end", f"ok-{i}", payload={"i": i}))
        p.emit(Event.new("node_end", "poison", payload={"bad": "value"}))
        for i in range(8):
            p.emit(Event.new("node_end", f"ok-{i}", payload={"i": i}))
        assert p.flush()
        health = p.health()
    assert "ledger:poison" in health["quarantined"]
    for i in range(8):
        assert [e.seq for e in ledger.events if e.thread_id == f"ok-{i}"] == [1, 2]
    (kept,) = (spool_dir / "quarantine").rglob("*.jsonl")
    lines = kept.read_text().splitlines()
    assert "invalid byte sequence" in json.loads(lines[0])["reason"]
    assert json.loads(lines[1])["payload"] == {"bad": "value"}


def test_large_payloads_become_artifacts_and_nothing_is_truncated(
    tmp_path: Path, spool_dir: Path
) -> None:
    ws = Workspace(tmp_path / "ws")
    big = {"text": "x" * 5000}
    raw = b"\x00raw tool response" * 500
    ledger = InMemoryLedger()
    with Pipeline(
        ledger, projections=[WorkspaceProjection(ws)], spool_dir=spool_dir, offload_threshold=1024
    ) as p:
        p.emit(Event.new("tool_end", "t", payload=big, raw=raw))
        p.emit(Event.new("tool_end", "t", payload={"small": 1}, raw=b"ok"))
    first, second = list(ws.iter_events("t"))
    ref = first["payload"]["text"]  # the payload keeps its shape; the large value is named
    assert ref["as"] == "text" and ref["size"] == 5000 and ref["head"] == "x" * 2000
    stored = ws.read_bytes(ws.artifact_path("t", ref["$artifact"]))
    assert stored.decode() == big["text"] and sha256_hex(stored) == ref["$artifact"]
    assert expand(first["payload"], lambda d: ws.read_bytes(ws.artifact_path("t", d))) == big
    assert first["raw"] is None and first["artifact"] == sha256_hex(raw)
    assert ws.read_bytes(ws.artifact_path("t", first["artifact"])) == raw
    assert second["payload"] == {"small": 1} and second["artifact"] is None
    verify_chain([first, second])
    assert [e.envelope() for e in ledger.events] == [first, second]


def test_identity_fields_of_a_large_payload_are_never_offloaded(
    tmp_path: Path, spool_dir: Path
) -> None:
    ws = Workspace(tmp_path / "ws")
    ledger = InMemoryLedger()
    inputs = {"messages": [{"role": "user", "content": "q" * 40_000}]}
    payload = {"user_id": "bob", "tags": ["vip"], "name": "agent", "inputs": inputs}
    with Pipeline(
        ledger, projections=[WorkspaceProjection(ws)], spool_dir=spool_dir, offload_threshold=16_384
    ) as p:
        p.emit(Event.new("run_start", "t", payload=payload))
        p.emit(Event.new("tool_end", "t", payload={"output": "d" * 70_000, "status": "ok"}))
    run, tool = list(ws.iter_events("t"))
    assert run["payload"]["user_id"] == "bob" and run["payload"]["tags"] == ["vip"]
    message = run["payload"]["inputs"]["messages"][0]
    assert message["role"] == "user" and message["content"]["head"] == "q" * 2000
    assert tool["payload"]["status"] == "ok" and tool["payload"]["output"]["tail"] == "d" * 500
    fetch = lambda d: ws.read_bytes(ws.artifact_path("t", d))  # noqa: E731
    assert expand(run["payload"], fetch) == payload
    assert expand(tool["payload"], fetch)["output"] == "d" * 70_000


def test_a_large_tool_result_with_a_lone_surrogate_is_recorded_not_dropped(
    tmp_path: Path, spool_dir: Path
) -> None:
    ws = Workspace(tmp_path / "ws")
    ledger = InMemoryLedger()
    result = "x" * 40_000 + "\ud800"
    with Pipeline(
        ledger, projections=[WorkspaceProjection(ws)], spool_dir=spool_dir, offload_threshold=16_384
    ) as p:
        p.emit(Event.new("tool_end", "t", payload={"output": result, "tool_call_id": "c1"}))
        p.emit(Event.new("run_end", "t", payload={"outputs": {"last": result}}))
    tool, end = list(ws.iter_events("t"))
    assert tool["kind"] == "tool_end" and end["kind"] == "run_end"
    output = tool["payload"]["output"]  # marked escaped, its escaped text offloaded
    assert output["as"] == "text"
    text = ws.read_bytes(ws.artifact_path("t", output["$escaped"]["$artifact"])).decode()
    assert text == "x" * 40_000 + "\\ud800"  # escaped, as inline text is
    fetch = lambda d: ws.read_bytes(ws.artifact_path("t", d))  # noqa: E731
    assert expand(tool["payload"], fetch)["output"] == result  # and read back exactly
    verify_chain([tool, end])


def test_redactor_runs_before_anything_is_written(tmp_path: Path, spool_dir: Path) -> None:
    def redactor(value: object) -> tuple[object, int]:
        text = json.dumps(value)
        n = text.count("sk-secret")
        return json.loads(text.replace("sk-secret", "[REDACTED]")), n

    ws = Workspace(tmp_path / "ws")
    ledger = InMemoryLedger()
    with Pipeline(
        ledger, projections=[WorkspaceProjection(ws)], spool_dir=spool_dir, redactor=redactor
    ) as p:
        p.emit(Event.new("llm_start", "t", payload={"key": "sk-secret", "k2": ["sk-secret"]}))
    (env,) = ws.iter_events("t")
    assert env["redactions"] == 2
    assert "sk-secret" not in (tmp_path / "ws" / "threads" / "t" / "events.jsonl").read_text()
    assert "sk-secret" not in json.dumps(ledger.events[0].envelope())


def test_values_are_snapshotted_when_emitted_not_later(spool_dir: Path) -> None:
    ledger = InMemoryLedger()
    with Pipeline(ledger, spool_dir=spool_dir, linger=0.2) as p:
        live = {"messages": ["hello"]}
        p.emit(Event.new("node_end", "t", payload={"update": live}))
        live["messages"].append("mutated after the callback")
    assert ledger.events[0].payload == {"update": {"messages": ["hello"]}}


def test_emit_after_close_is_an_error(spool_dir: Path) -> None:
    p = Pipeline(InMemoryLedger(), spool_dir=spool_dir)
    p.close()
    with pytest.raises(RecordingError):
        p.emit(Event.new("run_start", "t"))


def test_nul_and_lone_surrogates_are_recorded_escaped_marked_and_read_back_exactly(
    spool_dir: Path,
) -> None:
    ledger = InMemoryLedger()
    with Pipeline(ledger, spool_dir=spool_dir) as p:
        p.emit(
            Event.new(
                "tool_end",
                "t",
                node="n\x00ode",
                payload={"out": "a\x00b", "k\x00": ["\x00"], "path": "caf\udce9"},
            )
        )
    (e,) = ledger.events
    assert e.payload == {  # a key to escape marks its mapping; a value, itself
        "$escaped": {
            "out": {"$escaped": "a\\u0000b", "as": "text"},
            "k\\u0000": [{"$escaped": "\\u0000", "as": "text"}],
            "path": {"$escaped": "caf\\udce9", "as": "text"},
        },
        "as": "object",
    }
    assert expand(e.payload, {}.get) == {"out": "a\x00b", "k\x00": ["\x00"], "path": "caf\udce9"}
    assert e.node == "n\\u0000ode"  # a column: escaped visibly
    json.dumps(e.envelope()).encode("utf-8")  # storable as UTF-8
    verify_chain([e.envelope()])


@pytest.mark.slow  # seconds: a subprocess or a 30 s wait
def test_an_app_that_never_closes_still_gets_everything_recorded_at_exit(
    tmp_path: Path, spool_dir: Path, dsn: str
) -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        from langgraph_external import Event
        from langgraph_external.assembly import assemble
        from langgraph_external.options import Options
        from langgraph_external.settings import Settings
        rec = assemble(Settings.resolve(workspace={str(tmp_path / "ws")!r}, dsn={dsn!r},
                       options=Options(spool_dir={str(spool_dir)!r})), linger=0.5)
        for i in range(200):
            rec.pipeline.emit(Event.new("node_end", "t", payload={{"i": i}}))
        # no flush, no close: the interpreter exits with events still buffered
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    envs = list(Workspace(tmp_path / "ws").iter_events("t"))
    assert [e["seq"] for e in envs] == list(range(1, 201))
    verify_chain(envs)


class StumblingLockLedger(InMemoryLedger):
    """Its projection locks fail in an unexpected way the first ``fail`` times."""

    def __init__(self, fail: int) -> None:
        super().__init__()
        self.fail = fail

    @contextlib.contextmanager
    def projection_locks(self, projection: str, thread_ids: Sequence[str]) -> Iterator[Any]:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("unexpected failure taking the locks")
        yield LockedPass(set(thread_ids), {})


def test_the_projector_survives_an_unexpected_error_and_catches_up(
    tmp_path: Path, spool_dir: Path
) -> None:
    ws = Workspace(tmp_path / "ws")
    ledger = StumblingLockLedger(fail=2)
    with Pipeline(
        ledger, projections=[WorkspaceProjection(ws)], spool_dir=spool_dir, retry_interval=0.05
    ) as p:
        for i in range(3):
            p.emit(Event.new("node_end", "t", payload={"i": i}))
        assert p.flush(timeout=10)
        assert [e["payload"]["i"] for e in ws.iter_events("t")] == [0, 1, 2]
        assert any("unexpected failure" in f.error for f in p.failures)
        projector = p.service.projector if p.service is not None else None
        assert projector is not None and projector.started
        assert ledger.fail == 0 and projector.running


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_flusher_is_started_again_and_nothing_is_lost(
    spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # both loops retry every error; this guards what no `except Exception` catches
    ledger = InMemoryLedger()
    p = Pipeline(ledger, spool_dir=spool_dir, retry_interval=0.05)
    original = Pipeline._flushable_now
    calls = {"n": 0}

    def dies_once(self: Pipeline) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise SystemExit("a BaseException in the flusher")
        return original(self)

    monkeypatch.setattr(Pipeline, "_flushable_now", dies_once)
    first = p.flusher.thread
    for i in range(5):
        p.emit(Event.new("node_end", "t", payload={"i": i}))
    first.join(10)
    assert not first.is_alive()
    assert p.flush(timeout=10)
    assert p.flusher.thread is not first and p.flusher.thread.is_alive()
    p.close()
    assert [e.payload.get("i") for e in ledger.events] == list(range(5))


def test_health_counts_a_commit_stuck_in_a_savers_transaction(spool_dir: Path) -> None:
    # a frozen database can hold the app inside the saver's transaction with nothing
    # buffered and the flusher idle: the open commit is what shows the wait
    with Pipeline(InMemoryLedger(), spool_dir=spool_dir) as p:
        commit = p.open_commit("t")
        time.sleep(0.3)
        assert p.health()["ledger_wait_seconds"] >= 0.3
        commit.failed()
        assert p.health()["ledger_wait_seconds"] == 0.0


def test_an_event_the_processors_cannot_record_takes_its_place_as_record_failed(
    tmp_path: Path, spool_dir: Path
) -> None:
    def broken(event: Event) -> Event:  # a processor of the app's with a bug
        if event.kind == "tool_end":
            raise ValueError("cannot handle this result")
        return event

    ws = Workspace(tmp_path / "ws")
    ledger = InMemoryLedger()
    with Pipeline(
        ledger,
        projections=[WorkspaceProjection(ws)],
        spool_dir=spool_dir,
        extra_processors=[broken],
    ) as p:
        p.emit(Event.new("tool_start", "t", node="tools", step=2, run_id="r1"))
        p.emit(Event.new("tool_end", "t", node="tools", step=2, run_id="r1", payload={"x": 1}))
        p.emit(Event.new("node_end", "t", node="tools", step=2))
        assert p.flush()
        health = p.health()
    events = list(ws.iter_events("t"))
    assert [e["kind"] for e in events] == ["tool_start", "record_failed", "node_end"]
    failed = events[1]
    assert (failed["node"], failed["step"], failed["run_id"], failed["status"]) == (
        "tools",
        2,
        "r1",
        "error",
    )
    assert failed["payload"]["kind"] == "tool_end"
    assert failed["payload"]["processor"] == "broken"
    assert failed["payload"]["error"] == "cannot handle this result"
    assert health["record_failures"] == 1
    verify_chain(events)


class _SealsOnly:
    """A sealing backend with just the contract (wake, flush, close): no ``health``."""

    def __init__(self, service: SealingService) -> None:
        self._service = service

    def wake(self) -> None:
        self._service.wake()

    def flush(self, request: FlushRequest) -> bool:
        return self._service.flush(request)

    def close(self, timeout: float = 30.0) -> bool:
        return self._service.close(timeout)


def test_a_sealing_backend_needs_only_wake_flush_and_close(spool_dir: Path) -> None:
    ledger = InMemoryLedger()
    backend = _SealsOnly(SealingService(ledger).start())
    with Pipeline(ledger, spool_dir=spool_dir, sealing=backend) as p:
        for i in range(20):
            p.emit(Event.new("node_start", "t", payload={"i": i}))
        assert p.flush(timeout=30)
        health = p.health()
    assert [e["payload"]["i"] for e in _envs(ledger, "t")] == list(range(20))
    verify_chain(_envs(ledger, "t"))
    # nothing to say about sealing, and no error for asking
    assert "sealing" not in health and health["failing"] == []


def test_health_includes_the_backends_report_when_it_gives_one(spool_dir: Path) -> None:
    ledger = InMemoryLedger()
    with Pipeline(ledger, spool_dir=spool_dir, sealing=SealingService(ledger).start()) as p:
        p.emit(Event.new("node_start", "t", payload={}))
        assert p.flush(timeout=30)
        assert p.health()["sealing"]["sealed_events"] == 1
