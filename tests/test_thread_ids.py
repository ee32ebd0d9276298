"""A thread id the record cannot store is refused by every source the way the checkpointer
refuses it (``InvalidThreadIdError``), before anything is buffered or written: the
recording never wedges on it, ``flush()`` stays ``True`` and ``with External(...)`` exits
cleanly."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from langgraph_external import External, InvalidThreadIdError
from langgraph_external.options import Options
from langgraph_external.record.thread_ids import check_thread_id
from tests.graphs import react_agent

SURROGATE = "\ud800"  # a lone surrogate: valid in a Python str, not encodable as UTF-8
HOSTILE: list[Any] = [SURROGATE, "a\udfffb", "a\x00b", "", True, 1.5, b"t", None, ("t",)]


class S(TypedDict, total=False):
    n: int


def _one_node(fn: Any, **compile_kw: Any) -> Any:
    g = StateGraph(S)
    g.add_node("work", fn)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    return g.compile(**compile_kw)


def _config(ext: External, thread_id: Any) -> Any:
    """``ext.config`` with the thread id swapped in afterwards (``ext.config`` refuses it
    itself): what a config built or edited by hand carries to the sources."""
    config = ext.config("placeholder")
    config["configurable"]["thread_id"] = thread_id
    return config


def _recorded(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from langgraph_external.events").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("bad", HOSTILE, ids=repr)
def test_check_thread_id_refuses_what_cannot_be_recorded(bad: Any) -> None:
    with pytest.raises(InvalidThreadIdError):
        check_thread_id(bad)


def test_check_thread_id_returns_the_text_recorded() -> None:
    u = uuid.uuid4()
    assert check_thread_id("thread-42") == "thread-42"
    assert check_thread_id(7) == "7"
    assert check_thread_id(u) == str(u)
    assert check_thread_id("日本語 ✓") == "日本語 ✓"
    assert check_thread_id("a\x00b", reject_nul=False) == "a\x00b"


def test_external_config_refuses_an_invalid_thread_id(tmp_path: Path) -> None:
    ext = External(dsn="postgresql://unused", workspace=tmp_path / "ws")
    with pytest.raises(InvalidThreadIdError, match="not valid Unicode"):
        ext.config(SURROGATE)


@pytest.mark.parametrize("strict", [False, True])
def test_a_lone_surrogate_thread_id_never_wedges_the_recording(
    strict: bool, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    # the case: a graph with the checkpointer and the audit callbacks
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, strict=strict),
    ) as ext:
        agent = react_agent(ext.checkpointer)
        with pytest.raises(InvalidThreadIdError):
            agent.invoke({"messages": [HumanMessage("hi")]}, _config(ext, SURROGATE))
        assert ext.pipeline.health()["buffered"] == 0
        assert ext.flush(timeout=10)
        # the recording goes on for valid threads
        agent.invoke({"messages": [HumanMessage("hi")]}, ext.config("fine"))
        assert ext.flush(timeout=10)
        assert {e["thread_id"] for e in ext.events("fine")} == {"fine"}
    with psycopg.connect(dsn) as conn:
        threads = [r[0] for r in conn.execute("select thread_id from langgraph_external.threads")]
    assert threads == ["fine"]


@pytest.mark.parametrize("strict", [False, True])
def test_the_callback_handler_refuses_before_buffering(
    strict: bool, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    # no checkpointer: only the callbacks see the thread id
    graph = _one_node(lambda s: {"n": s["n"] + 1})
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, strict=strict),
    ) as ext:
        if strict:  # strict callbacks raise into the run
            with pytest.raises(InvalidThreadIdError):
                graph.invoke({"n": 1}, _config(ext, SURROGATE))
        else:  # default: the run goes on, its events are refused with a warning
            assert graph.invoke({"n": 1}, _config(ext, SURROGATE)) == {"n": 2}
        assert ext.pipeline.health()["buffered"] == 0
        assert ext.flush(timeout=10)
    assert _recorded(dsn) == 0


@pytest.mark.parametrize("strict", [False, True])
def test_the_audited_store_refuses_before_the_store_runs(
    strict: bool, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    inner = InMemoryStore()
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, strict=strict),
    ) as ext:
        store = ext.store(inner)

        def remember(s: S) -> S:
            store.put(("users", "u1"), "lang", {"value": "fr"})
            return {"n": s["n"] + 1}

        graph = _one_node(remember, store=store)
        with pytest.raises(InvalidThreadIdError):
            graph.invoke({"n": 1}, _config(ext, SURROGATE))
        assert inner.search(("users",)) == []  # nothing half-written: the store untouched
        assert ext.pipeline.health()["buffered"] == 0
        assert ext.flush(timeout=10)
        graph.invoke({"n": 1}, ext.config("fine"))
        assert [i.key for i in inner.search(("users",))] == ["lang"]
        assert ext.flush(timeout=10)
        assert "memory_put" in {e["kind"] for e in ext.events("fine")}


@pytest.mark.parametrize("strict", [False, True])
def test_the_guard_refuses_to_record_a_violation_under_an_invalid_thread(
    strict: bool, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph_external.guards import TransitionPolicy, guard
    from tests.test_guards_runtime import START_STATE, build

    ran: list[str] = []
    builder, spec = build("illegal_edge", ran)
    spec["on_violation"] = {"action": "route", "fallback": "fallback"}
    policy = TransitionPolicy.from_dict(spec)
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, strict=strict),
    ) as ext:
        graph = guard(builder, policy, pipeline=ext.pipeline).compile()
        with pytest.raises(InvalidThreadIdError):
            graph.invoke(START_STATE, _config(ext, SURROGATE))
        assert ext.pipeline.health()["buffered"] == 0
        assert ext.flush(timeout=10)
        graph.invoke(START_STATE, ext.config("fine"))
        assert ext.flush(timeout=10)
        kinds = {e["kind"] for e in ext.events("fine")}
    assert "policy_violation" in kinds


def test_the_mem0_adapter_refuses_before_touching_mem0(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph_external.memory_adapters import Mem0Adapter
    from langgraph_external.memory_adapters.testing import HashingEmbeddings, ScriptedChatModel

    with (
        External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext,
        Mem0Adapter(
            dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings(), pipeline=ext.pipeline
        ) as memory,
    ):

        def remember(s: S) -> S:
            memory.add("I prefer tea", user_id="alice", infer=False)
            memory.search("tea", filters={"user_id": "alice"})
            return {"n": s["n"] + 1}

        graph = _one_node(remember)
        with pytest.raises(InvalidThreadIdError):
            graph.invoke({"n": 1}, _config(ext, SURROGATE))
        assert memory.get_all(filters={"user_id": "alice"})["results"] == []  # Mem0 untouched
        with psycopg.connect(dsn) as conn:
            audit = conn.execute("select count(*) from langgraph_external.memory_events")
            assert audit.fetchone() == (0,)
        assert ext.flush(timeout=10)
        graph.invoke({"n": 1}, ext.config("fine"))
        assert len(memory.get_all(filters={"user_id": "alice"})["results"]) == 1
        assert ext.flush(timeout=10)
        kinds = {e["kind"] for e in ext.events("fine")}
    assert {"memory_add", "memory_search"} <= kinds
