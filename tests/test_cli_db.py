"""``lgx db`` and the embedded server: it stays up between processes, ``lgx db stop`` stops
it, what a crash leaves is cleaned up; real servers, real processes, a real SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from typer.testing import CliRunner, Result

from langgraph_external.cli import app
from langgraph_external.external import External
from langgraph_external.ledger.embedded import (
    HANDLES_FILE,
    EmbeddedPostgres,
    prune_stale_handles,
    server_status,
    stop_server,
)
from langgraph_external.options import Options

HOLDER = textwrap.dedent(
    """
    import sys, time
    from langgraph_external.ledger.embedded import EmbeddedPostgres
    print(EmbeddedPostgres(sys.argv[1]).start(), flush=True)
    time.sleep(300)
    """
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    """A workspace directory; its embedded server is stopped after the test."""
    path = tmp_path / "ws"
    path.mkdir()
    yield path
    stop_server(pgdata(path), force=True)


def pgdata(ws: Path) -> Path:
    return ws / ".lgx" / "pgdata"


def lgx(runner: CliRunner, ws: Path, *args: str) -> Result:
    return runner.invoke(app, ["--workspace", str(ws), *args])


def as_json(result: Result) -> dict[str, Any]:
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


class Holder:
    """Another process holding the embedded server, as an app using External does."""

    def __init__(self, datadir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(datadir)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        assert self.proc.stdout is not None
        self.uri = self.proc.stdout.readline().strip()
        assert self.uri.startswith("postgresql://"), self.uri

    @property
    def pid(self) -> int:
        return self.proc.pid

    def sigkill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.sigkill()


@pytest.fixture
def holder(ws: Path) -> Iterator[Holder]:
    h = Holder(pgdata(ws))
    try:
        yield h
    finally:
        h.close()


def postmaster_pid(datadir: Path) -> int:
    return int((datadir / "postmaster.pid").read_text().splitlines()[0])


def server_pids(datadir: Path) -> list[int]:
    """Every PostgreSQL process working in ``datadir`` (a server and its children)."""
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info.get("name") == "postgres" and Path(proc.cwd()) == datadir.resolve():
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def assert_no_server(datadir: Path) -> None:
    """No process of the server runs and it left no ``postmaster.pid``."""
    assert server_pids(datadir) == []
    assert not (datadir / "postmaster.pid").exists()


def wait_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not gone(pid):
        assert time.monotonic() < deadline, f"pid {pid} is still alive"
        time.sleep(0.05)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- status, start, url, stop ------------------------------------------------------------
def test_status_and_url_without_a_server(runner: CliRunner, ws: Path) -> None:
    status = lgx(runner, ws, "db", "status", "--json")
    assert status.exit_code == 1, status.output
    assert as_json(status) | {"datadir": None} == {
        "datadir": None,
        "initialized": False,
        "running": False,
        "pid": None,
        "uri": None,
        "state": None,
        "started_at": None,
        "handles": [],
        "stale_removed": [],
        "keep_running": False,
        "stale": None,
        "sealing": None,  # no server: nothing to say about captures
    }
    text = lgx(runner, ws, "db", "status")
    assert text.exit_code == 1 and "not running" in text.stdout
    url = lgx(runner, ws, "db", "url")
    assert url.exit_code == 1 and url.stdout == ""
    assert url.stderr.startswith("error:") and "lgx db start" in url.stderr
    assert not (ws / ".lgx").exists()  # looking creates nothing


def test_start_leaves_the_server_running_until_stop(runner: CliRunner, ws: Path) -> None:
    started = lgx(runner, ws, "db", "start")
    assert started.exit_code == 0, started.output
    uri = started.stdout.strip()
    assert started.stdout == uri + "\n"  # only the URL on stdout: LGX_DSN=$(lgx db start)
    with psycopg.connect(uri) as conn:
        assert conn.execute("select 1").fetchone() == (1,)

    assert lgx(runner, ws, "db", "url").stdout == uri + "\n"
    assert as_json(lgx(runner, ws, "db", "url", "--json")) == {"uri": uri}
    status = lgx(runner, ws, "db", "status", "--json")
    assert status.exit_code == 0
    st = as_json(status)
    assert st["running"] and st["keep_running"] and st["uri"] == uri
    assert st["pid"] == postmaster_pid(pgdata(ws)) and st["handles"] == []
    assert "running" in lgx(runner, ws, "db", "status").stdout

    # a process that uses the server and exits does not stop it
    handle = EmbeddedPostgres(pgdata(ws))
    assert handle.start() == uri
    handle.release()
    assert server_status(pgdata(ws)).running
    # not even a handle asking to stop the server on close, while it is marked to keep running
    handle = EmbeddedPostgres(pgdata(ws), stop_on_close=True)
    assert handle.start() == uri
    handle.release()
    assert server_status(pgdata(ws)).running

    pid = st["pid"]
    stopped = lgx(runner, ws, "db", "stop", "--json")
    assert stopped.exit_code == 0, stopped.output
    result = as_json(stopped)
    assert result["stopped"] and result["was_running"] and not result["status"]["running"]
    assert gone(pid)
    assert_no_server(pgdata(ws))
    assert lgx(runner, ws, "db", "status").exit_code == 1
    again = lgx(runner, ws, "db", "stop")
    assert again.exit_code == 0 and "not running" in again.stdout

    # without the mark, a handle made with stop_on_close=True stops the server it started
    handle = EmbeddedPostgres(pgdata(ws), stop_on_close=True)
    handle.start()
    assert server_status(pgdata(ws)).running
    handle.release()
    assert not server_status(pgdata(ws)).running


def test_db_needs_a_local_workspace(runner: CliRunner) -> None:
    for command in (["status"], ["start"], ["stop"], ["url"]):
        result = runner.invoke(app, ["--workspace", "memory://lgx-db-test", "db", *command])
        assert result.exit_code == 2, result.output
        assert "not local" in result.stderr and "Traceback" not in result.output


# -- stale pids of killed processes ------------------------------------------------------
def test_stop_after_a_sigkilled_user_left_the_server_running(
    runner: CliRunner, ws: Path, holder: Holder
) -> None:
    server_pid = postmaster_pid(pgdata(ws))
    holder.sigkill()
    assert json.loads((pgdata(ws) / HANDLES_FILE).read_text()) == [holder.pid]
    assert not gone(server_pid)  # the killed process could not stop it

    stopped = lgx(runner, ws, "db", "stop", "--json")
    assert stopped.exit_code == 0, stopped.output
    result = as_json(stopped)
    assert result["stopped"] is True
    assert result["status"]["stale_removed"] == [holder.pid]
    assert result["status"]["handles"] == []
    assert gone(server_pid)
    assert json.loads((pgdata(ws) / HANDLES_FILE).read_text()) == []


def test_status_cleans_stale_pids(runner: CliRunner, ws: Path, holder: Holder) -> None:
    holder.sigkill()
    first = lgx(runner, ws, "db", "status", "--json")
    assert first.exit_code == 0  # still running
    assert as_json(first)["stale_removed"] == [holder.pid]
    assert as_json(first)["handles"] == []
    text = lgx(runner, ws, "db", "status")
    assert "removed stale" not in text.stdout  # already clean
    assert "keeps running between processes until `lgx db stop`" in text.stdout


def test_the_server_outlives_a_sigkilled_user_and_is_reused(ws: Path, holder: Holder) -> None:
    server_pid = postmaster_pid(pgdata(ws))
    holder.sigkill()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from langgraph_external.ledger.embedded import EmbeddedPostgres as E; "
            "e = E(sys.argv[1]); print(e.start()); e.release()",
            str(pgdata(ws)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == holder.uri  # the same server, reused
    assert postmaster_pid(pgdata(ws)) == server_pid and not gone(server_pid)
    assert json.loads((pgdata(ws) / HANDLES_FILE).read_text()) == []  # the stale pid is gone


def test_stop_refuses_while_a_live_process_uses_the_server(
    runner: CliRunner, ws: Path, holder: Holder
) -> None:
    server_pid = postmaster_pid(pgdata(ws))
    refused = lgx(runner, ws, "db", "stop")
    assert refused.exit_code == 1, refused.output
    assert str(holder.pid) in refused.stderr and "--force" in refused.stderr
    assert not gone(server_pid)
    assert as_json(lgx(runner, ws, "db", "status", "--json"))["handles"] == [holder.pid]

    forced = lgx(runner, ws, "db", "stop", "--force", "--json")
    assert forced.exit_code == 0, forced.output
    assert as_json(forced)["stopped"] is True
    assert gone(server_pid)


def test_prune_keeps_live_pids_and_repairs_a_garbled_list(ws: Path, holder: Holder) -> None:
    handles = pgdata(ws) / HANDLES_FILE
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    handles.write_text(json.dumps([holder.pid, dead.pid]))
    assert prune_stale_handles(pgdata(ws)) == [dead.pid]
    assert json.loads(handles.read_text()) == [holder.pid]
    handles.write_text("[1, 2")  # torn write
    assert prune_stale_handles(pgdata(ws)) == []
    assert json.loads(handles.read_text()) == []


def test_handles_of_one_process_share_the_server(ws: Path) -> None:
    first, second = EmbeddedPostgres(pgdata(ws)), EmbeddedPostgres(pgdata(ws))
    uri = first.start()
    assert second.start() == uri
    assert json.loads((pgdata(ws) / HANDLES_FILE).read_text()) == [os.getpid()]
    first.release()
    with psycopg.connect(uri) as conn:  # the other handle still has its server
        assert conn.execute("select 1").fetchone() == (1,)
    second.release()
    assert server_status(pgdata(ws)).running  # left running for the next process
    assert json.loads((pgdata(ws) / HANDLES_FILE).read_text()) == []


# -- the server stays up between processes -----------------------------------------------
APP = textwrap.dedent(
    """
    import json, os, sys
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict
    from langgraph_external import External

    class S(TypedDict):
        n: int

    g = StateGraph(S)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    with External(workspace=sys.argv[1]) as ext:
        graph = g.compile(checkpointer=ext.checkpointer)
        out = graph.invoke({"n": 0}, ext.config(sys.argv[2]))
        print(json.dumps({"n": out["n"], "dsn": ext.dsn}), flush=True)
    """
)


def run_app(ws: Path, thread: str) -> dict[str, Any]:
    """One app process on the embedded default (no DSN) that records one run and exits."""
    env = {k: v for k, v in os.environ.items() if k != "LGX_DSN"}
    done = subprocess.run(
        [sys.executable, "-c", APP, str(ws), thread],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "PYTHONWARNINGS": "ignore", "MEM0_TELEMETRY": "False"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(out, dict)
    return out


def test_the_server_stays_up_between_app_processes_until_db_stop(
    runner: CliRunner, ws: Path
) -> None:
    first = run_app(ws, "t-1")
    assert first["n"] == 1
    st = server_status(pgdata(ws))
    assert st.running and st.handles == []  # the app exited; its server did not
    server_pid = st.pid

    second = run_app(ws, "t-2")  # reuses the running server
    assert second["dsn"] == first["dsn"] and postmaster_pid(pgdata(ws)) == server_pid
    listed = lgx(runner, ws, "threads", "--json")  # so does an lgx command
    assert listed.exit_code == 0, listed.output
    assert {json.loads(line)["thread_id"] for line in listed.stdout.splitlines()} == {
        "t-1",
        "t-2",
    }
    assert postmaster_pid(pgdata(ws)) == server_pid

    stopped = lgx(runner, ws, "db", "stop")
    assert stopped.exit_code == 0, stopped.output
    assert gone(server_pid)
    assert_no_server(pgdata(ws))


def test_an_app_in_this_process_releases_the_server_and_leaves_it_running(
    ws: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LGX_DSN", raising=False)
    with External(workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        dsn = ext.dsn
    st = server_status(pgdata(ws))
    assert st.running and os.getpid() not in st.handles
    with External(workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        assert ext.dsn == dsn


# -- what a crash leaves is detected and the server started again ------------------------
def test_a_killed_server_is_detected_and_started_again(runner: CliRunner, ws: Path) -> None:
    handle = EmbeddedPostgres(pgdata(ws))
    handle.start()
    handle.release()
    old = postmaster_pid(pgdata(ws))
    children = []
    try:
        for pid in server_pids(pgdata(ws)):  # server processes that outlive their postmaster
            if pid != old:  # (stopped, so they cannot notice its death in time)
                with contextlib.suppress(ProcessLookupError):  # e.g. a backend just done
                    os.kill(pid, signal.SIGSTOP)
                    children.append(pid)
        assert children
        os.kill(old, signal.SIGKILL)
        wait_gone(old)
        assert (pgdata(ws) / "postmaster.pid").exists()
        status = as_json(lgx(runner, ws, "db", "status", "--json"))
        assert not status["running"] and f"pid {old}, which no longer runs" in status["stale"]

        handle = EmbeddedPostgres(pgdata(ws))
        uri = handle.start()
        try:
            with psycopg.connect(uri) as conn:
                assert conn.execute("select 1").fetchone() == (1,)
            assert postmaster_pid(pgdata(ws)) != old
            assert all(gone(p) for p in children)  # the orphans were ended
        finally:
            handle.release()
        assert lgx(runner, ws, "db", "stop").exit_code == 0
        assert_no_server(pgdata(ws))
    finally:
        for pid in children:  # whatever happened, leave no stopped process behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_postmaster_pid_naming_another_program_is_stale(runner: CliRunner, ws: Path) -> None:
    handle = EmbeddedPostgres(pgdata(ws))
    handle.start()
    handle.release()
    assert lgx(runner, ws, "db", "stop").exit_code == 0
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        # a crash left postmaster.pid behind and the system gave its pid to another program
        lines = ["0"] * 8
        lines[0], lines[1], lines[3], lines[4] = str(other.pid), str(pgdata(ws)), "5432", ""
        lines[7] = "ready"
        (pgdata(ws) / "postmaster.pid").write_text("\n".join(lines) + "\n")
        status = as_json(lgx(runner, ws, "db", "status", "--json"))
        assert not status["running"] and "not a server of this directory" in status["stale"]

        uri = EmbeddedPostgres(pgdata(ws)).start()
        with psycopg.connect(uri) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        assert postmaster_pid(pgdata(ws)) != other.pid
        assert other.poll() is None  # the other program was left alone
    finally:
        other.kill()
        other.wait()


def test_a_server_that_does_not_answer_is_restarted(ws: Path) -> None:
    handle = EmbeddedPostgres(pgdata(ws))
    uri = handle.start()
    handle.release()
    old = postmaster_pid(pgdata(ws))
    (pgdata(ws) / ".s.PGSQL.5432").unlink()  # its socket is gone: nobody can connect
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(uri, connect_timeout=3).close()

    again = EmbeddedPostgres(pgdata(ws))
    assert again.start() == uri
    with psycopg.connect(uri) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
    again.release()
    assert gone(old) and postmaster_pid(pgdata(ws)) != old


def test_db_stop_cleans_what_a_crash_left(runner: CliRunner, ws: Path) -> None:
    handle = EmbeddedPostgres(pgdata(ws))
    handle.start()
    handle.release()
    old = postmaster_pid(pgdata(ws))
    os.kill(old, signal.SIGKILL)
    wait_gone(old)
    stopped = lgx(runner, ws, "db", "stop", "--json")
    assert stopped.exit_code == 0, stopped.output
    result = as_json(stopped)
    assert not result["stopped"] and "no longer runs" in result["cleaned"]
    assert_no_server(pgdata(ws))


# -- the mirror's status agrees with lgx verify ------------------------------------------
def _mirror_says(runner: CliRunner, ws: Path) -> tuple[int, str, bool]:
    """(threads ``db status --json`` says behind, its text line, ``verify --all`` passes)."""
    status = lgx(runner, ws, "db", "status", "--json")
    assert status.exit_code == 0, status.output
    text = lgx(runner, ws, "db", "status").stdout
    line = next(x.strip() for x in text.splitlines() if "workspace mirror" in x)
    verified = lgx(runner, ws, "verify", "--all")
    return as_json(status)["sealing"]["workspace_behind_threads"], line, verified.exit_code == 0


def test_db_status_says_the_mirror_is_behind_exactly_when_verify_finds_it_behind(
    runner: CliRunner, ws: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LGX_DSN", raising=False)
    with External(workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = _two_nodes(ext.checkpointer)
        graph.invoke({"n": 1}, ext.config("a"))
        graph.invoke({"n": 2}, ext.config("b"))
        assert ext.flush()
        dsn = ext.dsn
    assert dsn is not None
    assert _mirror_says(runner, ws) == (0, "workspace mirror behind on 0 threads", True)

    # the projection's cursors lost (a restore of the database, a reset): the files are
    # complete, verify passes, and the mirror is not behind
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("update langgraph_external.projection_cursors set seq = 0")
    assert _mirror_says(runner, ws) == (0, "workspace mirror behind on 0 threads", True)

    # the last events of thread b cut from its events.jsonl under an up-to-date cursor:
    # verify fails the thread, and the mirror is behind on it
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "update langgraph_external.projection_cursors c set seq = t.last_seq"
            " from langgraph_external.threads t where t.thread_id = c.thread_id"
        )
    (events,) = [p for p in ws.glob("threads/*/events.jsonl") if _thread_of(p) == "b"]
    lines = events.read_text(encoding="utf-8").splitlines(keepends=True)
    events.write_text("".join(lines[:-2]), encoding="utf-8")
    assert _mirror_says(runner, ws) == (1, "workspace mirror behind on 1 thread", False)


def _thread_of(events: Path) -> str:
    first = json.loads(events.read_text(encoding="utf-8").splitlines()[0])
    return str(first["thread_id"])


def _two_nodes(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class N(TypedDict):
        n: int

    builder = StateGraph(N)
    builder.add_node("one", lambda s: {"n": s["n"] + 1})
    builder.add_node("two", lambda s: {"n": s["n"] * 2})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    return builder.compile(checkpointer=checkpointer)


def test_stop_is_the_deprecated_earlier_name_of_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released: list[EmbeddedPostgres] = []
    monkeypatch.setattr(EmbeddedPostgres, "release", lambda self: released.append(self))
    handle = EmbeddedPostgres(tmp_path / "pgdata")
    with pytest.warns(DeprecationWarning, match=r"EmbeddedPostgres\.stop\(\).*release\(\)"):
        handle.stop()
    assert released == [handle]
