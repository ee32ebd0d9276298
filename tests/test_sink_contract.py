"""One contract, every implementation: ledgers (Postgres, in-memory) and projections.

Each ledger stores sequenced events all or nothing, refuses a batch that does not start at
its thread's head (two writers never interleave), serves events back in order with their
detail, and keeps projection cursors. Each projection applies events idempotently: a
replayed batch, a torn last line or a deleted folder never yields a duplicate or a gap.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from langgraph_external import Event, Workspace, verify_chain
from langgraph_external.errors import PositionMovedError
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.contract import Ledger, Projection
from langgraph_external.ledger.memory import InMemoryLedger
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.record.processors import Sequencer, normalize
from langgraph_external.workspace.projection import WorkspaceProjection


def _sequenced(n: int, tid: str = "t", start: Any = None, **payload: Any) -> list[Event]:
    seq = Sequencer(lambda ids: {tid: start} if start else {})
    return seq.seal(
        [normalize(Event.new("node_end", tid, payload={"i": i, **payload})) for i in range(n)]
    )


class LedgerContract:
    """Behaviour every :class:`~langgraph_external.ledger.contract.Ledger` shows."""

    @pytest.fixture
    def store(self) -> Iterator[Ledger]:
        raise NotImplementedError

    def test_it_is_a_ledger(self, store: Ledger) -> None:
        assert isinstance(store, Ledger)

    def test_events_come_back_in_order_with_their_detail(self, store: Ledger) -> None:
        events = _sequenced(5)
        events[2] = events[2].replace(detail={"inline": {"ab": "eA=="}}, attachments={"a/b": b"x"})
        store.append(events)
        back = store.read("t")
        assert [e.envelope() for e in back] == [e.envelope() for e in events]
        assert back[2].detail == {"inline": {"ab": "eA=="}} and back[2].attachments == {"a/b": b"x"}
        assert [e.seq for e in store.read("t", after=3)] == [4, 5]
        assert store.positions(["t", "unknown"]) == {"t": (5, events[-1].hash)}

    def test_a_batch_not_at_the_head_is_refused_whole(self, store: Ledger) -> None:
        store.append(_sequenced(3))
        again = _sequenced(3, other_writer=True)  # a second writer that saw position 0
        with pytest.raises(PositionMovedError):
            store.append(again)
        assert [e.payload.get("other_writer") for e in store.read("t")] == [None] * 3
        head = store.positions(["t"])["t"]
        store.append(_sequenced(2, start=head))  # from the real head it is accepted
        assert [e.seq for e in store.read("t")] == [1, 2, 3, 4, 5]
        verify_chain([e.envelope() for e in store.read("t")])

    def test_payloads_survive_storage_and_still_verify(self, store: Ledger) -> None:
        events = _sequenced(
            1, big=1e20, neg=-0.0, nan=float("nan"), nul="a\x00b", deep=[{"x": 1.5}], s="\udc80"
        )
        store.append(events)
        envs = [e.envelope() for e in store.read("t")]
        verify_chain(envs)
        assert envs[0]["payload"]["big"] == 10**20 and envs[0]["payload"]["nan"] == "NaN"

    def test_cursors_tell_which_threads_a_projection_lags_on(self, store: Ledger) -> None:
        store.append(_sequenced(3, "a") + _sequenced(2, "b"))
        assert sorted(store.lagging("ws")) == [("a", 3, 0), ("b", 2, 0)]
        store.set_cursor("ws", "a", 3, None)
        store.set_cursor("ws", "b", 1, "KeyError: boom")  # quarantined: not offered again
        assert store.lagging("ws") == []
        assert sorted(store.lagging("other")) == [("a", 3, 0), ("b", 2, 0)]


class TestInMemoryLedger(LedgerContract):
    @pytest.fixture
    def store(self) -> Iterator[Ledger]:
        yield InMemoryLedger()


class TestPostgresLedger(LedgerContract):
    @pytest.fixture
    def store(self, dsn: str) -> Iterator[Ledger]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            ledger.setup(conn)
        s = PostgresLedger(dsn)
        yield s
        s.close()

    def test_the_sql_view_matches_what_read_returns(self, store: Ledger, dsn: str) -> None:
        events = _sequenced(4)
        store.append(events)
        with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
            envs = ledger.fetch_events(conn, "t")
        assert envs == [e.envelope() for e in events]


class ProjectionContract:
    """Behaviour every :class:`~langgraph_external.ledger.contract.Projection` shows."""

    def make(self, tmp_path: Path) -> Projection:
        raise NotImplementedError

    def lines(self, tmp_path: Path, tid: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def test_it_is_a_projection(self, tmp_path: Path) -> None:
        assert isinstance(self.make(tmp_path), Projection)

    def test_applying_twice_changes_nothing(self, tmp_path: Path) -> None:
        events = _sequenced(5)
        proj = self.make(tmp_path)
        proj.apply("t", events)
        proj.apply("t", events)
        proj.apply("t", events[2:])
        fresh = self.make(tmp_path)  # a new process: position from what is on disk
        fresh.apply("t", events)
        assert fresh.position("t") == 5
        assert [x["seq"] for x in self.lines(tmp_path, "t")] == [1, 2, 3, 4, 5]


class TestWorkspaceProjection(ProjectionContract):
    def make(self, tmp_path: Path) -> Projection:
        return WorkspaceProjection(Workspace(tmp_path / "ws"))

    def lines(self, tmp_path: Path, tid: str) -> list[dict[str, Any]]:
        return list(Workspace(tmp_path / "ws").iter_events(tid))

    def test_a_torn_last_line_is_cut_not_glued_to(self, tmp_path: Path) -> None:
        events = _sequenced(4)
        self.make(tmp_path).apply("t", events[:3])
        path = tmp_path / "ws" / "threads" / "t" / "events.jsonl"
        with open(path, "ab") as f:
            f.write(b'{"seq": 4, "kind": "node_e')  # a crash in the middle of an append
        proj = self.make(tmp_path)
        assert proj.position("t") == 3
        proj.apply("t", events)
        envs = self.lines(tmp_path, "t")
        assert [e["seq"] for e in envs] == [1, 2, 3, 4]
        verify_chain(envs)

    def test_a_deleted_workspace_is_rebuilt(self, tmp_path: Path) -> None:
        import shutil

        events = _sequenced(3)
        proj = self.make(tmp_path)
        proj.apply("t", events)
        shutil.rmtree(tmp_path / "ws" / "threads")
        proj = self.make(tmp_path)
        assert proj.position("t") == 0
        proj.apply("t", events)
        assert [e["seq"] for e in self.lines(tmp_path, "t")] == [1, 2, 3]
