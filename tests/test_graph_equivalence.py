"""Real graphs behave identically with and without the recording wrapper.

Each scenario runs the same graph twice — once on the plain saver, once on
``ExternalCheckpointer`` around the same kind of saver — and compares what a user sees:
invoke outputs, ``get_state`` (values, next, pending interrupts, subgraph state) and the
whole ``get_state_history`` as (values, next, step, source, tasks). Checkpoint ids,
timestamps and random message ids differ between runs, so they are left out.

Where it is cheap, the record is checked too: every checkpoint the saver holds for a
wrapped thread has its file in the workspace (``threads/<tid>/checkpoints/<ns>/<id>.json``)
and its row in the ledger, and the thread's ledger hash chain verifies.

Covered: message state with tool calls, interrupt + resume, subgraphs (checkpoint
namespaces), ``Send`` fan-out, time travel (history, replay, ``update_state`` fork), a
failing node and its retry, the functional API, the three ``durability`` modes, and
threads handed over between the plain Postgres saver and the wrapper in both directions
(string channel versions). Sync and async, over PostgresSaver, AsyncPostgresSaver,
InMemorySaver and the ``External`` facade.
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Interrupt, Send, StateSnapshot, interrupt

from langgraph_external import (
    External,
    ExternalCheckpointer,
    Pipeline,
    Workspace,
    encode_thread_id,
    verify_chain,
)
from langgraph_external.assembly import assemble
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.restore import CheckpointLog
from langgraph_external.options import Options
from langgraph_external.record.render import to_readable
from langgraph_external.settings import Settings
from langgraph_external.workspace.files import encode_ns

# -- normalising what a user sees ---------------------------------------------------------


def norm(value: Any) -> Any:
    """Plain data without the parts that legitimately differ between two runs."""
    if isinstance(value, BaseMessage):
        return {
            "type": value.type,
            "content": value.content,
            "name": value.name,
            "tool_calls": [
                (tc["name"], tc["args"], tc["id"]) for tc in getattr(value, "tool_calls", [])
            ],
            "tool_call_id": getattr(value, "tool_call_id", None),
        }
    if isinstance(value, Interrupt):
        return ("interrupt", norm(value.value))
    if isinstance(value, StateSnapshot):
        return snap(value)
    if isinstance(value, Send):
        return ("send", value.node, norm(value.arg))
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(norm(v) for v in value)
    if isinstance(value, list):
        return [norm(v) for v in value]
    return value


def snap(s: StateSnapshot) -> tuple[Any, ...]:
    """One state as the user sees it: values, next, step, source, tasks (+ subgraph state)."""
    tasks = [
        (
            t.name,
            norm(list(t.interrupts)),
            norm(t.result),
            snap(t.state) if isinstance(t.state, StateSnapshot) else None,
            t.error if t.error is None or isinstance(t.error, str) else repr(t.error),
        )
        for t in s.tasks
    ]
    return (
        norm(s.values),
        tuple(s.next),
        s.metadata.get("step") if s.metadata else None,
        s.metadata.get("source") if s.metadata else None,
        tasks,
        s.parent_config is None,
    )


def transcript(graph: Any, config: RunnableConfig, outputs: list[Any]) -> dict[str, Any]:
    """Outputs of the calls, final state (with subgraphs) and full history of a thread."""
    return {
        "outputs": norm(outputs),
        "state": snap(graph.get_state(config, subgraphs=True)),
        "history": [snap(s) for s in graph.get_state_history(config)],
    }


async def atranscript(graph: Any, config: RunnableConfig, outputs: list[Any]) -> dict[str, Any]:
    return {
        "outputs": norm(outputs),
        "state": snap(await graph.aget_state(config, subgraphs=True)),
        "history": [snap(s) async for s in graph.aget_state_history(config)],
    }


def readable_values(channel_values: dict[str, Any]) -> Any:
    """State channels as the workspace renders them (JSON round trip included)."""
    values = {k: v for k, v in channel_values.items() if not k.startswith(("__", "branch:"))}
    return json.loads(json.dumps(to_readable(values), default=str))


def cfg(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


# -- the record ---------------------------------------------------------------------------


@dataclass
class Recorder:
    """A workspace + ledger pipeline, and checks of what it recorded."""

    dsn: str
    root: Path
    pipeline: Pipeline

    def wrap(self, inner: BaseCheckpointSaver[Any]) -> ExternalCheckpointer:
        return ExternalCheckpointer(inner, pipeline=self.pipeline)

    def thread_dir(self, thread_id: str) -> Path:
        return self.root / "threads" / encode_thread_id(thread_id)

    def checkpoint_doc(self, thread_id: str, ns: str, checkpoint_id: str) -> dict[str, Any]:
        log_file = self.thread_dir(thread_id) / "checkpoints" / f"{encode_ns(ns)}.jsonl"
        assert log_file.is_file(), f"no checkpoint log for namespace {ns!r}"
        return CheckpointLog(Workspace(self.root), thread_id, ns).doc(checkpoint_id)

    def events(self, thread_id: str) -> list[dict[str, Any]]:
        path = self.thread_dir(thread_id) / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def ledger_checkpoints(self, thread_id: str) -> set[tuple[str, str]]:
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(
                "select checkpoint_ns, checkpoint_id from langgraph_external.checkpoints"
                " where thread_id = %s",
                (thread_id,),
            ).fetchall()
        return {(ns, cid) for ns, cid in rows}

    def check(self, thread_id: str, tuples: list[CheckpointTuple]) -> None:
        """Every checkpoint in ``tuples`` is mirrored (file + ledger row), chain intact."""
        self.pipeline.flush()
        assert tuples
        stored = set()
        for tup in tuples:
            conf = tup.config["configurable"]
            ns, cid = conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
            stored.add((ns, cid))
            doc = self.checkpoint_doc(thread_id, ns, cid)
            parent = (
                tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
            )
            assert doc["parent_checkpoint_id"] == parent
            assert doc["step"] == tup.metadata.get("step")
            assert doc["source"] == tup.metadata.get("source")
        recorded = {
            (e["checkpoint_ns"], e["checkpoint_id"])
            for e in self.events(thread_id)
            if e["kind"] == "checkpoint"
        }
        assert recorded == stored
        assert self.ledger_checkpoints(thread_id) == stored
        # state.json is the newest root checkpoint's state, complete and readable
        newest = max(
            (t for t in tuples if t.config["configurable"].get("checkpoint_ns", "") == ""),
            key=lambda t: t.checkpoint["id"],
        )
        state = json.loads((self.thread_dir(thread_id) / "state.json").read_text())
        assert state["checkpoint_id"] == newest.checkpoint["id"]
        assert state["values"] == readable_values(newest.checkpoint["channel_values"])
        with psycopg.connect(self.dsn) as conn:
            verify_chain(ledger.fetch_events(conn, thread_id))


@pytest.fixture
def recorder(dsn: str, tmp_path: Path, spool_dir: Path) -> Iterator[Recorder]:
    root = tmp_path / "ws"
    recording = assemble(
        Settings.resolve(
            workspace=root, dsn=dsn, redaction="off", options=Options(spool_dir=spool_dir)
        )
    )
    pipeline = recording.pipeline
    try:
        yield Recorder(dsn, root, pipeline)
        assert pipeline.health()["failures"] == []  # the sealing helper's included
    finally:
        recording.close()
    assert pipeline.health()["failures"] == []


@pytest.fixture
def pg_savers(dsn: str, recorder: Recorder) -> Iterator[tuple[PostgresSaver, ExternalCheckpointer]]:
    """(plain PostgresSaver, wrapped PostgresSaver) on the same database."""
    with ExitStack() as stack:
        plain = stack.enter_context(PostgresSaver.from_conn_string(dsn))
        plain.setup()
        inner = stack.enter_context(PostgresSaver.from_conn_string(dsn))
        yield plain, recorder.wrap(inner)


@pytest.fixture
async def apg_savers(
    dsn: str, recorder: Recorder
) -> AsyncIterator[tuple[AsyncPostgresSaver, ExternalCheckpointer]]:
    """(plain AsyncPostgresSaver, wrapped AsyncPostgresSaver) on the same database."""
    async with (
        AsyncPostgresSaver.from_conn_string(dsn) as plain,
        AsyncPostgresSaver.from_conn_string(dsn) as inner,
    ):
        await plain.setup()
        yield plain, recorder.wrap(inner)


async def alist_all(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[CheckpointTuple]:
    return [t async for t in saver.alist(cfg(thread_id))]


# -- graphs -------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _call(name: str, args: dict[str, int], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def agent_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """A tool-calling agent over ``MessagesState`` with a scripted model (two turns)."""
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    id="ai-1",
                    tool_calls=[
                        _call("add", {"a": 2, "b": 3}, "call-add"),
                        _call("multiply", {"a": 3, "b": 4}, "call-mul"),
                    ],
                ),
                AIMessage("2 + 3 = 5 and 3 * 4 = 12.", id="ai-2"),
                AIMessage("", id="ai-3", tool_calls=[_call("add", {"a": 5, "b": 12}, "call-2")]),
                AIMessage("Together that is 17.", id="ai-4"),
            ]
        )
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([add, multiply]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


AGENT_TURNS = [
    {"messages": [HumanMessage("What are 2+3 and 3*4?", id="h-1")]},
    {"messages": [HumanMessage("And their sum?", id="h-2")]},
]


class Review(TypedDict, total=False):
    topic: str
    draft: str
    verdict: str
    log: Annotated[list[str], operator.add]


def review_builder() -> StateGraph:
    """draft -> review (interrupts for a human verdict) -> publish."""

    def draft(state: Review) -> dict[str, Any]:
        return {"draft": f"draft about {state['topic']}", "log": ["draft"]}

    def review(state: Review) -> dict[str, Any]:
        verdict = interrupt({"please_review": state["draft"]})
        return {"verdict": verdict, "log": [f"review:{verdict}"]}

    def publish(state: Review) -> dict[str, Any]:
        return {"log": [f"publish:{state['verdict']}"]}

    builder = StateGraph(Review)
    builder.add_node("draft", draft)
    builder.add_node("review", review)
    builder.add_node("publish", publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder


def review_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    return review_builder().compile(checkpointer=checkpointer)


def parent_with_subgraph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """prepare -> child (the review graph as a subgraph, own namespace) -> finish."""
    child = review_builder().compile()

    def prepare(state: Review) -> dict[str, Any]:
        return {"topic": state["topic"].upper(), "log": ["prepare"]}

    def finish(state: Review) -> dict[str, Any]:
        return {"log": [f"finish:{state['verdict']}"]}

    builder = StateGraph(Review)
    builder.add_node("prepare", prepare)
    builder.add_node("child", child)
    builder.add_node("finish", finish)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "child")
    builder.add_edge("child", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=checkpointer)


class Fan(TypedDict, total=False):
    topics: list[str]
    results: Annotated[list[str], operator.add]
    summary: str


def fan_out_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """plan -> Send("research", topic) per topic -> summarize."""

    def plan(state: Fan) -> dict[str, Any]:
        return {"topics": sorted(state["topics"])}

    def route(state: Fan) -> list[Send]:
        return [Send("research", {"topic": t}) for t in state["topics"]]

    def research(arg: dict[str, str]) -> dict[str, Any]:
        return {"results": [f"notes on {arg['topic']}"]}

    def summarize(state: Fan) -> dict[str, Any]:
        return {"summary": " | ".join(state["results"])}

    builder = StateGraph(Fan)
    builder.add_node("plan", plan)
    builder.add_node("research", research)
    builder.add_node("summarize", summarize)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", route, ["research"])
    builder.add_edge("research", "summarize")
    builder.add_edge("summarize", END)
    return builder.compile(checkpointer=checkpointer)


class Count(TypedDict, total=False):
    value: int
    trail: Annotated[list[str], operator.add]


def chain_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """a -> b -> c, each recording itself in ``trail`` and changing ``value``."""

    def a(state: Count) -> dict[str, Any]:
        return {"value": state["value"] + 1, "trail": ["a"]}

    def b(state: Count) -> dict[str, Any]:
        return {"value": state["value"] * 10, "trail": ["b"]}

    def c(state: Count) -> dict[str, Any]:
        return {"value": state["value"] - 3, "trail": [f"c:{state['value']}"]}

    builder = StateGraph(Count)
    for name, fn in (("a", a), ("b", b), ("c", c)):
        builder.add_node(name, fn)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=checkpointer)


class Flaky(Exception):
    """A transient failure of a node (compared by repr in task errors)."""


def flaky_graph(checkpointer: BaseCheckpointSaver[Any], fail_times: int) -> Any:
    """a -> (flaky, sibling in parallel) -> c; ``flaky`` fails its first ``fail_times`` runs."""
    attempts = {"flaky": 0}

    def a(state: Count) -> dict[str, Any]:
        return {"value": state["value"] + 1, "trail": ["a"]}

    def flaky(state: Count) -> dict[str, Any]:
        attempts["flaky"] += 1
        if attempts["flaky"] <= fail_times:
            raise Flaky(f"attempt {attempts['flaky']} failed")
        return {"trail": [f"flaky:{attempts['flaky']}"]}

    def sibling(state: Count) -> dict[str, Any]:
        return {"trail": ["sibling"]}

    def c(state: Count) -> dict[str, Any]:
        return {"value": state["value"] * 2, "trail": ["c"]}

    builder = StateGraph(Count)
    for name, fn in (("a", a), ("flaky", flaky), ("sibling", sibling), ("c", c)):
        builder.add_node(name, fn)
    builder.add_edge(START, "a")
    builder.add_edge("a", "flaky")
    builder.add_edge("a", "sibling")
    builder.add_edge(["flaky", "sibling"], "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=checkpointer)


def functional_workflow(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The functional API: an entrypoint calling tasks, pausing for approval."""

    @task
    def shout(word: str) -> str:
        return word.upper()

    @task
    def count(words: list[str]) -> int:
        return sum(len(w) for w in words)

    @entrypoint(checkpointer=checkpointer)
    def workflow(words: list[str]) -> dict[str, Any]:
        loud = [f.result() for f in [shout(w) for w in words]]
        approved = interrupt({"approve": loud})
        total = count(loud).result() if approved else 0
        return {"loud": loud, "approved": approved, "total": total}

    return workflow


