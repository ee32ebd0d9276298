"""``lgx db`` and the embedded server's handle list, with real servers and a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from typer.testing import CliRunner, Result

from langgraph_external.cli import app
from langgraph_external.embedded import (
    HANDLES_FILE,
    EmbeddedPostgres,
    prune_stale_handles,
    server_status,
    stop_server,
)

HOLDER = textwrap.dedent(
    """
    import sys, time
    from langgraph_external.embedded import EmbeddedPostgres
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

    # a process that uses the server and exits does not stop a server started this way
    handle = EmbeddedPostgres(pgdata(ws))
    assert handle.start() == uri
    handle.stop()
    assert server_status(pgdata(ws)).running

    pid = st["pid"]
    stopped = lgx(runner, ws, "db", "stop", "--json")
    assert stopped.exit_code == 0, stopped.output
    result = as_json(stopped)
    assert result["stopped"] and result["was_running"] and not result["status"]["running"]
    assert gone(pid)
    assert lgx(runner, ws, "db", "status").exit_code == 1
    again = lgx(runner, ws, "db", "stop")
    assert again.exit_code == 0 and "not running" in again.stdout

    # once stopped, the next user's clean exit stops the server again
    handle = EmbeddedPostgres(pgdata(ws))
    handle.start()
    assert server_status(pgdata(ws)).running
    handle.stop()
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
    assert "no process uses it" in text.stdout


def test_a_clean_exit_after_a_sigkilled_user_stops_the_server(ws: Path, holder: Holder) -> None:
    server_pid = postmaster_pid(pgdata(ws))
    holder.sigkill()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from langgraph_external.embedded import EmbeddedPostgres as E; "
            "e = E(sys.argv[1]); e.start(); e.stop()",
            str(pgdata(ws)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert gone(server_pid)
    assert not server_status(pgdata(ws)).running


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
    first.stop()
    with psycopg.connect(uri) as conn:  # the other handle still has its server
        assert conn.execute("select 1").fetchone() == (1,)
    second.stop()
    assert not server_status(pgdata(ws)).running
    assert json.loads((pgdata(ws) / HANDLES_FILE).read_text()) == []
