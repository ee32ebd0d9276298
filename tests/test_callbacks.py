"""AuditCallbackHandler: what the agent did, in what order, on what evidence."""

from __future__ import annotations

import asyncio
import operator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from langgraph_external import Event, External, verify_chain
from langgraph_external.ledger.memory import InMemoryLedger
from langgraph_external.options import Options
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.sources.callbacks import (
    OUTPUT_TAIL,
    AuditCallbackHandler,
    prompt_context_hash,
)
from langgraph_external.testing import capture_events, node_path, of_kind


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order."""
    return {"order_id": order_id, "status": "delivered"}


@tool
def refund(order_id: str) -> str:
    """Refund an order (the payment service is down)."""
    raise ConnectionError(f"payment service unreachable for {order_id}")


def _agent(checkpointer: Any) -> Any:
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                id="ai-1",
                tool_calls=[
                    {"id": "call-1", "name": "lookup_order", "args": {"order_id": "A-17"}},
                    {"id": "call-2", "name": "refund", "args": {"order_id": "A-17"}},
                ],
                usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
            ),
            AIMessage(
                "Refund failed; escalating.",
                id="ai-2",
                usage_metadata={"input_tokens": 30, "output_tokens": 5, "total_tokens": 35},
            ),
        ]
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([lookup_order, refund], handle_tool_errors=True))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


@pytest.fixture
def ext(dsn: str, tmp_path: Path, spool_dir: Path) -> Any:
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as e:
        yield e


def _behaviour(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The callback events without ids and timings: what happened, in order."""
    return [
        (e["kind"], e["node"], e["step"], e["name"], e["status"])
        for e in events
        if e["kind"] not in ("checkpoint", "writes")
    ]


