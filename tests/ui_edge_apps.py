"""Apps recorded for the UI's rough edges (tests/test_ui_edges.py).

:func:`failing_app`: a ``recall`` node searches a LangGraph store (one search with a query,
whose hits have scores, one without, whose hits have none), an ``agent`` node asks a chat
model that names its model only in its answer (``response_metadata["model_name"]``, as
hosted models do), and a ``fetch`` node raises. :func:`approval_app`: a node that waits
for a human (``interrupt()``), then acts on the answer.
"""

from __future__ import annotations

import hashlib
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.config import get_store
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import interrupt

RESPONSE_MODEL = "gpt-4o-mini-2024-07-18"
SECRET = "sk-proj-4f9QeA2b7XcD1eF0gH3iJ5kL"
FAILURE = f"upstream answered 503 for order A-1 (key {SECRET})"
NOTES = {
    "refunds": "Refunds take five working days.",
    "shipping": "Orders ship from Lyon within two days.",
}
PREFERENCE = {"language": "fr", "channel": "email"}


class WordEmbeddings(Embeddings):
    """A deterministic bag of hashed words (similar texts have similar vectors)."""

    dims = 32

    def _one(self, text: str) -> list[float]:
        v = [0.0] * self.dims
        for w in text.lower().split():
            v[int(hashlib.sha256(w.encode()).hexdigest(), 16) % self.dims] += 1.0
        return v

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def notes_store() -> InMemoryStore:
    """A store with two notes (searched by meaning) and a user's preferences."""
    store = InMemoryStore(index={"dims": WordEmbeddings.dims, "embed": WordEmbeddings()})
    for key, text in NOTES.items():
        store.put(("notes",), key, {"text": text})
    store.put(("prefs", "alice"), "contact", PREFERENCE, index=False)
    return store


def failing_app(checkpointer: Any, store: Any) -> Any:
    """recall (store searches) → agent (a model named only in its answer) → fetch (raises)."""
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    "Let me fetch the order.",
                    response_metadata={"model_name": RESPONSE_MODEL},
                    usage_metadata={"input_tokens": 20, "output_tokens": 6, "total_tokens": 26},
                )
            ]
        )
    )

    def recall(state: MessagesState) -> dict[str, Any]:
        s = get_store()
        s.search(("notes",), query="how long do refunds take", limit=1)
        s.search(("prefs",))
        return {}

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def fetch(state: MessagesState) -> dict[str, Any]:
        raise RuntimeError(FAILURE)

    g = StateGraph(MessagesState)
    g.add_node("recall", recall)
    g.add_node("agent", agent)
    g.add_node("fetch", fetch)
    g.add_edge(START, "recall")
    g.add_edge("recall", "agent")
    g.add_edge("agent", "fetch")
    g.add_edge("fetch", END)
    return g.compile(checkpointer=checkpointer, store=store)


def approval_app(checkpointer: Any) -> Any:
    """plan → ask (waits for a human's answer) → act."""

    def plan(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("I will refund order A-1.")]}

    def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("approve the refund?")
        return {"messages": [HumanMessage(f"approved: {answer}")]}

    def act(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("Refunded.")]}

    g = StateGraph(MessagesState)
    g.add_node("plan", plan)
    g.add_node("ask", ask)
    g.add_node("act", act)
    g.add_edge(START, "plan")
    g.add_edge("plan", "ask")
    g.add_edge("ask", "act")
    g.add_edge("act", END)
    return g.compile(checkpointer=checkpointer)
