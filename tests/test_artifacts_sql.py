"""Large payload values in SQL: what the offload step moved to an artifact is readable
with plain SQL (``artifact_text``), and goes with the thread when it is deleted."""

from __future__ import annotations

from pathlib import Path

import psycopg
from langchain_core.messages import HumanMessage

from langgraph_external import External
from langgraph_external.options import Options
from langgraph_external.record.artifacts import artifact_digests
from langgraph_external.record.escapes import escape_text
from tests.graphs import react_agent

# ~16 KB: over the threshold below; a NUL, which PostgreSQL text cannot hold
QUESTION = "where is my order?\x00 " + "details " * 2_000


def test_an_offloaded_value_reads_back_whole_in_sql_and_goes_with_its_thread(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, offload_threshold=4096),
    ) as ext:
        react_agent(ext.checkpointer).invoke(
            {"messages": [HumanMessage(QUESTION)]}, ext.config("big")
        )
        assert ext.flush()
        offloaded = [e for e in ext.events("big") if artifact_digests(e["payload"])]
        assert offloaded, "nothing was offloaded"
        with psycopg.connect(dsn) as conn:
            # the documented recipe (docs/sql.md): every model call's messages, whole
            rows = conn.execute(
                """
                select m -> 'content' as ref,
                       langgraph_external.artifact_text(e.thread_id, m -> 'content') as text
                from langgraph_external.events e,
                     jsonb_array_elements(e.payload -> 'messages') m
                where e.thread_id = 'big' and e.kind = 'llm_start'
                  and jsonb_typeof(m -> 'content') = 'object'
                """
            ).fetchall()
            recorded = escape_text(QUESTION)  # escaped, as inline text is, and marked
            assert rows and all(text == recorded for _ref, text in rows)
            assert all(ref["as"] == "text" for ref, _text in rows)
            assert all(ref["$escaped"]["head"] == recorded[:2000] for ref, _text in rows)
            stored = conn.execute(
                "select count(*) from langgraph_external.artifacts where thread_id = 'big'"
            ).fetchone()
            assert stored is not None and stored[0] >= 1
        ext.checkpointer.delete_thread("big")
        assert ext.flush()
        with psycopg.connect(dsn) as conn:
            left = conn.execute(
                "select count(*) from langgraph_external.artifacts where thread_id = 'big'"
            ).fetchone()
        assert left == (0,)  # a deleted thread's large values go with it
