#!/usr/bin/env python
"""The least any sealer written in Python can cost: a lower bound for issue 32's targets.

Fills a capture table with ``--n`` invokes' worth of captures (12 checkpoint captures a
thread, a new thread per invoke, each a ~600-byte document naming its channels — what
the 10-node chain's checkpoints capture), then seals them the cheapest way a record with
a hash chain and a file mirror can be sealed: per batch one read of the captures, per
capture one orjson line and one sha256, one ``executemany`` of the rows and one
``delete`` of the captures in one transaction, and per thread one append to one file.
No exact copies, no readable views, no keyed tags, no encryption — it records less than
the product does, so what it costs is a floor, not a design.

Prints the CPU of this process (the sealer) and of the embedded server's processes
during the sealing, per invoke, for ``--rounds`` rounds. Compare with the bare invoke's
total CPU of ``cpu_accounting.py`` (app + server, ~18–22 ms on this machine).

    .venv/bin/python benchmarks/sealer_floor.py --n 300 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import psutil
import psycopg
from _common import postgres


def _server_cpu(pgdata: Path) -> dict[int, float]:
    """CPU seconds of every process of the server, by pid."""
    pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    master = psutil.Process(pid)
    out = {}
    for p in [master, *master.children()]:
        with contextlib.suppress(psutil.NoSuchProcess):
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
    return out


def _spent(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def _capture_doc(step: int) -> bytes:
    channels = {
        f"ch{k}": {
            "version": f"{step:032d}.0.{k}",
            "sha256": hashlib.sha256(os.urandom(8)).hexdigest(),
        }
        for k in range(5)
    }
    meta = {"source": "loop", "step": step, "run_id": str(uuid.uuid4())}
    doc = {"checkpoint_id": str(uuid.uuid4()), "parent": str(uuid.uuid4()), "channels": channels}
    return orjson.dumps({**doc, "metadata": meta})


def one_round(dsn: str, pgdata: Path, n: int, ws: Path) -> tuple[float, float]:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("drop table if exists rec; drop table if exists cap")
        c.execute(
            "create table rec (thread_id text, seq bigint, ts timestamptz default now(),"
            " kind text, line jsonb, hash text, primary key (thread_id, seq))"
        )
        c.execute("create table cap (id bigserial primary key, thread_id text, body bytea)")
        with c.cursor() as cur:
            rows = [(uuid.uuid4().hex, s) for _ in range(n) for s in range(12)]
            cur.executemany(
                "insert into cap (thread_id, body) values (%s, %s)",
                [(t, _capture_doc(s)) for t, s in rows],
            )
    heads: dict[str, tuple[int, str]] = {}
    with psycopg.connect(dsn) as c:  # its server process lives through the window
        server0, app0 = _server_cpu(pgdata), time.process_time()
        while True:
            got = c.execute("select id, thread_id, body from cap order by id limit 1200").fetchall()
            if not got:
                break
            out, files = [], {}
            for _, tid, body in got:
                seq, prev = heads.get(tid, (0, ""))
                line = orjson.dumps(
                    {"seq": seq + 1, "thread_id": tid, "prev": prev, "payload": orjson.loads(body)},
                    option=orjson.OPT_SORT_KEYS,
                )
                digest = hashlib.sha256(line).hexdigest()
                heads[tid] = (seq + 1, digest)
                out.append((tid, seq + 1, "checkpoint", line.decode(), digest))
                files.setdefault(tid, []).append(line)
            with c.cursor() as cur:
                cur.executemany(
                    "insert into rec (thread_id, seq, kind, line, hash)"
                    " values (%s, %s, %s, %s::jsonb, %s)",
                    out,
                )
                cur.execute("delete from cap where id = any(%s)", ([r[0] for r in got],))
            c.commit()
            for tid, lines in files.items():
                d = ws / tid
                d.mkdir(exist_ok=True)
                with open(d / "events.jsonl", "ab") as f:
                    f.write(b"\n".join(lines) + b"\n")
        app = (time.process_time() - app0) * 1000 / n
        server = _spent(server0, _server_cpu(pgdata)) * 1000 / n
    return app, server


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300, help="invokes (12 captures each)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, postgres(None, Path(tmp)) as (dsn, _):
        for r in range(a.rounds):
            ws = Path(tmp) / f"ws{r}"
            ws.mkdir()
            app, server = one_round(dsn, Path(tmp) / "pgdata", a.n, ws)
            print(
                f"round {r + 1}: sealer {app:.2f} ms + server {server:.2f} ms"
                f" = {app + server:.2f} ms CPU per invoke (12 checkpoints)"
            )


if __name__ == "__main__":
    main()
