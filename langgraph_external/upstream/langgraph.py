"""Every use of an upstream internal, in one place.

LangGraph, its official Postgres saver and Mem0 expose no public hook for what the record
needs: running the ledger's statements inside the saver's own transaction, reading the
Send packets a checkpoint carries, or swapping the saver's per-instance lock. Each such
use lives here, with the version it was checked against; ``tests/test_compat.py`` fails
loudly when one of them moves, so an upgrade is one file to read.

Checked against (``CHECKED_AGAINST``): langgraph 1.2.24, langgraph-checkpoint 4.3.2,
langgraph-checkpoint-postgres 3.2.0 (the record); langgraph-prebuilt 1.1.3 and
langchain-core 1.8.3 (the transition guard); opentelemetry-semantic-conventions 0.66b2
(the GenAI attribute names of the OTLP export, last section).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Protocol

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable as RunnableCallable
from langgraph._internal._runnable import coerce_to_runnable as coerce_to_runnable
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver, _ainternal, _internal
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.errors import ParentCommand as ParentCommand
from langgraph.graph._branch import BranchSpec as BranchSpec
from psycopg.types.json import Jsonb

CHECKED_AGAINST = {
    "langgraph": "1.2.24",
    "langgraph-checkpoint": "4.3.2",
    "langgraph-checkpoint-postgres": "3.2.0",
    "langgraph-prebuilt": "1.1.3",
    "langchain-core": "1.8.3",
    "opentelemetry-semantic-conventions": "0.66b2",
}

# -- LangGraph's reserved channel and task-path names (langgraph._internal._constants) ----
try:  # the names are stable strings; importing them proves they still exist
    from langgraph._internal._constants import INTERRUPT, PULL, PUSH, TASKS
except ImportError:  # pragma: no cover - moved upstream: the values are still known
    TASKS, PULL, PUSH = "__pregel_tasks", "__pregel_pull", "__pregel_push"
    INTERRUPT = "__interrupt__"

SEEN_NOT_A_NODE = frozenset({INTERRUPT})
"""``versions_seen`` keys that are the loop's bookkeeping, not a node: on every resume
(``Command(resume=...)``, a run from an older checkpoint) LangGraph records there the
versions it has seen, and no task ran for it."""

TASK_PATH_PULL = "~" + PULL
"""First element of a task path for a node triggered by its channels."""
TASK_PATH_PUSH = "~" + PUSH
"""First element of a task path for a ``Send`` (push) task; the second is its index."""


def send_targets(channel_values: dict[str, Any]) -> list[str | None]:
    """Target node of each ``Send`` packet a checkpoint carries, by push index.

    LangGraph keeps the Sends a step issued in the ``__pregel_tasks`` channel of the
    checkpoint that step produced; the next step runs them as push tasks.

    Example:
        >>> from langgraph.types import Send
        >>> send_targets({TASKS: [Send("a", 1), Send("b", 2)]})
        ['a', 'b']
    """
    packets = channel_values.get(TASKS) or ()
    return [getattr(p, "node", None) for p in packets]


# -- the official Postgres saver -------------------------------------------------------
def is_postgres_saver(saver: BaseCheckpointSaver[Any]) -> bool:
    """Whether ``saver`` stores in the official Postgres tables (sync or async saver)."""
    return isinstance(saver, (PostgresSaver, AsyncPostgresSaver))


def is_async_postgres_saver(saver: BaseCheckpointSaver[Any]) -> bool:
    """Whether ``saver`` is the official async Postgres saver."""
    return isinstance(saver, AsyncPostgresSaver)


def replace_lock(saver: BaseCheckpointSaver[Any], lock: Any) -> None:
    """Swap the official saver's per-instance lock (it serializes a whole pool)."""
    saver.lock = lock  # type: ignore[attr-defined]


class Outbox(Protocol):
    """The statement to run inside the next transactional cursor the saver opens.

    The checkpointer sets one around ``inner.put`` (a
    :class:`~langgraph_external.sources.captured_put.CapturedPut`); the saver's
    ``_cursor(pipeline=True)`` runs its own statements, then this one (:meth:`run`),
    before the pipeline's Sync (or the transaction's commit): both commit together or
    not at all. ``ran`` tells the caller afterwards whether it ran.
    """

    ran: bool

    def run(self, cur: Any) -> None:
        """Queue the statement on ``cur``."""

    async def arun(self, cur: Any) -> None:
        """Async twin of :meth:`run`."""


OUTBOX: contextvars.ContextVar[Outbox | None] = contextvars.ContextVar("lgx_outbox", default=None)

