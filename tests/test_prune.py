"""``lgx prune``: old checkpoints go from the saver, the ledger's index and the workspace
together; delta channels keep the ancestors they are rebuilt from; events stay."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner, Result

from langgraph_external import External, Workspace
from langgraph_external.cli import app
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops import prune
from langgraph_external.ops.restore import CheckpointLog
from langgraph_external.options import Options


def concat(state: list[int], writes: list[list[int]]) -> list[int]:
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


class Delta(TypedDict):
    log: Annotated[list[int], DeltaChannel(concat, snapshot_frequency=3)]
    n: int


class Plain(TypedDict):
    log: list[int]
    n: int


def counting_graph(state: type, stop: int, checkpointer: Any) -> Any:
    def step(s: dict[str, Any]) -> dict[str, Any]:
        return {"log": [s["n"]] if state is Delta else [*s["log"], s["n"]], "n": s["n"] + 1}

    g = StateGraph(state)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= stop else "step")
    return g.compile(checkpointer=checkpointer)


@dataclass
class Place:
    dsn: str
    ws: Path
    spool: Path

    def external(self) -> External:
        return External(dsn=self.dsn, workspace=self.ws, options=Options(spool_dir=self.spool))


@pytest.fixture
def place(dsn: str, tmp_path: Path, spool_dir: Path) -> Place:
    p = Place(dsn, tmp_path / "ws", spool_dir)
    with p.external() as ext:
        counting_graph(Plain, 6, ext.checkpointer).invoke({"log": [], "n": 0}, ext.config("plain"))
        # ends on a step whose delta channel has no snapshot: it needs its ancestors
        counting_graph(Delta, 7, ext.checkpointer).invoke({"log": [], "n": 0}, ext.config("delta"))
    return p


def lgx(p: Place, *args: str) -> Result:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})
    return runner.invoke(app, ["--dsn", p.dsn, "--workspace", str(p.ws), *args])


def saver_ids(dsn: str, thread_id: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "select checkpoint_id from checkpoints where thread_id = %s order by checkpoint_id",
            (thread_id,),
        ).fetchall()
    return [r[0] for r in rows]


def index_ids(dsn: str, thread_id: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "select checkpoint_id from langgraph_external.checkpoints where thread_id = %s "
            "order by checkpoint_id",
            (thread_id,),
        ).fetchall()
    return [r[0] for r in rows]


def events(dsn: str, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        return ledger.fetch_events(conn, thread_id)


def state_of(p: Place, thread_id: str) -> dict[str, Any]:
    with p.external() as ext:
        graph = counting_graph(
            Delta if thread_id.startswith("delta") else Plain, 99, ext.checkpointer
        )
        return dict(graph.get_state(ext.config(thread_id)).values)


def test_keep_latest_removes_from_saver_index_and_workspace_and_records_it(place: Place) -> None:
    before_ids = saver_ids(place.dsn, "plain")
    before_events = events(place.dsn, "plain")
    before_state = state_of(place, "plain")
    result = lgx(place, "prune", "plain", "--keep", "2", "--json")
    assert result.exit_code == 0, result.output
    (plan,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert plan["removed"] == len(before_ids) - 2 and plan["pruned"] is True
    kept = before_ids[-2:]
    assert saver_ids(place.dsn, "plain") == kept == index_ids(place.dsn, "plain")
    log = CheckpointLog(Workspace(place.ws), "plain", "")
    assert sorted(log.docs) == kept
    assert {line["checkpoint_id"] for _, line in log.write_lines} <= set(kept)
    # the audit trail stays: every earlier event, plus the prune itself
    after = events(place.dsn, "plain")
    assert [e["hash"] for e in after[:-1]] == [e["hash"] for e in before_events]
    assert after[-1]["kind"] == "thread_pruned" and after[-1]["payload"]["count"] == plan["removed"]
    assert sorted(after[-1]["payload"]["removed"][""]) == before_ids[:-2]
    assert state_of(place, "plain") == before_state
    verified = lgx(place, "verify", "plain")
    assert verified.exit_code == 0, verified.output
    # the thread runs on from its kept head
    with place.external() as ext:
        graph = counting_graph(Plain, 8, ext.checkpointer)
        graph.invoke({"log": before_state["log"], "n": before_state["n"]}, ext.config("plain"))
    assert saver_ids(place.dsn, "plain")[:2] == kept and len(saver_ids(place.dsn, "plain")) > 2
    assert lgx(place, "verify", "plain").exit_code == 0


def test_delta_channels_keep_the_ancestors_they_are_rebuilt_from(place: Place) -> None:
    before = state_of(place, "delta")
    assert before["log"] == list(range(7))
    ids = saver_ids(place.dsn, "delta")
    result = lgx(place, "prune", "delta", "--keep", "1", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    ancestry = plan["kept_for_ancestry"][""]
    assert ancestry and set(ancestry) < set(ids[:-1])
    assert saver_ids(place.dsn, "delta") == sorted([ids[-1], *ancestry])
    assert state_of(place, "delta") == before  # rebuilt from the kept ancestry
    assert lgx(place, "verify", "delta").exit_code == 0
    assert sorted(CheckpointLog(Workspace(place.ws), "delta", "").docs) == saver_ids(
        place.dsn, "delta"
    )


def test_without_the_ancestry_the_delta_state_would_be_lost(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control for the test above: a prune that ignores ancestry loses the value."""
    with place.external() as ext:
        ext.checkpointer.copy_thread("delta", "delta-naive")
    monkeypatch.setattr(prune, "_ancestry", lambda index, kept: set())
    assert lgx(place, "prune", "delta-naive", "--keep", "1").exit_code == 0
    assert state_of(place, "delta-naive")["log"] != list(range(7))


