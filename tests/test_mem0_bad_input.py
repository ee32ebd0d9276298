"""Mem0 adapter: bad input gets a clear typed error and leaves nothing half-written."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_external.memory_adapters import (
    EmbeddingDimensionError,
    Mem0Adapter,
    MemoryScopeError,
    MemoryTooLargeError,
    PgVectorUnavailableError,
)
from langgraph_external.memory_adapters.testing import (
    HashingEmbeddings,
    ScriptedChatModel,
    extraction_answer,
)

S = "langgraph_external"


def count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"select count(*) from {table}").fetchone()
        return int(row[0]) if row else 0


@pytest.fixture
def llm() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def adapter(dsn: str, llm: ScriptedChatModel) -> Iterator[Mem0Adapter]:
    with Mem0Adapter(dsn, llm=llm, embedder=HashingEmbeddings(), max_memory_chars=100) as ad:
        yield ad


def test_an_embedder_of_the_wrong_dimensions_is_refused_before_writing(dsn: str) -> None:
    # configured for 256 dimensions, but the embedder returns 32
    with Mem0Adapter(
        dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings(32), embedding_dims=256
    ) as ad:
        with pytest.raises(EmbeddingDimensionError, match=r"32 dimensions .* vector\(256\)"):
            ad.add("I like tea", user_id="u", infer=False)
        with pytest.raises(EmbeddingDimensionError):
            ad.search("tea", filters={"user_id": "u"})
    assert count(dsn, "mem0_memories") == 0
    assert count(dsn, f"{S}.memory_events") == 0


def test_existing_collection_with_other_dimensions_is_refused_at_setup(dsn: str) -> None:
    with Mem0Adapter(dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings()) as ad:
        ad.add("I like tea", user_id="u", infer=False)
    other = Mem0Adapter(dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings(32))
    with pytest.raises(EmbeddingDimensionError, match=r"vector\(256\).*embedding_dims=32"):
        other.setup()
    assert count(dsn, "mem0_memories") == 1


def test_an_oversized_memory_is_refused_and_nothing_is_written(
    adapter: Mem0Adapter, llm: ScriptedChatModel, dsn: str
) -> None:
    big = "x" * 101
    with pytest.raises(MemoryTooLargeError, match="101 characters"):
        adapter.add(
            [{"role": "user", "content": "ok"}, {"role": "user", "content": big}],
            user_id="u",
            infer=False,
        )
    # extracted by the LLM: Mem0 swallows store errors; the adapter re-raises, rolls back
    llm.responses.append(extraction_answer("fine memory", big))
    with pytest.raises(MemoryTooLargeError):
        adapter.add("long story", user_id="u", infer=True)
    [m] = adapter.add("short", user_id="u", infer=False)["results"]
    with pytest.raises(MemoryTooLargeError):
        adapter.update(m["id"], big)
    assert adapter.get(m["id"])["memory"] == "short"
    assert count(dsn, "mem0_memories") == 1
    assert count(dsn, f"{S}.memory_events") == 1
    assert count(dsn, f"{S}.memory_messages") == 0


def test_operations_without_a_scope_id_are_refused_and_record_nothing(
    adapter: Mem0Adapter, dsn: str
) -> None:
    with pytest.raises(MemoryScopeError):
        adapter.add("I like tea", infer=False)
    with pytest.raises(MemoryScopeError):
        adapter.search("tea", filters={"category": "drinks"})
    with pytest.raises(MemoryScopeError):
        adapter.search("tea")
    with pytest.raises(MemoryScopeError):
        adapter.get_all(filters={"user_id": "  "})
    with pytest.raises(MemoryScopeError):
        adapter.erase()
    with pytest.raises(MemoryScopeError):
        adapter.erase(user_id="u", memory_ids=[str(uuid.uuid4())])
    with pytest.raises(MemoryScopeError):
        adapter.erase(memory_ids=["not-a-uuid"])
    assert count(dsn, f"{S}.memory_retrievals") == 0
    assert count(dsn, f"{S}.memory_events") == 0
    assert count(dsn, f"{S}.memory_erasures") == 0


@pytest.fixture
def unprivileged_dsn(dsn: str) -> Iterator[str]:
    """A login role that owns nothing and is not superuser, allowed to create tables.

    pgvector's control file is not ``trusted``, so only a superuser may run
    ``CREATE EXTENSION vector``: the situation of an app role on a managed server where
    pgvector was never enabled. (The other real case, a server without pgvector at all,
    is Debian's PostgreSQL 15 here, which cannot be started as root in this sandbox.)
    """
    role = f"lgx_app_{uuid.uuid4().hex[:8]}"
    params = conninfo_to_dict(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'create role "{role}" login')
        conn.execute(f'grant connect, create on database "{params["dbname"]}" to "{role}"')
        conn.execute(f'grant create, usage on schema public to "{role}"')
    try:
        yield make_conninfo(**{**params, "user": role})
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'drop owned by "{role}"')
        server: dict[str, Any] = {**params, "dbname": "postgres"}
        with psycopg.connect(make_conninfo(**server), autocommit=True) as conn:
            conn.execute(f'revoke all on database "{params["dbname"]}" from "{role}"')
            conn.execute(f'drop role "{role}"')


def test_setup_without_pgvector_rights_explains_and_creates_nothing(
    unprivileged_dsn: str, dsn: str
) -> None:
    ad = Mem0Adapter(unprivileged_dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings())
    with pytest.raises(PgVectorUnavailableError, match="CREATE EXTENSION vector") as info:
        ad.setup()
    assert "may not create it" in str(info.value)
    with psycopg.connect(dsn) as conn:
        assert (
            conn.execute("select 1 from pg_extension where extname = 'vector'").fetchone() is None
        )
        assert (
            conn.execute(
                "select 1 from pg_namespace where nspname = 'langgraph_external'"
            ).fetchone()
            is None
        )
        assert conn.execute("select to_regclass('public.mem0_memories')").fetchone() == (None,)
    # a superuser enables it once; then the unprivileged role works
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create extension vector")
    with Mem0Adapter(unprivileged_dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings()) as ok:
        ok.add("I like tea", user_id="u", infer=False)


def test_create_extension_false_reports_instead_of_creating(dsn: str) -> None:
    ad = Mem0Adapter(
        dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings(), create_extension=False
    )
    with pytest.raises(PgVectorUnavailableError, match="not enabled"):
        ad.setup()


def test_mem0_files_go_under_the_workspace_when_first_imported(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import os; os.environ.pop('MEM0_DIR', None)\n"
        "from langgraph_external.memory_adapters import import_mem0\n"
        f"import_mem0({str(tmp_path / 'ws' / '.mem0')!r})\n"
        "print(os.environ['MEM0_TELEMETRY'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"
    assert (tmp_path / "ws" / ".mem0" / "config.json").exists()
