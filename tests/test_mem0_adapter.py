"""Mem0 adapter: the real ``mem0.Memory`` on pgvector, every write audited in SQL.

Offline stand-ins: a scripted LangChain chat model (Mem0's LLM) and a hashed bag-of-words
embedder (real similarity, so Mem0's search finds things).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest

from langgraph_external.memory_adapters import (
    Mem0Adapter,
    MemoryNotFoundError,
)
from langgraph_external.memory_adapters.mem0.store import PostgresHistory, text_hash
from langgraph_external.memory_adapters.testing import (
    HashingEmbeddings,
    ScriptedChatModel,
    extraction_answer,
)

S = "langgraph_external"


def rows(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query, params).fetchall()  # type: ignore[arg-type]


def events(dsn: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        cur = conn.execute(f"select * from {S}.memory_events order by event_id")
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


@pytest.fixture
def llm() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def adapter(dsn: str, tmp_path: Path, llm: ScriptedChatModel) -> Iterator[Mem0Adapter]:
    with Mem0Adapter(
        dsn, llm=llm, embedder=HashingEmbeddings(), workspace=tmp_path / "ws", actor="tests"
    ) as ad:
        yield ad


def test_history_lives_in_postgres_and_no_sqlite_file(adapter: Mem0Adapter, tmp_path: Path) -> None:
    import os

    adapter.add("I prefer tea", user_id="alice", infer=False)
    assert isinstance(adapter.memory.db, PostgresHistory)
    assert adapter.memory.vector_store is adapter.vector_store
    places = [tmp_path, Path(os.environ["MEM0_DIR"]), Path.cwd()]
    for place in places:
        for f in place.rglob("*") if place != Path.cwd() else place.glob("*"):
            if f.is_file() and f.stat().st_size >= 16:
                assert f.read_bytes()[:16] != b"SQLite format 3\x00", f


def test_add_infer_false_writes_vector_and_exact_audit_row(adapter: Mem0Adapter, dsn: str) -> None:
    out = adapter.add(
        "I prefer window seats", user_id="alice", infer=False, reason="onboarding form"
    )
    [res] = out["results"]
    assert res["event"] == "ADD" and res["memory"] == "I prefer window seats"
    [(payload,)] = rows(dsn, "select payload from mem0_memories where id = %s", res["id"])
    assert payload["data"] == "I prefer window seats" and payload["user_id"] == "alice"
    [e] = events(dsn)
    assert {k: e[k] for k in ("memory_id", "event", "old_text", "new_text", "old_hash")} == {
        "memory_id": uuid.UUID(res["id"]),
        "event": "ADD",
        "old_text": None,
        "new_text": "I prefer window seats",
        "old_hash": None,
    }
    assert e["new_hash"] == text_hash("I prefer window seats", adapter.key)
    # keyed: not the plain sha256 a dictionary attack would compare with
    assert e["new_hash"] != text_hash("I prefer window seats")
    assert (e["user_id"], e["agent_id"], e["scope_run_id"]) == ("alice", None, None)
    assert (e["actor"], e["reason"], e["infer"], e["role"]) == (
        "tests",
        "onboarding form",
        False,
        "user",
    )
    assert e["messages"] == [{"role": "user", "content": "I prefer window seats"}]
    assert e["thread_id"] is None and e["node"] is None  # standalone call
    assert e["collection"] == "mem0_memories"


def test_add_infer_true_is_one_llm_call_and_records_source_messages(
    adapter: Mem0Adapter, llm: ScriptedChatModel, dsn: str
) -> None:
    llm.responses.append(extraction_answer("Prefers window seats", "Is vegetarian"))
    msgs = [{"role": "user", "content": "Window seat please, and no meat for me."}]
    out = adapter.add(msgs, user_id="bob", infer=True, reason="chat turn")
    assert [r["memory"] for r in out["results"]] == ["Prefers window seats", "Is vegetarian"]
    assert len(llm.prompts) == 1
    assert "Window seat please" in llm.prompts[0][1]["content"]
    evs = events(dsn)
    assert [(e["event"], e["new_text"], e["infer"]) for e in evs] == [
        ("ADD", "Prefers window seats", True),
        ("ADD", "Is vegetarian", True),
    ]
    assert all(e["messages"] == msgs and e["user_id"] == "bob" for e in evs)
    assert len({e["op_id"] for e in evs}) == 1  # one operation, one transaction
    assert evs[0]["metadata"] == {"attributed_to": "user"}
    # Mem0's message context is in Postgres, not SQLite
    assert rows(dsn, f"select session_scope, role, content from {S}.memory_messages") == [
        ("user_id=bob", "user", "Window seat please, and no meat for me.")
    ]
    assert adapter.memory.db.get_last_messages("user_id=bob")[0]["content"].startswith("Window")


def test_search_writes_retrieval_rows_matching_the_results(adapter: Mem0Adapter, dsn: str) -> None:
    adapter.add("I prefer window seats on planes", user_id="alice", infer=False)
    adapter.add("My favourite drink is green tea", user_id="alice", infer=False)
    adapter.add("I prefer aisle seats", user_id="carol", infer=False)
    out = adapter.search("which seats does she prefer", filters={"user_id": "alice"}, top_k=5)
    hits = out["results"]
    assert hits[0]["memory"] == "I prefer window seats on planes"
    assert all(h["user_id"] == "alice" for h in hits)
    [(_sid, query, qhash, filters, top_k, n, uid)] = rows(
        dsn,
        f"select search_id, query, query_hash, filters, top_k, hit_count, user_id "
        f"from {S}.memory_retrievals",
    )
    assert (query, filters, top_k, n, uid) == (
        "which seats does she prefer",
        {"user_id": "alice"},
        5,
        len(hits),
        "alice",
    )
    assert qhash == text_hash(query, adapter.key)
    stored = rows(
        dsn, f"select rank, memory_id::text, score from {S}.memory_retrieval_hits order by rank"
    )
    assert stored == [(i + 1, h["id"], pytest.approx(h["score"])) for i, h in enumerate(hits)]
    reads = rows(dsn, f"select memory_id::text, score, rank from {S}.memory_reads order by rank")
    assert reads[0][0] == hits[0]["id"] and reads[0][2] == 1


def test_update_delete_history_and_views(adapter: Mem0Adapter, dsn: str) -> None:
    [a] = adapter.add("I live in Lyon", user_id="alice", infer=False)["results"]
    [b] = adapter.add("I own a red bike", user_id="alice", infer=False)["results"]
    before_update = datetime.now(timezone.utc)
    adapter.update(a["id"], "I live in Paris", reason="moved", actor="support-agent")
    adapter.delete(b["id"], reason="user asked")
    evs = events(dsn)
    assert [(e["event"], e["old_text"], e["new_text"]) for e in evs] == [
        ("ADD", None, "I live in Lyon"),
        ("ADD", None, "I own a red bike"),
        ("UPDATE", "I live in Lyon", "I live in Paris"),
        ("DELETE", "I own a red bike", None),
    ]
    upd, dele = evs[2], evs[3]
    assert (upd["old_hash"], upd["new_hash"]) == (
        text_hash("I live in Lyon", adapter.key),
        text_hash("I live in Paris", adapter.key),
    )
    assert (upd["actor"], upd["reason"], dele["reason"], dele["new_hash"]) == (
        "support-agent",
        "moved",
        "user asked",
        None,
    )
    assert rows(dsn, "select count(*) from mem0_memories where id = %s", b["id"]) == [(0,)]
    hist = adapter.history(a["id"])
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in hist] == [
        ("ADD", None, "I live in Lyon"),
        ("UPDATE", "I live in Lyon", "I live in Paris"),
    ]
    assert adapter.get(a["id"])["memory"] == "I live in Paris"
    # views
    assert rows(dsn, f"select memory_id::text, memory from {S}.memory_current") == [
        (a["id"], "I live in Paris")
    ]
    assert rows(
        dsn,
        f"select memory from {S}.memories_as_of('alice', %s) order by memory",
        before_update,
    ) == [("I live in Lyon",), ("I own a red bike",)]
    assert rows(
        dsn, f"select event from {S}.memory_history where memory_id = %s order by event_id", b["id"]
    ) == [("ADD",), ("DELETE",)]
    assert len(rows(dsn, f"select * from {S}.memory_created_by where user_id = 'alice'")) == 2


def test_update_or_delete_of_unknown_memory_is_a_typed_error(
    adapter: Mem0Adapter, dsn: str
) -> None:
    with pytest.raises(MemoryNotFoundError):
        adapter.update(str(uuid.uuid4()), "x")
    with pytest.raises(MemoryNotFoundError):
        adapter.delete(str(uuid.uuid4()))
    assert events(dsn) == []


@pytest.mark.parametrize("op", ["add", "update", "delete"])
def test_audit_row_and_vector_row_commit_or_roll_back_together(
    adapter: Mem0Adapter, dsn: str, op: str
) -> None:
    [m] = adapter.add("I drink coffee", user_id="alice", infer=False)["results"]
    before_vectors = rows(dsn, "select id::text, payload->>'data' from mem0_memories order by 1")
    before_events = events(dsn)

    def fail(event: str, memory_id: str) -> None:
        raise RuntimeError(f"injected failure between the {event} vector write and its audit")

    assert adapter.vector_store is not None
    adapter.vector_store.before_audit = fail
    with pytest.raises(RuntimeError, match="injected failure"):
        if op == "add":
            adapter.add("I drink tea", user_id="alice", infer=False)
        elif op == "update":
            adapter.update(m["id"], "I drink tea")
        else:
            adapter.delete(m["id"])
    assert rows(dsn, "select id::text, payload->>'data' from mem0_memories order by 1") == (
        before_vectors
    )
    assert events(dsn) == before_events
    adapter.vector_store.before_audit = None
    adapter.add("I drink tea", user_id="alice", infer=False)  # still usable
    assert len(events(dsn)) == len(before_events) + 1


def test_multi_message_add_is_all_or_nothing(adapter: Mem0Adapter, dsn: str) -> None:
    calls = []

    def fail_second(event: str, memory_id: str) -> None:
        calls.append(memory_id)
        if len(calls) == 2:
            raise RuntimeError("second write fails")

    assert adapter.vector_store is not None
    adapter.vector_store.before_audit = fail_second
    msgs = [{"role": "user", "content": "I like jazz"}, {"role": "user", "content": "I like rock"}]
    with pytest.raises(RuntimeError):
        adapter.add(msgs, user_id="alice", infer=False)
    assert rows(dsn, "select count(*) from mem0_memories") == [(0,)]
    assert events(dsn) == []


def test_concurrent_adds_from_threads(adapter: Mem0Adapter, dsn: str) -> None:
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            adapter.add(f"fact number {i} about user", user_id=f"u{i % 3}", infer=False)
            adapter.search(f"fact {i}", filters={"user_id": f"u{i % 3}"})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert rows(dsn, "select count(*) from mem0_memories") == [(16,)]
    assert rows(dsn, f"select count(*), count(distinct op_id) from {S}.memory_events") == [(16, 16)]
    assert rows(dsn, f"select count(*) from {S}.memory_retrievals") == [(16,)]


async def test_every_async_method_works_like_its_sync_twin(adapter: Mem0Adapter, dsn: str) -> None:
    results = await asyncio.gather(
        *(adapter.aadd(f"async fact {i}", user_id="async", infer=False) for i in range(4))
    )
    ids = [r["results"][0]["id"] for r in results]
    await adapter.aupdate(ids[0], "async fact zero")
    await adapter.adelete(ids[1])
    found = await adapter.asearch("async fact zero", filters={"user_id": "async"})
    assert found["results"][0]["id"] == ids[0]
    assert [h["event"] for h in await adapter.ahistory(ids[0])] == ["ADD", "UPDATE"]
    assert (await adapter.aget(ids[1])) is None
    assert len((await adapter.aget_all(filters={"user_id": "async"}))["results"]) == 3
    receipt = await adapter.aerase(memory_ids=[ids[2]])
    assert receipt.memory_ids == [ids[2]]
    assert rows(dsn, f"select count(*) from {S}.memory_events where event = 'ERASE'") == [(1,)]


def test_setup_is_idempotent_and_migrations_are_versioned(
    adapter: Mem0Adapter, dsn: str, tmp_path: Path
) -> None:
    with Mem0Adapter(dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings()) as again:
        again.add("still works", user_id="x", infer=False)
    assert rows(dsn, f"select v from {S}.memory_migrations order by v") == [(0,), (1,), (2,)]
    # the ledger's own migrations table is untouched by ours
    assert rows(dsn, f"select count(*) from {S}.migrations")[0][0] >= 1


def test_async_operations_audit_like_the_sync_ones(adapter: Mem0Adapter, dsn: str) -> None:
    import asyncio

    async def run() -> tuple[str, list[str]]:
        added = await adapter.aadd("I like oat milk", user_id="erin", infer=False)
        memory_id = added["results"][0]["id"]
        await adapter.aupdate(memory_id, "I like soy milk")
        found = await adapter.asearch("milk", filters={"user_id": "erin"})
        await adapter.adelete(memory_id)
        return memory_id, [h["memory"] for h in found["results"]]

    memory_id, found = asyncio.run(run())
    assert found == ["I like soy milk"]
    ops = rows(
        dsn,
        f"select event, new_text from {S}.memory_events where memory_id = %s order by event_id",
        memory_id,
    )
    assert [op for op, _ in ops] == ["ADD", "UPDATE", "DELETE"]
    assert ops[1][1] == "I like soy milk"
    assert rows(dsn, f"select count(*) from {S}.memory_retrievals") == [(1,)]


_SEARCH_THEN_DIE = """
import os, signal, sys
os.environ["MEM0_TELEMETRY"] = "False"
from langgraph_external.memory_adapters import Mem0Adapter
from langgraph_external.memory_adapters.testing import HashingEmbeddings, ScriptedChatModel