# -- scenarios (one function, run on both savers) -----------------------------------------

Scenario = Callable[[BaseCheckpointSaver[Any], str], dict[str, Any]]
AScenario = Callable[[BaseCheckpointSaver[Any], str], Awaitable[dict[str, Any]]]


def agent_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = agent_graph(saver)
    outputs = [graph.invoke(turn, cfg(tid)) for turn in AGENT_TURNS]
    return transcript(graph, cfg(tid), outputs)


async def aagent_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = agent_graph(saver)
    outputs = [await graph.ainvoke(turn, cfg(tid)) for turn in AGENT_TURNS]
    return await atranscript(graph, cfg(tid), outputs)


def review_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = review_graph(saver)
    config = cfg(tid)
    outputs: list[Any] = [graph.invoke({"topic": "otters"}, config)]
    paused = graph.get_state(config)
    outputs.append(snap(paused))
    outputs.append(graph.invoke(Command(resume="approved"), config))
    return transcript(graph, config, outputs)


def subgraph_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = parent_with_subgraph(saver)
    config = cfg(tid)
    outputs: list[Any] = [graph.invoke({"topic": "otters"}, config)]
    outputs.append(snap(graph.get_state(config, subgraphs=True)))
    outputs.append(graph.invoke(Command(resume="ok"), config))
    return transcript(graph, config, outputs)


