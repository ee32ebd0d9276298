"""``lgx ui``: the threads list, the thread view and the compare view over a real ledger.

The ledger is recorded by real apps (tests/ui_apps.py: a guarded ReAct support agent with
Mem0 memory, an interrupt and a policy violation; tests/replay_apps.py: the same weather
agent under two system prompts) and served by the real ``lgx ui`` command in a child
process; pages are checked in headless Chromium. Screenshots go to ``$LGX_SCREENSHOTS``
(``docs/img`` when the docs' pictures are refreshed) or the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from langgraph_external import External
from langgraph_external.options import Options
from langgraph_external.read.prices import PricesError, PriceTable, load_prices
from langgraph_external.ui import _queries, read_only_options
from tests import browser
from tests.conftest import _fresh_database
from tests.ui_apps import HOSTILE, record_support_thread, remember_alice
from tests.ui_server import Server, lgx_ui

needs_chromium = pytest.mark.skipif(
    browser.chromium_path() is None, reason="chromium is not installed (scripts/test.sh does it)"
)
S = "langgraph_external"
EVIL_THREAD = f"t{HOSTILE}"
PRICES = """\
currency: USD
"gpt-4o-mini*": {input: 0.15, output: 0.60}
"""


@dataclass
class Ledger:
    dsn: str
    ws: Path
    prices: Path


@pytest.fixture(scope="module")
def recorded(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    """One ledger for the module: support threads, two weather runs, a hostile thread."""
    from langgraph_external.memory_adapters import Mem0Adapter
    from langgraph_external.memory_adapters.testing import HashingEmbeddings, ScriptedChatModel
    from tests.replay_apps import react_app, terse_react_app

    tmp = tmp_path_factory.mktemp("ui")
    os.environ.setdefault("MEM0_DIR", str(tmp / "mem0"))
    os.environ["LGX_TEST_TOOL_LOG"] = str(tmp / "tools.log")
    prices = tmp / "prices.yaml"
    prices.write_text(PRICES)
    with _fresh_database(pg_server) as dsn:
        ws = tmp / "ws"
        with External(dsn=dsn, workspace=ws, options=Options(spool_dir=tmp / "spool")) as ext:
            memory = Mem0Adapter.from_external(
                ext, llm=ScriptedChatModel(), embedder=HashingEmbeddings()
            )
            remember_alice(memory, bad=HOSTILE)
            record_support_thread(ext, memory, "refund-A-1")
            record_support_thread(
                ext, memory, "refund-B-2", user_id="bob", tags=["vip"], model="local-llama"
            )
            record_support_thread(
                ext, memory, EVIL_THREAD, bad=HOSTILE, user_id=f"u{HOSTILE}", tags=[HOSTILE]
            )
            memory.close()
            question = {"messages": [HumanMessage("weather in Oslo?")]}
            react_app(ext.checkpointer).invoke(question, ext.config("weather-1"))
            terse_react_app(ext.checkpointer).invoke(question, ext.config("weather-2"))
        yield Ledger(dsn, ws, prices)


@pytest.fixture(scope="module")
def server(recorded: Ledger) -> Iterator[Server]:
    """``lgx ui`` in a child process, on a free port of 127.0.0.1."""
    with lgx_ui(recorded.dsn, recorded.ws, {"LGX_PRICES": str(recorded.prices)}) as running:
        yield running


def q(thread_id: str) -> str:
    return urllib.parse.quote(thread_id, safe="")


# -- prices -------------------------------------------------------------------------------
def test_prices_come_from_a_file_the_environment_or_pyproject_and_unknown_models_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LGX_PRICES", raising=False)
    assert load_prices(cwd=tmp_path).prices == {}  # nothing configured: every price unknown
    (tmp_path / "pyproject.toml").write_text(
        '[tool.langgraph-external.prices]\ncurrency = "EUR"\n'
        '"gpt-4o*" = { input = 2.5, output = 10 }\n'
        '"gpt-4o-mini*" = { input = 0.15, output = 0.6 }\n'
    )
    table = load_prices(cwd=tmp_path)
    assert table.currency == "EUR"
    # the longest matching pattern wins; a model without an entry has no price
    assert table.cost("gpt-4o-mini-2024", input_tokens=1_000_000, output_tokens=0) == 0.15
    assert table.cost("gpt-4o-2024", input_tokens=0, output_tokens=1_000_000) == 10.0
    assert table.cost("llama3", input_tokens=10, output_tokens=10) is None
    for name, text in {
        "p.yaml": "m: {input: 1, output: 2}\n",
        "p.json": '{"m": {"input": 1, "output": 2}}',
        "p.toml": "[m]\ninput = 1\noutput = 2\n",
    }.items():
        (tmp_path / name).write_text(text)
        monkeypatch.setenv("LGX_PRICES", str(tmp_path / name))
        assert load_prices(cwd=tmp_path).cost("m", input_tokens=10**6, output_tokens=10**6) == 3
    for bad in ("m: {input: -1}\n", "m: {input: cheap}\n", "m: 3\n", "m: {input: 1, out: 2}\n"):
        (tmp_path / "bad.yaml").write_text(bad)
        with pytest.raises(PricesError, match="model 'm'"):
            load_prices(tmp_path / "bad.yaml")
    with pytest.raises(PricesError, match="cannot read"):
        load_prices(tmp_path / "missing.yaml")


# -- the threads list ---------------------------------------------------------------------
def listed(dsn: str, text: str, **kw: Any) -> list[str]:
    with psycopg.connect(dsn, autocommit=True, options=read_only_options()) as conn:
        page = _queries.list_threads(conn, S, _queries.Search.parse(text), **kw)
    return [r.thread_id for r in page.rows]


def test_threads_are_found_by_user_tag_status_node_tool_error_violation_and_session(
    recorded: Ledger,
) -> None:
    d = recorded.dsn
    # memories written outside any graph run are recorded under the thread "_no_thread"
    everyone = {"refund-A-1", "refund-B-2", EVIL_THREAD, "weather-1", "weather-2", "_no_thread"}
    assert set(listed(d, "")) == everyone
    assert listed(d, "user:bob") == ["refund-B-2"]
    assert sorted(listed(d, "tag:refunds")) == ["refund-A-1"]
    assert listed(d, shlex.quote(f"tag:{HOSTILE}")) == [EVIL_THREAD]
    assert sorted(listed(d, "refund")) == ["refund-A-1", "refund-B-2"]  # part of a thread id
    assert sorted(listed(d, "tool:get_time")) == ["weather-1"]
    assert sorted(listed(d, "node:recall")) == ["refund-A-1", "refund-B-2"]
    assert set(listed(d, "violation:tool_tier")) == {"refund-A-1", "refund-B-2", EVIL_THREAD}
    assert len(listed(d, "violation:")) == 3 and listed(d, "violation:no_such_rule") == []
    assert listed(d, "session:weather-2") == ["weather-2"]  # the Langfuse session: the thread
    assert set(listed(d, "status:ok")) == everyone and listed(d, "status:interrupted") == []
    assert listed(d, "error:") == []
    with pytest.raises(_queries.SearchError, match="unknown search key 'colour'"):
        _queries.Search.parse("colour:red")
    with pytest.raises(_queries.SearchError, match="status is one of"):
        _queries.Search.parse("status:sleepy")


def test_threads_sort_by_tokens_and_cost_and_come_a_page_at_a_time(recorded: Ledger) -> None:
    prices = load_prices(recorded.prices)
    d = recorded.dsn
    with psycopg.connect(d, autocommit=True, options=read_only_options()) as conn:
        page = _queries.list_threads(conn, S, _queries.Search(), sort="cost", prices=prices)
        rows = {r.thread_id: r for r in page.rows}
        # gpt-4o-mini is priced; the local model is not, and says so instead of costing 0
        assert rows["refund-A-1"].cost is not None and rows["refund-A-1"].cost > 0
        assert rows["refund-B-2"].cost is None
        assert rows["refund-B-2"].unknown_price_models == ["local-llama"]
        assert page.rows[0].thread_id in ("refund-A-1", EVIL_THREAD)
        by_tokens = _queries.list_threads(conn, S, _queries.Search(), sort="tokens")
        tokens = [r.tokens for r in by_tokens.rows]
        assert tokens == sorted(tokens, reverse=True) and tokens[0] > 0
        by_duration = _queries.list_threads(conn, S, _queries.Search(), sort="duration", desc=False)
        durations = [r.duration_ms for r in by_duration.rows]
        assert durations == sorted(durations)
        first = _queries.list_threads(conn, S, _queries.Search(), page=1, page_size=2)
        third = _queries.list_threads(conn, S, _queries.Search(), page=3, page_size=2)
        assert (first.total, first.pages, len(first.rows), len(third.rows)) == (6, 3, 2, 2)
        assert rows["refund-A-1"].users == ["alice"] and rows["refund-A-1"].status == "ok"
        assert rows["refund-A-1"].violation_rules == ["tool_tier"]


def test_the_list_recomputes_only_the_threads_that_moved_on(recorded: Ledger) -> None:
    summaries = _queries.Summaries()
    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        first = summaries.refresh(conn, S)
        assert summaries.computed == len(first) == 6
        assert summaries.refresh(conn, S) == first and summaries.computed == 6
        # one thread moves on (a new run): only it is summarized again
        with External(dsn=recorded.dsn, workspace=recorded.ws) as ext:
            from tests.replay_apps import react_app

            react_app(ext.checkpointer).invoke(
                {"messages": [HumanMessage("and in Bergen?")]}, ext.config("weather-1")
            )
        again = summaries.refresh(conn, S)
        assert summaries.computed == 7
        assert again["weather-1"].runs == first["weather-1"].runs + 1


# -- the server ---------------------------------------------------------------------------
def test_the_server_is_local_read_only_and_answers_get_only(
    recorded: Ledger, server: Server
) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    status, body, headers = server.get("/")
    assert status == 200 and "refund-A-1" in body
    assert "script-src 'self'" in headers["content-security-policy"]
    req = urllib.request.Request(server.url, data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=30)
    assert info.value.code == 405
    # a page elsewhere that rebinds its DNS name to 127.0.0.1 is refused
    assert server.get("/", Host="attacker.example")[0] == 400
    assert server.get("/thread?id=nope")[0] == 404
    status, body, _ = server.get("/static/lgx.js")
    assert status == 200 and "textContent" in body
    # the app's sessions cannot write, whatever a query tried
    with (
        psycopg.connect(recorded.dsn, autocommit=True, options=read_only_options()) as conn,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        conn.execute(f"delete from {S}.events")
    status, body, headers = server.get(f"/thread/timeline.html?id={q('refund-A-1')}")
    assert status == 200 and "attachment" in headers["content-disposition"]
    # one file: every link stays inside the page, nothing is loaded from elsewhere
    refs = re.findall(r'(?:src|href)="([^"]*)"', body)
    assert refs and all(r.startswith(("#", "data:")) for r in refs), refs


def test_a_tampered_thread_shows_its_verification_failing(recorded: Ledger, server: Server) -> None:
    status, body, _ = server.get(f"/thread/verify.json?id={q('weather-1')}")
    assert status == 200 and json.loads(body)["headline"].startswith("hash chain verified")
    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        conn.execute(
            f"update {S}.events set payload = payload || '{{\"x\": 1}}' "
            "where thread_id = 'weather-2' and seq = 3"
        )
    result = json.loads(server.get(f"/thread/verify.json?id={q('weather-2')}")[1])
    assert result["ok"] is False and result["headline"].startswith("verification failed")
    assert any("seq 3" in p for p in result["problems"])
    # the recorded events of a row, fetched by the page when asked for
    status, body, _ = server.get(f"/thread/events.json?id={q('weather-1')}&seq=2,3")
    assert [e["seq"] for e in json.loads(body)] == [2, 3]


# -- in the browser -----------------------------------------------------------------------
def select(page: browser.Page, row: str) -> str:
    """Select a row of the run tree (an id, or a CSS selector) and wait for its details
    (the app renders them on the server when asked)."""
    if not row.isdigit():
        row = page.eval(f"document.querySelector({json.dumps(row)}).dataset.row")
    page.eval(f"window.lgx.select({row})")
    assert wait_for(page, "document.getElementById('details').dataset.row") == row
    return str(page.eval("document.querySelector('#details > section:not([hidden])').innerText"))


def wait_for(page: browser.Page, expression: str, seconds: float = 60) -> Any:
    """The value of ``expression`` once it is set (the page fetches some things)."""
    end = time.monotonic() + seconds
    while (value := page.eval(expression)) in (None, "") and time.monotonic() < end:
        page.pump(0.1)
    return value


def shots() -> Path | None:
    where = os.environ.get("LGX_SCREENSHOTS")
    return Path(where) if where else None


@needs_chromium
def test_each_view_renders_without_console_errors_and_shows_the_record(
    server: Server, tmp_path: Path
) -> None:
    out = shots() or tmp_path
    with browser.browser() as page:
        page.goto(server.url + "?q=" + q("refund"), width=1440, height=560)
        assert page.errors == []
        assert page.eval("[...document.querySelectorAll('#threads tbody tr')].length") == 2
        page.goto(server.url, width=1440, height=560)
        cells = page.eval(
            "[...document.querySelectorAll('#threads tbody tr')].map(r => r.innerText)"
        )
        assert any("⚠ tool_tier" in c and "alice" in c for c in cells)
        assert any("unknown price" in c for c in cells)  # local-llama has no price
        page.screenshot(out / "ui-threads.png")
        assert page.errors == []

        page.goto(server.url + "thread?id=refund-A-1", width=1440, height=1000)
        assert "What would have run" in select(page, "#tree .row.k-violation")
        assert wait_for(page, "document.body.dataset.verified") == "ok"
        assert page.errors == []
        text = page.eval("document.body.innerText")
        for expected in (
            "hash chain verified",  # the thread's verification
            "policy violation: tool_tier",  # a violation labelled with its rule
            "interrupt: awaiting approval of tool_tier",  # the interrupt, at its node
            "resume with false",
            "memory search · 2 hits",  # memory hits with their scores
            "Alice's order A-1 was a birthday present",
            "LLM gpt-4o-mini · ",  # a model call: tokens and cost
            "Let me check the order.",  # the conversation
            "order A-1: shipped on 2026-11-28",  # a tool result next to its call
        ):
            assert expected in text, expected
        assert "$0.0000" in page.eval("document.getElementById('cost').textContent")
        # a checkpoint's state change, read from the workspace
        assert "+ assistant: A human will look at this refund." in page.eval(
            "document.getElementById('checkpoints').innerText"
        )
        page.screenshot(out / "ui-thread.png")
        # the model call's exact prompt and answer
        shown = select(page, "#tree .row.k-llm")
        assert "Prompt (2 messages)" in shown and "Please refund order A-1" in shown
        assert "→ lookup_order" in shown and re.search(r"\d+ in · 30 out · \d+ total", shown)

        page.goto(server.url + "compare?a=weather-1&b=weather-2", width=1440, height=1000)
        assert page.errors == []
        text = page.eval("document.body.innerText")
        assert "the two sides differ" in text
        diff = page.eval("document.getElementById('prompt-diff').innerText")
        assert "-[system] You are a weather assistant." in diff
        assert "+[system] You are a terse weather assistant." in diff
        assert "get_time" in page.eval("document.getElementById('tools').innerText")
        page.screenshot(out / "ui-compare.png")
        # two checkpoints of one thread
        page.goto(server.url + "thread?id=refund-A-1", width=1200, height=800)
        cps = page.eval(
            "[...document.querySelectorAll('#checkpoints a[href*=compare]')].map(a => a.href)"
        )
        assert len(cps) == 6
        page.goto(cps[2] + "&bcp=" + cps[-1].split("acp=")[1], width=1200, height=800)
        assert page.errors == []
        assert "Path" in page.eval("document.body.innerText")
        assert page.eval("document.getElementById('error')") is None


@needs_chromium
def test_hostile_text_everywhere_is_shown_as_text_and_never_runs(
    recorded: Ledger, server: Server, tmp_path: Path
) -> None:
    """``<script>`` and ``"><img onerror>`` in messages, tool names, arguments and results,
    node names, memories, the thread id, the user id and tags: none of it runs."""
    from typer.testing import CliRunner

    from langgraph_external.cli import app

    timeline = tmp_path / "evil.html"
    result = CliRunner(env={"LGX_DSN": recorded.dsn}).invoke(
        app, ["--workspace", str(recorded.ws), "timeline", EVIL_THREAD, "-o", str(timeline)]
    )
    assert result.exit_code == 0, result.output
    pages = [
        server.url + "?q=" + q(shlex.quote(f"user:u{HOSTILE}")),
        server.url + "?q=" + q(HOSTILE),
        server.url + "thread?id=" + q(EVIL_THREAD),
        server.url + "compare?a=" + q(EVIL_THREAD) + "&b=refund-A-1",
        timeline.as_uri(),
    ]
    with browser.browser() as page:
        for url in pages:
            page.goto(url, width=1400, height=900)
            rows = page.eval("[...document.querySelectorAll('#tree .row')].map(r => r.dataset.row)")
            for i in rows or ():  # every row's details, and its recorded events
                select(page, i)
                page.eval("document.querySelectorAll('details').forEach(d => d.open = true)")
                page.pump(0.05)
            if "/thread?" in url:
                assert wait_for(page, "document.body.dataset.verified") == "ok"
            page.pump(0.5)
            assert page.errors == [], url
            assert page.eval("typeof window.__xss") == "undefined", url
            assert page.eval("document.querySelectorAll('img').length") == 0, url
            # the page's own script, and the recorded events of a thread as inert JSON
            n_scripts = 2 if url.startswith("file:") else 1
            assert page.eval("document.querySelectorAll('script').length") == n_scripts, url
        # the hostile text is there, as text
        page.goto(server.url + "thread?id=" + q(EVIL_THREAD), width=1400, height=900)
        assert page.eval("document.getElementById('thread-id').textContent") == EVIL_THREAD
        text = page.eval("document.body.innerText")
        assert f"recall{HOSTILE} · step 1" in text and f"user u{HOSTILE}" in text
        assert f"Let me check the order.{HOSTILE}" in text
        page.screenshot(tmp_path / "evil.png")
        if shots():
            page.screenshot(shots() / "ui-hostile.png")  # type: ignore[operator]


def test_lgx_ui_stops_with_a_clear_error_when_the_ledger_is_unreachable() -> None:
    from typer.testing import CliRunner

    from langgraph_external.cli import app

    result = CliRunner(env={"LGX_DSN": None}).invoke(
        app, ["--dsn", "postgresql://nobody@127.0.0.1:1/x?connect_timeout=1", "ui"]
    )
    assert result.exit_code == 2 and "cannot connect" in result.stderr


def test_lgx_ui_needs_a_valid_price_table(recorded: Ledger, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from langgraph_external.cli import app

    (tmp_path / "p.yaml").write_text("m: {input: free}\n")
    result = CliRunner(env={"LGX_DSN": recorded.dsn}).invoke(
        app, ["ui", "--prices", str(tmp_path / "p.yaml")]
    )
    assert result.exit_code == 2 and "input must be a number" in result.stderr


def test_a_thread_recorded_without_prices_says_unknown_price() -> None:
    from langgraph_external.read.thread_view import build_thread_view

    t = "2026-01-31T12:00:00+00:00"
    envs = [
        {
            "seq": 1,
            "ts": t,
            "kind": "llm_start",
            "run_id": "m",
            "name": "x",
            "payload": {"model": "local", "messages": [{"role": "user", "content": "hi"}]},
        },
        {
            "seq": 2,
            "ts": t,
            "kind": "llm_end",
            "run_id": "m",
            "status": "ok",
            "payload": {"usage": {"input_tokens": 3, "output_tokens": 4}},
        },
    ]
    view = build_thread_view("t", envs, prices=PriceTable())
    assert view["cost"] is None and view["unknown_price_models"] == ["local"]
    assert view["rows"][0]["label"] == "LLM local · 3 → 4 tokens · unknown price"
