"""Record every run of LangGraph's Agent Server (``langgraph dev``, ``langgraph up``, a
deployment) from ``langgraph.json``: the checkpointer and the store the server loads.

The server builds each run's config itself, so ``External.config(...)`` never runs there.
:func:`checkpointer` (the entry the server loads) opens one :class:`External`, configured
by the environment, and attaches the audit callbacks to every run of the server's
process through langchain-core's public configure hook (``register_configure_hook``):
node transitions, tool calls, model calls, retriever hits and resumes are recorded with
no line in the graph module. LangGraph hands its graph lifecycle callbacks (interrupts)
only to the handlers of the run's config: :func:`recorded` (one line in the graph
module) puts the same handler there, and the record then holds ``interrupt`` events too.

``langgraph.json``::

    {"dependencies": ["."],
     "graphs": {"agent": "./agent.py:graph"},
     "checkpointer": {"path": "langgraph_external.agent_server.checkpointer"},
     "store": {"path": "langgraph_external.agent_server.store"}}

``agent.py``::

    from langgraph_external.agent_server import recorded
    graph = recorded(builder.compile())

Environment: ``LGX_DSN`` (unset: an embedded PostgreSQL under the workspace),
``LGX_WORKSPACE`` (default ``./agent_workspace``; not used with ``LGX_SEALING=worker``),
``LGX_SEALING`` (``process``, ``thread`` or ``worker``), ``LGX_KEY`` / ``LGX_KEY_FILE``,
``LGX_SCHEMA``, ``LGX_REDACTION``, ``LGX_POOL_SIZE``. See docs/agent_server.md.

Example:
    >>> audit.handler is None  # no server checkpointer open in this process
    True
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.tracers.context import register_configure_hook
from langgraph.callbacks import GraphCallbackHandler
from langgraph.store.base import BaseStore
from langgraph.store.postgres import AsyncPostgresStore

from langgraph_external.checkpointers import ExternalCheckpointer
from langgraph_external.external import External
from langgraph_external.ledger import schema as ledger
from langgraph_external.options import Options
from langgraph_external.sources.callbacks import USER_ID_KEY, AuditCallbackHandler

__all__ = ["SERVER_RUN_KEYS", "SERVER_USER_KEYS", "audit", "checkpointer", "recorded", "store"]

SERVER_RUN_KEYS = ("run_id", "assistant_id", "graph_id", "run_attempt")
"""Config metadata keys of a server run recorded on its ``run_start`` (``run_metadata``):
LangGraph copies ``run_id``, ``assistant_id`` and ``graph_id`` from the server's
configurable into callback metadata, the server sets ``run_attempt``."""

SERVER_USER_KEYS = (USER_ID_KEY, "user_id", "owner")
"""Config metadata keys naming a server run's user, first present wins. The server merges
the assistant's, the thread's and the run's ``metadata`` into the run's: ``user_id`` set on
the thread or the run, or ``owner``, the key LangGraph's auth handlers conventionally set
on a thread (``configurable.user_id`` is not in callback metadata; the server copies it
into every checkpoint's metadata, which the record holds)."""

G = TypeVar("G")


class ServerAudit(GraphCallbackHandler):
    """The one handler object every server run gets: it hands each callback to the audit
    handler of the :class:`External` the server's checkpointer opened (none open: nothing
    is recorded). Being one object, the configure hook and :func:`recorded` never attach
    it twice to a run."""

    run_inline = True  # the audit handler only enqueues

    def __init__(self) -> None:
        self.handlers: list[AuditCallbackHandler] = []

    @property
    def handler(self) -> AuditCallbackHandler | None:
        """The audit handler callbacks go to (the first server checkpointer still open)."""
        return self.handlers[0] if self.handlers else None

    @property
    def raise_error(self) -> bool:  # type: ignore[override]
        """Raise into the run only when the record is strict (as the audit handler)."""
        h = self.handler
        return h.raise_error if h is not None else False


def _forward(name: str) -> Callable[..., None]:
    def forward(self: ServerAudit, *args: Any, **kwargs: Any) -> None:
        if (h := self.handler) is not None:
            getattr(h, name)(*args, **kwargs)

    forward.__name__, forward.__qualname__ = name, f"ServerAudit.{name}"
    return forward


# the handler's callbacks: the start/end/error family of each kind of run, and the rest
_FAMILIES = ("chain", "tool", "llm", "retriever")
for _name in (
    *(f"on_{kind}_{when}" for kind in _FAMILIES for when in ("start", "end", "error")),
    *("on_chat_model_start", "on_interrupt", "on_resume"),
):
    setattr(ServerAudit, _name, _forward(_name))


audit = ServerAudit()
"""The handler of every run of this process once :func:`checkpointer` is open."""

_hooked: ContextVar[ServerAudit | None] = ContextVar("lgx_agent_server_audit", default=audit)
_hook_registered = False


def recorded(graph: G) -> G:
    """``graph`` with the audit handler in its config, so LangGraph hands it the graph
    lifecycle callbacks too (``interrupt`` events); the one line a graph module adds.

    Example:
        >>> from langgraph.graph import StateGraph, START, MessagesState
        >>> b = StateGraph(MessagesState)
        >>> _ = b.add_node("a", lambda s: {}); _ = b.add_edge(START, "a")
        >>> recorded(b.compile()).config["callbacks"] == [audit]
        True
    """
    return graph.with_config(callbacks=[audit])  # type: ignore[attr-defined]


@dataclass
class _Session:
    ext: External
    handler: AuditCallbackHandler
    users: int = 0


# per event loop: the server enters its checkpointer once per loop (its pools are the loop's)
_sessions: dict[int, _Session] = {}
_locks: dict[int, asyncio.Lock] = {}


def external_from_env() -> External:
    """The :class:`External` the environment describes (see the module docstring).

    Example:
        >>> from unittest import mock
        >>> env = {"LGX_SEALING": "worker", "LGX_DSN": "postgresql://db/app"}
        >>> with mock.patch.dict(os.environ, env):
        ...     external_from_env().workspace is None  # the workers mirror
        True
    """
    sealing = os.environ.get("LGX_SEALING") or None
    workspace = os.environ.get("LGX_WORKSPACE") or "./agent_workspace"
    return External(
        workspace=None if sealing == "worker" else workspace,  # the workers mirror
        redaction=os.environ.get("LGX_REDACTION") or "standard",
        sealing=sealing,
        options=Options(
            schema=os.environ.get("LGX_SCHEMA") or ledger.DEFAULT_SCHEMA,
            pool_size=int(os.environ.get("LGX_POOL_SIZE") or 8),
        ),
    )


@asynccontextmanager
async def _session() -> AsyncIterator[External]:
    """The process's :class:`External` on this event loop, opened by its first user
    (the checkpointer or the store) and closed by its last (the server's shutdown)."""
    global _hook_registered
    key = id(asyncio.get_running_loop())
    lock = _locks.setdefault(key, asyncio.Lock())
    async with lock:
        session = _sessions.get(key)
        if session is None:
            ext = await external_from_env().asetup()
            assert ext.pipeline is not None
            handler = AuditCallbackHandler(
                ext.pipeline,
                checkpointed=ext.checkpointer.checkpointed,
                user_keys=SERVER_USER_KEYS,
                run_keys=SERVER_RUN_KEYS,
            )
            session = _sessions[key] = _Session(ext, handler)
            audit.handlers.append(handler)
            if not _hook_registered:
                register_configure_hook(_hooked, inheritable=True)
                _hook_registered = True
        session.users += 1
    try:
        yield session.ext
    finally:
        async with lock:
            session.users -= 1
            if session.users == 0:
                del _sessions[key]
                audit.handlers.remove(session.handler)
                await session.ext.aclose()


@asynccontextmanager
async def checkpointer() -> AsyncIterator[ExternalCheckpointer]:
    """The checkpointer of ``langgraph.json``
    (``"checkpointer": {"path": "langgraph_external.agent_server.checkpointer"}``):
    the recording checkpointer over the official async Postgres saver, and the audit
    callbacks on every run of the server while it is open."""
    async with _session() as ext:
        yield ext.checkpointer


@asynccontextmanager
async def store() -> AsyncIterator[BaseStore]:
    """The long-term memory store of ``langgraph.json``
    (``"store": {"path": "langgraph_external.agent_server.store"}``): LangGraph's async
    Postgres store on the ledger's database, every operation recorded."""
    async with _session() as ext:
        assert ext.dsn is not None
        async with AsyncPostgresStore.from_conn_string(ext.dsn) as inner:
            await inner.setup()
            yield ext.store(inner)