async def asubgraph_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = parent_with_subgraph(saver)
    config = cfg(tid)
    outputs: list[Any] = [await graph.ainvoke({"topic": "otters"}, config)]
    outputs.append(snap(await graph.aget_state(config, subgraphs=True)))
    # streamed with subgraphs: namespaces carry task ids, so keep only the node names
    async for ns, chunk in graph.astream(Command(resume="ok"), config, subgraphs=True):
        outputs.append(([part.split(":")[0] for part in ns], chunk))
    return await atranscript(graph, config, outputs)


def in_step_order(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stream updates in node order; parallel ``Send`` tasks finish in any order."""
    order = ["plan", "research", "summarize"]
    return sorted(chunks, key=lambda c: (order.index(next(iter(c))), repr(c)))


def fan_out_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = fan_out_graph(saver)
    config = cfg(tid)
    chunks = list(graph.stream({"topics": ["seals", "otters", "beavers"]}, config))
    return transcript(graph, config, in_step_order(chunks))


async def afan_out_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = fan_out_graph(saver)
    config = cfg(tid)
    outputs = in_step_order(
        [c async for c in graph.astream({"topics": ["seals", "otters"]}, config)]
    )
    outputs.append(await graph.ainvoke({"topics": ["voles"]}, config))
    return await atranscript(graph, config, outputs)


def time_travel_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = chain_graph(saver)
    config = cfg(tid)
    outputs: list[Any] = [graph.invoke({"value": 1}, config)]
    history = list(graph.get_state_history(config))
    before_b = next(s for s in history if s.next == ("b",))
    before_c = next(s for s in history if s.next == ("c",))
    # replay from an older checkpoint: c runs again on the stored state
    outputs.append(graph.invoke(None, before_c.config))
    # fork: change the past, then continue from the fork
    fork = graph.update_state(before_b.config, {"value": 100})
    outputs.append(snap(graph.get_state(fork)))
    outputs.append(graph.invoke(None, fork))
    # fork as if a node had written the update, skipping it
    skip = graph.update_state(before_c.config, {"value": 7, "trail": ["manual"]}, as_node="c")
    outputs.append(snap(graph.get_state(skip)))
    outputs.append(graph.invoke(None, skip))
    # history queries a UI relies on
    outputs.append([snap(s) for s in graph.get_state_history(config, limit=2)])
    outputs.append([snap(s) for s in graph.get_state_history(config, before=before_c.config)])
    outputs.append([snap(s) for s in graph.get_state_history(config, filter={"source": "update"})])
    return transcript(graph, config, outputs)


def failure_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    graph = flaky_graph(saver, fail_times=1)
    config = cfg(tid)
    outputs: list[Any] = []
    with pytest.raises(Flaky):
        graph.invoke({"value": 1}, config)
    outputs.append(snap(graph.get_state(config)))  # the error is pending on the task
    outputs.append(graph.invoke(None, config))  # retry: only the failed task runs again
    return transcript(graph, config, outputs)


def functional_scenario(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
    workflow = functional_workflow(saver)
    config = cfg(tid)
    outputs = [
        workflow.invoke(["otter", "seal"], config),
        workflow.invoke(Command(resume=True), config),
        workflow.invoke(["vole"], config),
        workflow.invoke(Command(resume=False), config),
    ]
    return transcript(workflow, config, outputs)


def durable_review_scenario(mode: str) -> Scenario:
    def run(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
        graph = review_graph(saver)
        config = cfg(tid)
        outputs = [
            graph.invoke({"topic": "otters"}, config, durability=mode),
            graph.invoke(Command(resume="yes"), config, durability=mode),
            graph.invoke({"topic": "seals"}, config, durability=mode),
        ]
        return transcript(graph, config, outputs)

    return run


def adurable_fan_out_scenario(mode: str) -> AScenario:
    async def run(saver: BaseCheckpointSaver[Any], tid: str) -> dict[str, Any]:
        graph = fan_out_graph(saver)
        config = cfg(tid)
        outputs = [
            await graph.ainvoke({"topics": ["b", "a"]}, config, durability=mode),
            await graph.ainvoke({"topics": ["c"]}, config, durability=mode),
        ]
        return await atranscript(graph, config, outputs)

    return run


# -- sync equivalence ---------------------------------------------------------------------


def test_tool_calling_agent_is_identical(
    pg_savers: tuple[PostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = pg_savers
    expected = agent_scenario(plain, "agent-plain")
    got = agent_scenario(wrapped, "agent-wrapped")
    assert got == expected
    final = got["state"][0]["messages"]
    turn_1, turn_2 = ["human", "ai", "tool", "tool", "ai"], ["human", "ai", "tool", "ai"]
    assert [m["type"] for m in final] == turn_1 + turn_2
    assert [m["content"] for m in final if m["type"] == "tool"] == ["5", "12", "17"]
    recorder.check("agent-wrapped", list(wrapped.list(cfg("agent-wrapped"))))
    # the tool results are in the record, attributed to the node that wrote them
    writes = [e for e in recorder.events("agent-wrapped") if e["kind"] == "writes"]
    assert {"agent", "tools"} <= {e["node"] for e in writes}


def test_external_facade_agent_is_identical(dsn: str, tmp_path: Path, spool_dir: Path) -> None:
    with PostgresSaver.from_conn_string(dsn) as plain:
        plain.setup()
        expected = agent_scenario(plain, "facade-plain")
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        got = agent_scenario(ext.checkpointer, "facade-wrapped")
        ext.flush()
        kinds = [e["kind"] for e in ext.events("facade-wrapped")]
        n_checkpoints = len(list(ext.checkpointer.list(cfg("facade-wrapped"))))
    assert got == expected
    assert kinds.count("checkpoint") == n_checkpoints
    state = json.loads((tmp_path / "ws/threads/facade-wrapped/state.json").read_text())
    assert state["values"]["messages"][-1]["content"] == "Together that is 17."


def test_interrupt_and_resume_are_identical(
    pg_savers: tuple[PostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = pg_savers
    expected = review_scenario(plain, "review-plain")
    got = review_scenario(wrapped, "review-wrapped")
    assert got == expected
    first, paused, resumed = got["outputs"]
    assert first["__interrupt__"] == [("interrupt", {"please_review": "draft about otters"})]
    assert paused[1] == ("review",)
    assert resumed["log"] == ["draft", "review:approved", "publish:approved"]
    recorder.check("review-wrapped", list(wrapped.list(cfg("review-wrapped"))))


def test_subgraph_namespaces_are_identical(
    pg_savers: tuple[PostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = pg_savers
    expected = subgraph_scenario(plain, "sub-plain")
    got = subgraph_scenario(wrapped, "sub-wrapped")
    assert got == expected
    paused = got["outputs"][1]
    (child_task,) = paused[4]
    assert child_task[0] == "child"
    assert child_task[3] is not None, "get_state(subgraphs=True) shows the child's state"
    assert child_task[3][1] == ("review",)
    assert got["outputs"][2]["log"][-1] == "finish:ok"

    tuples = list(wrapped.list(cfg("sub-wrapped")))
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in tuples}
    assert "" in namespaces and any(ns.startswith("child:") for ns in namespaces)
    recorder.check("sub-wrapped", tuples)
    ns_logs = {p.name for p in (recorder.thread_dir("sub-wrapped") / "checkpoints").iterdir()}
    assert {f"{encode_ns(ns)}.jsonl" for ns in namespaces} <= ns_logs


def test_send_fan_out_is_identical(
    pg_savers: tuple[PostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = pg_savers
    expected = fan_out_scenario(plain, "fan-plain")
    got = fan_out_scenario(wrapped, "fan-wrapped")
    assert got == expected
    assert got["state"][0]["summary"] == "notes on beavers | notes on otters | notes on seals"
    assert [next(iter(chunk)) for chunk in got["outputs"]] == [
        "plan",
        "research",
        "research",
        "research",
        "summarize",
    ]
    recorder.check("fan-wrapped", list(wrapped.list(cfg("fan-wrapped"))))


class SlowPutSaver(InMemorySaver):
    """An in-memory saver whose checkpoint writes take a while, like a remote database."""

    def put(self, *args: Any, **kwargs: Any) -> RunnableConfig:
        time.sleep(0.05)
        return super().put(*args, **kwargs)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_send_task_writes_are_attributed_to_their_node(mode: str, recorder: Recorder) -> None:
    wrapped = recorder.wrap(SlowPutSaver())
    graph = fan_out_graph(wrapped)
    out = graph.invoke({"topics": ["b", "a", "c"]}, cfg("attr"), durability=mode)
    assert out["summary"] == "notes on a | notes on b | notes on c"
    recorder.pipeline.flush()
    pushed = [
        e
        for e in recorder.events("attr")
        if e["kind"] == "writes" and e["payload"]["task_path"].startswith("~__pregel_push")
    ]
    assert len(pushed) == 3
    assert [e["node"] for e in pushed] == ["research"] * 3
    # and the checkpoint after the fan-out names who wrote into it
    (after,) = [e for e in recorder.events("attr") if e["kind"] == "checkpoint" and e["step"] == 2]
    assert [w["node"] for w in after["payload"]["writers"]] == ["research"] * 3


def test_time_travel_is_identical(
    pg_savers: tuple[PostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = pg_savers
    expected = time_travel_scenario(plain, "tt-plain")
    got = time_travel_scenario(wrapped, "tt-wrapped")
    assert got == expected
    first, replayed, _, forked, _, skipped = got["outputs"][:6]
    assert first == {"value": 17, "trail": ["a", "b", "c:20"]}
    assert replayed == {"value": 17, "trail": ["a", "b", "c:20"]}
    assert forked == {"value": 997, "trail": ["a", "b", "c:1000"]}
    assert skipped == {"value": 7, "trail": ["a", "b", "manual"]}

    tuples = list(wrapped.list(cfg("tt-wrapped")))
    recorder.check("tt-wrapped", tuples)
    # the forks are in the record as branches off the checkpoints they were made from
    updates = [t for t in tuples if t.metadata["source"] == "update"]
    assert len(updates) == 2
    for t in updates:
        doc = recorder.checkpoint_doc("tt-wrapped", "", t.config["configurable"]["checkpoint_id"])
        assert doc["parent_checkpoint_id"] == t.parent_config["configurable"]["checkpoint_id"]
        assert doc["source"] == "update"


def test_node_failure_and_retry_are_identical(
    pg_savers: tuple[PostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = pg_savers
    expected = failure_scenario(plain, "fail-plain")
    got = failure_scenario(wrapped, "fail-wrapped")
    assert got == expected
    failed, retried = got["outputs"]
    assert failed[1] == ("flaky",)
    assert failed[0] == {"value": 2, "trail": ["a", "sibling"]}
    errors = {name: error for name, _, _, _, error in failed[4]}
    assert errors == {"flaky": "Flaky('attempt 1 failed')", "sibling": None}
    # the sibling's successful write was kept: it does not run again
    assert retried == {"value": 4, "trail": ["a", "flaky:2", "sibling", "c"]}
    recorder.check("fail-wrapped", list(wrapped.list(cfg("fail-wrapped"))))
    # the failure is in the record as the failed task's pending write
    error_writes = [
        w
        for e in recorder.events("fail-wrapped")
        if e["kind"] == "writes"
        for w in e["payload"]["writes"]
        if w["channel"] == "__error__"
    ]
    assert len(error_writes) == 1


def test_functional_api_is_identical(
    pg_savers: tuple[PostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = pg_savers
    expected = functional_scenario(plain, "func-plain")
    got = functional_scenario(wrapped, "func-wrapped")
    assert got == expected
    first, approved, _, rejected = got["outputs"]
    assert first["__interrupt__"] == [("interrupt", {"approve": ["OTTER", "SEAL"]})]
    assert approved == {"loud": ["OTTER", "SEAL"], "approved": True, "total": 9}
    assert rejected == {"loud": ["VOLE"], "approved": False, "total": 0}
    recorder.check("func-wrapped", list(wrapped.list(cfg("func-wrapped"))))


@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
def test_durability_modes_are_identical(
    mode: str, pg_savers: tuple[PostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = pg_savers
    scenario = durable_review_scenario(mode)
    expected = scenario(plain, f"dur-{mode}-plain")
    got = scenario(wrapped, f"dur-{mode}-wrapped")
    assert got == expected
    assert got["outputs"][1]["log"] == ["draft", "review:yes", "publish:yes"]
    tuples = list(wrapped.list(cfg(f"dur-{mode}-wrapped")))
    if mode == "exit":
        # one checkpoint per invoke: what the user sees is the same, only less is stored
        assert len(tuples) == 3
    recorder.check(f"dur-{mode}-wrapped", tuples)


def test_memory_saver_inner_is_identical(recorder: Recorder) -> None:
    expected = review_scenario(InMemorySaver(), "mem")
    wrapped = recorder.wrap(InMemorySaver())
    got = review_scenario(wrapped, "mem")
    assert got == expected
    recorder.check("mem", list(wrapped.list(cfg("mem"))))


# -- async equivalence --------------------------------------------------------------------


async def test_async_external_facade_agent_is_identical(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    async with AsyncPostgresSaver.from_conn_string(dsn) as plain:
        await plain.setup()
        expected = await aagent_scenario(plain, "aagent-plain")
    async with External(
        dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)
    ) as ext:
        got = await aagent_scenario(ext.checkpointer, "aagent-wrapped")
        tuples = await alist_all(ext.checkpointer, "aagent-wrapped")
        events = ext.events("aagent-wrapped")
    assert got == expected
    assert {e["checkpoint_id"] for e in events if e["kind"] == "checkpoint"} == {
        t.config["configurable"]["checkpoint_id"] for t in tuples
    }
    verify_chain(events)


async def test_async_subgraph_interrupt_resume_is_identical(
    apg_savers: tuple[AsyncPostgresSaver, ExternalCheckpointer], recorder: Recorder
) -> None:
    plain, wrapped = apg_savers
    expected = await asubgraph_scenario(plain, "asub-plain")
    got = await asubgraph_scenario(wrapped, "asub-wrapped")
    assert got == expected
    # the child shares the parent's schema, so its output re-adds the "prepare" entry
    assert got["state"][0]["log"] == [
        "prepare",
        "prepare",
        "draft",
        "review:ok",
        "publish:ok",
        "finish:ok",
    ]
    recorder.check("asub-wrapped", await alist_all(wrapped, "asub-wrapped"))


async def test_async_send_fan_out_over_memory_saver_is_identical(recorder: Recorder) -> None:
    expected = await afan_out_scenario(InMemorySaver(), "afan")
    wrapped = recorder.wrap(InMemorySaver())
    got = await afan_out_scenario(wrapped, "afan")
    assert got == expected
    assert got["state"][0]["summary"] == "notes on otters | notes on seals | notes on voles"
    recorder.check("afan", await alist_all(wrapped, "afan"))


@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
async def test_async_durability_modes_are_identical(
    mode: str,
    apg_savers: tuple[AsyncPostgresSaver, ExternalCheckpointer],
    recorder: Recorder,
) -> None:
    plain, wrapped = apg_savers
    scenario = adurable_fan_out_scenario(mode)
    expected = await scenario(plain, f"adur-{mode}-plain")
    got = await scenario(wrapped, f"adur-{mode}-wrapped")
    assert got == expected
    assert got["outputs"][1]["summary"] == "notes on a | notes on b | notes on c"
    recorder.check(f"adur-{mode}-wrapped", await alist_all(wrapped, f"adur-{mode}-wrapped"))


async def test_sync_postgres_saver_becomes_async_capable(dsn: str, recorder: Recorder) -> None:
    """The plain PostgresSaver cannot ainvoke; wrapped, it runs async like AsyncPostgresSaver."""
    async with AsyncPostgresSaver.from_conn_string(dsn) as aplain:
        await aplain.setup()
        expected = await asubgraph_scenario(aplain, "sync-inner-plain")
    with PostgresSaver.from_conn_string(dsn) as inner:
        with pytest.raises(NotImplementedError):
            await review_graph(inner).ainvoke({"topic": "otters"}, cfg("sync-inner-bare"))
        wrapped = recorder.wrap(inner)
        got = await asubgraph_scenario(wrapped, "sync-inner-wrapped")
        tuples = list(inner.list(cfg("sync-inner-wrapped")))
    assert got == expected
    recorder.check("sync-inner-wrapped", tuples)


# -- handing threads over between the plain saver and the wrapper -------------------------

HANDOVER_CALLS: list[Any] = [
    {"topic": "otters"},  # -> interrupted in review
    Command(resume="yes"),  # resume
    {"topic": "seals"},  # another invoke on the same thread -> interrupted again
    Command(resume="no"),  # resume
]


def run_calls(saver: BaseCheckpointSaver[Any], tid: str, calls: list[Any]) -> list[Any]:
    graph = review_graph(saver)
    return [graph.invoke(call, cfg(tid)) for call in calls]


def assert_string_versions(saver: BaseCheckpointSaver[Any], tid: str) -> None:
    tup = saver.get_tuple(cfg(tid))
    assert tup is not None
    versions = tup.checkpoint["channel_versions"].values()
    assert versions and all(isinstance(v, str) for v in versions)


@pytest.mark.parametrize("first", ["plain", "wrapped"])
def test_thread_hands_over_between_plain_saver_and_wrapper(
    first: str,
    pg_savers: tuple[PostgresSaver, ExternalCheckpointer],
    recorder: Recorder,
) -> None:
    plain, wrapped = pg_savers
    expected_outputs = run_calls(plain, "baseline", HANDOVER_CALLS)
    expected = transcript(review_graph(plain), cfg("baseline"), expected_outputs)

    starter, continuer = (plain, wrapped) if first == "plain" else (wrapped, plain)
    tid = f"handover-from-{first}"
    outputs = run_calls(starter, tid, HANDOVER_CALLS[:1])
    assert_string_versions(starter, tid)
    outputs += run_calls(continuer, tid, HANDOVER_CALLS[1:])
    assert_string_versions(continuer, tid)

    got = transcript(review_graph(continuer), cfg(tid), outputs)
    assert got == expected
    assert got["outputs"][3]["log"] == [
        "draft",
        "review:yes",
        "publish:yes",
        "draft",
        "review:no",
        "publish:no",
    ]
    # both savers read the same thread the same way
    assert transcript(review_graph(starter), cfg(tid), outputs) == got

    # the record holds exactly the checkpoints written through the wrapper
    recorder.pipeline.flush()
    all_tuples = list(plain.list(cfg(tid)))
    recorded = {e["checkpoint_id"] for e in recorder.events(tid) if e["kind"] == "checkpoint"}
    assert recorded and recorded < {t.config["configurable"]["checkpoint_id"] for t in all_tuples}
    if first == "plain":
        # the wrapper mirrors the inherited state in full, so the readable state is complete
        state = json.loads((recorder.thread_dir(tid) / "state.json").read_text())
        final = plain.get_tuple(cfg(tid))
        assert final is not None
        assert state["checkpoint_id"] == final.checkpoint["id"]
        assert state["values"] == readable_values(final.checkpoint["channel_values"])


async def test_async_plain_thread_resumes_through_external(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    async def arun(saver: BaseCheckpointSaver[Any], tid: str, calls: list[Any]) -> list[Any]:
        graph = review_graph(saver)
        return [await graph.ainvoke(call, cfg(tid)) for call in calls]

    async with AsyncPostgresSaver.from_conn_string(dsn) as plain:
        await plain.setup()
        expected_outputs = await arun(plain, "abaseline", HANDOVER_CALLS)
        expected = await atranscript(review_graph(plain), cfg("abaseline"), expected_outputs)
        outputs = await arun(plain, "ahandover", HANDOVER_CALLS[:1])
    async with External(
        dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)
    ) as ext:
        outputs += await arun(ext.checkpointer, "ahandover", HANDOVER_CALLS[1:])
        got = await atranscript(review_graph(ext.checkpointer), cfg("ahandover"), outputs)
        tup = await ext.checkpointer.aget_tuple(cfg("ahandover"))
        events = ext.events("ahandover")
    assert got == expected
    assert tup is not None
    assert all(isinstance(v, str) for v in tup.checkpoint["channel_versions"].values())
    checkpoints = [e for e in events if e["kind"] == "checkpoint"]
    assert checkpoints and checkpoints[-1]["checkpoint_id"] == tup.checkpoint["id"]
    verify_chain(events)
