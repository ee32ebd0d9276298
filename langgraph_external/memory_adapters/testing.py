"""Offline stand-ins for Mem0's models: a scripted chat model and a hashing embedder.

Mem0 needs an LLM (to extract memories when ``infer=True``) and an embedder. Neither can
run offline, and LangChain's ``DeterministicFakeEmbedding`` returns unrelated random
vectors per text, so Mem0's search (threshold 0.1) never finds anything with it.
:class:`HashingEmbeddings` is a hashed bag of words: texts that share words are similar,
so search behaves like search. :class:`ScriptedChatModel` answers from a list and keeps
the prompts it saw.

Example:
    >>> emb = HashingEmbeddings(dims=64)
    >>> tea, tea2, car = (emb.embed_query(t) for t in ("likes green tea", "green tea", "red car"))
    >>> cosine(tea, tea2) > 0.5 > cosine(tea, car)
    True
    >>> llm = ScriptedChatModel(responses=['{"memory": []}'])
    >>> llm.invoke("hi").content
    '{"memory": []}'
    >>> len(llm.prompts)
    1
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

__all__ = ["HashingEmbeddings", "ScriptedChatModel", "cosine", "extraction_answer"]

_WORD = re.compile(r"[a-z0-9]+")


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a)) or 1.0
    nb = math.sqrt(sum(y * y for y in b)) or 1.0
    return dot / (na * nb)


class HashingEmbeddings(Embeddings):
    """Deterministic bag-of-words embeddings: each word adds ±1 at a hashed position.

    Words are lower-cased and a trailing ``s`` is dropped, so "seats" matches "seat".
    """

    def __init__(self, dims: int = 256) -> None:
        self.dims = dims

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * self.dims
        for word in _WORD.findall(text.lower()):
            if len(word) > 3 and word.endswith("s"):
                word = word[:-1]
            h = hashlib.sha256(word.encode()).digest()
            vec[int.from_bytes(h[:8], "big") % self.dims] += 1.0 if h[8] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec))
        return [x / norm for x in vec] if norm else [1.0 / math.sqrt(self.dims)] * self.dims

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text."""
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed one text."""
        return self._embed(text)


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers with ``responses`` in order and records every prompt.

    When the script runs out it answers ``default``. Thread-safe.
    """

    responses: list[str] = Field(default_factory=list)
    default: str = '{"memory": []}'
    prompts: list[list[dict[str, Any]]] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        del run_manager  # LangChain's signature: this model reports nothing of its own
        with self._lock:
            self.prompts.append([{"role": m.type, "content": m.content} for m in messages])
            answer = self.responses.pop(0) if self.responses else self.default
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])


def extraction_answer(*texts: str, attributed_to: str = "user") -> str:
    """The JSON Mem0 2.2 expects from its extraction call (``infer=True``), for ``texts``.

    Example:
        >>> json.loads(extraction_answer("Likes tea"))["memory"][0]["text"]
        'Likes tea'
    """
    memory = [
        {"id": str(i), "text": t, "attributed_to": attributed_to} for i, t in enumerate(texts)
    ]
    return json.dumps({"memory": memory})
