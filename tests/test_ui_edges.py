"""``lgx ui`` at its edges: bad input, every message of a compared call, writes with their
step, bidi controls in recorded text, store hits, errors and models named in answers.

The ledger is recorded by real apps (tests/ui_edge_apps.py, tests/replay_apps.py) into
an embedded PostgreSQL and served by the real ``lgx ui`` command in a child process, as
in tests/test_ui.py.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from langgraph_external import External
from langgraph_external.options import Options
from langgraph_external.read.prices import load_prices
from langgraph_external.read.thread_view import build_thread_view
from langgraph_external.ui import _queries, read_only_options
from tests import browser
from tests.conftest import _fresh_database
from tests.test_ui import Server
from tests.ui_server import lgx_ui

needs_chromium = pytest.mark.skipif(
    browser.chromium_path() is None, reason="chromium is not installed (scripts/test.sh does it)"
)
S = "langgraph_external"
RLO = "\u202e"
RLO_THREAD = f"rlo-{RLO}fdp.exe"
PRICES = 'currency: USD\n"gpt-4o-mini*": {input: 0.15, output: 0.60}\n'


@dataclass
class Ledger:
    dsn: str
    ws: Path
    prices: Path


@pytest.fixture(scope="module")
def recorded(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    """A failing thread (store hits, a model named in its answer, a node that raises), a
    thread paused and resumed, two weather runs, a thread whose ids carry U+202E."""
    from tests.replay_apps import react_app, terse_react_app
    from tests.ui_edge_apps import approval_app, failing_app, notes_store

    tmp = tmp_path_factory.mktemp("ui-edges")
    os.environ["LGX_TEST_TOOL_LOG"] = str(tmp / "tools.log")
    prices = tmp / "prices.yaml"
    prices.write_text(PRICES)
    with _fresh_database(pg_server) as dsn:
        ws = tmp / "ws"
        with External(dsn=dsn, workspace=ws, options=Options(spool_dir=tmp / "spool")) as ext:
            app = failing_app(ext.checkpointer, ext.store(notes_store()))
            with pytest.raises(RuntimeError):
                app.invoke({"messages": [HumanMessage("where is A-1?")]}, ext.config("edge-fail"))
            approval = approval_app(ext.checkpointer)
            for thread, user, tags in (
                ("edge-resume", "alice", ["refunds"]),
                (RLO_THREAD, f"u{RLO}cba", [f"t{RLO}gat", "plain"]),
            ):
                config = ext.config(thread, user_id=user, tags=tags)
                approval.invoke({"messages": [HumanMessage("refund A-1")]}, config)
                approval.invoke(Command(resume="yes"), config)
            question = {"messages": [HumanMessage("weather in Oslo?")]}
            react_app(ext.checkpointer).invoke(question, ext.config("weather-1"))
            terse_react_app(ext.checkpointer).invoke(question, ext.config("weather-2"))
        yield Ledger(dsn, ws, prices)


@pytest.fixture(scope="module")
def server(recorded: Ledger) -> Iterator[Server]:
    """``lgx ui`` in a child process, on a free port of 127.0.0.1."""
    with lgx_ui(recorded.dsn, recorded.ws, {"LGX_PRICES": str(recorded.prices)}) as running:
        yield running


def q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def view_of(recorded: Ledger, thread_id: str, envs: Any = None) -> dict[str, Any]:
    if envs is None:
        envs = events_of(recorded, thread_id)
    return build_thread_view(thread_id, envs, prices=load_prices(recorded.prices))


def events_of(recorded: Ledger, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(recorded.dsn, autocommit=True, options=read_only_options()) as conn:
        return _queries.view_events(conn, S, thread_id)


# -- 1. bad input -------------------------------------------------------------------------
def test_text_postgres_cannot_take_is_refused_with_a_4xx_on_every_page(server: Server) -> None:
    """NUL (PostgreSQL ``text`` cannot hold it) in any query parameter: a 400 naming the
    parameter, never a 500 with a traceback."""
    for path in (
        "/thread?id=%00",
        "/thread?id=edge-fail%00",
        "/compare?a=%00&b=x",
        "/compare?a=weather-1&b=weather-2&acp=%00",
        "/?q=error:%00",
        "/?q=session:%00",
        "/?q=%00",
        "/thread/row?id=%00&row=1",
        "/thread/timeline.html?id=%00",
        "/thread/events.json?id=%00",
        "/thread/verify.json?id=%00",
        "/?sort=%00",
    ):
        status, body, _ = server.get(path)
        assert 400 <= status < 500, (path, status, body[:300])
        assert "Traceback" not in body and "NUL" in body, (path, body[:300])
    # the same pages with good input still answer
    assert server.get("/?q=error:")[0] == 200
    assert server.get("/thread?id=edge-fail")[0] == 200


# -- 2. compare: every message of a call, the answer once -------------------------------
def llm_cells(page: str) -> list[str]:
    """The A and B cells of the compare page's model calls (prompt rows, then answers)."""
    table = page.split('id="llm"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<td>(.*?)</td>", table, flags=re.S)


def test_compare_shows_every_message_of_each_call_and_the_answer_once(server: Server) -> None:
    status, page, _ = server.get("/compare?a=weather-1&b=weather-2")
    assert status == 200
    cells = llm_cells(page)
    prompts = [c for c in cells if re.search(r"· \d+ messages", c)]
    assert len(prompts) >= 4
    for cell in prompts:
        said = int(re.search(r"· (\d+) messages", cell).group(1))  # type: ignore[union-attr]
        if "same prompt" not in cell:
            assert cell.count('class="msg ') == said, cell
    # call 2 of B: the terse system prompt, the question, the tool call and its result
    second_b = prompts[3]
    assert "You are a terse weather assistant." in second_b and "weather in Oslo?" in second_b
    answers = re.findall(r'<pre class="text">(.*?)</pre>', page, flags=re.S)
    assert answers and all(a.count("[assistant]") <= 1 for a in answers), answers
    assert any("→ get_weather" in a for a in answers)
    assert not any(a.startswith("[assistant] \n") or a.startswith("\n") for a in answers)


# -- 3. writes with their step and run ----------------------------------------------------
def writes_placement(view: dict[str, Any]) -> list[tuple[str, str, Any, str]]:
    """(channels, parent kind, parent's run label, parent label) of every writes row."""
    rows = {r["id"]: r for r in view["rows"]}

    def run_of(r: dict[str, Any]) -> dict[str, Any]:
        while r["parent"] is not None:
            r = rows[r["parent"]]
        return r

    assert all(r["parent"] is not None for r in view["rows"] if r["kind"] == "writes")
    return [
        (
            r["label"],
            rows[r["parent"]]["kind"],
            run_of(r)["label"],
            rows[r["parent"]]["label"],
        )
        for r in view["rows"]
        if r["kind"] == "writes"
    ]


def test_each_writes_row_is_drawn_with_its_step_and_run_whatever_the_commit_order(
    recorded: Ledger,
) -> None:
    """LangGraph commits a task's writes in the background: before its node's events, a
    later step's before an earlier one's, a resume's before the paused run's last events.
    The run tree draws each writes row under the node run that wrote it, in its run."""
    envs = events_of(recorded, "edge-resume")
    writes = [e for e in envs if e["kind"] == "writes"]
    rest = [e for e in envs if e["kind"] != "writes"]
    committed_first = [{**e, "seq": n} for n, e in enumerate([rest[0], *writes, *rest[1:]], 1)]
    for order in (envs, committed_first):
        placed = writes_placement(view_of(recorded, "edge-resume", order))
        by_channels = {label: (kind, run, parent) for label, kind, run, parent in placed}
        assert by_channels["writes __interrupt__"] == ("node", "run 1", "ask · step 2")
        assert by_channels["writes __resume__, messages"] == (
            "node",
            "run 2 · resume",
            "ask · step 2",
        )
        assert by_channels["writes __resume__"][1] == "run 2 · resume"  # the resume value
        assert ("writes messages", "node", "run 1", "plan · step 1") in placed
        assert ("writes messages", "node", "run 2 · resume", "act · step 3") in placed
        # each writes row is drawn at its node's step, inside it (never at the top)
        view = view_of(recorded, "edge-resume", order)
        rows = {r["id"]: r for r in view["rows"]}
        for r in view["rows"]:
            if r["kind"] == "writes" and rows[r["parent"]]["kind"] == "node":
                assert r["step"] == rows[r["parent"]]["step"]


# -- 5. store hits: a score when there is one, and the item's value ----------------------
def row_html(server: Server, thread_id: str, row: int) -> str:
    status, body, _ = server.get(f"/thread/row?id={q(thread_id)}&row={row}")
    assert status == 200
    return body


def test_store_hits_show_their_score_only_when_there_is_one_and_the_items_value(
    recorded: Ledger, server: Server
) -> None:
    from tests.ui_edge_apps import NOTES, PREFERENCE

    view = view_of(recorded, "edge-fail")
    searches = [r for r in view["rows"] if r["kind"] == "memory"]
    assert [r["label"] for r in searches] == [
        "memory search · 1 hit (0.37)",  # a search by meaning: scored
        "memory search · 1 hit",  # a listing: no score, and none is made up
    ]
    scored, listed = (row_html(server, "edge-fail", r["id"]) for r in searches)
    assert "0.365" in scored and NOTES["refunds"] in scored
    assert "None" not in listed and PREFERENCE["channel"] in listed
    status, page, _ = server.get("/thread?id=edge-fail")
    assert status == 200
    hits = page.split('id="memory"', 1)[1].split("</table>", 1)[0]
    assert "None" not in hits and NOTES["refunds"] in hits and "0.365" in hits


# -- 6. errors: the traceback in the node's details, the error in the conversation -------
def test_an_errored_node_shows_its_redacted_traceback_and_the_conversation_says_so(
    recorded: Ledger, server: Server
) -> None:
    from tests.ui_edge_apps import SECRET

    with psycopg.connect(recorded.dsn, autocommit=True) as conn:
        failed = _queries.events_at(conn, S, "edge-fail", list(range(1, 200)))
    assert SECRET not in repr(failed)  # the error and its traceback, redacted when recorded
    node_end = next(e for e in failed if e["kind"] == "node_end" and e["status"] == "error")
    trace = node_end["payload"]["traceback"]
    assert trace.startswith("Traceback (most recent call last):")
    assert "in fetch" in trace and "RuntimeError: upstream answered 503" in trace
    assert "[REDACTED" in trace

    view = view_of(recorded, "edge-fail")
    fetch = next(r for r in view["rows"] if r["kind"] == "node" and r["name"] == "fetch")
    details = row_html(server, "edge-fail", fetch["id"])
    assert "Traceback (most recent call last):" in details and "in fetch" in details
    errors = [m for m in view["conversation"] if m.get("kind") == "error"]
    assert len(errors) == 1 and errors[0]["row"] == fetch["id"]  # the run's own: said once
    assert errors[0]["label"].startswith("error in fetch · step 3: RuntimeError: upstream")
    status, page, _ = server.get("/thread?id=edge-fail")
    assert status == 200
    conversation = page.split('id="conversation"', 1)[1].split("</section>", 1)[0]
    assert "RuntimeError: upstream answered 503" in conversation
    assert conversation.index("Let me fetch the order.") < conversation.index("RuntimeError")


# -- 7. the model named by the answer when the request names none ------------------------
def test_a_model_named_only_in_its_answer_is_named_and_priced_by_that_name(
    recorded: Ledger, server: Server
) -> None:
    from tests.ui_edge_apps import RESPONSE_MODEL

    (call,) = view_of(recorded, "edge-fail")["llm_calls"]
    assert call["model"] == RESPONSE_MODEL and call["cost"] is not None and call["cost"] > 0
    prices = load_prices(recorded.prices)
    with psycopg.connect(recorded.dsn, autocommit=True, options=read_only_options()) as conn:
        page = _queries.list_threads(conn, S, _queries.Search.parse("edge-fail"), prices=prices)
    (row,) = page.rows
    assert row.unknown_price_models == [] and row.cost == call["cost"]
    status, html, _ = server.get("/thread?id=edge-fail")
    assert status == 200 and f"LLM {RESPONSE_MODEL} · 20 → 6 tokens · $" in html
    # a model the request names keeps that name (the scripted weather model's _type)
    (first, *_) = view_of(recorded, "weather-1")["llm_calls"]
    assert first["model"] == "scripted"


# -- 4. bidi controls in recorded text stay inside their element --------------------------
@needs_chromium
def test_a_right_to_left_override_in_recorded_text_reorders_nothing_around_it(
    server: Server, tmp_path: Path
) -> None:
    """U+202E in a thread id, a user id and a tag: each element showing recorded text is
    isolated (its own bidi context), so the text after it keeps its place and order."""
    out = Path(os.environ.get("LGX_SCREENSHOTS") or tmp_path)
    with browser.browser() as page:
        page.goto(server.url + "?q=" + q("rlo-"), width=1400, height=500)
        assert page.errors == []
        page.screenshot(out / "ui-rlo-threads.png")
        # the tags after the user's badge are drawn after it, left to right
        lefts = page.eval(
            "[...document.querySelectorAll('#threads tbody tr td:nth-child(3) .badge')]"
            ".map(b => Math.round(b.getBoundingClientRect().left))"
        )
        assert len(lefts) == 3 and lefts == sorted(lefts), lefts
        page.goto(server.url + "thread?id=" + q(RLO_THREAD), width=1400, height=900)
        assert page.errors == []
        page.screenshot(out / "ui-rlo-thread.png")
        # the badges after the user's: in reading order
        lefts = page.eval(
            "[...document.querySelectorAll('#summary .badge')]"
            ".slice(0, 4).map(b => Math.round(b.getBoundingClientRect().left))"
        )
        assert lefts == sorted(lefts), lefts
        page.goto(server.url + "compare?a=" + q(RLO_THREAD) + "&b=edge-resume", width=1400)
        assert page.errors == []
        page.screenshot(out / "ui-rlo-compare.png")
        # the words after the thread's link ("· 0 LLM calls") come after it
        link = page.eval(
            "(() => { const a = document.querySelector('#verdict .compare div a');"
            " const r = a.getBoundingClientRect(); return [r.left, r.right]; })()"
        )
        rest = page.eval(
            "(() => { const d = document.querySelector('#verdict .compare div');"
            " const t = [...d.childNodes]"
            ".filter(n => n.nodeType === 3 && n.textContent.includes('LLM'))[0];"
            " const r = document.createRange(); r.selectNodeContents(t);"
            " return r.getBoundingClientRect().left; })()"
        )
        assert rest >= link[1] - 1, (link, rest)
