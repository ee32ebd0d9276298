#!/usr/bin/env python
"""What the auditor's proof adds to the record's CPU, part by part (issue 35).

The whole record's CPU on this machine varies by more than the proof can add (2 %), so
besides ``cpu_accounting.py`` before/after this measures each added part where it is
paid, alternating with and without it in one run:

* **server, per head move**: ``advance_thread`` with the log (a leaf appended, the right
  edge updated, in the same transaction) against the same function without it, each in a
  transaction of its own as a sealer runs it — the backend's CPU (psutil);
* **sealer, per exact value**: the commitment (``WorkspaceCipher.commitment``: an HMAC
  and a SHA-256) — ``time.process_time``;
* **signing, per head**: ``sign_head`` (client and server), paid once per interval;
* **how many of each an invoke pays**: leaves and commitments per invoke of the 10-node
  chain with the audit callbacks, a new thread each, counted from the ledger.

    .venv/bin/python benchmarks/bench_signing.py --n 200 --moves 3000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg

HERE = Path(__file__).resolve().parent
S = "langgraph_external"


def no_log_function() -> str:
    """v14's ``advance_thread`` without its leaf: renamed, the append left out."""
    from langgraph_external.ledger.log_schema import LOG_MIGRATION

    start = LOG_MIGRATION.index("create or replace function {schema}.advance_thread(")
    text = LOG_MIGRATION[start : LOG_MIGRATION.index("$$;", start) + 3]
    text = text.replace(".advance_thread(", ".advance_thread_nolog(", 1)
    without = text.replace("perform {schema}.log_append(p_thread, p_seq, p_hash, p_ts);", "")
    assert without != text, "the append is no longer where this benchmark looks"
    return without.format(schema=S)


def moves(conn: psycopg.Connection[Any], fn: str, prefix: str, n: int) -> float:
    """Backend CPU ms per head move: ``n`` new threads, each moved twice (create, advance)."""
    backend = psutil.Process(conn.execute("select pg_backend_pid()").fetchone()[0])  # type: ignore[index]
    stmt = f"select {S}.{fn}(%s, %s, %s, %s, %s, now(), null)".encode()
    before = sum(backend.cpu_times()[:2])
    for i in range(n // 2):
        tid = f"{prefix}-{i}"
        with conn.transaction():
            conn.execute(stmt, (tid, 0, None, 1, "a" * 64))
        with conn.transaction():
            conn.execute(stmt, (tid, 1, "a" * 64, 2, "b" * 64))
    return 1000 * (sum(backend.cpu_times()[:2]) - before) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200, help="invokes recorded (counts per invoke)")
    ap.add_argument("--moves", type=int, default=3000, help="head moves per measurement")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from _common import postgres, record_chain

    from langgraph_external.proof.heads import sign_head
    from langgraph_external.proof.keys import Signer
    from langgraph_external.record.crypto import WorkspaceCipher

    with tempfile.TemporaryDirectory() as tmp, postgres(None, Path(tmp)) as (dsn, _):
        record_chain(dsn, Path(tmp) / "ws", a.n)
        with psycopg.connect(dsn, autocommit=True) as conn:
            leaves = conn.execute(f"select count(*) from {S}.log_leaves").fetchone()[0]  # type: ignore[index]
            commits = conn.execute(
                f"select count(*) from {S}.events e, jsonb_path_query(e.payload, "
                "'strict $.**.commit') c where e.kind in ('checkpoint', 'writes')"
            ).fetchone()[0]  # type: ignore[index]
            print(
                f"per invoke: {leaves / a.n:.2f} head moves (log leaves), "
                f"{commits / a.n:.1f} commitments"
            )
            conn.execute(no_log_function().encode())
            with_log, without = [], []
            for r in range(a.rounds):
                without.append(moves(conn, "advance_thread_nolog", f"n{r}", a.moves))
                with_log.append(moves(conn, "advance_thread", f"l{r}", a.moves))
            print(
                "server CPU per head move, ms: with the log "
                + ", ".join(f"{x:.4f}" for x in with_log)
                + "; without "
                + ", ".join(f"{x:.4f}" for x in without)
            )
            signer = Signer.generate("bench")
            t0 = time.process_time()
            for _ in range(50):
                sign_head(conn, S, [signer])
            sign_ms = 1000 * (time.process_time() - t0) / 50
    cipher = WorkspaceCipher(WorkspaceCipher.generate_key())
    value = b"\x92\xa5hello" * 40
    address = cipher.address(value)
    t0 = time.process_time()
    for _ in range(20000):
        cipher.commitment(value, address)
    commit_us = 1e6 * (time.process_time() - t0) / 20000
    delta = statistics.median(with_log) - statistics.median(without)
    per_invoke = delta * leaves / a.n + commit_us / 1000 * commits / a.n
    print(f"sealer CPU per commitment: {commit_us:.2f} µs; sign_head (client): {sign_ms:.2f} ms")
    print(
        f"added per invoke: server {delta * leaves / a.n:.4f} ms (log) + sealer "
        f"{commit_us / 1000 * commits / a.n:.4f} ms (commitments) = {per_invoke:.4f} ms; "
        "signing: one head per interval (default 5 s), whatever the load"
    )


if __name__ == "__main__":
    main()
