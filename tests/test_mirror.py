"""The record is exact: every stored checkpoint is mirrored, decodes to the saver's values,
and the workspace and the ledger hold the same hash-chained events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_external import External, verify_chain
from langgraph_external.ops.restore import iter_checkpoint_ids, load_checkpoint, restore_thread
from langgraph_external.options import Options
from tests.graphs import fanout_with_subgraph


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def _agent_graph(checkpointer: Any) -> Any:
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                id="ai-1",
                tool_calls=[{"id": "call-1", "name": "get_weather", "args": {"city": "Oslo"}}],
            ),
            AIMessage("It is sunny in Oslo.", id="ai-2"),
        ]
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([get_weather]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def _saver_checkpoints(dsn: str) -> set[tuple[str, str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "select thread_id, checkpoint_ns, checkpoint_id from public.checkpoints"
        ).fetchall()
    return {tuple(r) for r in rows}  # type: ignore[misc]


@pytest.fixture
def recorded(dsn: str, tmp_path: Path, spool_dir: Path) -> External:
    ext = External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)).setup()
    agent = _agent_graph(ext.checkpointer)
    out = agent.invoke(
        {"messages": [HumanMessage("weather in Oslo?", id="h-1")]}, ext.config("agent-1")
    )
    assert out["messages"][-1].content == "It is sunny in Oslo."
    fan = fanout_with_subgraph(ext.checkpointer)
    assert fan.invoke({"items": [], "total": 0}, ext.config("fan/1"))["total"] == 120
    ext.flush()
    yield ext
    ext.close()


def test_every_checkpoint_in_postgres_has_its_workspace_mirror(recorded: External) -> None:
    ws, saver = recorded.workspace, recorded.checkpointer
    stored = _saver_checkpoints(recorded.dsn or "")
    assert {ns for _, ns, _ in stored} > {""}  # the subgraph wrote a child namespace
    mirrored = {
        (tid, ns, cid) for tid in ("agent-1", "fan/1") for ns, cid in iter_checkpoint_ids(ws, tid)
    }
    assert mirrored == stored
    for tid, ns, cid in stored:
        cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
        want = saver.get_tuple(cfg)  # type: ignore[arg-type]
        got = load_checkpoint(ws, tid, ns, cid, serde=saver.serde)
        assert want is not None
        assert got.checkpoint["channel_values"] == want.checkpoint["channel_values"]
        assert got.checkpoint["channel_versions"] == want.checkpoint["channel_versions"]
        assert got.checkpoint["versions_seen"] == want.checkpoint["versions_seen"]
        assert got.metadata == want.metadata
        assert got.parent_config == (
            {"configurable": {**want.parent_config["configurable"]}} if want.parent_config else None
        )
        assert sorted(got.pending_writes or [], key=repr) == sorted(
            want.pending_writes or [], key=repr
        )


def test_workspace_and_ledger_hold_the_same_chained_events(recorded: External) -> None:
    for tid in ("agent-1", "fan/1"):
        from_files = list(recorded.workspace.iter_events(tid))
        from_sql = recorded.events(tid)
        assert from_files == from_sql
        assert [e["seq"] for e in from_sql] == list(range(1, len(from_sql) + 1))
        verify_chain(from_sql)
        verify_chain(from_files)


def test_the_checkpoint_index_says_which_node_wrote_what(recorded: External) -> None:
    with psycopg.connect(recorded.dsn or "") as conn:
        rows = conn.execute(
            """select step, nodes, cardinality(task_ids), workspace_path
               from langgraph_external.checkpoints
               where thread_id = 'agent-1' and checkpoint_ns = '' order by step"""
        ).fetchall()
    assert [(step, nodes) for step, nodes, _, _ in rows] == [
        (-1, []),
        (0, ["__start__"]),
        (1, ["agent"]),
        (2, ["tools"]),
        (3, ["agent"]),
    ]
    for _, _, _, path in rows:
        assert (Path(recorded.workspace.root) / path).is_file()
    with psycopg.connect(recorded.dsn or "") as conn:
        (fan_nodes,) = conn.execute(
            """select nodes from langgraph_external.checkpoints
               where thread_id = 'fan/1' and checkpoint_ns = '' and step = 2"""
        ).fetchone()  # type: ignore[misc]
        (tasks,) = conn.execute(
            """select count(distinct task_id) from langgraph_external.checkpoint_tasks
               where thread_id = 'fan/1' and checkpoint_ns = '' and step = 2"""
        ).fetchone()  # type: ignore[misc]
    assert fan_nodes == ["work"] and tasks == 3  # three Send tasks, one node


def test_state_json_shows_readable_messages(recorded: External) -> None:
    ws = recorded.workspace
    state = ws.read_json(f"{ws.thread_dir('agent-1')}/state.json")
    msgs = state["values"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[1]["tool_calls"] == [
        {"id": "call-1", "name": "get_weather", "args": {"city": "Oslo"}}
    ]
    assert msgs[2]["content"] == "sunny in Oslo" and msgs[2]["tool_call_id"] == "call-1"


def test_a_thread_restored_from_the_workspace_is_the_same_thread(recorded: External) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    target = InMemorySaver()
    n = restore_thread(recorded.workspace, "agent-1", target)
    assert n == len(list(iter_checkpoint_ids(recorded.workspace, "agent-1")))
    original = _agent_graph(recorded.checkpointer)
    restored = _agent_graph(target)
    cfg = {"configurable": {"thread_id": "agent-1"}}
    assert restored.get_state(cfg).values == original.get_state(cfg).values
    hist_a = [(s.values, s.next, s.metadata) for s in original.get_state_history(cfg)]
    hist_b = [(s.values, s.next, s.metadata) for s in restored.get_state_history(cfg)]
    assert hist_a == hist_b