dsn, tag, searches = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Mem0Adapter(dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings()) as memory:
    memory.add(f"I like {tag}", user_id=tag, infer=False)
    for i in range(searches):
        query = f"what does {tag} like {i}"
        memory.search(query, filters={"user_id": tag})
        print(query, flush=True)  # the search returned
    os.kill(os.getpid(), signal.SIGKILL)  # at once: no close(), no atexit
"""


def test_a_search_that_returned_has_its_retrieval_row_even_if_the_process_dies_at_once(
    dsn: str, tmp_path: Path
) -> None:
    import random
    import signal
    import subprocess
    import sys

    from tests.graphs import cpu_burner

    script = tmp_path / "search_then_die.py"
    script.write_text(_SEARCH_THEN_DIE)
    rng = random.Random(21)
    returned: list[str] = []
    with cpu_burner():  # both cores busy: a background writer would be far behind
        for trial in range(6):
            tag = f"kill{trial}"
            child = subprocess.run(
                [sys.executable, str(script), dsn, tag, str(rng.randint(1, 4))],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
            returned += child.stdout.split("\n")[:-1]
    assert len(returned) >= 6
    recorded = {q for (q,) in rows(dsn, f"select query from {S}.memory_retrievals")}
    assert [q for q in returned if q not in recorded] == []


def test_a_search_whose_record_cannot_be_written_raises_and_leaves_no_half_row(
    adapter: Mem0Adapter, dsn: str
) -> None:
    from langgraph_external.memory_adapters import MemoryAuditError

    adapter.add("I prefer tea", user_id="alice", infer=False)
    with psycopg.connect(dsn, autocommit=True) as conn:  # the hits table is gone
        conn.execute(f"alter table {S}.memory_retrieval_hits rename to hits_away")
    try:
        with pytest.raises(MemoryAuditError, match="could not be recorded"):
            adapter.search("tea", filters={"user_id": "alice"})
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"alter table {S}.hits_away rename to memory_retrieval_hits")
    assert rows(dsn, f"select count(*) from {S}.memory_retrievals") == [(0,)]
    adapter.search("tea", filters={"user_id": "alice"})  # and it recovers
    assert rows(dsn, f"select count(*) from {S}.memory_retrievals") == [(1,)]


@pytest.mark.parametrize("durable_reads", [False, True])
def test_a_search_leaves_its_pooled_connection_as_durable_as_before(
    dsn: str, tmp_path: Path, llm: ScriptedChatModel, durable_reads: bool
) -> None:
    """The read log's commit mode is the row's own: the memory writes that reuse the
    connection still wait for the WAL flush, in a transaction of their own."""
    with Mem0Adapter(
        dsn, llm=llm, embedder=HashingEmbeddings(), pool_size=1, durable_reads=durable_reads
    ) as ad:
        ad.add("I prefer tea", user_id="alice", infer=False)
        ad.search("tea", filters={"user_id": "alice"})
        with ad.pool.connection() as conn:  # the only one: the search's
            assert conn.autocommit is False
            assert conn.execute("show synchronous_commit").fetchone() == ("on",)
        ad.add("I prefer coffee", user_id="alice", infer=False)
    assert rows(dsn, f"select count(*) from {S}.memory_retrievals") == [(1,)]
    assert rows(dsn, f"select count(*) from {S}.memory_events") == [(2,)]
