"""Langfuse export: the ledger as a Langfuse view that never loses a span.

The Langfuse server is the one stand-in: ``tests/otlp_receiver.py`` implements its OTLP
ingestion endpoint on 127.0.0.1 and decodes the real ``ExportTraceServiceRequest``. Each
test uses its own public key (the Langfuse SDK keeps one client per key).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from typer.testing import CliRunner

from langgraph_external import ConfigurationError, External
from langgraph_external.cli import app as cli_app
from langgraph_external.exporters import (
    LangfuseExport,
    span_id_for_run,
    trace_context_for_run,
    trace_id_for_run,
)
from langgraph_external.exporters._langfuse_map import ThreadMapper
from langgraph_external.ledger.postgres import PostgresLedger
from tests.graphs import cpu_burner, react_agent
from tests.langfuse_app import USAGE, build_app
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def keys(request: pytest.FixtureRequest) -> tuple[str, str]:
    name = request.node.name.replace("[", "-").replace("]", "")
    return f"pk-lf-{name}", f"sk-lf-{name}"


@pytest.fixture
def rx(keys: tuple[str, str]) -> Iterator[OtlpReceiver]:
    with OtlpReceiver({keys[0]: keys[1]}) as receiver:
        yield receiver


def export_config(rx: OtlpReceiver, keys: tuple[str, str], **kw: Any) -> LangfuseExport:
    return LangfuseExport(public_key=keys[0], secret_key=keys[1], base_url=rx.base_url, **kw)


def langfuse_env(rx: OtlpReceiver, keys: tuple[str, str]) -> dict[str, str]:
    return {
        "LANGFUSE_PUBLIC_KEY": keys[0],
        "LANGFUSE_SECRET_KEY": keys[1],
        "LANGFUSE_BASE_URL": rx.base_url,
    }


def app_process(
    rx: OtlpReceiver, keys: tuple[str, str], dsn: str, ws: Path, thread: str, part: str
) -> Any:
    """Play ``part`` of ``tests/langfuse_app.py`` in another process; its JSON answer."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.langfuse_app", dsn, str(ws), thread, part],
        env={**os.environ, **langfuse_env(rx, keys), "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def expected_spans(dsn: str, thread_id: str) -> dict[str, Any]:
    """What the whole thread maps to, computed from the ledger alone (span id → record)."""
    led = PostgresLedger(dsn)
    try:
        events = led.read(thread_id, 0, limit=100_000)
    finally:
        led.close()
    mapper = ThreadMapper(thread_id)
    return {r.span_id: r for r in mapper.feed(events)}


def tree(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {s.span_id: s for s in spans}


def path_of(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[str]:
    """Names from the root down to ``span``."""
    out = [span.name]
    while span.parent_id is not None:
        span = by_id[span.parent_id]
        out.append(span.name)
    return out[::-1]


# -- the whole story ---------------------------------------------------------------------
def test_a_run_and_its_resume_in_another_process_are_one_trace(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, export=export_config(rx, keys)) as ext:
        app = build_app(ext.checkpointer)
        out = app.invoke(
            {"messages": [("user", "weather in Oslo?")]},
            ext.config("trip-1", user_id="user-7", tags=["beta"]),
        )
        assert "__interrupt__" in out
        assert ext.flush(60)
    # the human answers days later, from another process
    assert app_process(rx, keys, dsn, ws, "trip-1", "resume") == {
        "interrupted": False,
        "flushed": True,
    }

    spans = rx.by_key(keys[0])
    by_id = tree(spans)
    assert len({s.trace_id for s in spans}) == 1  # the resume continued the trace
    assert all(s.parent_id is None or s.parent_id in by_id for s in spans)  # no orphan
    (root,) = [s for s in spans if s.parent_id is None]
    assert root.name == "LangGraph" and root.type == "agent"
    assert root.trace_id == trace_id_for_run(root.json_attr("langfuse.observation.metadata.run_id"))
    assert {s.attributes.get("session.id") for s in spans} == {"trip-1"}
    assert root.attributes["user.id"] == "user-7"
    assert root.attributes["langfuse.trace.tags"] == ["beta"]
    assert {s.scope for s in spans} == {"langgraph-external"}

    paths = sorted("/".join(path_of(s, by_id)) for s in spans)
    assert paths == sorted(
        [
            "LangGraph",
            *(["LangGraph/agent"] * 3),
            *(["LangGraph/agent/FakeMessagesListChatModel"] * 3),
            *(["LangGraph/tools"] * 2),
            "LangGraph/tools/get_weather",
            "LangGraph/tools/get_time",
            "LangGraph/fan",
            *(["LangGraph/work"] * 3),  # the Send fan-out: three tasks, three spans
            "LangGraph/approval",  # the subgraph node ...
            "LangGraph/approval/review",  # ... and its own node, nested
            "LangGraph/interrupt",
            "LangGraph/resume",
            "LangGraph/LangGraph",  # the resumed run, in the same trace
            "LangGraph/LangGraph/resume (checkpoint)",
            "LangGraph/LangGraph/approval",
            "LangGraph/LangGraph/approval/review",
        ]
    )
    types = {s.name: s.type for s in spans}
    assert types["FakeMessagesListChatModel"] == "generation"
    assert types["get_weather"] == types["get_time"] == "tool"
    assert types["agent"] == types["work"] == types["review"] == "span"
    assert types["interrupt"] == "event"

    gens = sorted((s for s in spans if s.type == "generation"), key=lambda s: s.start_ns)
    assert [s.json_attr("langfuse.observation.usage_details") for s in gens] == [
        {"input": i, "output": o, "total": i + o} for i, o in USAGE
    ]
    assert gens[0].attributes["langfuse.observation.model.name"] == (
        "fake-messages-list-chat-model"
    )
    assert gens[0].json_attr("langfuse.observation.input")[0]["content"] == "weather in Oslo?"
    assert gens[0].json_attr("langfuse.observation.output")["tool_calls"][0]["name"] == (
        "get_weather"
    )
    weather = next(s for s in spans if s.name == "get_weather")
    assert weather.json_attr("langfuse.observation.input") == {"city": "Oslo"}
    assert weather.attributes["langfuse.observation.output"] == "sunny in Oslo"  # a string as is
    assert weather.json_attr("langfuse.observation.metadata.raw_result") == "sunny in Oslo"

    # original timestamps: each span starts and ends when the ledger says it did
    evs = ledger_events(dsn, "trip-1")
    starts = {span_id_for_run(e["run_id"]): e for e in evs if e["kind"].endswith("_start")}
    ends = {span_id_for_run(e["run_id"]): e for e in evs if e["kind"] in _ENDS}
    timed = [s for s in spans if s.span_id in starts]
    assert len(timed) == len(spans) - 3  # all but the point events: interrupt, 2 resumes
    for s in timed:
        assert s.start_ns == _ns(starts[s.span_id]["ts"])
        assert s.end_ns == _ns(ends[s.span_id]["ts"])
    resumed = next(s for s in spans if path_of(s, by_id) == ["LangGraph", "LangGraph"])
    interrupt = next(s for s in spans if s.name == "interrupt")
    assert resumed.start_ns > interrupt.end_ns
    assert rx.resent_identically()


_ENDS = ("run_end", "node_end", "tool_end", "llm_end")


def ledger_events(dsn: str, thread_id: str) -> list[dict[str, Any]]:
    import psycopg

    from langgraph_external.ledger import schema as ledger

    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        return ledger.fetch_events(conn, thread_id)


def _ns(iso: str) -> int:
    from datetime import datetime

    ts = datetime.fromisoformat(iso)
    return int(ts.timestamp()) * 1_000_000_000 + ts.microsecond * 1000


# -- faults ------------------------------------------------------------------------------
def test_nothing_is_lost_while_langfuse_refuses_fails_hangs_then_recovers(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    cfg = export_config(rx, keys, timeout=1.0, backoff_max=0.5, poll_interval=0.2)
    threads = []
    with External(dsn=dsn, workspace=tmp_path / "ws", export=cfg) as ext:
        graph = react_agent(ext.checkpointer)
        for i, mode in enumerate(["down", "500", "429", "hang", "down"]):
            rx.set_mode(mode)
            tid = f"fault-{i}-{mode}"
            out = graph.invoke({"messages": [("user", "hi")]}, ext.config(tid))
            assert out["messages"][-1].content == "Sunny at noon in Oslo."  # never disturbed
            threads.append(tid)
            assert not ext.flush(1.5)  # Langfuse did not take it: flush says so
            assert ext.health()["langfuse"]["last_error"]
        rx.set_mode("ok")
        assert ext.flush(60)
        assert ext.health()["langfuse"]["last_error"] is None
    expected: dict[str, Any] = {}
    for tid in threads:
        expected.update(expected_spans(dsn, tid))
    got = tree(rx.by_key(keys[0]))
    assert set(got) == set(expected)  # every expected span arrived ...
    traces: dict[str, list[str]] = {}
    for span in got.values():
        traces.setdefault(span.trace_id, []).append(span.name)
    assert len(traces) == len(threads)
    for names in traces.values():  # a whole ReAct run each: graph, 5 nodes, 3 models, 2 tools
        assert sorted(names) == sorted(
            ["LangGraph", "agent", "agent", "agent", "tools", "tools", "get_weather", "get_time"]
            + ["FakeMessagesListChatModel"] * 3
        )
    for sid, rec in expected.items():
        assert got[sid].name == rec.name and got[sid].start_ns == rec.start_ns
    assert rx.resent_identically()  # ... and a resent id always carried the same content


def test_wrong_keys_are_logged_clearly_and_the_backfill_sends_everything_later(
    dsn: str,
    tmp_path: Path,
    rx: OtlpReceiver,
    keys: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrong = LangfuseExport(public_key=keys[0], secret_key="not-the-secret", base_url=rx.base_url)
    with (
        caplog.at_level(logging.ERROR, logger="langgraph_external"),
        External(dsn=dsn, workspace=tmp_path / "ws", export=wrong) as ext,
    ):
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("k1"))
        assert not ext.flush(3)
    assert "HTTP 401" in caplog.text and "wrong public/secret key" in caplog.text
    assert rx.by_key(keys[0]) == []
    result = CliRunner(env=langfuse_env(rx, keys)).invoke(
        cli_app, ["--dsn", dsn, "export", "langfuse", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert set(tree(rx.by_key(keys[0]))) == set(expected_spans(dsn, "k1"))


def test_a_wrong_base_url_is_reported_and_nothing_is_marked_exported(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws") as ext:
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("u1"))
    env = {**langfuse_env(rx, keys), "LANGFUSE_BASE_URL": rx.base_url + "/wrong/prefix"}
    result = CliRunner(env=env).invoke(cli_app, ["--dsn", dsn, "export", "langfuse"])
    assert result.exit_code == 1
    assert "HTTP 404" in result.output and "wrong base URL" in result.output
    result = CliRunner(env=langfuse_env(rx, keys)).invoke(
        cli_app, ["--dsn", dsn, "export", "langfuse"]
    )
    assert result.exit_code == 0, result.output
    assert set(tree(rx.by_key(keys[0]))) == set(expected_spans(dsn, "u1"))


# -- back-fill and sidecars --------------------------------------------------------------
def test_backfill_twice_sends_nothing_new_and_resend_sends_identical_ids(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws") as ext:  # recorded without Langfuse
        graph = react_agent(ext.checkpointer)
        for i in range(3):
            graph.invoke({"messages": [("user", "hi")]}, ext.config(f"old-{i}"))
    runner = CliRunner(env=langfuse_env(rx, keys))
    first = runner.invoke(cli_app, ["--dsn", dsn, "export", "langfuse", "--json"])
    assert first.exit_code == 0, first.output
    report = json.loads(first.output)
    assert report["threads"] == 3 and report["ok"]
    sent = dict(rx.deliveries)
    assert sum(map(len, sent.values())) == report["spans"] == len(sent)

    again = runner.invoke(cli_app, ["--dsn", dsn, "export", "langfuse", "--all", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["spans"] == 0
    assert rx.deliveries == sent  # nothing new

    resent = runner.invoke(cli_app, ["--dsn", dsn, "export", "langfuse", "old-1", "--resend"])
    assert resent.exit_code == 0, resent.output
    assert set(rx.deliveries) == set(sent)  # only ids Langfuse already has ...
    assert rx.resent_identically()  # ... with identical content
    assert any(len(v) == 2 for v in rx.deliveries.values())


def test_two_follow_exporters_send_every_span_once(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    env = {**os.environ, **langfuse_env(rx, keys), "PYTHONPATH": str(ROOT)}
    followers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "langgraph_external.cli",
                "--dsn",
                dsn,
                "export",
                "langfuse",
                "--follow",
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        with External(dsn=dsn, workspace=tmp_path / "ws") as ext:
            graph = react_agent(ext.checkpointer)
            tids = [f"side-{i}" for i in range(8)]
            for tid in tids:
                graph.invoke({"messages": [("user", "hi")]}, ext.config(tid))
        expected: dict[str, Any] = {}
        for tid in tids:
            expected.update(expected_spans(dsn, tid))
        assert rx.wait_for(lambda r: set(expected) <= set(r.spans), timeout=120)
        time.sleep(2.0)  # a second sender would have sent by now
    finally:
        for p in followers:
            p.send_signal(signal.SIGTERM)
        outs = [p.communicate(timeout=60) for p in followers]
    assert all(p.returncode == 0 for p in followers), outs
    assert {sid: len(v) for sid, v in rx.deliveries.items()} == dict.fromkeys(expected, 1)


_SLOW_APP = """
import json, sys, time
sys.path.insert(0, {root!r})
import psycopg
from langgraph_external import External
from langgraph_external.exporters import LangfuseExport
from tests.graphs import react_agent
# a long linger: this app's exporter (in its sealing helper) is slow to reach its threads
cfg = LangfuseExport(public_key={pk!r}, secret_key={sk!r}, base_url={url!r}, linger=120.0)
with External(dsn={dsn!r}, workspace={ws!r}, langfuse=cfg) as ext:
    graph = react_agent(ext.checkpointer)
    for i in range(4):
        graph.invoke({{"messages": [("user", "hi")]}}, ext.config(f"slow-{{i}}"))
    time.sleep(1.5)  # the flusher captures the runs' last events (hold: 1 s)
    quiet = 0  # then nothing buffered nor unsealed, three looks in a row (all sealed;
    with psycopg.connect({dsn!r}) as conn:  # flush() would hurry the exporter)
        while quiet < 3:
            n = conn.execute("select count(*) from langgraph_external.captures").fetchone()[0]
            quiet = quiet + 1 if n == 0 and ext.health()["buffered"] == 0 else 0
            time.sleep(0.2)
    print("sealed", flush=True)
    sys.stdin.readline()  # meanwhile another process exports these threads
    started = time.monotonic()
    ok = ext.flush(20)
    print(json.dumps({{"flushed": ok, "seconds": time.monotonic() - started,
                      "threads_behind": ext.health()["langfuse"]["threads_behind"]}}), flush=True)
"""


def test_threads_another_process_exported_first_do_not_hold_flush_back(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    """Two processes export one database to one receiver: an app (its exporter runs in its
    sealing helper) and ``lgx export langfuse``. The other one sends the app's threads
    first; the app's ``flush()`` returns True at once (the receiver has every span) and
    its health shows no thread behind."""
    script = _SLOW_APP.format(
        root=str(ROOT), pk=keys[0], sk=keys[1], url=rx.base_url, dsn=dsn, ws=str(tmp_path / "ws")
    )
    app = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert app.stdout is not None and app.stdin is not None
        assert app.stdout.readline().strip() == "sealed"
        other = subprocess.run(
            [sys.executable, "-m", "langgraph_external.cli", "--dsn", dsn, "export", "langfuse"],
            env={**os.environ, **langfuse_env(rx, keys), "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert other.returncode == 0, other.stdout + other.stderr
        app.stdin.write("go\n")
        app.stdin.flush()
        answer = json.loads(app.stdout.readline())
        assert app.wait(timeout=120) == 0
    finally:
        if app.poll() is None:
            app.kill()
    assert answer["flushed"] and answer["threads_behind"] == 0, answer
    expected: dict[str, Any] = {}
    for i in range(4):
        expected.update(expected_spans(dsn, f"slow-{i}"))
    assert set(expected) <= set(rx.spans)
    assert all(len(rx.deliveries[sid]) == 1 for sid in expected)  # sent once, by the other


# -- the live exporter under load ----------------------------------------------------------
def test_live_export_keeps_up_while_cpu_is_busy(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    cfg = export_config(rx, keys, poll_interval=0.2)
    with cpu_burner(), External(dsn=dsn, workspace=tmp_path / "ws", export=cfg) as ext:
        graph = react_agent(ext.checkpointer)
        for i in range(10):
            tid = f"busy-{i}"
            graph.invoke({"messages": [("user", "hi")]}, ext.config(tid))
            assert ext.flush(60)
            got = {s.span_id for s in rx.by_key(keys[0])}
            assert set(expected_spans(dsn, tid)) <= got
    assert all(len(v) == 1 for v in rx.deliveries.values())


# -- mapping details -----------------------------------------------------------------------
def test_large_values_become_a_preview_with_their_workspace_address(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    big = "x" * 300_000
    model = FakeMessagesListChatModel(responses=[AIMessage(big)])

    def node(s: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(s["messages"])]}

    b = StateGraph(MessagesState)
    b.add_node("talk", node)
    b.add_edge(START, "talk")
    cfg = export_config(rx, keys, max_payload_bytes=30_000)
    with External(dsn=dsn, workspace=tmp_path / "ws", export=cfg) as ext:
        b.compile(checkpointer=ext.checkpointer).invoke(
            {"messages": [("user", "hi")]}, ext.config("big")
        )
        assert ext.flush(60)
    spans = rx.by_key(keys[0])
    assert spans
    for s in spans:
        for key in ("langfuse.observation.input", "langfuse.observation.output"):
            assert len(s.attributes.get(key, "")) < 30_000
    gen = next(s for s in spans if s.type == "generation")
    out = gen.json_attr("langfuse.observation.output")
    assert out["truncated"] is True and out["preview"]
    assert out["artifact"].startswith("threads/big/")
    assert (tmp_path / "ws" / out["artifact"]).exists()  # the full value is there


def test_policy_violations_are_warnings_and_errors_are_errors(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    from langgraph_external import Event

    with External(dsn=dsn, workspace=tmp_path / "ws", export=export_config(rx, keys)) as ext:

        def boom(s: MessagesState) -> dict[str, Any]:
            ext.pipeline.emit(  # type: ignore[union-attr]
                Event.new(
                    "policy_violation",
                    "bad",
                    payload={"rule": "transition", "message": "tools → refund denied"},
                )
            )
            raise RuntimeError("card declined")

        b = StateGraph(MessagesState)
        b.add_node("pay", boom)
        b.add_edge(START, "pay")
        with pytest.raises(RuntimeError):
            b.compile(checkpointer=ext.checkpointer).invoke(
                {"messages": [("user", "hi")]}, ext.config("bad")
            )
        assert ext.flush(60)
    spans = {s.name: s for s in rx.by_key(keys[0])}
    warn = spans["policy_violation"]
    assert warn.attributes["langfuse.observation.level"] == "WARNING"
    assert "refund denied" in warn.attributes["langfuse.observation.status_message"]
    pay = spans["pay"]
    assert pay.attributes["langfuse.observation.level"] == "ERROR"
    assert "card declined" in pay.attributes["langfuse.observation.status_message"]
    assert pay.status_code == 2  # OTel STATUS_CODE_ERROR
    assert spans["LangGraph"].attributes["langfuse.observation.level"] == "ERROR"


def test_retriever_hits_are_retriever_observations_with_ids_and_scores(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Shelf(BaseRetriever):
        def _get_relevant_documents(self, query: str, **kwargs: Any) -> list[Document]:
            return [
                Document("refunds take 5 days", id="doc-1", metadata={"score": 0.91}),
                Document("shipping is free", id="doc-2", metadata={"score": 0.42}),
            ]

    def look(s: MessagesState) -> dict[str, Any]:
        docs = Shelf().invoke("refund time")
        return {"messages": [AIMessage(docs[0].page_content)]}

    b = StateGraph(MessagesState)
    b.add_node("look", look)
    b.add_edge(START, "look")
    with External(dsn=dsn, workspace=tmp_path / "ws", export=export_config(rx, keys)) as ext:
        b.compile(checkpointer=ext.checkpointer).invoke(
            {"messages": [("user", "hi")]}, ext.config("shelf")
        )
        assert ext.flush(60)
    spans = rx.by_key(keys[0])
    (ret,) = [s for s in spans if s.type == "retriever"]
    by_id = tree(spans)
    assert path_of(ret, by_id) == ["LangGraph", "look", "Shelf"]
    assert ret.attributes["langfuse.observation.input"] == "refund time"
    hits = ret.json_attr("langfuse.observation.output")
    assert [(h["id"], h["score"], h["rank"]) for h in hits] == [
        ("doc-1", 0.91, 1),
        ("doc-2", 0.42, 2),
    ]


def test_trace_ids_are_the_ones_langfuse_derives_from_the_run_id() -> None:
    from langfuse import Langfuse

    rid = "01a233f5-6fa3-75fc-a011-0edba67b98f7"
    assert trace_id_for_run(rid) == Langfuse.create_trace_id(seed=rid)
    assert trace_context_for_run(rid) == {
        "trace_id": trace_id_for_run(rid),
        "parent_span_id": span_id_for_run(rid),
    }


def test_configuration_errors_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL", "LANGFUSE_HOST"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigurationError, match="LANGFUSE_PUBLIC_KEY"):
        External(dsn="postgresql:///unused", export=LangfuseExport())
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk")
    monkeypatch.setenv("LANGFUSE_HOST", "langfuse.internal:3000")
    with pytest.raises(ConfigurationError, match="http:// or https://"):
        External(dsn="postgresql:///unused", export=LangfuseExport())
    monkeypatch.setenv("LANGFUSE_HOST", "https://langfuse.internal")
    assert LangfuseExport().resolved().base_url == "https://langfuse.internal"
    with pytest.raises(ConfigurationError, match="max_payload_bytes"):
        LangfuseExport(max_payload_bytes=10).resolved()


def test_langfuse_callback_handler_joins_the_same_trace(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    # Langfuse's own SDK installs a global tracer provider: run it in its own process
    app_process(rx, keys, dsn, tmp_path / "ws", "h-1", "handler")
    spans = rx.by_key(keys[0])
    assert len({s.trace_id for s in spans}) == 1
    scopes = {s.scope for s in spans}
    assert "langgraph-external" in scopes and any(x.startswith("langfuse-sdk") for x in scopes)
    by_id = tree(spans)
    (root,) = [s for s in spans if s.parent_id is None]
    assert root.scope == "langgraph-external"
    theirs = [s for s in spans if s.scope != "langgraph-external"]
    assert all(s.parent_id in by_id for s in theirs)
    assert any(s.parent_id == root.span_id for s in theirs)


def test_lgx_export_langfuse_usage_errors(
    dsn: str, rx: OtlpReceiver, keys: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL", "LANGFUSE_HOST"):
        monkeypatch.delenv(var, raising=False)
    import psycopg

    from langgraph_external.ledger import schema as ledger

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger.setup(conn)
    no_keys = CliRunner().invoke(cli_app, ["--dsn", dsn, "export", "langfuse"])
    assert no_keys.exit_code == 2
    assert "LANGFUSE_PUBLIC_KEY" in no_keys.output and "Traceback" not in no_keys.output
    missing = CliRunner(env=langfuse_env(rx, keys)).invoke(
        cli_app, ["--dsn", dsn, "export", "langfuse", "no-such-thread"]
    )
    assert missing.exit_code == 1 and "no such thread: no-such-thread" in missing.output
