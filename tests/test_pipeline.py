"""The event pipeline: ordering, numbering, hash chain, offload, failure handling."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from langgraph_external import Event, Pipeline, SinkError, Workspace, verify_chain
from langgraph_external.sinks.memory import InMemorySink
from langgraph_external.sinks.workspace import WorkspaceSink
from langgraph_external.workspace import sha256_hex


class FlakySink(InMemorySink):
    """Fails while ``down`` is set, like a database that went away."""

    name = "flaky"

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    def write(self, events: Sequence[Event]) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("server closed the connection unexpectedly")
        super().write(events)


class SlowSink(InMemorySink):
    name = "slow"

    def write(self, events: Sequence[Event]) -> None:
        time.sleep(0.01)
        super().write(events)


def _envs(sink: InMemorySink, tid: str) -> list[dict]:
    return [e.envelope() for e in sink.events if e.thread_id == tid]


def test_events_are_numbered_per_thread_without_gaps_and_chained(spool_dir: Path) -> None:
    sink = InMemorySink()
    with Pipeline([sink], spool_dir=spool_dir) as p:
        for i in range(300):
            p.emit(Event.new("node_start", f"t{i % 3}", payload={"i": i}))
    for tid in ("t0", "t1", "t2"):
        envs = _envs(sink, tid)
        assert [e["seq"] for e in envs] == list(range(1, 101))
        assert [e["payload"]["i"] for e in envs] == list(range(int(tid[1]), 300, 3))
        verify_chain(envs)


def test_tampering_breaks_the_chain(spool_dir: Path) -> None:
    sink = InMemorySink()
    with Pipeline([sink], spool_dir=spool_dir) as p:
        for i in range(5):
            p.emit(Event.new("tool_end", "t", payload={"result": i}))
    envs = _envs(sink, "t")
    envs[2]["payload"] = {"result": 999}
    with pytest.raises(ValueError, match="seq 3"):
        verify_chain(envs)
    envs = _envs(sink, "t")
    del envs[1]
    with pytest.raises(ValueError, match="gap"):
        verify_chain(envs)


def test_numbering_continues_after_a_restart(tmp_path: Path, spool_dir: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    for _ in range(2):
        with Pipeline([WorkspaceSink(ws)], spool_dir=spool_dir) as p:
            for _ in range(3):
                p.emit(Event.new("run_start", "t"))
    envs = list(ws.iter_events("t"))
    assert [e["seq"] for e in envs] == [1, 2, 3, 4, 5, 6]
    verify_chain(envs)


def test_a_failing_sink_is_spooled_and_replayed_in_order(spool_dir: Path) -> None:
    good, flaky = InMemorySink(), FlakySink()
    p = Pipeline([good, flaky], spool_dir=spool_dir, retry_interval=0.0)
    p.emit(Event.new("run_start", "t"))
    p.flush()
    flaky.down = True
    for i in range(20):
        p.emit(Event.new("node_end", "t", payload={"i": i}))
    p.flush()
    assert len(flaky.events) == 1  # the outage: nothing more reached it
    assert len(good.events) == 21  # other sinks are unaffected
    health = p.health()
    assert health["failing"] == ["flaky"] and health["spooled"]["flaky"] >= 1
    assert p.failures and "server closed" in p.failures[0].error
    flaky.down = False
    p.emit(Event.new("run_end", "t"))
    p.close()
    assert [e.seq for e in flaky.events] == list(range(1, 23))
    verify_chain(_envs(flaky, "t"))
    assert list((spool_dir / "flaky").glob("*.jsonl")) == []


def test_spooled_batches_survive_a_restart(spool_dir: Path) -> None:
    flaky = FlakySink()
    flaky.down = True
    p = Pipeline([flaky], spool_dir=spool_dir)
    for _ in range(5):
        p.emit(Event.new("node_end", "t"))
    p.close()
    assert flaky.events == []
    assert list((spool_dir / "flaky").glob("*.jsonl"))
    recovered = FlakySink()
    with Pipeline([recovered], spool_dir=spool_dir) as p2:
        p2.emit(Event.new("node_end", "t"))
    assert [e.seq for e in recovered.events] == [1, 2, 3, 4, 5, 6]
    verify_chain(_envs(recovered, "t"))


def test_strict_mode_raises_but_keeps_the_events(spool_dir: Path) -> None:
    flaky = FlakySink()
    flaky.down = True
    p = Pipeline([flaky], spool_dir=spool_dir, strict=True)
    with pytest.raises(SinkError, match="flaky"):
        p.emit(Event.new("tool_error", "t"))
    flaky.down = False
    p.emit(Event.new("tool_end", "t"))
    p.close()
    assert [e.seq for e in flaky.events] == [1, 2]


def test_a_full_queue_applies_back_pressure_and_drops_nothing(spool_dir: Path) -> None:
    slow = SlowSink()
    p = Pipeline([slow], spool_dir=spool_dir, queue_size=4, batch_size=2)
    producers = [
        threading.Thread(
            target=lambda k=k: [p.emit(Event.new("node_end", f"t{k}")) for _ in range(25)]
        )
        for k in range(4)
    ]
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    p.close()
    assert len(slow.events) == 100
    for k in range(4):
        assert [e.seq for e in slow.events if e.thread_id == f"t{k}"] == list(range(1, 26))


def test_large_payloads_become_artifacts_and_nothing_is_truncated(
    tmp_path: Path, spool_dir: Path
) -> None:
    ws = Workspace(tmp_path / "ws")
    big = {"text": "x" * 5000}
    raw = b"\x00raw tool response" * 500
    with Pipeline([WorkspaceSink(ws)], spool_dir=spool_dir, offload_threshold=1024) as p:
        p.emit(Event.new("tool_end", "t", payload=big, raw=raw))
        p.emit(Event.new("tool_end", "t", payload={"small": 1}, raw=b"ok"))
    first, second = list(ws.iter_events("t"))
    ref = first["payload"]["$artifact"]
    stored = ws.read_bytes(ws.artifact_path("t", ref))
    assert json.loads(stored) == big and sha256_hex(stored) == ref
    assert first["raw"] is None and first["artifact"] == sha256_hex(raw)
    assert ws.read_bytes(ws.artifact_path("t", first["artifact"])) == raw
    assert second["payload"] == {"small": 1} and second["artifact"] is None
    verify_chain([first, second])


def test_redactor_runs_before_anything_is_written(tmp_path: Path, spool_dir: Path) -> None:
    def redactor(value: object) -> tuple[object, int]:
        text = json.dumps(value)
        n = text.count("sk-secret")
        return json.loads(text.replace("sk-secret", "[REDACTED]")), n

    ws = Workspace(tmp_path / "ws")
    with Pipeline([WorkspaceSink(ws)], spool_dir=spool_dir, redactor=redactor) as p:
        p.emit(Event.new("llm_start", "t", payload={"key": "sk-secret", "k2": ["sk-secret"]}))
    (env,) = ws.iter_events("t")
    assert env["redactions"] == 2
    assert "sk-secret" not in (tmp_path / "ws" / "threads" / "t" / "events.jsonl").read_text()


def test_emit_after_close_is_an_error(spool_dir: Path) -> None:
    p = Pipeline([InMemorySink()], spool_dir=spool_dir)
    p.close()
    with pytest.raises(SinkError):
        p.emit(Event.new("run_start", "t"))


class _PositionsOnly(InMemorySink):
    name = "positions"

    def positions(self, thread_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        return {t: (41, "h" * 64) for t in thread_ids}


def test_numbering_continues_from_the_furthest_sink(spool_dir: Path) -> None:
    sink = InMemorySink()
    with Pipeline([sink, _PositionsOnly()], spool_dir=spool_dir) as p:
        p.emit(Event.new("run_start", "t"))
    assert sink.events[0].seq == 42 and sink.events[0].prev == "h" * 64


def test_nul_characters_in_payloads_are_kept_visible_not_lost(spool_dir: Path) -> None:
    sink = InMemorySink()
    with Pipeline([sink], spool_dir=spool_dir) as p:
        p.emit(Event.new("tool_end", "t", payload={"out": "a\x00b", "k\x00": ["\x00"]}))
    (e,) = sink.events
    assert e.payload == {"out": "a\\u0000b", "k\\u0000": ["\\u0000"]}
    verify_chain([e.envelope()])


def test_an_app_that_never_closes_still_gets_everything_written_at_exit(
    tmp_path: Path, spool_dir: Path
) -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        from langgraph_external import Event, Pipeline, Workspace
        from langgraph_external.sinks.workspace import WorkspaceSink
        p = Pipeline([WorkspaceSink(Workspace({str(tmp_path / "ws")!r}))],
                     spool_dir={str(spool_dir)!r}, linger=0.5)
        for i in range(200):
            p.emit(Event.new("node_end", "t", payload={{"i": i}}))
        # no flush, no close: the interpreter exits with events still queued
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    envs = list(Workspace(tmp_path / "ws").iter_events("t"))
    assert [e["seq"] for e in envs] == list(range(1, 201))
    verify_chain(envs)
