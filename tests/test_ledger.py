"""The ledger sink: batches are all-or-nothing, replays are harmless, divergence is loud."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from langgraph_external import ChainConflictError, Event, ledger
from langgraph_external.processors import Sequencer
from langgraph_external.sinks.postgres import LedgerSink


def _sequenced(n: int, tid: str = "t", **payload: Any) -> list[Event]:
    seq = Sequencer(lambda ids: {})
    return [seq(Event.new("node_end", tid, payload={"i": i, **payload})) for i in range(n)]


def _count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from langgraph_external.events").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def sink(dsn: str) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger.setup(conn)
    s = LedgerSink(dsn)
    yield s
    s.close()


def test_replaying_a_stored_batch_changes_nothing(sink: LedgerSink, dsn: str) -> None:
    events = _sequenced(5)
    sink.write(events)
    sink.write(events)  # e.g. the spool replays a batch whose commit was not acknowledged
    sink.write(events[2:] + _sequenced(7)[5:])  # overlapping replay plus new events
    assert _count(dsn) == 7
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        envs = ledger.fetch_events(conn, "t")
    assert [e["seq"] for e in envs] == list(range(1, 8))
    assert sink.positions(["t", "unknown"]) == {"t": (7, envs[-1]["hash"])}


def test_a_different_event_at_a_stored_position_is_a_conflict(
    sink: LedgerSink, dsn: str
) -> None:
    sink.write(_sequenced(3))
    other = _sequenced(3, other_writer=True)
    with pytest.raises(ChainConflictError, match="seq 1"):
        sink.write(other)
    assert _count(dsn) == 3  # the failed batch left nothing behind


def test_payloads_survive_jsonb_and_still_verify(sink: LedgerSink, dsn: str) -> None:
    from langgraph_external import verify_chain

    events = _sequenced(1, big=1e20, neg=-0.0, nan=float("nan"), nul="a\x00b", deep=[{"x": 1.5}])
    sink.write(events)
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        envs = ledger.fetch_events(conn, "t")
    verify_chain(envs)
    assert envs[0]["payload"]["big"] == 10**20 and envs[0]["payload"]["nan"] == "NaN"
