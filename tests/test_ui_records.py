"""``lgx ui`` over records it did not always show (issue 33): a thread recorded by a version
that offloaded *whole* payloads (``{"$artifact", "size"}``), and a thread with events the
processors could not record (``record_failed``: the app's redactor raised on them).

The older record is made by the real pipeline with the offload step of that version
(:class:`OldOffload`, as it was before values were offloaded one by one) in place of
today's: the ledger and workspace then hold exactly what that version wrote, hash chain
intact. The ledger is served by the real ``lgx ui`` command in a child process, as in
tests/test_ui.py.
"""

from __future__ import annotations

import json
import re
import urllib.parse
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
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.verify import verify_thread
from langgraph_external.options import Options
from langgraph_external.read.thread_view import build_thread_view
from langgraph_external.record.events import Event
from langgraph_external.record.locations import sha256_hex
from langgraph_external.record.processors import Offload
from langgraph_external.ui import _queries, read_only_options
from langgraph_external.workspace.files import Workspace
from tests.conftest import _fresh_database
from tests.test_ui import Server
from tests.test_ui_payloads import artifact_links, escaped, get
from tests.ui_payload_apps import PAGE_END, PAGE_MIDDLE, fetch_app, page, question
from tests.ui_server import lgx_ui

S = "langgraph_external"


class OldOffload:
    """The offload step before values were offloaded one by one: a payload over the
    threshold went whole to ``artifacts/<sha256>``, the event keeping
    ``{"$artifact": sha256, "size": n}`` (raw bytes are not offloaded by the app here)."""

    def __init__(self, threshold: int = 64 * 1024) -> None:
        self.threshold = threshold

    def __call__(self, event: Event) -> Event:
        if not event.payload or event.kind in ("checkpoint", "writes"):
            return event
        if len(json.dumps(event.payload, sort_keys=True, default=str)) <= self.threshold:
            return event
        data = json.dumps(event.payload, ensure_ascii=False, default=str).encode()
        digest = sha256_hex(data)
        return event.replace(
            attachments={**event.attachments, f"artifacts/{digest}": data},
            payload={"$artifact": digest, "size": len(data)},
        )


def failing_redactor() -> Any:
    """The app's own redactor, with a bug: it raises on the fetched page's last line (so
    the tool result, and every event carrying it, cannot be recorded). A closure, as in
    tests/test_bad_input.py: it cannot be pickled, so the record is sealed in a thread of
    this process (a function of this module is pickled by reference and sent to the
    sealing helper process, which exited again and again here; the same redactor in a
    plain module records fine: likely importing this test module in the helper)."""

    def redactor(value: Any) -> tuple[Any, int]:
        if PAGE_END in repr(value):
            raise RuntimeError("redactor bug on sk-live-123")
        return value, 0

    return redactor


@dataclass
class Ledger:
    dsn: str
    ws: Path


