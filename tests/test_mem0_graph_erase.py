"""Mem0 adapter inside a running graph (provenance, ledger events) and provable erasure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from psycopg import sql

from langgraph_external import External
from langgraph_external.memory_adapters import ErasureVerificationError, Mem0Adapter
from langgraph_external.memory_adapters.mem0.store import text_hash
from langgraph_external.memory_adapters.testing import (
    HashingEmbeddings,
    ScriptedChatModel,
    extraction_answer,
)
from langgraph_external.options import Options

S = "langgraph_external"
# What the user tells the agent, by turn; kept out of graph state on purpose: erasure
# covers the memory store, while the thread's own checkpoints are the app's state.
SECRETS = {
    "alice": ["Alice is allergic to hazelnuts", "Alice lives at 12 Quai Zola"],
    "bob": ["Bob collects vintage radios"],
}


class State(TypedDict):
    user: str
    turn: int
    found: int


def build_graph(memory: Mem0Adapter, llm: ScriptedChatModel) -> Any:
    def remember(state: State) -> dict[str, Any]:
        text = SECRETS[state["user"]][state["turn"]]
        if state["turn"] == 0:
            memory.add(text, user_id=state["user"], infer=False, reason="stated by user")
        else:
            llm.responses.append(extraction_answer(text))
            memory.add(f"note: {text}", user_id=state["user"], infer=True)
        return {}

    def recall(state: State) -> dict[str, Any]:
        hits = memory.search("allergic radios lives", filters={"user_id": state["user"]})
        return {"found": len(hits["results"])}

    b = StateGraph(State)
    b.add_node("remember", remember)
    b.add_node("recall", recall)
    b.add_edge(START, "remember")
    b.add_edge("remember", "recall")
    b.add_edge("recall", END)
    return b


@pytest.fixture
def ext(dsn: str, tmp_path: Path, spool_dir: Path) -> Iterator[External]:
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as e:
        yield e


@pytest.fixture
def llm() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def memory(ext: External, llm: ScriptedChatModel) -> Iterator[Mem0Adapter]:
    m = Mem0Adapter.from_external(ext, llm=llm, embedder=HashingEmbeddings())
    yield m
    m.close()


def q(dsn: str, text: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(text, params).fetchall()  # type: ignore[arg-type]


def test_provenance_of_writes_and_reads_from_a_graph_node(
    ext: External, memory: Mem0Adapter, llm: ScriptedChatModel, dsn: str
) -> None:
    graph = build_graph(memory, llm).compile(checkpointer=ext.checkpointer)
    out = graph.invoke({"user": "alice", "turn": 0, "found": 0}, ext.config("thread-a"))
    assert out["found"] == 1
    ledger = ext.events("thread-a")
    node_runs = {e["node"]: e["run_id"] for e in ledger if e["kind"] == "node_start"}
    [ev] = q(
        dsn,
        f"select thread_id, node, step, run_id, checkpoint_id, task_id, new_text "
        f"from {S}.memory_events",
    )
    thread, node, step, run_id, checkpoint_id, task_id, text = ev
    assert (thread, node, step, text) == ("thread-a", "remember", 1, SECRETS["alice"][0])
    assert run_id == node_runs["remember"]
    checkpoints = {c["payload"].get("checkpoint_id") for c in ledger if c["kind"] == "checkpoint"}
    checkpoints |= {c["checkpoint_id"] for c in ledger if c["kind"] == "checkpoint"}
    assert checkpoint_id in checkpoints
    writes = [e for e in ledger if e["kind"] == "writes" and e["node"] == "remember"]
    assert task_id is not None and (not writes or writes[0]["task_id"] == task_id)
    # the read: retrieval row attributed to the recall node, and a ledger event
    [(r_thread, r_node, r_step, r_run, hits)] = q(
        dsn, f"select thread_id, node, step, run_id, hit_count from {S}.memory_retrievals"
    )
    assert (r_thread, r_node, r_step, r_run, hits) == (
        "thread-a",
        "recall",
        2,
        node_runs["recall"],
        1,
    )
    adds = [e for e in ledger if e["kind"] == "memory_add"]
    searches = [e for e in ledger if e["kind"] == "memory_search"]
    assert [(e["node"], e["payload"]["event"]) for e in adds] == [("remember", "ADD")]
    assert [(e["node"], len(e["payload"]["hits"])) for e in searches] == [("recall", 1)]
    assert searches[0]["payload"]["hits"][0]["rank"] == 1
    # which runs and nodes read this memory, with what score (documented recipe)
    [(node_read, score)] = q(
        dsn,
        f"select node, score from {S}.memory_reads where memory_id = "
        f"(select memory_id from {S}.memory_events limit 1)",
    )
    assert node_read == "recall" and score > 0.1
    # Mem0's extraction prompt never reaches the hash-chained ledger
    graph.invoke({"user": "alice", "turn": 1, "found": 0}, ext.config("thread-b"))
    assert not [e for e in ext.events("thread-b") if e["kind"].startswith("llm")]
    assert len(llm.prompts) == 1


def test_memory_provenance_carries_the_root_run_id_of_the_invocation(
    ext: External, memory: Mem0Adapter, llm: ScriptedChatModel, dsn: str
) -> None:
    graph = build_graph(memory, llm).compile(checkpointer=ext.checkpointer)
    for thread in ("root-1", "root-2"):
        graph.invoke({"user": "alice", "turn": 0, "found": 0}, ext.config(thread))
    for thread in ("root-1", "root-2"):
        ledger = ext.events(thread)
        [start] = [e for e in ledger if e["kind"] == "run_start"]
        assert start["run_id"] == start["root_run_id"]
        node_start = next(e for e in ledger if e["kind"] == "node_start")
        assert node_start["root_run_id"] == start["run_id"]
        [(root, run_id)] = q(
            dsn,
            f"select root_run_id, run_id from {S}.memory_events where thread_id = %s",
            thread,
        )
        assert root == start["run_id"]
        assert run_id == node_start["run_id"]
        [add] = [e for e in ledger if e["kind"] == "memory_add"]
        assert add["root_run_id"] == start["run_id"]
        # the memory_reads view joins reads to the invocation the same way
        reads = q(
            dsn,
            f"select root_run_id from {S}.memory_reads where thread_id = %s",
            thread,
        )
        assert reads and {r[0] for r in reads} == {start["run_id"]}


def _dump_database(dsn: str) -> str:
    """Every value of every text-like column of every user table (what pg_dump would show)."""
    out: list[str] = []
    with psycopg.connect(dsn) as conn:
        tables = conn.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_type = 'BASE TABLE' "
            "and table_schema not in ('pg_catalog', 'information_schema')"
        ).fetchall()
        for schema, table in tables:
            ident = sql.Identifier(schema, table)
            for row in conn.execute(sql.SQL("select t::text from {} t").format(ident)):
                out.append(row[0])
    return "\n".join(out)


def _dump_workspace(root: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_erase_user_leaves_no_trace_and_a_verifiable_receipt(
    ext: External, memory: Mem0Adapter, llm: ScriptedChatModel, dsn: str, tmp_path: Path
) -> None:
    graph = build_graph(memory, llm).compile(checkpointer=ext.checkpointer)
    for turn in (0, 1):
        graph.invoke({"user": "alice", "turn": turn, "found": 0}, ext.config(f"alice-{turn}"))
    graph.invoke({"user": "bob", "turn": 0, "found": 0}, ext.config("bob-0"))
    [mid] = [
        r[0]
        for r in q(
            dsn, "select id::text from mem0_memories where payload->>'data' like 'Alice lives%%'"
        )
    ]
    memory.update(mid, "Alice lives at 3 Rue Neuve", reason="moved")
    memory.delete(mid)  # deleted memories keep their text in history: erase must find it
    ext.flush()
    dump = _dump_database(dsn)
    assert all(s in dump for s in SECRETS["alice"])  # present before

    receipt = memory.erase(
        user_id="alice", erased_by="dpo@example.org", reason="GDPR art. 17", vacuum=True
    )
    ext.flush()

    dump = _dump_database(dsn)
    ws = _dump_workspace(tmp_path / "ws")
    for secret in [*SECRETS["alice"], "3 Rue Neuve", "note: Alice"]:
        assert secret not in dump, secret
        assert secret.encode() not in ws, secret
    assert (
        "alice"
        not in q(dsn, f"select coalesce(string_agg(user_id, ','), '') from {S}.memory_events")[0][0]
    )
    # bob is untouched
    assert SECRETS["bob"][0] in dump
    assert memory.search("radios", filters={"user_id": "bob"})["results"]
    assert memory.search("allergic", filters={"user_id": "alice"})["results"] == []

    assert receipt.subject_kind == "user_id" and len(receipt.memory_ids) == 2
    assert receipt.row_counts["vectors"] == 1  # the other one was already deleted
    assert receipt.row_counts["audit_rows"] == 4  # ADD, ADD, UPDATE, DELETE
    assert receipt.row_counts["messages"] == 1 and receipt.row_counts["retrievals"] == 2
    import hashlib

    # the fingerprint of an erased text is keyed: a guess cannot be confirmed without the key
    assert text_hash(SECRETS["alice"][0], memory.key) in receipt.content_hashes
    assert hashlib.sha256(SECRETS["alice"][0].encode()).hexdigest() not in receipt.content_hashes
    assert memory.verify_erasure(receipt.erasure_id) == receipt
    assert (tmp_path / "ws" / "memory" / "erasures" / f"{receipt.erasure_id}.json").exists()
    assert [
        r[0]
        for r in q(
            dsn,
            f"select event from {S}.memory_events where erasure_id is not null and event = 'ERASE'",
        )
    ] == ["ERASE", "ERASE"]
    erase_events = [e for e in ext.events("_no_thread") if e["kind"] == "memory_erase"]
    assert erase_events[0]["payload"]["receipt_hash"] == receipt.receipt_hash

    # tampering with the stored receipt is detected
    with psycopg.connect(dsn) as conn:
        conn.execute(f"update {S}.memory_erasures set row_counts = '{{}}'")
    with pytest.raises(ErasureVerificationError, match="receipt_hash"):
        memory.verify_erasure(receipt.erasure_id)


def test_erase_memory_ids_keeps_the_rest(memory: Mem0Adapter, dsn: str) -> None:
    [a] = memory.add("I hate olives", user_id="dan", infer=False)["results"]
    [b] = memory.add("I love capers", user_id="dan", infer=False)["results"]
    memory.search("olives", filters={"user_id": "dan"})
    receipt = memory.erase(memory_ids=[a["id"]], erased_by="dan")
    assert receipt.memory_ids == [a["id"]]
    dump = _dump_database(dsn)
    assert "I hate olives" not in dump and "I love capers" in dump
    assert memory.get(b["id"])["memory"] == "I love capers"
    assert memory.history(a["id"])[0]["new_memory"] is None  # text gone, event kept
    memory.verify_erasure(receipt.erasure_id)