def test_react_agent_is_recorded_completely_and_in_order(ext: External) -> None:
    app = _agent(ext.checkpointer)
    question = {"messages": [HumanMessage("Refund order A-17", id="h-1")]}
    out = app.invoke(question, ext.config("agent"))
    assert out["messages"][-1].content == "Refund failed; escalating."
    events = ext.events("agent")
    verify_chain(events)
    assert events == list(ext.workspace.iter_events("agent"))  # ledger == workspace
    kinds = [e["kind"] for e in events if e["kind"] not in ("checkpoint", "writes")]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    # node transitions: every node start has its end, steps in order
    starts = [(e["node"], e["step"]) for e in events if e["kind"] == "node_start"]
    ends = [(e["node"], e["step"]) for e in events if e["kind"] == "node_end"]
    assert starts == [("agent", 1), ("tools", 2), ("agent", 3)]
    assert sorted(starts) == sorted(ends)
    # tools: arguments, call ids, raw bytes and parsed value; the failure with its error
    (ok,) = [e for e in events if e["kind"] == "tool_end"]
    assert ok["name"] == "lookup_order" and ok["payload"]["tool_call_id"] == "call-1"
    assert ok["payload"]["parsed"] == {"order_id": "A-17", "status": "delivered"}
    import base64
    import json

    assert json.loads(base64.b64decode(ok["raw"])) == ok["payload"]["parsed"]
    (failed,) = [e for e in events if e["kind"] == "tool_error"]
    assert failed["name"] == "refund" and failed["status"] == "error"
    assert "payment service unreachable" in json.dumps(failed["payload"])
    tool_starts = {e["payload"]["tool_call_id"]: e for e in events if e["kind"] == "tool_start"}
    assert tool_starts["call-2"]["payload"]["args"] == {"order_id": "A-17"}
    # model calls: exact messages, prompt hash, requested tool calls, token usage
    llm_starts = [e for e in events if e["kind"] == "llm_start"]
    llm_ends = [e for e in events if e["kind"] == "llm_end"]
    assert len(llm_starts) == len(llm_ends) == 2
    assert [m["content"] for m in llm_starts[0]["payload"]["messages"]] == ["Refund order A-17"]
    # the hash is reproducible from what was recorded (ids are not part of the prompt)
    first = llm_starts[0]["payload"]
    assert first["prompt_context_hash"] == prompt_context_hash(
        [HumanMessage("Refund order A-17")], first["tools"], first["params"], key=ext.cipher
    )
    # keyed: the plain sha256 of the prompt (what a dictionary attack computes) differs
    assert first["prompt_context_hash"] != prompt_context_hash(
        [HumanMessage("Refund order A-17")], first["tools"], first["params"]
    )
    assert llm_starts[1]["payload"]["prompt_context_hash"] != first["prompt_context_hash"]
    assert [t["name"] for t in llm_ends[0]["payload"]["tool_calls"]] == ["lookup_order", "refund"]
    assert llm_ends[0]["payload"]["usage"]["total_tokens"] == 19
    assert [m["role"] for m in llm_starts[1]["payload"]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    # routers: the agent chose the tools, then the end
    routes = [e["payload"]["destination"] for e in events if e["kind"] == "route"]
    assert routes == ["tools", "__end__"]


def test_node_events_join_the_checkpoint_writes_by_task_id(ext: External) -> None:
    app = _agent(ext.checkpointer)
    app.invoke({"messages": [HumanMessage("Refund order A-17")]}, ext.config("join"))
    events = ext.events("join")
    writes_by_task = {e["task_id"]: e for e in events if e["kind"] == "writes"}
    for end in (e for e in events if e["kind"] == "node_end"):
        w = writes_by_task[end["task_id"]]
        assert w["node"] == end["node"]
        assert w["payload"]["task_path"].endswith(end["node"])


def test_the_handler_does_not_change_the_graph(ext: External, tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    with_handler = _agent(ext.checkpointer).invoke(
        {"messages": [HumanMessage("q", id="h")]}, ext.config("same")
    )
    without = _agent(InMemorySaver()).invoke(
        {"messages": [HumanMessage("q", id="h")]}, {"configurable": {"thread_id": "same"}}
    )
    strip = [
        (type(m).__name__, m.content, getattr(m, "tool_calls", None))
        for m in with_handler["messages"]
    ]
    assert strip == [
        (type(m).__name__, m.content, getattr(m, "tool_calls", None)) for m in without["messages"]
    ]


class Fan(TypedDict):
    topics: list[str]
    notes: Annotated[list[str], operator.add]


def _fan_graph(checkpointer: Any) -> Any:
    g = StateGraph(Fan)
    g.add_node("plan", lambda s: {})
    g.add_node("research", lambda s: {"notes": [f"notes on {s['topics'][0]}"]})
    g.add_node("left", lambda s: {"notes": ["left"]})
    g.add_node("right", lambda s: {"notes": ["right"]})
    g.add_edge(START, "plan")
    g.add_conditional_edges(
        "plan", lambda s: [Send("research", {"topics": [t], "notes": []}) for t in s["topics"]]
    )
    g.add_edge("research", "left")
    g.add_edge("research", "right")
    g.add_edge(["left", "right"], END)
    return g.compile(checkpointer=checkpointer)


def test_parallel_branches_and_send_are_attributed_to_their_node_and_task(
    ext: External,
) -> None:
    with capture_events(ext, thread_id="fan") as events:
        _fan_graph(ext.checkpointer).invoke(
            {"topics": ["otters", "seals", "voles"], "notes": []}, ext.config("fan")
        )
    path = node_path(events)
    assert path[0] == (1, ["plan"])
    assert path[1][0] == 2 and sorted(path[1][1]) == ["research"] * 3
    assert path[2][0] == 3 and sorted(path[2][1]) == ["left", "right"]
    ends = of_kind(events, "node_end")
    research = [e for e in ends if e.node == "research"]
    assert len({e.task_id for e in research}) == 3  # three Send tasks, three task ids
    assert sorted(e.payload["update"]["notes"][0] for e in research) == [
        "notes on otters",
        "notes on seals",
        "notes on voles",
    ]
    writes = {e.task_id: e.node for e in of_kind(events, "writes")}
    for e in ends:
        assert writes[e.task_id] == e.node


def _linear(checkpointer: Any) -> Any:
    class S(TypedDict):
        n: int

    g = StateGraph(S)
    for name in ("a", "b", "c"):
        g.add_node(name, lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=checkpointer)


def test_sync_and_async_record_the_same(dsn: str, tmp_path: Path, spool_dir: Path) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        _linear(ext.checkpointer).invoke({"n": 0}, ext.config("sync"))
        sync = _behaviour(ext.events("sync"))

    async def run() -> list[tuple[Any, ...]]:
        async with External(
            dsn=dsn,
            workspace=tmp_path / "ws2",
            options=Options(spool_dir=spool_dir),
        ) as aext:
            await _linear(aext.checkpointer).ainvoke({"n": 0}, aext.config("async"))
            await asyncio.to_thread(aext.flush)
            return _behaviour(await asyncio.to_thread(aext.events, "async"))

    assert asyncio.run(run()) == sync
    assert [k for k, *_ in sync] == ["run_start"] + ["node_start", "node_end"] * 3 + ["run_end"]


def test_interrupts_and_resumes_are_recorded_with_the_value(ext: External) -> None:
    class S(TypedDict):
        draft: str
        verdict: str

    def review(s: S) -> dict[str, str]:
        return {"verdict": interrupt({"please_review": s["draft"]})}

    g = StateGraph(S)
    g.add_node("review", review)
    g.add_edge(START, "review")
    g.add_edge("review", END)
    app = g.compile(checkpointer=ext.checkpointer)
    cfg = ext.config("hitl")
    app.invoke({"draft": "otters", "verdict": ""}, cfg)
    app.invoke(Command(resume="approved"), cfg)
    events = ext.events("hitl")
    (intr,) = [e for e in events if e["kind"] == "interrupt"]
    assert intr["payload"]["interrupts"][0]["value"] == {"please_review": "otters"}
    resumes = [e for e in events if e["kind"] == "resume" and "value" in e["payload"]]
    assert [r["payload"]["value"] for r in resumes] == ["approved"]
    assert next(e["status"] for e in events if e["kind"] == "run_end") in ("ok", "interrupted")
    assert app.get_state(cfg).values["verdict"] == "approved"


def test_an_interrupt_names_the_node_and_step_that_raised_it(ext: External) -> None:
    class S(TypedDict, total=False):
        draft: str
        verdict: str
        answers: Annotated[list[str], operator.add]

    def review(s: S) -> dict[str, str]:
        return {"verdict": interrupt({"please_review": s["draft"]})}

    # a root node, two steps in
    g = StateGraph(S)
    g.add_node("write", lambda s: {"draft": "otters"})
    g.add_node("review", review)
    g.add_edge(START, "write")
    g.add_edge("write", "review")
    app = g.compile(checkpointer=ext.checkpointer)
    app.invoke({"draft": ""}, ext.config("i-root"))

    # a node of a subgraph: the root task is the subgraph's node
    sub = StateGraph(S)
    sub.add_node("review", review)
    sub.add_edge(START, "review")
    outer = StateGraph(S)
    outer.add_node("write", lambda s: {"draft": "otters"})
    outer.add_node("desk", sub.compile())
    outer.add_edge(START, "write")
    outer.add_edge("write", "desk")
    outer.compile(checkpointer=ext.checkpointer).invoke({"draft": ""}, ext.config("i-sub"))

    # two Send tasks of one node interrupt in one step
    def ask(s: dict[str, Any]) -> S:
        return {"answers": [str(interrupt({"item": s["item"]}))]}

    fan = StateGraph(S)
    fan.add_node("ask", ask)
    fan.add_conditional_edges(START, lambda s: [Send("ask", {"item": i}) for i in (1, 2)], ["ask"])
    fan.compile(checkpointer=ext.checkpointer).invoke({}, ext.config("i-fan"))

    # a static interrupt after a node
    static = StateGraph(S)
    static.add_node("write", lambda s: {"draft": "otters"})
    static.add_edge(START, "write")
    static.compile(checkpointer=ext.checkpointer, interrupt_after=["write"]).invoke(
        {"draft": ""}, ext.config("i-after")
    )

    def interrupt_of(thread: str) -> dict[str, Any]:
        events = ext.events(thread)
        (intr,) = [e for e in events if e["kind"] == "interrupt"]
        node_starts = {e["task_id"]: e for e in events if e["kind"] == "node_start"}
        for item in intr["payload"]["interrupts"]:  # each names the task that raised it
            assert node_starts[item["task_id"]]["node"] == item["node"]
            assert node_starts[item["task_id"]]["step"] == item["step"]
        return intr

    root = interrupt_of("i-root")
    assert (root["node"], root["step"]) == ("review", 2)
    assert root["payload"]["interrupts"][0]["checkpoint_ns"] == ""
    nested = interrupt_of("i-sub")
    assert (nested["node"], nested["step"]) == ("desk", 2)  # the root graph's task
    inner = nested["payload"]["interrupts"][0]
    assert (inner["node"], inner["step"]) == ("review", 1)  # where interrupt() was called
    assert inner["checkpoint_ns"].startswith("desk:")
    fanned = interrupt_of("i-fan")
    assert (fanned["node"], fanned["step"]) == ("ask", 1)
    assert sorted(i["value"]["item"] for i in fanned["payload"]["interrupts"]) == [1, 2]
    assert len({i["task_id"] for i in fanned["payload"]["interrupts"]}) == 2
    after = interrupt_of("i-after")
    assert (after["node"], after["step"], after["payload"]["nodes"]) == ("write", 1, ["write"])


@pytest.mark.slow  # seconds: a subprocess or a 30 s wait
def test_fail_soft_never_raises_into_the_graph_and_strict_does(
    tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    broken = Pipeline(InMemoryLedger(), spool_dir=spool_dir)
    broken.close()  # every emit now fails
    handler = AuditCallbackHandler(broken)
    app = _linear(InMemorySaver())
    out = app.invoke({"n": 0}, {"configurable": {"thread_id": "t"}, "callbacks": [handler]})
    assert out == {"n": 3}

    class Down(InMemoryLedger):
        name = "down"

        def capture(self, captures: Any) -> None:
            raise ConnectionError("ledger down")

        def append(self, events: Any) -> None:
            raise ConnectionError("ledger down")

    strict = Pipeline(Down(), spool_dir=spool_dir, strict=True)
    with pytest.raises(Exception, match="ledger down"):
        app.invoke(
            {"n": 0},
            {"configurable": {"thread_id": "t2"}, "callbacks": [AuditCallbackHandler(strict)]},
        )
    strict.close()


def test_capture_events_sees_the_records_of_one_thread(ext: External) -> None:
    with capture_events(ext, kinds={"node_start"}, thread_id="cap") as events:
        _linear(ext.checkpointer).invoke({"n": 0}, ext.config("cap"))
        _linear(ext.checkpointer).invoke({"n": 0}, ext.config("other"))
    assert [e.node for e in events] == ["a", "b", "c"]
    assert all(isinstance(e, Event) and e.seq is not None for e in events)


def test_sql_views_answer_the_audit_questions(ext: External) -> None:
    import psycopg

    _agent(ext.checkpointer).invoke({"messages": [HumanMessage("Refund A-17")]}, ext.config("v"))
    ext.flush()
    with psycopg.connect(ext.dsn or "") as conn:
        tools = conn.execute(
            "select tool, status, error_type, tool_call_id from langgraph_external.tool_calls"
            " where thread_id = 'v' order by tool"
        ).fetchall()
        stats = conn.execute(
            "select tool, calls, errors from langgraph_external.hourly_tool_stats order by tool"
        ).fetchall()
        llm = conn.execute(
            "select model, total_tokens, status from langgraph_external.llm_calls"
            " where thread_id = 'v' order by started_at"
        ).fetchall()
        path = conn.execute(
            "select step, node from langgraph_external.node_runs"
            " where thread_id = 'v' order by step"
        ).fetchall()
    assert tools == [
        ("lookup_order", "ok", None, "call-1"),
        ("refund", "error", "ConnectionError", "call-2"),
    ]
    assert stats == [("lookup_order", 1, 0), ("refund", 1, 1)]
    assert [(m, t) for m, t, _ in llm] == [
        ("fake-messages-list-chat-model", 19),
        ("fake-messages-list-chat-model", 35),
    ]
    assert path == [(1, "agent"), (2, "tools"), (3, "agent")]


def test_store_operations_are_recorded_and_attributed_to_the_node(ext: External) -> None:
    from langgraph.store.base import BaseStore
    from langgraph.store.memory import InMemoryStore

    class S(TypedDict):
        user: str
        lang: str

    def remember(state: S, *, store: BaseStore) -> dict[str, str]:
        store.put(("prefs", state["user"]), "lang", {"value": "fr"})
        return {}

    def recall(state: S, *, store: BaseStore) -> dict[str, str]:
        hits = store.search(("prefs", state["user"]))
        missing = store.get(("prefs", state["user"]), "colour")
        assert missing is None
        return {"lang": hits[0].value["value"]}

    g = StateGraph(S)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    app = g.compile(checkpointer=ext.checkpointer, store=ext.store(InMemoryStore()))
    out = app.invoke({"user": "u1", "lang": ""}, ext.config("mem"))
    assert out["lang"] == "fr"
    events = [e for e in ext.events("mem") if e["kind"].startswith("memory_")]
    assert [(e["kind"], e["node"], e["step"]) for e in events] == [
        ("memory_put", "remember", 1),
        ("memory_search", "recall", 2),
        ("memory_get", "recall", 2),
    ]
    put, search, get = events
    assert put["payload"]["value"] == {"value": "fr"}
    assert search["payload"]["hits"] == [
        {
            "rank": 1,
            "namespace": ["prefs", "u1"],
            "key": "lang",
            "score": None,
            "value": {"value": "fr"},
        }
    ]
    assert get["payload"] == {"namespace": ["prefs", "u1"], "key": "colour", "found": False}
    node_ends = {e["task_id"]: e["node"] for e in ext.events("mem") if e["kind"] == "node_end"}
    assert node_ends[search["task_id"]] == "recall"


def test_every_sql_recipe_in_the_docs_runs(ext: External) -> None:
    import re

    import psycopg

    _agent(ext.checkpointer).invoke({"messages": [HumanMessage("Refund A-17")]}, ext.config("d"))
    ext.flush()
    docs = Path(__file__).parent.parent / "docs"
    statements = []
    for page in ("audit.md", "sql.md"):
        for block in re.findall(r"```sql\n(.*?)```", (docs / page).read_text(), re.S):
            statements += [
                s.strip()
                for s in block.split(";")
                if s.strip()
                and not all(line.strip().startswith("--") for line in s.strip().splitlines())
            ]
    assert len(statements) >= 10
    with psycopg.connect(ext.dsn or "") as conn:
        for sql in statements:
            conn.execute(sql).fetchall()  # raises on any broken recipe
        (rows,) = conn.execute(
            "select count(*) from langgraph_external.node_runs where thread_id = 'd'"
        ).fetchone() or (0,)
    assert rows == 3


def test_a_guarded_run_records_the_policy_hash_everywhere(ext: External) -> None:
    from langgraph_external.guards import TransitionPolicy, guard

    class S(TypedDict):
        n: int

    g = StateGraph(S)
    for name in ("a", "b"):
        g.add_node(name, lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    policy = TransitionPolicy.from_dict(
        {"states": ["a", "b"], "transitions": {"START": ["a"], "a": ["b"], "b": ["END"]}}
    )
    guard(g, policy, pipeline=ext.pipeline)
    app = g.compile(checkpointer=ext.checkpointer)
    assert app.invoke({"n": 0}, ext.config("guarded", policy=policy)) == {"n": 2}
    events = ext.events("guarded")
    behaviour = [e for e in events if e["kind"] not in ("checkpoint", "writes")]
    missing = [
        (e["kind"], e["node"]) for e in behaviour if e["payload"].get("policy_hash") != policy.hash
    ]
    assert behaviour and not missing, missing
    checkpoints = [e for e in events if e["kind"] == "checkpoint"]
    assert all(e["payload"]["metadata"].get("lgx_policy_hash") == policy.hash for e in checkpoints)
    thread_json = ext.workspace.read_json(f"{ext.workspace.thread_dir('guarded')}/thread.json")
    assert thread_json["policy_hash"] == policy.hash


@pytest.mark.parametrize(
    "how",
    [
        "invoke",
        "stream-values",
        "stream-updates",
        "stream-debug",
        "batch",
        "astream",
        "astream_events",
    ],
)
def test_every_way_of_running_records_the_same_path(ext: External, how: str) -> None:
    app = _linear(ext.checkpointer)
    tid = f"way-{how}"
    cfg = ext.config(tid)
    if how == "invoke":
        app.invoke({"n": 0}, cfg)
    elif how.startswith("stream-"):
        list(app.stream({"n": 0}, cfg, stream_mode=how.split("-", 1)[1]))
    elif how == "batch":
        app.batch([{"n": 0}], [cfg])
    elif how == "astream":

        async def run() -> None:
            async for _ in app.astream({"n": 0}, cfg):
                pass

        asyncio.run(run())
    else:

        async def run_events() -> None:
            async for _ in app.astream_events({"n": 0}, cfg, version="v2"):
                pass

        asyncio.run(run_events())
    ext.flush()
    events = ext.events(tid)
    starts = [(e["node"], e["step"]) for e in events if e["kind"] == "node_start"]
    assert starts == [("a", 1), ("b", 2), ("c", 3)]
    kinds = [e["kind"] for e in events]
    assert kinds.count("run_start") == 1 and kinds.count("run_end") == 1


def test_retriever_hits_are_recorded_with_ids_and_scores(ext: External) -> None:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Policies(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [
                Document("Returns within 30 days.", id="pol-1", metadata={"score": 0.91}),
                Document("Refunds go to the card.", id="pol-7", metadata={"score": 0.42}),
            ]

    class S(TypedDict):
        q: str
        answer: str

    def lookup(state: S) -> dict[str, str]:
        docs = Policies().invoke(state["q"])
        return {"answer": docs[0].page_content}

    g = StateGraph(S)
    g.add_node("lookup", lookup)
    g.add_edge(START, "lookup")
    g.add_edge("lookup", END)
    app = g.compile(checkpointer=ext.checkpointer)
    app.invoke({"q": "return window?", "answer": ""}, ext.config("rag"))
    (hit,) = [e for e in ext.events("rag") if e["kind"] == "retrieval"]
    assert hit["node"] == "lookup" and hit["payload"]["query"] == "return window?"
    assert [(h["rank"], h["id"], h["score"]) for h in hit["payload"]["hits"]] == [
        (1, "pol-1", 0.91),
        (2, "pol-7", 0.42),
    ]


def test_async_store_operations_are_recorded(ext: External) -> None:
    from langgraph.store.memory import InMemoryStore

    store = ext.store(InMemoryStore())

    async def use() -> list[str]:
        await store.aput(("notes",), "n1", {"text": "likes tea"})
        return [i.key for i in await store.asearch(("notes",))]

    assert asyncio.run(use()) == ["n1"]
    ext.flush()
    kinds = [e["kind"] for e in ext.events("_no_thread")]
    assert kinds == ["memory_put", "memory_search"]


def _echo_chat(checkpointer: Any) -> Any:
    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}

    g = StateGraph(MessagesState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_long_chat_run_end_names_its_state_instead_of_rendering_it_again(
    ext: External, durability: Any
) -> None:
    # rendering the whole history at every turn's run_end made a thread's recording grow
    # with the square of its length: the history is the checkpoint's, recorded already
    graph = _echo_chat(ext.checkpointer)
    for turn in range(15):
        graph.invoke(
            {"messages": [HumanMessage(f"q{turn}")]}, ext.config("long"), durability=durability
        )
    ext.flush()
    with capture_events(ext, kinds={"run_end", "checkpoint"}, thread_id="long") as events:
        out = graph.invoke(
            {"messages": [HumanMessage("last")]}, ext.config("long"), durability=durability
        )
        ext.flush()
    (end,) = of_kind(events, "run_end")
    msgs = end.payload["output"]["messages"]
    assert end.payload["state"] == "checkpoint"
    assert msgs["$items"] == len(out["messages"]) == 32
    assert [m["content"] for m in msgs["$tail"]] == [
        m.content for m in out["messages"][-OUTPUT_TAIL:]
    ]
    # the whole value is the state of the thread's last checkpoint before the run_end
    last = of_kind(events, "checkpoint")[-1]
    assert last.seq is not None and end.seq is not None and last.seq < end.seq
    state = ext.checkpointer.get_tuple(ext.config("long"))
    assert state is not None and state.checkpoint["id"] == last.checkpoint_id
    assert state.checkpoint["channel_values"]["messages"] == out["messages"]


def test_a_run_end_without_a_recorded_checkpoint_keeps_its_whole_output(
    ext: External,
) -> None:
    # a graph compiled without the recording checkpointer: the output is only here
    graph = _echo_chat(None)
    ext.flush()
    history = [HumanMessage(f"q{i}") for i in range(OUTPUT_TAIL + 5)]
    with capture_events(ext, kinds={"run_end"}, thread_id="plain") as events:
        graph.invoke({"messages": history}, ext.config("plain"))
    (end,) = events
    assert "state" not in end.payload
    assert len(end.payload["output"]["messages"]) == OUTPUT_TAIL + 6
