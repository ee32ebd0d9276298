"""Callback events left to the sealer: snapshotted on the caller's thread, carried
encrypted by their capture, redacted, normalized and offloaded where they are sealed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_external import Event, External
from langgraph_external.errors import LedgerUnavailableError
from langgraph_external.ledger import schema as ledger_sql
from langgraph_external.ledger.memory import InMemoryLedger
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.pipeline.seal import Sealer
from langgraph_external.record.capture import Capture
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.processors import Offload, Redact, materialize, normalize
from langgraph_external.record.redaction import Redactor
from tests.graphs import FailingRedactor, cpu_burner

SECRET = "sk-proj-4f9QeA2b7XcD1eF0gH3iJ5kL"


def _processors() -> list[Any]:
    return [materialize, Redact(Redactor()), normalize, Offload()]


def _captured_riders(dsn: str, tid: str, timeout: float = 10.0) -> list[bytes]:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "select riders from langgraph_external.captures where thread_id = %s order by id",
                (tid,),
            ).fetchall()
            if rows or time.monotonic() > deadline:
                return [bytes(r[0]) for r in rows]
            time.sleep(0.02)


def test_a_deferred_event_rides_encrypted_and_the_sealer_redacts_it(
    dsn: str, spool_dir: Path
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger_sql.setup(conn)
    key = WorkspaceCipher(WorkspaceCipher.generate_key())
    ledger = PostgresLedger(dsn, cipher=key)
    p = Pipeline(
        ledger,
        cipher=key,
        redactor=Redactor(),
        sealing=None,  # nothing seals here: the capture stays to be looked at
        defer=True,
        linger=0.01,
        spool_dir=spool_dir,
    )
    try:
        assert p.processing.deferred
        p.emit(
            Event.new(
                "tool_end",
                "dp",
                name="lookup",
                payload={"result": f"token {SECRET}", "n": 1.0},
                raw=f"token {SECRET}".encode(),
            )
        )
        (riders,) = _captured_riders(dsn, "dp")
        # the capture row holds the snapshot, unredacted, only encrypted
        assert riders[:1] == b"\xc1"
        assert SECRET.encode() not in riders and b"lookup" not in riders
        with psycopg.connect(dsn, autocommit=True) as conn:
            dump = conn.execute(
                "select row_to_json(c)::text from langgraph_external.captures c"
            ).fetchall()
        assert SECRET not in str(dump)

        assert Sealer(ledger, cipher=key, processors=_processors()).drain()
        with psycopg.connect(dsn, autocommit=True) as conn:
            kind, payload, redactions, raw = conn.execute(
                "select kind, payload::text, redactions, raw from langgraph_external.events "
                "where thread_id = 'dp'"
            ).fetchone()
            left = conn.execute("select count(*) from langgraph_external.captures").fetchone()
        assert kind == "tool_end" and redactions == 2
        assert SECRET not in payload and "[REDACTED:openai_key]" in payload
        assert SECRET.encode() not in bytes(raw)
        assert '"n": 1' in payload  # normalized where it was sealed (1.0 -> 1)
        assert left == (0,)

        # a sealer with another deployment key cannot open them: it says so, loses nothing
        p.emit(Event.new("node_end", "dp2", payload={"x": 1}))
        assert _captured_riders(dsn, "dp2")
        other = WorkspaceCipher(WorkspaceCipher.generate_key())
        Sealer(PostgresLedger(dsn, cipher=other), cipher=other, processors=_processors()).drain()
        with psycopg.connect(dsn, autocommit=True) as conn:
            (row,) = conn.execute(
                "select kind, name from langgraph_external.events where thread_id = 'dp2'"
            ).fetchall()
        assert row == ("error", "riders_unreadable")
    finally:
        p.close(timeout=1)


def test_values_are_snapshotted_when_emitted_while_another_thread_burns_cpu(
    spool_dir: Path,
) -> None:
    key = WorkspaceCipher(WorkspaceCipher.generate_key())
    ledger = InMemoryLedger()
    with cpu_burner(), Pipeline(ledger, cipher=key, spool_dir=spool_dir, defer=True) as p:
        assert p.processing.deferred
        for i in range(300):
            live: dict[str, Any] = {"messages": [f"hello {i}"], "meta": {"k": i}}
            p.emit(Event.new("node_end", f"snap-{i % 5}", payload={"update": live}))
            live["messages"].append("mutated after the callback")
            live["meta"]["k"] = -1
        assert p.flush()
    got = sorted(e.payload["update"]["meta"]["k"] for e in ledger.events)
    assert got == list(range(300))
    assert all(
        e.payload["update"]["messages"] == [f"hello {e.payload['update']['meta']['k']}"]
        for e in ledger.events
    )


class Opaque:
    def __str__(self) -> str:
        return f"Opaque({SECRET})"


def test_a_value_that_is_not_plain_data_is_processed_where_it_was_emitted(
    spool_dir: Path,
) -> None:
    key = WorkspaceCipher(WorkspaceCipher.generate_key())
    ledger = InMemoryLedger()
    with Pipeline(
        ledger, cipher=key, redactor=Redactor(), spool_dir=spool_dir, defer=True, linger=0.5
    ) as p:
        event = p.process(Event.new("tool_end", "op", payload={"result": Opaque(), "t": "\ud800"}))
        # not left for later: the object is rendered (and redacted, escaped) right away
        assert SECRET not in str(event.payload) and event.redactions == 1
        p.emit(Event.new("tool_end", "op", payload={"result": Opaque()}))
        assert p.flush()
    (recorded,) = ledger.events
    assert recorded.payload == {"result": "Opaque([REDACTED:openai_key])"}
    assert recorded.redactions == 1


class _Down(InMemoryLedger):
    def capture(self, captures: Sequence[Capture]) -> None:
        raise LedgerUnavailableError("server closed the connection unexpectedly")


def test_deferred_events_that_outlive_a_close_are_redacted_before_the_log_keeps_them(
    spool_dir: Path,
) -> None:
    key = WorkspaceCipher(WorkspaceCipher.generate_key())
    p = Pipeline(
        _Down(),
        cipher=key,
        redactor=Redactor(),
        spool_dir=spool_dir,
        defer=True,
        retry_interval=0.05,
    )
    p.emit(Event.new("tool_end", "wal", payload={"result": f"token {SECRET}"}))
    p.close(timeout=0.5)
    logs = list((spool_dir / "wal").rglob("*.wal"))
    assert logs
    text = b"".join(f.read_bytes() for f in logs)
    assert SECRET.encode() not in text and b"REDACTED" in text


def test_external_leaves_processing_to_its_own_sealer_and_its_health_counts_failures(
    dsn: str, tmp_path: Path
) -> None:
    class S(TypedDict):
        text: str

    g = StateGraph(S)
    g.add_node("say", lambda s: {"text": s["text"] + "!"})
    g.add_edge(START, "say")
    g.add_edge("say", END)
    with External(dsn=dsn, workspace=tmp_path / "ws", redaction=FailingRedactor()) as ext:
        assert ext.pipeline is not None and ext.pipeline.processing.deferred
        assert ext.pipeline.service is None  # sealed by the helper process
        graph = g.compile(checkpointer=ext.checkpointer)
        assert graph.invoke({"text": "boom"}, ext.config("hf"))["text"] == "boom!"
        assert ext.flush()
        assert ext.health()["record_failures"] >= 1
    with psycopg.connect(dsn, autocommit=True) as conn:
        kinds = [
            r[0]
            for r in conn.execute(
                "select kind from langgraph_external.events where thread_id = 'hf' order by seq"
            )
        ]
    assert "record_failed" in kinds and "run_start" not in kinds and "checkpoint" in kinds


@pytest.mark.parametrize("options", [{"sealing": "worker"}, {"strict": True}, {"encrypt": False}])
def test_lgx_worker_strict_mode_or_no_encryption_keep_processing_on_the_callers_thread(
    dsn: str, tmp_path: Path, options: dict[str, Any]
) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws", **options) as ext:
        assert ext.pipeline is not None and not ext.pipeline.processing.deferred