ABORT_SQL = (
    "do $$ begin raise exception using errcode = 'LX002', message = "
    "'langgraph-external could not record this write; nothing was stored'; end $$"
)
"""Fails the saver's implicit transaction when building the record failed in Python."""


def install_outbox(saver: BaseCheckpointSaver[Any]) -> bool:
    """Make the official saver run the current :data:`OUTBOX` inside its transactions.

    Wraps the instance's ``_cursor`` (checked: ``put`` opens ``_cursor(pipeline=True)``
    and runs its statements there; on an autocommit connection everything before the
    pipeline's Sync is one implicit transaction). Returns ``False`` for other savers.
    """
    if not is_postgres_saver(saver):
        return False
    if getattr(saver, "_lgx_outbox", False):
        return True
    original = saver._cursor  # type: ignore[attr-defined]
    if is_async_postgres_saver(saver):

        @asynccontextmanager
        async def acursor(*, pipeline: bool = False) -> AsyncIterator[Any]:
            async with original(pipeline=pipeline) as cur:
                yield cur
                box = OUTBOX.get()
                if pipeline and box is not None and not box.ran:
                    box.ran = True
                    try:
                        await box.arun(cur)
                    except BaseException:
                        await cur.execute(ABORT_SQL)
                        raise

        saver._cursor = acursor  # type: ignore[attr-defined]
    else:

        @contextmanager
        def cursor(*, pipeline: bool = False) -> Iterator[Any]:
            with original(pipeline=pipeline) as cur:
                yield cur
                box = OUTBOX.get()
                if pipeline and box is not None and not box.ran:
                    box.ran = True
                    try:
                        box.run(cur)
                    except BaseException:
                        cur.execute(ABORT_SQL)
                        raise

        saver._cursor = cursor  # type: ignore[attr-defined]
    saver._lgx_outbox = True  # type: ignore[attr-defined]
    return True


def saver_database_identity(saver: BaseCheckpointSaver[Any]) -> tuple[str, str] | None:
    """``(system identifier, database)`` the sync official saver writes to, else ``None``."""
    if not is_postgres_saver(saver) or is_async_postgres_saver(saver):
        return None
    # under the saver's lock: a saver on one connection serializes every use of it
    with saver.lock, _internal.get_connection(saver.conn) as conn:  # type: ignore[attr-defined]
        return _identity(conn.execute(IDENTITY_SQL).fetchone())


async def asaver_database_identity(saver: BaseCheckpointSaver[Any]) -> tuple[str, str] | None:
    """Async twin of :func:`saver_database_identity` for the official async saver."""
    if not is_async_postgres_saver(saver):
        return None
    async with saver.lock, _ainternal.get_connection(saver.conn) as conn:  # type: ignore[attr-defined]
        cur = await conn.execute(IDENTITY_SQL)
        return _identity(await cur.fetchone())


