"""Inside LangGraph's Agent Server: the ``langgraph.json`` entry records everything (issue 36).

One real server (``langgraph dev``, from the package registry, offline) in a child process
for the module, with ``langgraph_external.agent_server.checkpointer`` and ``.store`` as its
checkpointer and store, driven through ``langgraph_sdk`` as a user's client would.
"""

from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.schema import Command

from langgraph_external.ledger import schema as ledger
from langgraph_external.read.inspection import list_threads
from langgraph_external.workspace.files import Workspace
from tests.agent_server_run import RECORDED, ROOT, serve, write_app
from tests.conftest import _fresh_database
from tests.ui_server import lgx_ui

LGX = Path(sys.executable).parent / "lgx"
RECORD_TIMEOUT = 60.0


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


ASK = _say("weather in Oslo?")


@dataclass
class Server:
    url: str
    dsn: str
    ws: Path
    log: Path
    proc: subprocess.Popen[bytes]

    def events(self, thread_id: str) -> list[dict[str, Any]]:
        with psycopg.connect(self.dsn, options="-c timezone=UTC") as conn:
            return ledger.fetch_events(conn, thread_id, ledger.DEFAULT_SCHEMA)

    def wait_for(
        self, thread_id: str, done: Callable[[list[dict[str, Any]]], bool]
    ) -> list[dict[str, Any]]:
        """The thread's events once ``done`` holds of them and the workspace mirrors them."""
        deadline = time.monotonic() + RECORD_TIMEOUT
        events: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            events = self.events(thread_id)
            if events and done(events):
                mirrored = list(Workspace(self.ws).iter_events(thread_id))
                if [e["seq"] for e in mirrored] == [e["seq"] for e in events]:
                    return events
            time.sleep(0.2)
        kinds = [(e["kind"], e.get("node")) for e in events]
        raise AssertionError(f"{thread_id}: not recorded in time: {kinds}\n{self.tail()}")

    def lgx(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(LGX), "--dsn", self.dsn, "--workspace", str(self.ws), *args],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        )

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def server(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``langgraph dev`` with the documented langgraph.json, recording into a fresh
    database and a workspace (sealing in the default helper process)."""
    app = write_app(tmp_path_factory.mktemp("agent-server"), RECORDED)
    ws = app / "ws"
    with (
        _fresh_database(pg_server) as dsn,
        serve(app, {"LGX_DSN": dsn, "LGX_WORKSPACE": str(ws)}) as running,
    ):
        yield Server(running.url, dsn, ws, running.log, running.proc)


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in events]


def has(*wanted: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda events: set(wanted) <= set(kinds(events))


def _assert_verified(server: Server) -> None:
    done = server.lgx("verify", "--all")
    assert done.returncode == 0, done.stdout + done.stderr


def _listed(server: Server) -> set[str]:
    """The threads ``lgx threads`` lists — and that ``lgx ui``'s threads page shows."""
    with psycopg.connect(server.dsn) as conn:
        rows, _total, _copies = list_threads(conn, limit=None)
    listed = {r["thread_id"] for r in rows}
    page = _ui_page(server, "/")
    assert all(html.escape(t) in page for t in listed), "lgx ui lists fewer threads"
    return listed


def _ui_page(server: Server, path: str) -> str:
    """One page of ``lgx ui`` run on the server's record."""
    with lgx_ui(server.dsn, server.ws, {"PYTHONPATH": str(ROOT)}) as ui:
        status, page, _headers = ui.get(path)
    assert status == 200
    return page


def _react_recorded(events: list[dict[str, Any]], thread_id: str, run_id: str) -> None:
    """A ReAct run of the server's: nodes, the model's tool call, the tool's result."""
    ks = kinds(events)
    assert all(e["thread_id"] == thread_id for e in events)
    nodes = [e["node"] for e in events if e["kind"] == "node_start"]
    assert nodes[:3] == ["agent", "tools", "agent"], nodes
    assert ks.count("llm_start") >= 2 and ks.count("llm_end") >= 2
    tool = next(e for e in events if e["kind"] == "tool_end")
    assert tool["name"] == "get_weather" and "sunny in Oslo" in json.dumps(tool["payload"])
    start = next(e for e in events if e["kind"] == "run_start" and e["run_id"] == run_id)
    meta = start["payload"]["run_metadata"]
    assert meta["run_id"] == run_id and meta["graph_id"] in ("agent", "bare_agent")
    assert meta["assistant_id"]
    assert "checkpoint" in ks


async def _run_id(client: Any, thread_id: str) -> str:
    runs = await client.runs.list(thread_id)
    return str(runs[0]["run_id"])  # newest first


# -- a tool-calling agent ------------------------------------------------------------------
async def test_runs_wait_records_nodes_tool_and_model_calls_under_the_servers_ids(
    server: Server,
) -> None:
    """``runs.wait``: the record holds the server's thread, its run id and assistant, the
    user from the run's metadata, every node, the model's calls and the tool's result."""
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    result = await client.runs.wait(tid, "agent", input=ASK, metadata={"user_id": "alice"})
    assert isinstance(result, dict)
    assert result["messages"][-1]["content"] == "It is sunny in Oslo."
    run_id = await _run_id(client, tid)
    events = server.wait_for(tid, has("run_end", "tool_end", "llm_end"))
    _react_recorded(events, tid, run_id)
    start = next(e for e in events if e["kind"] == "run_start")
    assert start["payload"]["user_id"] == "alice"
    _assert_verified(server)
    assert tid in _listed(server)


async def test_runs_stream_records_the_run_it_streams(server: Server) -> None:
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    run_id, modes = None, set()
    async for part in client.runs.stream(
        tid, "agent", input=ASK, stream_mode=["updates", "messages-tuple"]
    ):
        modes.add(part.event)
        if part.event == "metadata":
            run_id = part.data["run_id"]
    assert run_id is not None and {"updates", "messages"} <= modes
    events = server.wait_for(tid, has("run_end", "tool_end", "llm_end"))
    _react_recorded(events, tid, run_id)
    _assert_verified(server)
    assert tid in _listed(server)


async def test_the_checkpointer_entry_alone_records_nodes_tools_and_model_calls(
    server: Server,
) -> None:
    """A graph module without the ``recorded(...)`` line: the configure hook the
    checkpointer registers attaches the audit handler to the server's run all the same."""
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "bare_agent", input=ASK)
    events = server.wait_for(tid, has("run_end", "tool_end", "llm_end"))
    _react_recorded(events, tid, await _run_id(client, tid))
    starts = [e for e in events if e["kind"] == "run_start"]
    assert len(starts) == 1  # attached once per run, not once per nested runnable
    _assert_verified(server)


