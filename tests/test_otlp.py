"""OTLP export: presets, conventions, configuration, and what the user sees when it fails.

The receiver is the stand-in (``tests/otlp_receiver.py``: Langfuse's endpoint, or a plain
OTLP collector with bearer tokens) for fault cases; ``tests/test_phoenix.py`` exports to a
real Arize Phoenix. The pure mapping tests read ``tests/data/otlp_events.json``: the
recorded events of ``tests/otlp_apps.py`` (``tests/data/make_otlp_events.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from typer.testing import CliRunner

from langgraph_external import ConfigurationError, External
from langgraph_external.cli import app as cli_app
from langgraph_external.exporters import LangfuseExport, OtlpExport, OtlpExporter
from langgraph_external.exporters._langfuse_map import MapperOptions, ThreadMapper, chain_start
from langgraph_external.exporters._otlp import encode
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.record.events import Event
from tests.graphs import cpu_burner, react_agent
from tests.otlp_apps import SECRET
from tests.otlp_receiver import OtlpReceiver

FIXTURE = Path(__file__).parent / "data" / "otlp_events.json"


def fixture_events() -> dict[str, list[Event]]:
    data = json.loads(FIXTURE.read_text())
    return {tid: [Event.from_envelope(e) for e in envs] for tid, envs in data.items()}


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def expected_spans(dsn: str, thread_id: str, semconv: bool = False) -> dict[str, Any]:
    led = PostgresLedger(dsn)
    try:
        events = led.read(thread_id, 0, limit=100_000)
    finally:
        led.close()
    mapper = ThreadMapper(thread_id, MapperOptions(semconv=semconv))
    return {r.span_id: r for r in mapper.feed(events)}


@pytest.fixture
def keys(request: pytest.FixtureRequest) -> tuple[str, str]:
    name = request.node.name.replace("[", "-").replace("]", "")
    return f"pk-lf-{name}", f"sk-lf-{name}"


@pytest.fixture
def rx(keys: tuple[str, str]) -> Iterator[OtlpReceiver]:
    with OtlpReceiver({keys[0]: keys[1]}) as receiver:
        yield receiver


def langfuse_env(url: str, keys: tuple[str, str]) -> dict[str, str]:
    return {
        "LANGFUSE_PUBLIC_KEY": keys[0],
        "LANGFUSE_SECRET_KEY": keys[1],
        "LANGFUSE_BASE_URL": url,
    }


# -- the langfuse preset is what it was ------------------------------------------------------
GOLDEN = {  # computed by the Langfuse exporter before the OTLP presets existed (9928d0f)
    "trip-1": (23, "252fdff63c6c53b180e889ea0457b82a130f30cf5122bb1295fc1036dc6afee9"),
    "guarded-1": (7, "f5b8beaf961ec98ebcff9ed4e59b5cd67fe9190cfafd8bd7c19004bf068f87fd"),
    "memory-1": (10, "398949cb249471435f2d59b392183902944ad08d7976afbcf080e3acad0cdf8c"),
}


def _span_digest(body: bytes) -> str:
    """sha256 of the spans, their scope and the resource (less its per-process id)."""
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    h = hashlib.sha256()
    for rs in req.resource_spans:
        for a in rs.resource.attributes:
            if a.key not in ("service.instance.id", "telemetry.sdk.version"):
                h.update(a.SerializeToString(deterministic=True))
        for ss in rs.scope_spans:
            h.update(ss.scope.SerializeToString(deterministic=True))
            for sp in ss.spans:
                h.update(sp.SerializeToString(deterministic=True))
    return h.hexdigest()


def test_the_langfuse_preset_sends_byte_for_byte_what_it_sent_before() -> None:
    cfg = LangfuseExport(public_key="pk", secret_key="sk", base_url="http://lf").to_otlp()
    cfg = cfg.resolved()
    assert cfg.semantic_conventions is False and cfg.cursor == "langfuse"
    for tid, events in fixture_events().items():
        records = ThreadMapper(tid, MapperOptions(semconv=False)).feed(events)
        body = encode(
            records, service_version="0.1.0", resource_attributes=cfg.resource_attributes()
        )
        assert (len(records), _span_digest(body)) == GOLDEN[tid], tid
        for r in records:  # no other dialect leaks into Langfuse's
            assert not any(k.startswith(("gen_ai.", "lgx.", "llm.")) for k in r.attributes)


# -- the other conventions -------------------------------------------------------------------
def _semconv_records(tid: str) -> list[Any]:
    return ThreadMapper(tid, MapperOptions(semconv=True)).feed(fixture_events()[tid])


def test_spans_carry_openinference_genai_and_our_attributes_for_their_kind() -> None:
    trip = _semconv_records("trip-1")
    by_name: dict[str, list[Any]] = {}
    for r in trip:
        by_name.setdefault(r.name, []).append(r)
    kinds = {
        name: {r.attributes["openinference.span.kind"] for r in rs} for name, rs in by_name.items()
    }
    assert kinds["LangGraph"] == {"AGENT"}
    assert kinds["agent"] == kinds["tools"] == kinds["work"] == kinds["review"] == {"CHAIN"}
    assert kinds["FakeMessagesListChatModel"] == {"LLM"}
    assert kinds["get_weather"] == kinds["get_time"] == {"TOOL"}

    llm = sorted(by_name["FakeMessagesListChatModel"], key=lambda r: r.start_ns)
    first, second = llm[0].attributes, llm[1].attributes
    assert first["llm.input_messages.0.message.role"] == "user"
    assert first["llm.input_messages.0.message.content"] == "weather in Oslo?"
    assert first["llm.output_messages.0.message.role"] == "assistant"
    call = "llm.output_messages.0.message.tool_calls.0.tool_call."
    assert first[call + "id"] == "call-1"
    assert first[call + "function.name"] == "get_weather"
    assert json.loads(first[call + "function.arguments"]) == {"city": "Oslo"}
    # the tool's answer is the third input message of the second call, tied to its call
    assert second["llm.input_messages.2.message.role"] == "tool"
    assert second["llm.input_messages.2.message.content"] == "sunny in Oslo"
    assert second["llm.input_messages.2.message.tool_call_id"] == "call-1"
    assert (first["llm.token_count.prompt"], first["llm.token_count.completion"]) == (10, 5)
    assert first["llm.token_count.total"] == 15
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (10, 5)
    assert first["gen_ai.operation.name"] == "chat"
    assert (
        first["llm.model_name"]
        == first["gen_ai.request.model"]
        == ("fake-messages-list-chat-model")
    )
    assert json.loads(first["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "weather in Oslo?"}]}
    ]
    assert json.loads(first["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call-1",
                    "name": "get_weather",
                    "arguments": {"city": "Oslo"},
                }
            ],
            "finish_reason": "tool_call",
        }
    ]

    (weather,) = by_name["get_weather"]
    w = weather.attributes
    assert (w["tool.name"], w["gen_ai.tool.name"], w["gen_ai.operation.name"]) == (
        "get_weather",
        "get_weather",
        "execute_tool",
    )
    assert w["gen_ai.tool.call.id"] == w["tool.id"] == "call-1"
    assert json.loads(w["gen_ai.tool.call.arguments"]) == {"city": "Oslo"}
    assert w["input.mime_type"] == "application/json"
    assert (w["output.value"], w["output.mime_type"]) == ("sunny in Oslo", "text/plain")
    assert w["gen_ai.tool.call.result"] == "sunny in Oslo"

    root = next(r for r in by_name["LangGraph"] if r.parent_id is None)
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["agent.name"] == "LangGraph"
    assert root.attributes["tag.tags"] == ["beta"]
    for r in trip:  # ours, on every span
        a = r.attributes
        assert a["lgx.thread_id"] == "trip-1" and a["lgx.seq"] == r.seq
        assert a["session.id"] == "trip-1" and a["user.id"] == "user-7"
        assert json.loads(a["metadata"])["thread_id"] == "trip-1"


def test_each_span_names_the_checkpoint_its_step_ran_from() -> None:
    events = fixture_events()["trip-1"]
    ckpt = {(e.checkpoint_ns, e.step): e.checkpoint_id for e in events if e.kind == "checkpoint"}
    records = _semconv_records("trip-1")
    checked = 0
    for r in records:
        a = r.attributes
        if a["lgx.kind"] in ("node_end", "llm_end", "tool_end"):
            expected = ckpt[(a.get("lgx.checkpoint_ns", ""), a["lgx.step"] - 1)]
            assert a["lgx.checkpoint_id"] == expected, r.name
            checked += 1
    assert checked == 13 + 3 + 2  # every node, model and tool span of the two runs
    interrupt = next(r for r in records if r.name == "interrupt")
    assert interrupt.attributes["lgx.checkpoint_id"] == next(
        e.checkpoint_id for e in events if e.kind == "interrupt"
    )


def test_retrievers_memory_searches_and_policy_violations_in_the_conventions() -> None:
    mem = {r.name: r.attributes for r in _semconv_records("memory-1")}
    search = mem["store.search"]
    assert search["openinference.span.kind"] == "RETRIEVER"
    assert search["input.value"] == "which seat does the user prefer"
    assert search["retrieval.documents.0.document.id"] == "prefs/user-7/seat"
    assert (
        search["retrieval.documents.0.document.score"]
        > search["retrieval.documents.1.document.score"]
    )
    assert search["gen_ai.data_source.id"] == "prefs/user-7"
    shelf = mem["Shelf"]
    assert shelf["retrieval.documents.0.document.content"] == "refunds take 5 days"
    assert shelf["retrieval.documents.1.document.score"] == 0.42
    assert json.loads(shelf["gen_ai.retrieval.documents"]) == [
        {"id": "doc-1", "score": 0.91},
        {"id": "doc-2", "score": 0.42},
    ]
    failed = next(r for r in _semconv_records("memory-1") if r.name == "book_seat")
    assert failed.error and "booking system down" in failed.error and not failed.ok

    guarded = {r.name: r for r in _semconv_records("guarded-1")}
    v = guarded["policy_violation"].attributes
    assert v["openinference.span.kind"] == "GUARDRAIL"
    assert v["lgx.policy_violation.rule"] == "tool_tier"
    assert v["lgx.policy_violation.outcome"] == "routed"
    assert "remote_write" in v["lgx.policy_violation.message"]
    assert v["langfuse.observation.level"] == "WARNING"


def test_redaction_holds_in_every_convention() -> None:
    records = _semconv_records("memory-1")
    text = json.dumps([dict(r.attributes) for r in records])
    assert SECRET not in text and SECRET[:20] not in text
    llm = next(r for r in records if r.name == "FakeMessagesListChatModel")
    assert "[REDACTED:openai_key]" in llm.attributes["llm.input_messages.0.message.content"]
    assert "[REDACTED:openai_key]" in llm.attributes["gen_ai.input.messages"]


def test_mapping_is_deterministic_from_any_cursor() -> None:
    """A mapper rebuilt at a cursor (re-reading its trace from the start) maps what follows
    exactly as one that read everything: the exporter relies on it after a restart."""
    events = fixture_events()["trip-1"]
    whole = {r.span_id: r for r in _semconv_records("trip-1")}
    assert whole == {r.span_id: r for r in _semconv_records("trip-1")}
    for cursor in (10, 40, 62, 66, 70):
        markers = [
            (e.seq, e.kind, e.payload)
            for e in events
            if e.kind in ("run_start", "interrupt") and e.seq <= cursor
        ]
        start = chain_start(markers, cursor)
        mapper = ThreadMapper("trip-1", MapperOptions(semconv=True), pos=start - 1)
        mapper.feed([e for e in events if start <= (e.seq or 0) <= cursor])
        after = mapper.feed([e for e in events if (e.seq or 0) > cursor])
        assert after and all(whole[r.span_id] == r for r in after), cursor


# -- configuration -----------------------------------------------------------------------------
def test_the_configuration_is_plain_data_rebuilt_from_a_dict_or_the_environment() -> None:
    cfg = OtlpExport(preset="phoenix", endpoint="http://127.0.0.1:6006", project="agents")
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert OtlpExport.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ConfigurationError, match="unknown OTLP export option"):
        OtlpExport.from_dict({"preset": "otlp", "endpont": "http://x"})

    env = {
        "PHOENIX_COLLECTOR_ENDPOINT": "http://phoenix:6006",
        "PHOENIX_API_KEY": "px-key",
        "PHOENIX_PROJECT_NAME": "support",
    }
    phoenix = OtlpExport(preset="phoenix").resolved(env)
    assert phoenix.url == "http://phoenix:6006/v1/traces" and phoenix.cursor == "phoenix"
    assert phoenix.request_headers()["Authorization"] == "Bearer px-key"
    assert phoenix.resource_attributes() == {"openinference.project.name": "support"}
    assert phoenix.semantic_conventions is True
    assert OtlpExport(preset="phoenix").resolved({}).url == "http://localhost:6006/v1/traces"

    otel = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector.example/custom/traces",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-team=blue,api-key=a%20b",
    }
    plain = OtlpExport().resolved(otel)
    assert plain.url == "https://collector.example/custom/traces"
    assert plain.request_headers() == {"x-team": "blue", "api-key": "a b"}
    base = OtlpExport().resolved({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"})
    assert base.url == "http://c:4318/v1/traces"
    given = OtlpExport(endpoint="http://mine:4318", path="/otlp/v1/traces").resolved(otel)
    assert given.url == "http://mine:4318/otlp/v1/traces"  # what you pass wins

    lf = OtlpExport(preset="langfuse").resolved(
        {"LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk", "LANGFUSE_HOST": "http://lf"}
    )
    assert lf.url == "http://lf/api/public/otel/v1/traces"
    assert lf.request_headers()["Authorization"].startswith("Basic ")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (OtlpExport(preset="jaeger"), "unknown OTLP preset 'jaeger'"),
        (OtlpExport(endpoint="collector:4318"), "http:// or https://"),
        (OtlpExport(endpoint="http://c", path="v1/traces"), "must start with '/'"),
        (OtlpExport(endpoint="http://c", cursor="workspace"), "cursor 'workspace'"),
        (OtlpExport(endpoint="http://c", cursor="a b"), "cursor 'a b'"),
        (OtlpExport(endpoint="http://c", max_payload_bytes=10), "max_payload_bytes"),
        (OtlpExport(preset="langfuse"), "LANGFUSE_PUBLIC_KEY"),
    ],
)
def test_bad_configurations_are_refused_when_built(config: OtlpExport, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        External(dsn="postgresql:///unused", export=config)


def test_two_exports_need_two_cursors() -> None:
    with pytest.raises(ConfigurationError, match="share a cursor"):
        External(
            dsn="postgresql:///unused",
            export=[OtlpExport(endpoint="http://a"), OtlpExport(endpoint="http://b")],
        )


# -- a plain OTLP collector, next to Langfuse --------------------------------------------------
def test_an_otlp_collector_and_langfuse_each_get_every_span_in_their_dialect(
    dsn: str, tmp_path: Path, keys: tuple[str, str]
) -> None:
    with (
        OtlpReceiver({keys[0]: keys[1]}) as langfuse,
        OtlpReceiver({}, tokens=("tok-1",)) as collector,
    ):
        exports = [
            OtlpExport(preset="otlp", endpoint=collector.base_url, api_key="tok-1"),
            LangfuseExport(public_key=keys[0], secret_key=keys[1], base_url=langfuse.base_url),
        ]
        with External(dsn=dsn, workspace=tmp_path / "ws", export=exports) as ext:
            react_agent(ext.checkpointer).invoke(
                {"messages": [("user", "hi")]}, ext.config("both-1", user_id="u-1")
            )
            assert ext.flush(60)
            assert set(ext.health()["exports"]) == {"otlp", "langfuse"}
        expected = expected_spans(dsn, "both-1", semconv=True)
        otlp_spans = {s.span_id: s for s in collector.by_key("tok-1")}
        lf_spans = {s.span_id: s for s in langfuse.by_key(keys[0])}
        assert set(otlp_spans) == set(lf_spans) == set(expected)  # same ids in both
        for sid, span in otlp_spans.items():
            assert span.attributes == dict(expected[sid].attributes)
            assert span.resource["service.name"] == "langgraph-external"
        kinds = sorted(s.attributes["openinference.span.kind"] for s in otlp_spans.values())
        assert kinds == sorted(["AGENT"] + ["CHAIN"] * 5 + ["LLM"] * 3 + ["TOOL"] * 2)
        assert all(s.status_code == 1 for s in otlp_spans.values())  # OTel STATUS_CODE_OK
        assert not any("gen_ai.operation.name" in s.attributes for s in lf_spans.values())


def test_a_wrong_token_is_reported_and_lgx_export_otlp_sends_everything_later(
    dsn: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with OtlpReceiver({}, tokens=("right",)) as collector:
        wrong = OtlpExport(endpoint=collector.base_url, api_key="wrong")
        with (
            caplog.at_level(logging.ERROR, logger="langgraph_external"),
            External(dsn=dsn, workspace=tmp_path / "ws", export=wrong) as ext,
        ):
            react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("t1"))
            assert not ext.flush(3)
        assert "credentials refused: HTTP 401" in caplog.text
        assert "wrong API key or headers" in caplog.text
        assert collector.by_key("right") == []
        args = ["--dsn", dsn, "export", "otlp", "--endpoint", collector.base_url]
        result = CliRunner().invoke(cli_app, [*args, "--api-key", "right", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["ok"] is True
        assert {s.span_id for s in collector.by_key("right")} == set(expected_spans(dsn, "t1"))
        again = CliRunner().invoke(cli_app, [*args, "-H", "Authorization=Bearer right"])
        assert again.exit_code == 0, again.output
        assert "nothing new to send" in again.output  # its own cursor: all sent already


# -- the receiver is down (issue 22's friction) -------------------------------------------------
def test_a_receiver_that_is_down_is_one_log_line_per_failure_kind_with_the_spans_waiting(
    dsn: str,
    tmp_path: Path,
    rx: OtlpReceiver,
    keys: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    rx.set_mode("down")
    cfg = LangfuseExport(
        public_key=keys[0],
        secret_key=keys[1],
        base_url=rx.base_url,
        backoff_max=0.1,
        poll_interval=0.1,
        timeout=1.0,
    )
    with (
        caplog.at_level(logging.WARNING, logger="langgraph_external"),
        External(dsn=dsn, workspace=tmp_path / "ws", export=cfg) as ext,
    ):
        graph = react_agent(ext.checkpointer)
        for tid in ("down-1", "down-2"):
            graph.invoke({"messages": [("user", "hi")]}, ext.config(tid))
        assert not ext.flush(3)  # a few dozen attempts, backoff 0.1 s
        waiting = sum(len(expected_spans(dsn, t)) for t in ("down-1", "down-2"))
        down = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
        assert len(down) == 1, down  # once, not per attempt
        assert f"receiver unreachable: connection refused ({rx.base_url}" in down[0]
        assert f"{waiting} spans of 2 threads wait in the ledger" in down[0]
        assert down[0].count(rx.base_url) == 1
        for noise in ("HTTPConnectionPool", "Max retries", "object at 0x", "urllib3"):
            assert noise not in caplog.text
        rx.set_mode("500")  # another kind of failure: its own line
        assert not ext.flush(2)
        errors = [r.getMessage() for r in caplog.records if "receiver error" in r.getMessage()]
        assert len(errors) == 1 and "HTTP 500" in errors[0], errors
        rx.set_mode("ok")
        assert ext.flush(60)
    got = {s.span_id for s in rx.by_key(keys[0])}
    assert got == set(expected_spans(dsn, "down-1")) | set(expected_spans(dsn, "down-2"))


def test_lgx_export_reports_sent_of_total_and_why_when_the_receiver_is_down(
    dsn: str, tmp_path: Path, keys: tuple[str, str]
) -> None:
    with External(dsn=dsn, workspace=tmp_path / "ws") as ext:  # recorded without an export
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("t7"))
    n = len(expected_spans(dsn, "t7"))
    url = closed_port_url()
    runner = CliRunner(env=langfuse_env(url, keys))
    result = runner.invoke(cli_app, ["--dsn", dsn, "export", "langfuse"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0] == (
        f"0 of {n} spans sent; receiver unreachable: connection refused"
        f" ({url}/api/public/otel/v1/traces)"
    )
    assert lines[1] == f"behind: t7: {n} spans waiting"
    assert "exported" not in result.output and "HTTPConnectionPool" not in result.output
    as_json = json.loads(
        runner.invoke(cli_app, ["--dsn", dsn, "export", "langfuse", "--json"]).output
    )
    assert (as_json["spans"], as_json["spans_waiting"], as_json["ok"]) == (0, n, False)
    assert as_json["waiting"] == {"t7": n}

    with OtlpReceiver({keys[0]: keys[1]}) as rx:
        ok = CliRunner(env=langfuse_env(rx.base_url, keys)).invoke(
            cli_app, ["--dsn", dsn, "export", "langfuse"]
        )
        assert ok.exit_code == 0, ok.output
        assert ok.output.strip().splitlines()[0] == (
            f"{n} spans sent to {rx.base_url}/api/public/otel/v1/traces (1 thread up to date)"
        )
        assert {s.span_id for s in rx.by_key(keys[0])} == set(expected_spans(dsn, "t7"))


def test_close_does_not_wait_again_after_a_flush_that_timed_out(
    dsn: str, tmp_path: Path, keys: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    url = closed_port_url()
    cfg = LangfuseExport(public_key=keys[0], secret_key=keys[1], base_url=url, backoff_max=0.2)
    ext = External(dsn=dsn, workspace=tmp_path / "ws", export=cfg).setup()
    try:
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("c1"))
        assert not ext.flush(1.0)  # the receiver is down: flush says so after 1 s
        exporter = ext.langfuse
        assert exporter is not None
    finally:
        with caplog.at_level(logging.WARNING, logger="langgraph_external"):
            began = time.monotonic()
            ext.close()
            took = time.monotonic() - began
    assert took < 2.5, took  # it used to wait its 5 s again, in vain
    n = len(expected_spans(dsn, "c1"))
    closing = [r.getMessage() for r in caplog.records if "not sent at close" in r.getMessage()]
    assert closing == [
        f"langfuse export: {n} spans of 1 thread not sent at close (receiver unreachable: "
        f"connection refused ({url}/api/public/otel/v1/traces)); they wait in the ledger for "
        "the next start or `lgx export langfuse`"
    ]


def test_close_still_delivers_when_the_receiver_came_back_after_a_timed_out_flush(
    dsn: str, tmp_path: Path, rx: OtlpReceiver, keys: tuple[str, str]
) -> None:
    """No second wait only when nothing moved: a receiver back since gets every span, also
    while another thread burns CPU."""
    cfg = LangfuseExport(
        public_key=keys[0], secret_key=keys[1], base_url=rx.base_url, backoff_max=0.2
    )
    threads = []
    with cpu_burner():
        for i in range(3):
            rx.set_mode("down")
            with External(dsn=dsn, workspace=tmp_path / f"ws{i}", export=cfg) as ext:
                graph = react_agent(ext.checkpointer)
                for j in range(3):
                    threads.append(f"back-{i}-{j}")
                    graph.invoke({"messages": [("user", "hi")]}, ext.config(threads[-1]))
                assert not ext.flush(0.5)
                rx.set_mode("ok")
                assert rx.wait_for(lambda r: r.accepted_requests > 0, timeout=30)
            # close() ran: it gave the export its time, since spans were accepted again
            got = {s.span_id for s in rx.by_key(keys[0])}
            for tid in threads:
                assert set(expected_spans(dsn, tid)) <= got, tid
            rx.accepted_requests = 0


def test_lgx_export_otlp_usage_errors(dsn: str) -> None:
    import psycopg

    from langgraph_external.ledger import schema as ledger

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger.setup(conn)
    bad = CliRunner().invoke(cli_app, ["--dsn", dsn, "export", "otlp", "--preset", "jaeger"])
    assert bad.exit_code == 2 and "unknown OTLP preset 'jaeger'" in bad.output
    assert "Traceback" not in bad.output
    header = CliRunner().invoke(
        cli_app, ["--dsn", dsn, "export", "otlp", "--endpoint", "http://c", "-H", "oops"]
    )
    assert header.exit_code == 2 and "key=value" in header.output


def test_an_exporter_builds_from_the_dict_another_process_would_get(dsn: str) -> None:
    """``lgx worker`` builds its exporter from plain data: nothing of the app process."""
    import psycopg

    from langgraph_external.ledger import schema as ledger

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger.setup(conn)
    data = json.loads(json.dumps(OtlpExport(preset="phoenix", endpoint="http://p:6006").to_dict()))
    exporter = OtlpExporter(OtlpExport.from_dict(data), dsn)
    try:
        assert (exporter.name, exporter.url) == ("phoenix", "http://p:6006/v1/traces")
        assert exporter.options.semconv is True
    finally:
        exporter.close()
