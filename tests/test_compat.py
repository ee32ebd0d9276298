"""Every upstream internal the package relies on, checked against the installed versions.

If one of these fails after an upgrade, read ``langgraph_external/_compat.py``: it is the
one file that uses them."""

from __future__ import annotations

import copy
from importlib.metadata import version
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import Send

from langgraph_external import _compat


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


def test_the_outbox_runs_inside_the_saver_put_transaction(dsn: str) -> None:
    """put opens _cursor(pipeline=True); a failing outbox statement rolls the put back."""
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        assert _compat.install_outbox(saver)
        ran: list[Any] = []

        def run(cur: Any) -> None:
            ran.append(cur)
            cur.execute("select 1/0")  # the outbox's statement fails: nothing may commit

        token = _compat.OUTBOX.set(_compat.Outbox(run, run))  # type: ignore[arg-type]
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

        token = _compat.OUTBOX.set(_compat.Outbox(lambda cur: None, arun))
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

    from langgraph_external.checkpointers import _postgres_ops as pg
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


def test_a_pool_check_callback_sees_the_pool_handing_the_connection_out(dsn: str) -> None:
    from psycopg_pool import ConnectionPool

    seen: list[Any] = []
    with (
        ConnectionPool(
            dsn, min_size=1, max_size=1, check=lambda c: seen.append(_compat.pool_of(c))
        ) as pool,
        pool.connection(timeout=30),
    ):
        pass
    assert seen == [pool]
