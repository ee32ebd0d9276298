#!/usr/bin/env python
"""A chat agent that remembers user preferences across threads, audited in Postgres.

Runs offline: a scripted chat model stands in for Mem0's LLM and a hashing embedder for
the embedding model (swap in real ones, e.g. ``ChatOpenAI`` / ``OpenAIEmbeddings``).
``dsn=None`` starts the embedded PostgreSQL (with pgvector) under the workspace.

    .venv/bin/python examples/memory_agent.py [--workspace ./memory_ws] [--dsn ...]

At the end it prints the SQL a compliance reviewer would run, with its results.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, TypedDict

os.environ["MEM0_TELEMETRY"] = "False"

from langgraph.graph import END, START, StateGraph

from langgraph_external import External
from langgraph_external.memory_adapters import Mem0Adapter
from langgraph_external.memory_adapters.testing import (
    HashingEmbeddings,
    ScriptedChatModel,
    extraction_answer,
)


class Chat(TypedDict):
    user_id: str
    message: str
    reply: str


REVIEW_SQL = {
    "Why does the agent believe this? (full history of each memory)": """
        select memory_id, event, old_text, new_text, actor, reason, thread_id, node, created_at
        from langgraph_external.memory_history order by memory_id, event_id""",
    "Who wrote it? (memories created per node and thread)": """
        select memory, thread_id, node, step, run_id from langgraph_external.memory_created_by
        where user_id = 'alice'""",
    "Which runs used it, with what score?": """
        select m.new_text as memory, r.thread_id, r.node, r.score, r.rank, r.read_at
        from langgraph_external.memory_reads r
        join langgraph_external.memory_audit m on m.memory_id = r.memory_id and m.event = 'ADD'
        order by r.read_at""",
    "What did the agent know about alice yesterday vs now?": """
        select memory from langgraph_external.memories_as_of('alice', now())""",
    "Prove it is gone (erasure receipts)": """
        select erasure_id, erased_by, subject_kind, cardinality(memory_ids) as memories,
               row_counts, receipt_hash from langgraph_external.memory_erasures""",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="./memory_ws")
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()

    llm = ScriptedChatModel()
    with External(dsn=args.dsn, workspace=args.workspace) as ext:
        memory = Mem0Adapter.from_external(
            ext, llm=llm, embedder=HashingEmbeddings(), actor="memory-agent"
        )

        def remember(state: Chat) -> dict[str, Any]:
            # the scripted LLM plays Mem0's extractor: it answers with the facts to keep
            if "window" in state["message"]:
                llm.responses.append(extraction_answer("Prefers window seats"))
            elif "vegetarian" in state["message"]:
                llm.responses.append(extraction_answer("Is vegetarian"))
            memory.add(state["message"], user_id=state["user_id"], reason="chat turn")
            return {}

        def answer(state: Chat) -> dict[str, Any]:
            hits = memory.search(state["message"], filters={"user_id": state["user_id"]})
            known = "; ".join(h["memory"] for h in hits["results"]) or "nothing yet"
            return {"reply": f"(I remember: {known})"}

        b = StateGraph(Chat)
        b.add_node("remember", remember)
        b.add_node("answer", answer)
        b.add_edge(START, "remember")
        b.add_edge("remember", "answer")
        b.add_edge("answer", END)
        graph = b.compile(checkpointer=ext.checkpointer)

        turns = [
            ("monday", "I always want a window seat"),
            ("tuesday", "By the way, I'm vegetarian"),
            ("friday", "Book me a flight with a meal: seat and food preferences?"),
        ]
        for thread, text in turns:
            out = graph.invoke(
                {"user_id": "alice", "message": text, "reply": ""}, ext.config(thread)
            )
            print(f"[{thread}] alice: {text}\n[{thread}] agent: {out['reply']}")

        receipt = memory.erase(user_id="bob-who-asked", erased_by="dpo")  # nothing to erase
        memory.verify_erasure(receipt.erasure_id)
        ext.flush()

        import psycopg

        assert ext.dsn is not None
        with psycopg.connect(ext.dsn) as conn:
            for title, query in REVIEW_SQL.items():
                print(f"\n-- {title}\n{query.strip()}")
                for row in conn.execute(query).fetchall():  # type: ignore[call-overload]
                    print("   ", row)
        memory.close()


if __name__ == "__main__":
    main()
