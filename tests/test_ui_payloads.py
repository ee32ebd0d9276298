"""Big payloads wherever a reviewer looks (issue 33): a 100 KB tool result and a 40 KB
user message, offloaded to the workspace's artifacts when recorded, read back whole.

The ledger is recorded by a real agent (tests/ui_payload_apps.py) into an embedded
PostgreSQL and served by the real ``lgx ui`` command in a child process, as in
tests/test_ui.py; ``lgx show`` and ``lgx events`` run in this process.
"""

from __future__ import annotations

import json
import re
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
from typer.testing import CliRunner

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.options import Options
from langgraph_external.read.thread_view import build_thread_view
from langgraph_external.ui import _queries, read_only_options
from langgraph_external.workspace.files import Workspace
from tests import browser
from tests.conftest import _fresh_database
from tests.test_ui import Server, select, shots, wait_for
from tests.ui_payload_apps import PAGE_END, PAGE_MIDDLE, fetch_app, page, question
from tests.ui_server import lgx_ui

needs_chromium = pytest.mark.skipif(
    browser.chromium_path() is None, reason="chromium is not installed (scripts/test.sh does it)"
)
S = "langgraph_external"


@dataclass
class Ledger:
    dsn: str
    ws: Path


@pytest.fixture(scope="module")
def recorded(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    """Three runs of the agent: big-A (Oslo), big-B (Bergen: another page and prompt), and
    big-gone (Trondheim), whose tool result's artifact is then deleted."""
    tmp = tmp_path_factory.mktemp("ui-payloads")
    with _fresh_database(pg_server) as dsn:
        ws = tmp / "ws"
        with External(dsn=dsn, workspace=ws, options=Options(spool_dir=tmp / "spool")) as ext:
            for thread, city in (("big-A", "Oslo"), ("big-B", "Bergen"), ("big-gone", "Trondheim")):
                fetch_app(ext.checkpointer, city).invoke(
                    {"messages": [HumanMessage(question())]}, ext.config(thread, user_id="bob")
                )
        yield Ledger(dsn, ws)


@pytest.fixture(scope="module")
def server(recorded: Ledger) -> Iterator[Server]:
    """``lgx ui`` in a child process, on a free port of 127.0.0.1."""
    with lgx_ui(recorded.dsn, recorded.ws) as running:
        yield running


def view_of(recorded: Ledger, thread_id: str) -> dict[str, Any]:
    with psycopg.connect(recorded.dsn, autocommit=True, options=read_only_options()) as conn:
        envs = _queries.view_events(conn, S, thread_id)
    return build_thread_view(thread_id, envs)


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def row_html(server: Server, thread_id: str, row: int) -> str:
    query = urllib.parse.urlencode({"id": thread_id, "row": row})
    status, _, body = get(f"{server.url}thread/row?{query}")
    assert status == 200
    return body.decode()


def artifact_links(html: str) -> list[str]:
    return [x.replace("&amp;", "&") for x in re.findall(r'href="/(artifact\?[^"]+)"', html)]


def escaped(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")
    )


def whole(server: Server, link: str) -> tuple[int, dict[str, str], bytes]:
    return get(server.url + link)


# -- the views ----------------------------------------------------------------------------
def test_a_100kb_tool_result_shows_its_ends_shortened_and_opens_whole_from_the_tool_call(
    server: Server, recorded: Ledger
) -> None:
    view = view_of(recorded, "big-A")
    tool = next(r for r in view["rows"] if r["kind"] == "tool")
    html = row_html(server, "big-A", tool["id"])
    assert 'Result</h2><pre class="json">null' not in html  # was "Result null"
    assert escaped(page()[:200]) in html  # its head: the fetched page's script, as text
    assert escaped(PAGE_END) in html  # and its tail
    assert PAGE_MIDDLE not in html  # the middle is left out, and says so
    assert "shortened: 100,000 bytes in all" in html
    links = artifact_links(html)
    assert links, html[:2000]
    status, _, body = whole(server, links[0])
    assert status == 200 and body.decode() == page()


def test_the_40kb_user_message_is_in_the_conversation_with_its_ends_and_a_link(
    server: Server,
) -> None:
    html = get(server.url + "thread?id=big-A")[2].decode()
    conversation = html[html.index('id="conversation"') : html.index('id="llm-calls"')]
    user = conversation[conversation.index('data-role="user"') :]
    assert escaped(question()[:300]) in user
    assert escaped("END-OF-QUESTION: please answer briefly.") in user
    assert "MIDDLE-OF-QUESTION" not in user
    assert "shortened: 40,000 bytes in all" in user
    link = artifact_links(user)[0]
    assert whole(server, link)[2].decode() == question()
    # the tool result next to its call, in the conversation too
    assert "shortened: 100,000 bytes in all" in conversation
    assert whole(server, artifact_links(conversation)[1])[2].decode() == page()


def test_the_checkpoint_changes_show_the_large_user_message_and_tool_result(
    server: Server,
) -> None:
    html = get(server.url + "thread?id=big-A")[2].decode()
    checkpoints = html[html.index('id="checkpoints"') : html.index('id="violations"')]
    assert "+ user: Where is order A-1? Here is the whole log:" in checkpoints
    assert "+ tool (fetch_page): " + escaped(page()[:60]) in checkpoints
    assert "(40,000 characters)" in checkpoints and "(100,000 characters)" in checkpoints


def test_the_llm_call_view_shows_each_offloaded_message_shortened_with_its_link(
    server: Server, recorded: Ledger
) -> None:
    view = view_of(recorded, "big-A")
    second = [r for r in view["rows"] if r["kind"] == "llm"][1]
    html = row_html(server, "big-A", second["id"])
    assert "shortened: 40,000 bytes in all" in html
    assert "shortened: 100,000 bytes in all" in html
    bodies = {whole(server, link)[2].decode() for link in artifact_links(html)}
    assert bodies == {question(), page()}


def test_compare_shows_offloaded_prompts_and_results_with_each_sides_link(
    server: Server,
) -> None:
    html = get(server.url + "compare?a=big-A&b=big-B")[2].decode()
    llm = html[html.index('id="llm"') : html.index('id="tools"')]
    tools = html[html.index('id="tools"') : html.index('id="state"')]
    assert "shortened: 40,000 bytes in all" in llm
    assert escaped(PAGE_END) in tools
    links = artifact_links(tools)
    assert {urllib.parse.parse_qs(x.split("?", 1)[1])["thread"][0] for x in links} == {
        "big-A",
        "big-B",
    }
    bodies = {whole(server, link)[2].decode() for link in links}
    assert bodies == {page(city="Oslo"), page(city="Bergen")}
    diff = html[html.index('id="prompt-diff"') : html.index('id="path"')]
    assert "[user] Where is order A-1? Here is the whole log:" in diff  # its head, as text


# -- the route ----------------------------------------------------------------------------
def test_the_artifact_route_refuses_a_bad_digest_400_and_an_unnamed_or_missing_one_404(
    server: Server, recorded: Ledger
) -> None:
    a = view_of(recorded, "big-A")
    b = view_of(recorded, "big-B")
    digest_a = next(r for r in a["rows"] if r["kind"] == "tool")["detail"]["result"]["$artifact"]
    digest_b = next(r for r in b["rows"] if r["kind"] == "tool")["detail"]["result"]["$artifact"]
    assert digest_a != digest_b

    def status(thread: str, sha: str) -> int:
        return get(
            server.url + "artifact?" + urllib.parse.urlencode({"thread": thread, "sha": sha})
        )[0]

    for bad in ("", "abc", digest_a[:63], digest_a + "0", "../" + digest_a[3:], "g" * 64):
        assert status("big-A", bad) == 400, bad
    assert get(server.url + "artifact?thread=big-A")[0] == 400
    assert status("big-A", digest_a.upper()) == 200  # hex is hex
    assert status("big-A", digest_b) == 404  # big-B's, not named by big-A's record
    assert status("no-such-thread", digest_a) == 404
    assert status("../big-A", digest_a) == 404
    assert status("big-A", "0" * 64) == 404
    gone = next(r for r in view_of(recorded, "big-gone")["rows"] if r["kind"] == "tool")
    digest = gone["detail"]["result"]["$artifact"]
    assert status("big-gone", digest) == 200
    Path(Workspace(recorded.ws).artifact_path("big-gone", digest)).unlink()
    assert status("big-gone", digest) == 404  # named, but not in the workspace
    headers = get(server.url + "artifact?thread=big-A&sha=x")[1]
    assert headers["content-type"].startswith("text/plain")
    assert "frame-ancestors 'none'" in headers["content-security-policy"]


def test_html_in_an_artifact_is_served_as_text_with_a_sandboxing_policy(
    server: Server, recorded: Ledger
) -> None:
    view = view_of(recorded, "big-A")
    digest = next(r for r in view["rows"] if r["kind"] == "tool")["detail"]["result"]["$artifact"]
    code, headers, body = get(f"{server.url}artifact?thread=big-A&sha={digest}")
    assert code == 200 and body.startswith(b"<html><head><title>Order A-1")
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["x-content-type-options"] == "nosniff"
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "sandbox" in csp
    assert headers["content-disposition"] == f'inline; filename="{digest}.txt"'
    assert headers["cache-control"] == "no-store"


@needs_chromium
def test_the_views_in_a_browser_and_a_hostile_artifact_is_never_rendered(
    server: Server, recorded: Ledger, tmp_path: Path
) -> None:
    """Screenshots of the thread, LLM-call, tool-call and compare views (LGX_SCREENSHOTS=DIR
    keeps them); the page a tool fetched opens as its text, its script never runs."""
    out = shots() or tmp_path
    view = view_of(recorded, "big-A")
    with browser.browser() as tab:
        tab.goto(server.url + "thread?id=big-A", width=1440, height=1100)
        assert tab.errors == []
        conversation = tab.eval("document.getElementById('conversation').innerText")
        assert "Where is order A-1?" in conversation and "END-OF-QUESTION" in conversation
        assert "shortened: 40,000 bytes in all" in conversation
        # the user message, the tool result under its call and the tool's message
        assert tab.eval("document.querySelectorAll('#conversation a.whole').length") == 3
        tab.screenshot(out / "ui-payloads-thread.png")
        llm = [r for r in view["rows"] if r["kind"] == "llm"][1]
        shown = select(tab, str(llm["id"]))
        assert "shortened: 100,000 bytes in all" in shown
        tab.screenshot(out / "ui-payloads-llm.png")
        tool = next(r for r in view["rows"] if r["kind"] == "tool")
        shown = select(tab, str(tool["id"]))
        assert "<script>alert('pwned')</script>" in shown and PAGE_END in shown
        tab.screenshot(out / "ui-payloads-tool.png")
        href = tab.eval("document.querySelector('#details > section:not([hidden]) a.whole').href")
        tab.goto(href, width=1000, height=600)
        assert tab.eval("document.contentType") == "text/plain"
        assert tab.eval("document.querySelectorAll('script, title, p').length") == 0
        assert wait_for(tab, "document.body.innerText.length") == len(page())
        assert tab.errors == []
        tab.goto(server.url + "compare?a=big-A&b=big-B", width=1440, height=1100)
        assert tab.errors == []
        assert "shortened: 100,000 bytes" in tab.eval("document.getElementById('tools').innerText")
        tab.eval("document.getElementById('tools').scrollIntoView()")
        tab.screenshot(out / "ui-payloads-compare.png")


# -- the commands -------------------------------------------------------------------------
def lgx(recorded: Ledger, *args: str) -> str:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})
    result = runner.invoke(app, ["--dsn", recorded.dsn, "--workspace", str(recorded.ws), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_lgx_events_prints_offloaded_values_by_their_ends_size_and_path_and_whole_with_full(
    recorded: Ledger,
) -> None:
    where = Workspace(recorded.ws).thread_dir("big-A") + "/artifacts/"
    brief = lgx(recorded, "events", "big-A", "--kind", "tool_end")
    assert "parsed, result: 100,000 bytes (text) in " + where in brief
    assert "<script>alert('pwned')</script>" in brief and PAGE_END in brief
    assert PAGE_MIDDLE not in brief and "shortened: 100,000 bytes in all" in brief
    full = lgx(recorded, "events", "big-A", "--kind", "tool_end", "--full")
    assert page() in full
    lines = lgx(recorded, "events", "big-A", "--kind", "tool_end", "--json", "--full")
    assert '"result": ' + json.dumps(page(), ensure_ascii=False) in lines
    stored = lgx(recorded, "events", "big-A", "--kind", "tool_end", "--json")
    assert PAGE_MIDDLE not in stored and '"$artifact"' in stored  # as stored


def test_lgx_show_prints_the_last_events_offloaded_values_and_whole_with_full(
    recorded: Ledger,
) -> None:
    brief = lgx(recorded, "show", "big-A", "-n", "0")
    assert "input.messages.0.content: 40,000 bytes (text)" in brief
    assert "END-OF-QUESTION" in brief and "(the value printed at seq" in brief
    full = lgx(recorded, "show", "big-A", "-n", "0", "--full")
    assert question() in full and page() in full
    lines = lgx(recorded, "show", "big-A", "--json", "--full", "-n", "0")
    assert "MIDDLE-OF-QUESTION" in lines and '"$artifact"' not in lines