def dsn_database_identity(dsn: str) -> tuple[str, str]:
    """``(system identifier, database)`` of the database ``dsn`` connects to."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        return _identity(conn.execute(IDENTITY_SQL).fetchone())


def same_database(saver: BaseCheckpointSaver[Any], dsn: str) -> bool:
    """Whether the official sync saver writes to the database of ``dsn`` (``False`` when
    it is another saver, or either cannot be asked)."""
    try:
        mine = saver_database_identity(saver)
        return mine is not None and mine == dsn_database_identity(dsn)
    except Exception:
        return False


async def asame_database(saver: BaseCheckpointSaver[Any], dsn: str) -> bool:
    """Async twin of :func:`same_database` (the async saver is asked asynchronously)."""
    if not is_async_postgres_saver(saver):
        return await asyncio.to_thread(same_database, saver, dsn)
    try:
        mine = await asaver_database_identity(saver)
        return mine == await asyncio.to_thread(dsn_database_identity, dsn)
    except Exception:
        return False


SAVER_INLINE_TRUE = True
"""The value ``PostgresSaver.put`` leaves inline for a channel whose ``_DeltaSnapshot`` it
moved to the blob table (its bytes are the blob row's)."""


def inline_value_is_primitive(value: Any) -> bool:
    """Whether the official saver keeps this channel value inline in the checkpoint row
    (not in ``checkpoint_blobs``): ``None``, ``str``, ``int``, ``float``, ``bool``."""
    return value is None or isinstance(value, (str, int, float, bool))


IDENTITY_SQL = (
    "select (select system_identifier::text from pg_control_system()) as sysid, "
    "current_database() as db"
)


def _identity(row: Any) -> tuple[str, str]:
    if isinstance(row, dict):
        return (str(row["sysid"]), str(row["db"]))
    return (str(row[0]), str(row[1]))


# -- the official Postgres saver's rows (langgraph-checkpoint-postgres 3.2.0) -----------
# ``PostgresSaver.put`` keeps primitive channel values (None, str, int, float, bool) inline
# in the ``checkpoint`` JSONB and puts every other value of a new version (and a
# ``_DeltaSnapshot``, marked ``true`` inline) into ``checkpoint_blobs`` as its serde bytes;
# the metadata goes through ``get_serializable_checkpoint_metadata``. ``put_writes``
# numbers writes by position except the special channels (``WRITES_IDX_MAP``: error,
# scheduled, interrupt, resume get negative indexes), and upserts only when every write
# is special. ``saver_put_rows`` / ``saver_write_rows`` shape the same rows, so a thread
# can be written with one ``executemany`` per table; ``tests/test_compat.py`` compares them
# with what the saver itself writes.
SaverRow = tuple[Any, ...]


def stores_serializer_bytes(saver: BaseCheckpointSaver[Any]) -> bool:
    """Whether ``saver`` keeps exactly what its ``serde.dumps_typed`` returns for every
    channel value, write and (``SqliteSaver``) whole checkpoint, and nothing else of them:
    ``InMemorySaver`` and ``SqliteSaver`` with LangGraph's own serializer (restore hands
    them exact bytes, :mod:`langgraph_external.ops.exact`). Subclasses may store
    differently, so only these classes themselves qualify.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> stores_serializer_bytes(InMemorySaver()), stores_serializer_bytes(object())
        (True, False)
    """
    kinds: list[type] = [InMemorySaver]
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver

        kinds.append(SqliteSaver)
    except ImportError:  # the optional SQLite saver is not installed
        pass
    serde = getattr(saver, "serde", None)
    return type(saver) in kinds and type(serde) is JsonPlusSerializer


class _OneCommit:
    """A ``sqlite3.Connection`` whose ``commit`` waits for :func:`sqlite_one_transaction`."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def commit(self) -> None:
        """Deferred: the whole restore commits once, or rolls back."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@contextmanager
def sqlite_one_transaction(saver: Any) -> Iterator[None]:
    """Every ``put``/``put_writes`` of ``SqliteSaver`` inside this block in one transaction.

    ``SqliteSaver`` commits (and so syncs its file) after every call; a restore of a long
    thread spent most of its time there, and a failure half-way left half a thread. Its
    ``cursor()`` takes ``saver.lock`` and commits ``saver.conn``: while the block runs, the
    lock is ours (a re-entrant stand-in, so other threads wait) and the connection's
    commit is deferred to the end: one commit, or a rollback when the block raises. Any
    other saver: nothing changes.
    """
    kind = type(saver)
    if (kind.__module__, kind.__name__) != ("langgraph.checkpoint.sqlite", "SqliteSaver"):
        yield
        return
    lock, conn, ours = saver.lock, saver.conn, threading.RLock()
    with lock, ours:
        saver.lock, saver.conn = ours, _OneCommit(conn)
        try:
            saver.setup()
            yield
        except BaseException:
            conn.rollback()
            raise
        else:
            conn.commit()
        finally:
            saver.lock, saver.conn = lock, conn


def saver_statements() -> dict[str, str]:
    """The official saver's own insert statements (its class attributes), by table."""
    return {
        "blobs": PostgresSaver.UPSERT_CHECKPOINT_BLOBS_SQL,
        "checkpoints": PostgresSaver.UPSERT_CHECKPOINTS_SQL,
        "writes_upsert": PostgresSaver.UPSERT_CHECKPOINT_WRITES_SQL,
        "writes_insert": PostgresSaver.INSERT_CHECKPOINT_WRITES_SQL,
    }


def saver_put_rows(
    serde: Any,
    config: RunnableConfig,
    checkpoint: Any,
    metadata: Any,
    new_versions: dict[str, Any],
) -> tuple[list[SaverRow], SaverRow]:
    """``(blob rows, checkpoint row)`` that ``PostgresSaver.put`` writes for these arguments.

    Example:
        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
        >>> cp = empty_checkpoint()
        >>> cp["channel_values"] = {"n": 1, "items": ["a"]}
        >>> conf = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        >>> blobs, row = saver_put_rows(JsonPlusSerializer(), conf, cp, {}, {"items": "1"})
        >>> [b[2:5] for b in blobs], row[3], row[4].obj["channel_values"]
        ([('items', '1', 'msgpack')], None, {'n': 1})
    """
    conf = config["configurable"]
    thread_id, checkpoint_ns = conf["thread_id"], conf["checkpoint_ns"]
    copy = dict(checkpoint)
    inline = dict(checkpoint["channel_values"])
    blob_values: dict[str, Any] = {}
    for k, v in checkpoint["channel_values"].items():
        if isinstance(v, _DeltaSnapshot):
            blob_values[k] = inline.pop(k)
            inline[k] = SAVER_INLINE_TRUE
        elif not inline_value_is_primitive(v):
            blob_values[k] = inline.pop(k)
    copy["channel_values"] = inline
    blobs: list[SaverRow] = [
        (
            thread_id,
            checkpoint_ns,
            k,
            str(ver),
            *serde.dumps_typed(blob_values[k]),
        )
        for k, ver in new_versions.items()
        if k in blob_values  # the saver writes blobs only for new versions of blob values
    ]
    row: SaverRow = (
        thread_id,
        checkpoint_ns,
        checkpoint["id"],
        conf.get("checkpoint_id"),
        Jsonb(copy),
        Jsonb(get_serializable_checkpoint_metadata(config, metadata)),
    )
    return blobs, row


def saver_write_rows(
    serde: Any,
    config: RunnableConfig,
    writes: Any,
    task_id: str,
    task_path: str = "",
) -> tuple[bool, list[SaverRow]]:
    """``(upsert, rows)`` that ``PostgresSaver.put_writes`` writes for these arguments.

    ``upsert``: the saver's ``UPSERT_CHECKPOINT_WRITES_SQL`` (all writes special), else
    its ``INSERT_CHECKPOINT_WRITES_SQL``.

    Example:
        >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
        >>> conf = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}}
        >>> up, rows = saver_write_rows(JsonPlusSerializer(), conf, [("__interrupt__", 1)], "k")
        >>> up, rows[0][:7]
        (True, ('t', '', 'c', 'k', '', -3, '__interrupt__'))
    """
    conf = config["configurable"]
    rows: list[SaverRow] = [
        (
            conf["thread_id"],
            conf["checkpoint_ns"],
            conf["checkpoint_id"],
            task_id,
            task_path,
            WRITES_IDX_MAP.get(channel, idx),
            channel,
            *serde.dumps_typed(value),
        )
        for idx, (channel, value) in enumerate(writes)
    ]
    return all(w[0] in WRITES_IDX_MAP for w in writes), rows


# -- the transition guard (langgraph 1.2.24, langgraph-prebuilt 1.1.3, langchain-core 1.8.3) --
# -- configurable keys LangGraph puts into every task's config ----------------------------
_RUNTIME = "__pregel_runtime"
"""Its ``stream_writer`` is created once per ``stream()`` call and shared by all the tasks of
that call: the guard keys per-invocation state (visit counts, diverted tasks) on it."""
_CHECKPOINTER = "__pregel_checkpointer"
"""The saver of the running graph (also for subgraphs that inherit it)."""
_RESUMING = "__pregel_resuming"
"""True in the first step of an invocation that continues a thread (``None`` or ``Command``
input on a thread with checkpoints); the loop removes it after that step."""
_TASK_ID = "__pregel_task_id"
"""The id of the running task (also where ``checkpoint_ns`` is empty: the root graph)."""

# Other facts relied on (no import needed):
# * ``ParentCommand(Command)`` raised inside a subgraph reaches the parent's task with
#   ``command.graph`` set to that task's ``checkpoint_ns`` (or its node name), and the
#   parent applies it as that task's writes.
# * ``Pregel.copy`` rebuilds a compiled graph as ``self.__class__(**self.__dict__)``, and
#   ``invoke``/``ainvoke`` go through ``stream``/``astream``: a subclass overriding those
#   two sees every input, and survives ``with_config``.
# * A checkpoint's ``versions_seen[node]`` changes exactly in the checkpoints of the steps
#   in which ``node`` ran as a pull task (``Send`` tasks do not touch it); new input is
#   saved as a checkpoint with ``metadata["source"] == "input"``.
# * LangChain's callback manager logs ``Error in <Handler>.<event> callback`` for an
#   ``Exception`` raised by a handler, not for a ``BaseException``; ``BaseTool.run`` calls
#   ``on_tool_start`` (with ``tool_call_id``) before its ``try`` block, so an exception there
#   skips the tool body and the tool's error callbacks; ``ToolNode`` catches ``Exception``
#   only (``handle_tool_errors``), so a ``BaseException`` passes through it.
# * ``ToolNode`` executes the tool calls of the latest ``AIMessage`` in its input's
#   ``messages_key`` (a dict, an object attribute or a bare list of messages), or the
#   ``ToolCall`` dicts it is given as a list or as ``{"__type": "tool_call_with_context",
#   "tool_call": ...}`` (``create_agent`` sends one per tool call).


def run_key(config: RunnableConfig) -> Any:
    """An object that lives exactly as long as the current invocation, or ``None``."""
    conf = config.get("configurable") or {}
    return getattr(conf.get(_RUNTIME), "stream_writer", None)


def checkpointer_of(config: RunnableConfig) -> Any:
    """The checkpointer of the running graph, if any."""
    return (config.get("configurable") or {}).get(_CHECKPOINTER)


def is_resuming(config: RunnableConfig) -> bool:
    """Whether this task belongs to the first step of an invocation resuming a thread."""
    return bool((config.get("configurable") or {}).get(_RESUMING))


def task_id_of(config: RunnableConfig) -> str | None:
    """The id of the task running with ``config``, if it runs in a LangGraph task.

    Example:
        >>> task_id_of({"configurable": {}}) is None
        True
    """
    task_id = (config.get("configurable") or {}).get(_TASK_ID)
    return str(task_id) if task_id else None


def execution_info(config: RunnableConfig) -> Any:
    """The runtime's ``ExecutionInfo`` of the running task (``checkpoint_id``, ``run_id``
    of the invocation, ...), or ``None`` outside a LangGraph task.

    Example:
        >>> execution_info({"configurable": {}}) is None
        True
    """
    conf = config.get("configurable") or {}
    return getattr(conf.get(_RUNTIME), "execution_info", None)


def is_tool_node(runnable: Any) -> bool:
    """Whether ``runnable`` is LangGraph's prebuilt ``ToolNode``."""
    from langgraph.prebuilt import ToolNode

    return isinstance(runnable, ToolNode)


def messages_key_of(runnable: Any, default: str = "messages") -> str:
    """The state key a ``ToolNode`` reads its messages from."""
    return str(getattr(runnable, "_messages_key", None) or default)


# -- replay (langchain-core 1.8.3) ------------------------------------------------------------
# Every chat-model call, whatever its entry point (``invoke``, ``generate``, ``batch``; not
# ``stream`` of a model that streams natively), goes through ``_generate_with_cache`` (or its
# async twin) with the normalized messages, ``stop``, the run manager of the call (whose
# ``metadata`` carries the ``langgraph_*`` keys of the task) and the call's keyword arguments;
# it returns a ``ChatResult``. Returning one without calling the original skips the model and
# keeps the callbacks (``on_chat_model_start`` before, ``on_llm_end`` after).
CHAT_MODEL_CALLS = ("_generate_with_cache", "_agenerate_with_cache")


def chat_model_class() -> type:
    """``BaseChatModel``, whose :data:`CHAT_MODEL_CALLS` replay intercepts."""
    from langchain_core.language_models.chat_models import BaseChatModel

    return BaseChatModel


def chat_invocation_params(model: Any, stop: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ``invocation_params`` the callbacks of this call receive (tools included)."""
    return dict(model._get_invocation_params(stop=stop, **kwargs))


def tool_callback_inputs(tool: Any, tool_input: Any) -> Any:
    """The tool arguments ``on_tool_start`` records (injected arguments left out)."""
    if isinstance(tool_input, dict):
        return tool._filter_injected_args(tool_input)
    return tool_input


def patch_method(cls: type, name: str, make: Callable[[Any], Any]) -> Callable[[], None]:
    """Replace ``cls.name`` by ``make(original)``; returns the undo (a no-op if someone
    replaced it again meanwhile, so their patch survives)."""
    original = cls.__dict__[name]
    wrapper = make(original)
    setattr(cls, name, wrapper)

    def undo() -> None:
        if cls.__dict__.get(name) is wrapper:
            setattr(cls, name, original)

    return undo


# -- OpenTelemetry's GenAI semantic conventions (the OTLP export) -------------------------
def genai_attributes() -> Any:
    """The module of OpenTelemetry's GenAI attribute names (``gen_ai.*``).

    The conventions are still "development" upstream, so the package ships them only
    under ``opentelemetry.semconv._incubating``; importing the names (rather than
    spelling them) makes an upgrade that renames one fail in ``tests/test_compat.py``.
    Imported on first use: the OTLP export is an optional extra.
    """
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

    return gen_ai_attributes