def test_dry_run_and_older_than_change_nothing_they_should_not(place: Place) -> None:
    ids = saver_ids(place.dsn, "plain")
    n_events = len(events(place.dsn, "plain"))
    dry = lgx(place, "prune", "--all", "--keep", "1", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    plans = {p["thread_id"]: p for p in map(json.loads, dry.stdout.splitlines())}
    assert set(plans) == {"plain", "delta"}
    assert plans["plain"]["removed"] == len(ids) - 1 and plans["plain"]["pruned"] is False
    assert saver_ids(place.dsn, "plain") == ids and len(events(place.dsn, "plain")) == n_events
    # nothing is older than 2000-01-01
    old = lgx(place, "prune", "plain", "--older-than", "2000-01-01", "--json")
    assert old.exit_code == 0 and json.loads(old.stdout)["removed"] == 0
    assert saver_ids(place.dsn, "plain") == ids and len(events(place.dsn, "plain")) == n_events
    # everything is older than a second from now: all but the latest go
    recent = lgx(place, "prune", "plain", "--older-than", "0s", "--json")
    assert recent.exit_code == 0 and json.loads(recent.stdout)["removed"] == len(ids) - 1


def test_prune_usage_errors_exit_2(place: Place) -> None:
    for args in (
        ["prune", "plain"],  # neither --keep nor --older-than
        ["prune", "--keep", "1"],  # no thread and no --all
        ["prune", "plain", "--all", "--keep", "1"],
        ["prune", "plain", "--keep", "0"],
        ["prune", "plain", "--older-than", "yesterday-ish"],
    ):
        result = lgx(place, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
    missing = lgx(place, "prune", "nope", "--keep", "1", "--json")
    assert missing.exit_code == 1 and "no checkpoints" in missing.stderr


def test_prune_while_the_app_runs_on_the_same_thread(place: Place) -> None:
    """Repeated prunes race a run that keeps adding checkpoints, with both cores busy:
    every prune lands, the record stays one valid chain, saver, index and workspace agree."""
    import threading

    from tests.graphs import cpu_burner

    errors: list[BaseException] = []
    done = threading.Event()

    def app() -> None:
        try:
            with place.external() as ext:
                graph = counting_graph(Plain, 10**6, ext.checkpointer)
                for _ in range(15):
                    # 5 more steps per invoke, from where the thread is
                    state = graph.get_state(ext.config("plain")).values
                    more = counting_graph(Plain, state["n"] + 5, ext.checkpointer)
                    more.invoke({"log": state["log"], "n": state["n"]}, ext.config("plain"))
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
        finally:
            done.set()

    with cpu_burner():
        runner = threading.Thread(target=app)
        runner.start()
        prunes = 0
        while not done.is_set() or prunes < 3:
            result = lgx(place, "prune", "plain", "--keep", "2", "--json")
            assert result.exit_code == 0, result.output
            prunes += 1
        runner.join()
    assert errors == []
    result = lgx(place, "prune", "plain", "--keep", "2")
    assert result.exit_code == 0, result.output
    assert saver_ids(place.dsn, "plain") == index_ids(place.dsn, "plain")
    assert len(saver_ids(place.dsn, "plain")) == 2
    assert sorted(CheckpointLog(Workspace(place.ws), "plain", "").docs) == saver_ids(
        place.dsn, "plain"
    )
    verified = lgx(place, "verify", "plain")
    assert verified.exit_code == 0, verified.output
    assert state_of(place, "plain")["n"] == 6 + 15 * 5