# -- human in the loop ---------------------------------------------------------------------
async def test_an_interrupt_resumed_with_a_command_is_recorded(server: Server) -> None:
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(tid, "approval", input={"messages": []})
    assert isinstance(paused, dict) and paused["__interrupt__"]
    events = server.wait_for(tid, has("interrupt", "run_end"))
    pause = next(e for e in events if e["kind"] == "interrupt")
    assert pause["node"] == "ask" and pause["thread_id"] == tid
    assert pause["payload"]["interrupts"][0]["value"] == {"question": "send the report?"}
    done = await client.runs.wait(tid, "approval", command=Command(resume="yes"))
    assert isinstance(done, dict) and done["messages"][-1]["content"] == "report sent"
    events = server.wait_for(tid, lambda ev: kinds(ev).count("run_end") == 2)
    resume = next(e for e in events if e["kind"] == "resume" and e["payload"].get("value"))
    assert resume["payload"]["value"] == "yes"
    ended = [e["node"] for e in events if e["kind"] == "node_end" and e["status"] == "ok"]
    assert ended[-2:] == ["ask", "act"]
    _assert_verified(server)
    assert tid in _listed(server)


# -- what the server does to threads -------------------------------------------------------
async def test_a_rollback_multitask_run_deletes_the_rolled_back_run_from_the_record(
    server: Server,
) -> None:
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    slow = await client.runs.create(
        tid, "slow", input={"messages": [{"role": "user", "content": "slow"}]}
    )
    server.wait_for(tid, has("node_end"))  # the slow run is in its second node
    fast = await client.runs.create(
        tid,
        "slow",
        input=_say("fast"),
        multitask_strategy="rollback",
    )
    await client.runs.join(tid, fast["run_id"])

    def fast_ended(events: list[dict[str, Any]]) -> bool:
        ends = {e["run_id"] for e in events if e["kind"] == "run_end"}
        return "runs_deleted" in kinds(events) and fast["run_id"] in ends

    events = server.wait_for(tid, fast_ended)
    deleted = next(e for e in events if e["kind"] == "runs_deleted")
    assert deleted["payload"]["run_ids"] == [slow["run_id"]]
    cancelled = next(e for e in events if e["kind"] == "run_end" and e["run_id"] == slow["run_id"])
    assert cancelled["status"] == "error"  # the rolled-back run's behaviour stays recorded
    state = await client.threads.get_state(tid)
    assert [m["content"] for m in state["values"]["messages"]] == ["fast", "started", "finished"]
    assert any(e["kind"] == "run_start" and e["run_id"] == fast["run_id"] for e in events)
    _assert_verified(server)
    assert tid in _listed(server)


async def test_threads_delete_leaves_a_tombstone_and_a_green_verify(server: Server) -> None:
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "agent", input=ASK)
    server.wait_for(tid, has("run_end"))
    await client.threads.delete(tid)
    events = server.wait_for(tid, has("thread_deleted"))
    assert kinds(events)[-1] == "thread_deleted"
    _assert_verified(server)
    with psycopg.connect(server.dsn) as conn:
        rows, _total, _copies = list_threads(conn, limit=None)
    row = next(r for r in rows if r["thread_id"] == tid)
    assert row["deleted_at"] is not None


