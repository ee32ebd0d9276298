"""The OTLP export against a real Arize Phoenix server (``phoenix serve``, started here).

Everything is read back through Phoenix's REST API: the span tree, the OpenInference
kinds, input and output messages, tool calls, token counts, sessions and users. The
``phoenix`` test extra installs the server (``scripts/test.sh`` does, and there a missing
server fails these tests instead of skipping them). Set ``LGX_SCREENSHOTS=docs/img`` to
write the screenshots of Phoenix's UI into the docs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from langgraph_external import External
from langgraph_external.cli import app as cli_app
from langgraph_external.exporters import OtlpExport
from langgraph_external.exporters._langfuse_map import MapperOptions, ThreadMapper
from langgraph_external.ledger.postgres import PostgresLedger
from tests import browser
from tests.graphs import react_agent
from tests.guard_agents import QUESTION
from tests.langfuse_app import USAGE, build_app
from tests.otlp_apps import MEMORY_USAGE, SECRET, guarded_app, memory_app, memory_store
from tests.phoenix_server import PhoenixServer, phoenix_missing

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    why = phoenix_missing()
    if why is not None:
        if os.environ.get("LGX_TEST_REQUIRE_PHOENIX") == "1":
            pytest.fail(why)
        pytest.skip(why)
    server = PhoenixServer(tmp_path_factory.mktemp("phoenix"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def project(request: pytest.FixtureRequest) -> str:
    """A Phoenix project of this test's own."""
    return re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:60]


def phoenix_export(phoenix: PhoenixServer, project: str) -> OtlpExport:
    return OtlpExport(preset="phoenix", endpoint=phoenix.url, project=project)


def expected_ids(dsn: str, thread_id: str) -> set[str]:
    """The span ids the thread maps to, computed from the ledger alone."""
    led = PostgresLedger(dsn)
    try:
        events = led.read(thread_id, 0, limit=100_000)
    finally:
        led.close()
    return {r.span_id for r in ThreadMapper(thread_id, MapperOptions(semconv=True)).feed(events)}


def span_id(s: dict[str, Any]) -> str:
    return str(s["context"]["span_id"])


def arrived(ids: set[str]) -> Any:
    return lambda spans: ids <= {span_id(s) for s in spans}