@pytest.fixture(scope="module")
def recorded(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    """old-A (Oslo) and old-B (Bergen): the agent of tests/ui_payload_apps.py recorded with
    the older offload step (its 100 KB tool result and 40 KB question)."""
    tmp = tmp_path_factory.mktemp("ui-records")
    with _fresh_database(pg_server) as dsn:
        ws = tmp / "ws"
        # sealed in this process: the older offload step replaces the current one where
        # events are processed, on the app's thread and in its sealer
        with External(
            dsn=dsn,
            workspace=ws,
            sealing="thread",
            options=Options(spool_dir=tmp / "spool"),
        ) as ext:
            assert ext.pipeline is not None and ext.pipeline.service is not None
            lists = (ext.pipeline.processors, ext.pipeline.service.sealer.processors)
            at = next(i for i, p in enumerate(lists[0]) if isinstance(p, Offload))
            for procs in lists:
                procs[at] = OldOffload()
            for thread, city in (("old-A", "Oslo"), ("old-B", "Bergen")):
                fetch_app(ext.checkpointer, city).invoke(
                    {"messages": [HumanMessage(question())]},
                    ext.config(thread, user_id="bob", tags=["legacy"]),
                )
            assert ext.flush()
            for procs in lists:
                procs[at] = Offload()
        with External(
            dsn=dsn,
            workspace=ws,
            redaction=failing_redactor(),
            options=Options(spool_dir=tmp / "spool"),
        ) as ext:
            fetch_app(ext.checkpointer).invoke(
                {"messages": [HumanMessage("Where is order A-1?")]}, ext.config("failed-rec")
            )
            assert ext.flush()
        yield Ledger(dsn, ws)


@pytest.fixture(scope="module")
def server(recorded: Ledger) -> Iterator[Server]:
    """``lgx ui`` in a child process, on a free port of 127.0.0.1."""
    with lgx_ui(recorded.dsn, recorded.ws) as running:
        yield running


def stored(recorded: Ledger, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(recorded.dsn, autocommit=True, options=read_only_options()) as conn:
        return _queries.view_events(conn, S, thread_id)


def rows(recorded: Ledger, thread_id: str) -> list[dict[str, Any]]:
    """The run tree's rows (their ids and kinds do not depend on the payloads)."""
    return list(build_thread_view(thread_id, stored(recorded, thread_id))["rows"])


def row_html(server: Server, thread_id: str, row: int) -> str:
    query = urllib.parse.urlencode({"id": thread_id, "row": row})
    status, _, body = get(f"{server.url}thread/row?{query}")
    assert status == 200
    return body.decode()


def whole(server: Server, link: str) -> bytes:
    status, _, body = get(server.url + link)
    assert status == 200, (link, body[:200])
    return body


# -- records written before values were offloaded one by one ------------------------------
def _found(conn: psycopg.Connection[Any], text: str, workspace: Any = None) -> set[str]:
    kw = {} if workspace is None else {"workspace": workspace}
    page = _queries.list_threads(conn, S, _queries.Search.parse(text), **kw)
    return {r.thread_id for r in page.rows}


def test_search_by_user_and_tag_finds_the_runs_of_the_older_record(
    recorded: Ledger, server: Server
) -> None:
    envs = stored(recorded, "old-A")
    (start,) = [e for e in envs if e["kind"] == "run_start"]
    assert set(start["payload"]) == {"$artifact", "size"}  # user and tags in the artifact
    with psycopg.connect(recorded.dsn, autocommit=True, options=read_only_options()) as conn:
        assert _found(conn, "user:bob") == _found(conn, "tag:legacy") == {"old-A", "old-B"}
        assert _found(conn, "user:alice") == _found(conn, "tag:other") == set()
    # recorded before the database held artifacts: read from the workspace
    with psycopg.connect(recorded.dsn) as conn, conn.transaction(force_rollback=True):
        conn.execute(f"delete from {S}.artifacts where thread_id = 'old-A'")
        assert _found(conn, "user:bob") == {"old-B"}  # not at hand: not found, no error
        assert _found(conn, "user:bob", Workspace(recorded.ws)) == {"old-A", "old-B"}
    # and in the threads list of lgx ui
    status, _, body = get(server.url + "?q=" + urllib.parse.quote("user:bob"))
    listed = body.decode()
    assert status == 200 and "old-A" in listed and "old-B" in listed
    assert "failed-rec" not in listed


def test_lgx_timeline_from_the_workspace_alone_reads_whole_payloads_back_as_from_the_ledger(
    recorded: Ledger, dsn: str, tmp_path: Path
) -> None:
    runner = CliRunner(env={"LGX_DSN": None})

    def timeline(database: str, name: str) -> tuple[str, str]:
        target = tmp_path / name
        args = ["--dsn", database, "--workspace", str(recorded.ws), "timeline", "old-A"]
        result = runner.invoke(app, [*args, "-o", str(target), "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["source"], target.read_text(encoding="utf-8")

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger.setup(conn)
    from_ledger = timeline(recorded.dsn, "ledger.html")
    from_workspace = timeline(dsn, "workspace.html")  # a ledger without the thread
    assert (from_ledger[0], from_workspace[0]) == ("ledger", "workspace")
    for source, html in (from_ledger, from_workspace):
        # the tool result's and the question's ends: only in the whole payloads read back
        assert "END-OF-PAGE marker" in html and "END-OF-QUESTION" in html, source
        assert PAGE_MIDDLE not in html  # shown shortened, as today's offload would


def test_the_older_record_holds_whole_payload_references_and_verifies(recorded: Ledger) -> None:
    envs = stored(recorded, "old-A")
    old = [e for e in envs if set(e.get("payload") or {}) == {"$artifact", "size"}]
    assert {e["kind"] for e in old} >= {"run_start", "llm_start", "tool_end", "node_end"}
    ws = Workspace(recorded.ws)
    tool_end = next(e for e in old if e["kind"] == "tool_end")
    data = ws.read_bytes(ws.artifact_path("old-A", tool_end["payload"]["$artifact"]))
    assert json.loads(data)["result"] == page()
    with psycopg.connect(recorded.dsn) as conn:
        res = verify_thread(conn, ws, "old-A", S)
    assert res.ok, res.problems


def test_a_whole_payload_tool_result_shows_its_ends_shortened_and_opens_whole(
    server: Server, recorded: Ledger
) -> None:
    tool = next(r for r in rows(recorded, "old-A") if r["kind"] == "tool")
    html = row_html(server, "old-A", tool["id"])
    assert 'Result</h2><pre class="json">null' not in html  # was "Result null"
    assert "offloaded payload of" not in html
    assert escaped(page()[:200]) in html and escaped(PAGE_END) in html
    assert PAGE_MIDDLE not in html
    assert "shortened: 100,000 bytes in all" in html
    links = artifact_links(html)
    assert links, html[:2000]
    assert {whole(server, link).decode() for link in links} == {page()}


def test_a_whole_payload_prompt_shows_each_long_message_shortened_with_its_link(
    server: Server, recorded: Ledger
) -> None:
    second = [r for r in rows(recorded, "old-A") if r["kind"] == "llm"][1]
    html = row_html(server, "old-A", second["id"])
    assert "shortened: 40,000 bytes in all" in html
    assert "shortened: 100,000 bytes in all" in html
    assert "MIDDLE-OF-QUESTION" not in html and PAGE_MIDDLE not in html
    bodies = {whole(server, link).decode() for link in artifact_links(html)}
    assert bodies == {question(), page()}


def test_the_conversation_of_an_older_record_has_the_user_message_and_tool_result(
    server: Server,
) -> None:
    html = get(server.url + "thread?id=old-A")[2].decode()
    conversation = html[html.index('id="conversation"') : html.index('id="llm-calls"')]
    user = conversation[conversation.index('data-role="user"') :]
    assert escaped(question()[:300]) in user
    assert escaped("END-OF-QUESTION: please answer briefly.") in user
    assert "MIDDLE-OF-QUESTION" not in user
    assert "shortened: 40,000 bytes in all" in user
    assert whole(server, artifact_links(user)[0]).decode() == question()
    assert "shortened: 100,000 bytes in all" in conversation
    assert "Order A-1 is in transit from Oslo." in conversation


def test_compare_reads_the_whole_payloads_of_both_older_threads(server: Server) -> None:
    html = get(server.url + "compare?a=old-A&b=old-B")[2].decode()
    tools = html[html.index('id="tools"') : html.index('id="state"')]
    assert escaped(PAGE_END) in tools
    bodies = {whole(server, link).decode() for link in artifact_links(tools)}
    assert bodies == {page(city="Oslo"), page(city="Bergen")}


def test_a_path_into_a_whole_payload_is_checked(server: Server, recorded: Ledger) -> None:
    tool_end = next(e for e in stored(recorded, "old-A") if e["kind"] == "tool_end")
    digest = tool_end["payload"]["$artifact"]

    def status(at: str) -> int:
        query = urllib.parse.urlencode({"thread": "old-A", "sha": digest, "at": at})
        return get(f"{server.url}artifact?{query}")[0]

    assert status('["result"]') == 200
    assert status('["nothing"]') == 404
    assert status('["result", 0]') == 404
    for bad in ("result", "{}", '[["x"]]', "[1.5]", "[" + ",".join(["0"] * 65) + "]"):
        assert status(bad) == 400, bad
    code, headers, body = get(f"{server.url}artifact?thread=old-A&sha={digest}")
    assert code == 200 and json.loads(body)["result"] == page()  # the payload, whole
    assert headers["content-type"] == "application/json"


# -- events the processors could not record -----------------------------------------------
def test_a_thread_with_a_record_failure_is_flagged_in_the_list_and_found_by_error(
    server: Server, recorded: Ledger
) -> None:
    failed = [e for e in stored(recorded, "failed-rec") if e["kind"] == "record_failed"]
    assert "tool_end" in {e["payload"]["kind"] for e in failed}  # a real one was recorded
    html = get(server.url + "?q=" + urllib.parse.quote("thread:failed-rec"))[2].decode()
    line = html[html.index('href="/thread?id=failed-rec"') :]
    line = line[: line.index("</tr>")]
    assert f"{len(failed)} not recorded" in line and 'class="badge error' in line
    assert "status%3Aerror" in line  # its run ended: not "running" for want of its end
    for q in ("error:", "error:RuntimeError"):
        found = get(server.url + "?q=" + urllib.parse.quote(q))[2].decode()
        assert "failed-rec" in found, q
        assert "old-A" not in found, q


def test_an_unrecorded_tool_result_is_a_marked_row_with_its_node_and_step(
    server: Server, recorded: Ledger
) -> None:
    rs = rows(recorded, "failed-rec")
    by_id = {r["id"]: r for r in rs}
    mark = next(r for r in rs if r["label"] == "not recorded: tool_end — Redact: RuntimeError")
    assert mark["kind"] == "unrecorded" and mark["status"] == "error"
    tool = by_id[mark["parent"]]
    assert tool["kind"] == "tool" and tool["status"] == "error"
    assert tool["label"].endswith("· end not recorded")
    node = by_id[tool["parent"]]
    assert node["kind"] == "node" and node["node"] == "tools" == mark["node"]
    assert node["step"] == mark["step"] is not None
    page = get(server.url + "thread?id=failed-rec")[2].decode()
    assert "not recorded: tool_end — Redact: RuntimeError" in page
    assert f'class="row k-unrecorded s-error" data-row="{mark["id"]}"' in page
    html = row_html(server, "failed-rec", mark["id"])
    assert "The <code>tool_end</code> event of tools · step" in html
    assert "Redact raised RuntimeError" in html and "lgx verify</code> fails the thread" in html
    event_id = next(
        e["payload"]["event_id"]
        for e in stored(recorded, "failed-rec")
        if e["kind"] == "record_failed" and e["payload"]["kind"] == "tool_end"
    )
    assert event_id in html and "&#34;processor&#34;: &#34;Redact&#34;" in html
    assert "sk-live-123" not in page + html  # the failing redactor's message is not kept


def test_the_conversation_says_what_of_the_step_could_not_be_recorded(
    server: Server, recorded: Ledger
) -> None:
    mark = next(r for r in rows(recorded, "failed-rec") if r["kind"] == "unrecorded")
    html = get(server.url + "thread?id=failed-rec")[2].decode()
    conversation = html[html.index('id="conversation"') : html.index('id="llm-calls"')]
    said = re.findall(r'<div class="msg event unrecorded">(.*?)</div>', conversation, re.S)
    wanted = (
        f"not recorded in tools · step {mark['step']}: its tool_end event (Redact: "
        "RuntimeError) — something of this step could not be recorded; `lgx verify` fails "
        "the thread"
    )
    assert any(wanted in x for x in said), said
    assert "Order A-1 is in transit from Oslo." in conversation  # the rest is there
