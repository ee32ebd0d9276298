"""Every use of a Mem0 internal, in one place.

Mem0 has no hooks for where it keeps its data (see ``FACTS.md``). The adapter fills its
seams: it builds a ``Memory`` and then replaces its vector store, its SQLite history
(``memory.db``) and its lazily built entity store (``memory._entity_store``); it runs
``PGVector``'s statements inside the adapter's transactions (``PGVector._get_cursor``),
tells a store that its table exists (``PGVector._collection_ensured``), reads the session
scopes Mem0 builds (``_build_session_scope``) and turns Mem0's telemetry off in the
modules that read ``MEM0_TELEMETRY``. Each such use lives here, with the version it was
checked against; ``tests/test_compat.py`` fails loudly when one of them moves.

``mem0`` itself is imported only inside these functions, on first use: importing it takes
about a second, reads ``MEM0_TELEMETRY``/``MEM0_DIR`` once and writes a file, so it must
come after :func:`import_mem0` set them, and never on ``import langgraph_external``.

Checked against (``CHECKED_AGAINST``): mem0ai 2.2.1.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from psycopg_pool import ConnectionPool

CHECKED_AGAINST = {"mem0ai": "2.2.1"}

JoinedCursor = Callable[[], AbstractContextManager[Any] | None]
"""Gives the cursor a store's statement should run on (inside a transaction the caller
holds), or ``None`` to let Mem0 take a connection from the store's pool."""


def import_mem0(mem0_dir: str | os.PathLike[str] | None = None) -> Any:
    """Import ``mem0`` with telemetry forced off and its files under ``mem0_dir``.

    Mem0 reads ``MEM0_TELEMETRY`` and ``MEM0_DIR`` once, at import (it writes
    ``config.json`` there). The first import decides; later calls only re-assert that
    telemetry is off (in ``mem0.memory.telemetry`` and in ``mem0.memory.main``, which
    copied the flag at its own import).

    Example:
        >>> import_mem0().Memory.__name__                   # doctest: +SKIP
        'Memory'
    """
    os.environ["MEM0_TELEMETRY"] = "False"
    if "mem0" not in sys.modules:
        if mem0_dir is None and "MEM0_DIR" not in os.environ:
            mem0_dir = Path(os.path.expanduser("~")) / ".cache" / "langgraph-external" / "mem0"
        if mem0_dir is not None:
            Path(mem0_dir).mkdir(parents=True, exist_ok=True)
            os.environ["MEM0_DIR"] = str(mem0_dir)
    # lazy: mem0 takes about a second to import and reads the environment set above
    import mem0
    import mem0.memory.main as mem0_main
    import mem0.memory.telemetry as mem0_telemetry

    mem0_telemetry.MEM0_TELEMETRY = False  # in case mem0 was imported before us
    mem0_main.MEM0_TELEMETRY = False
    return mem0


@functools.cache
def _joining_pgvector() -> type:
    """Mem0's ``PGVector``, running its statements on the cursor its owner gives."""
    from mem0.vector_stores.pgvector import PGVector  # lazy: after import_mem0 (see above)

    class JoiningPGVector(PGVector):
        """``PGVector`` whose cursors join the caller's transaction when there is one."""

        joined_cursor: JoinedCursor

        @contextmanager
        def _get_cursor(self, commit: bool = False) -> Iterator[Any]:
            joined = self.joined_cursor()
            if joined is None:
                with super()._get_cursor(commit) as cur:
                    yield cur
            else:
                with joined as cur:
                    yield cur

        def __del__(self) -> None:  # the pool belongs to the adapter, not to Mem0
            pass

    return JoiningPGVector


def new_pgvector(
    pool: ConnectionPool[Any], collection: str, dims: int, joined_cursor: JoinedCursor
) -> Any:
    """A Mem0 ``PGVector`` (HNSW index, Mem0's table layout) over ``pool``.

    Every statement it runs asks ``joined_cursor`` first: the cursor it returns (a
    savepoint of an operation, the connection of a migration) is used as it is; ``None``
    lets the store take a connection from ``pool`` and commit, as Mem0 does. Collecting
    the store leaves ``pool`` open.
    """
    store = _joining_pgvector()(
        dbname=None,
        collection_name=collection,
        embedding_model_dims=dims,
        user=None,
        password=None,
        host=None,
        port=None,
        diskann=False,
        hnsw=True,
        connection_pool=pool,
    )
    store.joined_cursor = joined_cursor
    return store


def mark_collection_ensured(store: Any) -> None:
    """Tell a ``PGVector`` its table exists, so it does not list tables before each use.

    The adapter creates the tables in its own migration, under its advisory lock.
    """
    store._collection_ensured = True


def build_memory(
    dsn: str,
    *,
    collection: str,
    dims: int,
    llm: Any,
    embedder: Any,
    vector_store: Any,
    history: Any,
    entity_store: Any,
) -> Any:
    """A ``mem0.Memory`` using LangChain models and *our* stores.

    Mem0 builds its own ``PGVector`` and SQLite history in ``__init__``. It gets a pool
    that never opens (its ``PGVector`` closes its pool when collected) and an in-memory
    SQLite (no file); both are replaced right after by ``vector_store`` and ``history``
    (any object with the methods of Mem0's ``SQLiteManager``), and the entity store Mem0
    would build on first use by ``entity_store``.
    """
    mem0 = import_mem0()
    throwaway: ConnectionPool[Any] = ConnectionPool(dsn, min_size=0, max_size=1, open=False)
    config = {
        "vector_store": {
            "provider": "pgvector",
            "config": {
                "connection_pool": throwaway,
                "collection_name": collection,
                "embedding_model_dims": dims,
            },
        },
        "llm": {"provider": "langchain", "config": {"model": llm}},
        "embedder": {
            "provider": "langchain",
            "config": {"model": embedder, "embedding_dims": dims},
        },
        "history_db_path": ":memory:",
    }
    memory = mem0.Memory.from_config(config)
    memory.db.close()
    memory.db = history
    memory.vector_store = vector_store
    memory._entity_store = entity_store
    return memory


def parse_session_scope(scope: str) -> dict[str, str]:
    """Invert Mem0's ``_build_session_scope`` (``key=value&...``, ``%``-escaped).

    Mem0 keys the messages it keeps for extraction by that string; the adapter stores
    them by scope (user, agent, run) so that an erasure finds them.

    Example:
        >>> parse_session_scope("agent_id=a1&user_id=alice%26bob")
        {'agent_id': 'a1', 'user_id': 'alice&bob'}
    """
    out: dict[str, str] = {}
    for part in scope.split("&") if scope else []:
        key, _, value = part.partition("=")
        out[key] = value.replace("%3D", "=").replace("%26", "&").replace("%25", "%")
    return out
