#!/usr/bin/env python
"""What denser rows would save the server: one invoke's events as ~45 rows or as one row.

Records ``--n`` invokes of the 10-node chain with the audit callbacks (a new thread each),
then stores each thread's events again, in a scratch table of each layout, one
transaction per thread, and reads the server backend's CPU time (psutil) and the WAL it
wrote around each pass:

* ``rows``   — today's layout: one row per event, with the ledger's indexes;
* ``page``   — one row per thread and batch: the envelopes as ``jsonb`` (out of line,
  uncompressed), the details as a ``bytea[]``, a GIN index on the kinds and a BRIN on
  the time (what cross-thread reads by kind would need);
* ``bytes``  — the same with the envelopes as bytes (JSON text; the server parses nothing);
* ``pglz``   — the same, compressed by the server.

It is the prototype behind issue 32's closing note (docs/benchmarks.md, *Denser rows,
prototyped*): the storage is what denser rows change, not the sealer's event building,
hashing and mirroring, nor the app's capture and callbacks.

    .venv/bin/python benchmarks/dense_rows.py --n 200 --rounds 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psutil
import psycopg
from psycopg.types.json import Jsonb

HERE = Path(__file__).resolve().parent
S = "langgraph_external"
PAGE = """
create table {name} (thread_id text not null, seq bigint not null, last_seq bigint not null,
    ts timestamptz not null, kinds text[] not null, run_ids text[], entries {kind} not null,
    details bytea[], primary key (thread_id, seq));
create index on {name} using brin (ts);
create index on {name} using gin (kinds);
alter table {name} alter column entries set storage {storage};
alter table {name} alter column details set storage {storage};
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200, help="invokes (threads) recorded")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from _common import postgres, record_chain

    with tempfile.TemporaryDirectory() as tmp, postgres(None, Path(tmp)) as (dsn, _):
        record_chain(dsn, Path(tmp) / "ws", a.n)
        with psycopg.connect(dsn, autocommit=True) as conn:
            run(conn, a.n, a.rounds)


def run(conn: psycopg.Connection[Any], n: int, rounds: int) -> None:
    cols = [
        r[0]
        for r in conn.execute(
            "select column_name from information_schema.columns where table_schema = %s"
            " and table_name = 'events' order by ordinal_position",
            (S,),
        )
    ]
    conn.execute(f"create table scratch_rows (like {S}.events including all)")
    conn.execute("alter table scratch_rows alter column detail set storage external")
    for name, kind, storage in (
        ("scratch_page", "jsonb", "external"),
        ("scratch_bytes", "bytea", "external"),
        ("scratch_pglz", "bytea", "extended"),
    ):
        conn.execute(PAGE.format(name=name, kind=kind, storage=storage).encode())
    rows = conn.execute(f"select {', '.join(cols)} from {S}.events order by thread_id, seq")
    threads: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows.fetchall():
        threads.setdefault(r[0], []).append(r)
    groups = list(threads.values())
    events = sum(len(g) for g in groups)
    print(f"{events} events of {len(groups)} threads ({events / len(groups):.0f} per invoke)")
    backend = psutil.Process(conn.execute("select pg_backend_pid()").fetchone()[0])  # type: ignore[index]
    insert = (
        f"insert into scratch_rows ({', '.join(cols)}) values ({', '.join(['%s'] * len(cols))})"
    )
    payload = cols.index("payload")

    def as_rows(group: list[tuple[Any, ...]]) -> None:
        params = [[Jsonb(v) if i == payload else v for i, v in enumerate(r)] for r in group]
        with conn.cursor() as cur:
            cur.executemany(insert.encode(), params)

    def as_page(table: str, encode: Callable[[Any], Any]) -> Callable[[list[Any]], None]:
        def store(group: list[tuple[Any, ...]]) -> None:
            entries, details = [], []
            for r in group:
                d = dict(zip(cols, r, strict=True))
                details.append(d.pop("detail"))
                d.pop("raw")
                d["ts"], d["event_id"] = d["ts"].isoformat(), str(d["event_id"])
                entries.append(d)
            conn.execute(
                f"insert into {table} values (%s, %s, %s, %s, %s, %s, %s, %s)".encode(),
                (
                    group[0][0],
                    entries[0]["seq"],
                    entries[-1]["seq"],
                    group[0][cols.index("ts")],
                    sorted({e["kind"] for e in entries}),
                    sorted({e["run_id"] for e in entries if e["run_id"]}),
                    encode(entries),
                    details,
                ),
            )

        return store

    layouts: dict[str, tuple[str, Callable[[list[Any]], None]]] = {
        "rows": ("scratch_rows", as_rows),
        "page": ("scratch_page", as_page("scratch_page", Jsonb)),
        "bytes": ("scratch_bytes", as_page("scratch_bytes", orjson.dumps)),
        "pglz": ("scratch_pglz", as_page("scratch_pglz", orjson.dumps)),
    }
    print(f"{'round':>5} " + " ".join(f"{k:>22}" for k in layouts))
    for r in range(rounds):
        cells = []
        for table, store in layouts.values():
            cpu0 = sum(backend.cpu_times()[:2])
            lsn0 = conn.execute("select pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
            for group in groups:
                with conn.transaction():
                    store(group)
            cpu1 = sum(backend.cpu_times()[:2])
            wal = conn.execute(
                "select pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn0,)
            ).fetchone()[0]  # type: ignore[index]
            conn.execute(f"truncate {table}".encode())
            cells.append(f"{1000 * (cpu1 - cpu0) / n:6.2f} ms {float(wal) / n / 1024:6.1f} KiB")
            time.sleep(0.2)
        print(f"{r + 1:>5} " + " ".join(f"{c:>22}" for c in cells))
    print("(server CPU and WAL per invoke, its events stored in one transaction)")


if __name__ == "__main__":
    main()