async def test_threads_prune_is_recorded_and_verify_stays_green(server: Server) -> None:
    """``threads.prune``: the in-memory runtime takes only ``strategy="delete"``, which
    deletes the thread through the checkpointer (a tombstone in the record)."""
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "agent", input=ASK)
    server.wait_for(tid, has("run_end"))
    pruned = await client.threads.prune([tid], strategy="delete")
    assert pruned["pruned_count"] == 1
    events = server.wait_for(tid, has("thread_deleted"))
    assert kinds(events)[-1] == "thread_deleted"
    _assert_verified(server)
    with psycopg.connect(server.dsn) as conn:
        rows, _total, _copies = list_threads(conn, limit=None)
    assert next(r for r in rows if r["thread_id"] == tid)["deleted_at"] is not None


# -- the store -----------------------------------------------------------------------------
async def test_the_store_entry_records_the_servers_store_operations(server: Server) -> None:
    client = get_client(url=server.url)
    await client.store.put_item(["users", "alice"], "prefs", {"units": "metric"})
    item = await client.store.get_item(["users", "alice"], "prefs")
    assert item["value"] == {"units": "metric"}
    events = server.wait_for("_no_thread", has("memory_put", "memory_get"))
    put = next(e for e in events if e["kind"] == "memory_put")
    assert "metric" in json.dumps(put["payload"])


# -- production shape ----------------------------------------------------------------------
async def test_with_worker_sealing_the_server_only_captures_and_lgx_worker_seals_and_mirrors(
    pg_server: str, tmp_path: Path
) -> None:
    """``LGX_SEALING=worker``: the server's process captures (no helper, no workspace of
    its own) and an ``lgx worker`` beside it seals the record and mirrors it."""
    app = write_app(tmp_path / "app", RECORDED)
    ws = tmp_path / "worker-ws"
    with (
        _fresh_database(pg_server) as dsn,
        serve(app, {"LGX_DSN": dsn, "LGX_SEALING": "worker"}) as running,
    ):
        srv = Server(running.url, dsn, ws, running.log, running.proc)
        client = get_client(url=running.url)
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "agent", input=ASK)
        hitl = (await client.threads.create())["thread_id"]
        await client.runs.wait(hitl, "approval", input={"messages": []})
        assert not (app / "agent_workspace").exists()  # the workers own the workspace
        worker = subprocess.Popen(
            [str(LGX), "--dsn", dsn, "-w", str(ws), "worker", "--poll", "0.5"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stderr=subprocess.PIPE,
        )
        try:
            events = srv.wait_for(tid, has("run_end", "tool_end", "llm_end"))
            _react_recorded(events, tid, await _run_id(client, tid))
            srv.wait_for(hitl, has("interrupt", "run_end"))
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0
        _assert_verified(srv)
        assert {tid, hitl} <= _listed(srv)


# -- threads.copy: last, since a copied thread fails `lgx verify` today -------------------
async def test_threads_copy_records_the_copy_under_the_new_thread_id(server: Server) -> None:
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "agent", input=ASK)
    server.wait_for(tid, has("run_end"))
    copy = await client.threads.copy(tid)
    cid = copy["thread_id"]
    assert cid != tid
    copied = server.wait_for(cid, has("thread_copied"))
    (event,) = [e for e in copied if e["kind"] == "thread_copied"]
    assert event["payload"]["source_thread_id"] == tid
    state = await client.threads.get_state(cid)
    assert state["values"]["messages"][-1]["content"] == "It is sunny in Oslo."
    # the copy goes on as a thread of its own, recorded under its id
    await client.runs.wait(
        cid, "agent", input={"messages": [{"role": "user", "content": "and Rome?"}]}
    )
    events = server.wait_for(cid, lambda ev: kinds(ev).count("run_end") == 1)
    assert any(e["kind"] == "tool_end" and "Rome" in json.dumps(e["payload"]) for e in events)
    source = server.lgx("verify", tid)
    assert source.returncode == 0, source.stdout + source.stderr
    # the copy's one known problem (test_lgx_verify_all_is_green_after_threads_copy)
    target = server.lgx("verify", cid)
    problems = [x for x in target.stdout.splitlines() if x.startswith("FAIL")]
    assert all("task writes without a writes event" in x for x in problems), target.stdout
    assert {tid, cid} <= _listed(server)


async def test_lgx_verify_all_is_green_after_threads_copy(server: Server) -> None:
    client = get_client(url=server.url)
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "agent", input=ASK)
    server.wait_for(tid, has("run_end"))
    cid = (await client.threads.copy(tid))["thread_id"]
    server.wait_for(cid, has("thread_copied"))
    _assert_verified(server)