def path_of(span: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> str:
    names = [span["name"]]
    while span["parent_id"]:
        span = by_id[span["parent_id"]]
        names.append(span["name"])
    return "/".join(reversed(names))


def kinds(spans: list[dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in spans:
        out.setdefault(s["name"], set()).add(s["span_kind"])
    return out


def record_trip(dsn: str, ws: Path, export: OtlpExport, thread: str) -> None:
    """The trip app's first run in this process (it stops at the human's approval)."""
    with External(dsn=dsn, workspace=ws, export=export) as ext:
        app = build_app(ext.checkpointer)
        out = app.invoke(
            {"messages": [("user", "weather in Oslo?")]},
            ext.config(thread, user_id="user-7", tags=["beta"]),
        )
        assert "__interrupt__" in out
        assert ext.flush(60)


# -- the whole story ------------------------------------------------------------------------
def test_a_react_run_with_subgraph_send_and_a_resume_from_another_process(
    dsn: str, tmp_path: Path, phoenix: PhoenixServer, project: str
) -> None:
    ws = tmp_path / "ws"
    record_trip(dsn, ws, phoenix_export(phoenix, project), "trip-1")
    resumed = subprocess.run(  # the human answers, from another process
        [sys.executable, "-m", "tests.otlp_apps", dsn, str(ws), "trip-1", "trip-resume"],
        env={
            **os.environ,
            "PHOENIX_COLLECTOR_ENDPOINT": phoenix.url,
            "PHOENIX_PROJECT_NAME": project,
            "PYTHONPATH": str(ROOT),
        },
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.splitlines()[-1]) == {"interrupted": False, "flushed": True}

    ids = expected_ids(dsn, "trip-1")
    spans = phoenix.wait_for(project, arrived(ids))
    assert {span_id(s) for s in spans} == ids
    by_id = {span_id(s): s for s in spans}
    assert len({s["context"]["trace_id"] for s in spans}) == 1  # the resume continued it
    assert sorted(path_of(s, by_id) for s in spans) == sorted(
        [
            "LangGraph",
            *(["LangGraph/agent"] * 3),
            *(["LangGraph/agent/FakeMessagesListChatModel"] * 3),
            *(["LangGraph/tools"] * 2),
            "LangGraph/tools/get_weather",
            "LangGraph/tools/get_time",
            "LangGraph/fan",
            *(["LangGraph/work"] * 3),  # the Send fan-out
            "LangGraph/approval",  # the subgraph's node ...
            "LangGraph/approval/review",  # ... and the subgraph's own node
            "LangGraph/interrupt",
            "LangGraph/resume",
            "LangGraph/LangGraph",  # the run resumed by the other process
            "LangGraph/LangGraph/resume (checkpoint)",
            "LangGraph/LangGraph/approval",
            "LangGraph/LangGraph/approval/review",
        ]
    )
    k = kinds(spans)
    assert k["LangGraph"] == {"AGENT"} and k["FakeMessagesListChatModel"] == {"LLM"}
    assert k["get_weather"] == k["get_time"] == {"TOOL"}
    assert k["agent"] == k["tools"] == k["work"] == k["review"] == k["interrupt"] == {"CHAIN"}

    llms = sorted((s for s in spans if s["span_kind"] == "LLM"), key=lambda s: s["start_time"])
    assert [
        (
            s["attributes"]["llm.token_count.prompt"],
            s["attributes"]["llm.token_count.completion"],
            s["attributes"]["llm.token_count.total"],
        )
        for s in llms
    ] == [(i, o, i + o) for i, o in USAGE]
    assert all(s["status_code"] == "OK" for s in llms)
    second = llms[1]["attributes"]  # it saw the first tool's answer, and asked for the next
    assert [second[f"llm.input_messages.{i}.message.role"] for i in range(3)] == [
        "user",
        "assistant",
        "tool",
    ]
    assert second["llm.input_messages.0.message.content"] == "weather in Oslo?"
    call = "llm.input_messages.1.message.tool_calls.0.tool_call."
    assert second[call + "function.name"] == "get_weather"
    assert json.loads(second[call + "function.arguments"]) == {"city": "Oslo"}
    assert second["llm.input_messages.2.message.content"] == "sunny in Oslo"
    assert second["llm.input_messages.2.message.tool_call_id"] == "call-1"
    out = "llm.output_messages.0.message.tool_calls.0.tool_call.function.name"
    assert second[out] == "get_time"
    assert llms[2]["attributes"]["llm.output_messages.0.message.content"] == (
        "Sunny at noon in Oslo."
    )
    weather = next(s for s in spans if s["name"] == "get_weather")["attributes"]
    assert json.loads(weather["input.value"]) == {"city": "Oslo"}
    assert weather["output.value"] == "sunny in Oslo" and weather["tool.name"] == "get_weather"

    root = next(s for s in spans if s["parent_id"] is None)
    assert root["attributes"]["user.id"] == "user-7"
    assert {s["attributes"]["session.id"] for s in spans} == {"trip-1"}
    sessions = phoenix.get(f"/v1/projects/{project}/sessions")["data"]
    assert [(x["session_id"], len(x["traces"])) for x in sessions] == [("trip-1", 1)]
    assert sessions[0]["token_count_total"] == sum(i + o for i, o in USAGE)

    # a resend sends the same ids: Phoenix keeps one copy of each
    args = ["--dsn", dsn, "export", "otlp", "--preset", "phoenix", "--endpoint", phoenix.url]
    resend = CliRunner().invoke(cli_app, [*args, "--project", project, "trip-1", "--resend"])
    assert resend.exit_code == 0, resend.output
    assert resend.output.strip().startswith(f"{len(ids)} spans sent")
    with External(dsn=dsn, workspace=ws) as ext:  # then one more thread, sent after it
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("later"))
    later = CliRunner().invoke(cli_app, [*args, "--project", project, "later"])
    assert later.exit_code == 0, later.output
    after = phoenix.wait_for(project, arrived(expected_ids(dsn, "later")))
    trip_after = [s for s in after if s["attributes"].get("session.id") == "trip-1"]
    assert sorted(map(span_id, trip_after)) == sorted(ids)  # nothing added
    assert {span_id(s): s["attributes"] for s in trip_after} == {
        span_id(s): s["attributes"] for s in spans
    }


def test_a_policy_violation_is_a_guardrail_span(
    dsn: str, tmp_path: Path, phoenix: PhoenixServer, project: str
) -> None:
    with External(
        dsn=dsn, workspace=tmp_path / "ws", export=phoenix_export(phoenix, project)
    ) as ext:
        guarded_app(ext.checkpointer).invoke(QUESTION, ext.config("refund-1", user_id="u-9"))
        assert ext.flush(60)
    spans = phoenix.wait_for(project, arrived(expected_ids(dsn, "refund-1")))
    by_id = {span_id(s): s for s in spans}
    (violation,) = [s for s in spans if s["span_kind"] == "GUARDRAIL"]
    assert path_of(violation, by_id) == "LangGraph/policy_violation"
    v = violation["attributes"]
    assert v["lgx.policy_violation.rule"] == "tool_tier"
    assert v["lgx.policy_violation.outcome"] == "routed"
    assert "remote_write" in v["lgx.policy_violation.message"]
    assert v["langfuse.observation.level"] == "WARNING"
    llm = next(s for s in spans if s["span_kind"] == "LLM")["attributes"]
    asked = [
        llm[f"llm.output_messages.0.message.tool_calls.{i}.tool_call.function.name"]
        for i in range(2)
    ]
    assert asked == ["lookup_order", "remote_write"]
    ran = sorted(path_of(s, by_id) for s in spans if s["span_kind"] == "TOOL")
    assert ran == ["LangGraph/tools/lookup_order"]  # the refused call never ran
    assert "LangGraph/escalate" in {path_of(s, by_id) for s in spans}


def test_a_memory_search_and_a_retriever_are_retriever_spans_with_scores(
    dsn: str, tmp_path: Path, phoenix: PhoenixServer, project: str
) -> None:
    with External(
        dsn=dsn, workspace=tmp_path / "ws", export=phoenix_export(phoenix, project)
    ) as ext:
        app = memory_app(ext.checkpointer, ext.store(memory_store()))
        app.invoke(
            {"messages": [("user", f"book my usual seat, my key is {SECRET}")]},
            ext.config("mem-1", user_id="user-7"),
        )
        assert ext.flush(60)
    spans = phoenix.wait_for(project, arrived(expected_ids(dsn, "mem-1")))
    by_name = {s["name"]: s for s in spans}
    search = by_name["store.search"]
    assert search["span_kind"] == "RETRIEVER"
    a = search["attributes"]
    assert a["input.value"] == "which seat does the user prefer"
    assert a["retrieval.documents.0.document.id"] == "prefs/user-7/seat"
    assert a["retrieval.documents.1.document.id"] == "prefs/user-7/meal"
    assert 0 < a["retrieval.documents.1.document.score"] < a["retrieval.documents.0.document.score"]
    shelf = by_name["Shelf"]["attributes"]
    assert shelf["retrieval.documents.0.document.content"] == "refunds take 5 days"
    assert shelf["retrieval.documents.0.document.score"] == 0.91
    tool = by_name["book_seat"]
    assert tool["span_kind"] == "TOOL" and tool["status_code"] == "ERROR"
    assert "booking system down" in tool["status_message"]
    llms = sorted((s for s in spans if s["span_kind"] == "LLM"), key=lambda s: s["start_time"])
    llm = llms[0]["attributes"]  # the call that asked for the tool (the second reports no usage)
    assert (llm["llm.token_count.prompt"], llm["llm.token_count.completion"]) == MEMORY_USAGE
    assert "[REDACTED:openai_key]" in llm["llm.input_messages.0.message.content"]
    everything = json.dumps(spans)
    assert SECRET not in everything and SECRET[8:30] not in everything  # redacted everywhere


# -- what a person sees -----------------------------------------------------------------------
needs_chromium = pytest.mark.skipif(
    browser.chromium_path() is None,
    reason="chromium is not installed (scripts/test.sh installs Debian's chromium package; "
    "apt-get install chromium failed or is not possible here)",
)


def _keep(shot: Path) -> None:
    where = os.environ.get("LGX_SCREENSHOTS")
    if where:
        shutil.copy(shot, ROOT / where / shot.name)


@needs_chromium
def test_phoenix_shows_our_trace_as_chat_tool_calls_and_token_counts(
    dsn: str, tmp_path: Path, phoenix: PhoenixServer
) -> None:
    project = "langgraph-external"  # what the docs' screenshots show
    export = phoenix_export(phoenix, project)
    record_trip(dsn, tmp_path / "ws", export, "trip-ui")
    with External(dsn=dsn, workspace=tmp_path / "ws", export=export) as ext:
        memory_app(ext.checkpointer, ext.store(memory_store())).invoke(
            {"messages": [("user", "book my usual seat")]}, ext.config("memory-ui")
        )
        assert ext.flush(60)
    ids = expected_ids(dsn, "trip-ui") | expected_ids(dsn, "memory-ui")
    spans = phoenix.wait_for(project, arrived(ids))
    project_id = next(p["id"] for p in phoenix.get("/v1/projects")["data"] if p["name"] == project)
    llm = next(  # the second model call: a tool's answer in, the next tool call out
        s
        for s in spans
        if s["span_kind"] == "LLM"
        and s["attributes"]["session.id"] == "trip-ui"
        and s["attributes"]["llm.token_count.total"] == sum(USAGE[1])
    )
    search = next(s for s in spans if s["name"] == "store.search")
    with browser.browser() as page:
        page.goto(
            f"{phoenix.url}/projects/{project_id}/traces/{llm['context']['trace_id']}"
            f"?selectedSpanNodeId={llm['id']}",
            width=1600,
            height=1000,
        )
        text = _wait_for_text(page, "sunny in Oslo")
        for shown in ("tool: get_weather", "get_weather", "Tool Result: call-1", "get_time("):
            assert shown in text, shown
        assert str(sum(USAGE[1])) in text  # the token count next to the model call
        shot = tmp_path / "phoenix-llm.png"
        page.screenshot(shot)
        assert shot.stat().st_size > 50_000
        _keep(shot)

        # the same span's attributes, searched: its token counts, then our own attributes
        assert page.eval(
            "(() => { const t = [...document.querySelectorAll('[role=tab]')]"
            ".find(e => e.textContent.trim().startsWith('Attributes'));"
            " if (t) t.click(); return !!t; })()"
        )
        _wait_for_text(page, "openinference.span.kind")
        searches = [
            (
                "token",
                "phoenix-tokens.png",
                ("llm.token_count.prompt", "gen_ai.usage.input_tokens"),
            ),
            ("lgx.", "phoenix-ours.png", ("lgx.checkpoint_id", "lgx.thread_id")),
        ]
        for i, (needle, name, shown) in enumerate(searches):
            _search_attributes(page, needle, open_box=i == 0)
            # the search leaves only the matching rows: Langfuse's own attributes go
            text = _wait_until(page, lambda t: "langfuse.observation.type" not in t)
            assert all(x in text for x in shown), text[:3000]
            shot = tmp_path / name
            page.screenshot(shot)
            _keep(shot)

        page.goto(
            f"{phoenix.url}/projects/{project_id}/traces/{search['context']['trace_id']}"
            f"?selectedSpanNodeId={search['id']}",
            width=1600,
            height=1000,
        )
        text = _wait_for_text(page, "prefs/user-7/seat")
        assert "prefs/user-7/meal" in text and "0.46" in text
        shot = tmp_path / "phoenix-retriever.png"
        page.screenshot(shot)
        _keep(shot)


def _search_attributes(page: Any, text: str, *, open_box: bool) -> None:
    """Type ``text`` into the attributes table's search box (as a person would)."""
    box = "input[aria-label='Search JSON keys and values']"
    if open_box:  # the magnifier button opens the box
        assert page.eval(
            "(() => { const b = [...document.querySelectorAll('button')].find("
            "x => x.getAttribute('aria-label') === 'Search JSON keys and values');"
            " if (b) b.click(); return !!b; })()"
        )
        page.pump(0.5)
    page.eval(f'(() => {{ const i = document.querySelector("{box}"); i.focus(); i.select(); }})()')
    page.send("Input.insertText", text=text)
    page.pump(1.0)


def _wait_until(page: Any, ready: Any, seconds: float = 30.0) -> str:
    """The page's text once ``ready(text)`` holds."""
    waited = 0.0
    while True:
        text = str(page.eval("document.body.innerText"))
        if ready(text):
            page.pump(0.5)
            return str(page.eval("document.body.innerText"))
        assert waited < seconds, text[:3000]
        page.pump(0.25)
        waited += 0.25


def _wait_for_text(page: Any, needle: str, seconds: float = 60.0) -> str:
    """The page's text once ``needle`` is in it (Phoenix renders after its queries)."""
    waited = 0.0
    while True:
        text = str(page.eval("document.body.innerText"))
        if needle in text or waited >= seconds:
            assert needle in text, text[:2000]
            page.pump(1.0)  # let the last panes settle before a screenshot
            return str(page.eval("document.body.innerText"))
        page.pump(0.25)
        waited += 0.25
