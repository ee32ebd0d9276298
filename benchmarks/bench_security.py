#!/usr/bin/env python
"""What the deployment key costs on the hot path: encrypted vs clear exact copies.

Three setups on the same server, in the same run, interleaved in rounds: A the bare
official ``PostgresSaver``; B ``External`` with the defaults (keyed addresses, exact copies
encrypted with AES-256-GCM, keyed head tags); C ``External(encrypt=False)`` (keyed
addresses and head tags, copies in clear). The 10-node chain of ``bench_checkpointer``,
``durability="sync"``, a new thread per invoke; each External batch ends with its flush.
Prints per-invoke medians and the ratios B/A, C/A, B/C; plus the per-value cost of a
keyed address and of sealing next to a plain sha256.

Run from the repository root::

    .venv/bin/python benchmarks/bench_security.py [--n 300] [--batch 25]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from _common import bare_saver, build_graph, invoke_once, postgres

from langgraph_external.options import Options


def _external(dsn: str, files: Path, *, encrypt: bool) -> Any:
    from langgraph_external import External

    return External(
        dsn=dsn,
        workspace=files / "workspace",
        options=Options(spool_dir=files / "spool", encrypt=encrypt),
    ).setup()


def _per_value() -> dict[str, float]:
    from langgraph_external.record.crypto import WorkspaceCipher

    c = WorkspaceCipher(WorkspaceCipher.generate_key())
    data = os.urandom(512)
    n = 20_000
    out = {}
    for name, fn in {
        "sha256 (before)": lambda: hashlib.sha256(data).hexdigest(),
        "keyed address": lambda: c.address(data),
        "keyed address + AES-GCM seal": lambda: c.encrypt(data, c.address(data).encode()),
    }.items():
        out[name] = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=300, help="invokes per setup")
    p.add_argument("--batch", type=int, default=25, help="invokes per setup per round")
    args = p.parse_args()
    os.environ.setdefault("LGX_KEY_FILE", tempfile.mkdtemp(prefix="lgx-bench-key-") + "/key")
    with tempfile.TemporaryDirectory(prefix="lgx-bench-sec-") as tmp:
        root = Path(tmp)
        with postgres(os.environ.get("LGX_BENCH_DSN"), root) as (dsn, kind):
            saver, pool = bare_saver(dsn, 8)
            setups: dict[str, tuple[Any, Any]] = {
                "A bare PostgresSaver": (build_graph(saver), None),
            }
            ext_b = _external(dsn, root / "b", encrypt=True)
            ext_c = _external(dsn, root / "c", encrypt=False)
            setups["B External (encrypted, default)"] = (build_graph(ext_b.checkpointer), ext_b)
            setups["C External(encrypt=False)"] = (build_graph(ext_c.checkpointer), ext_c)
            times: dict[str, list[float]] = {k: [] for k in setups}
            for graph, _ in setups.values():  # warm-up
                for _ in range(10):
                    invoke_once(graph, "warm")
            order = list(setups)
            done = 0
            while done < args.n:
                for name in order:
                    graph, ext = setups[name]
                    t0 = time.perf_counter()
                    for _ in range(args.batch):
                        invoke_once(graph, name[0])
                    if ext is not None:
                        ext.flush(timeout=300)
                    times[name].append((time.perf_counter() - t0) / args.batch * 1000)
                order.reverse()
                done += args.batch
            ext_b.close()
            ext_c.close()
            pool.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    a, b, c = (med[k] for k in setups)
    print(f"server: {kind}; {args.n} invokes per setup, batches of {args.batch}")
    for k, v in med.items():
        print(f"  {k:<34} {v:7.2f} ms per invoke (median of batch means, incl. flush)")
    print(f"  ratio B/A {b / a:.2f}   C/A {c / a:.2f}   B/C (cost of encryption) {b / c:.3f}")
    print("per 512-byte value:")
    for k, us in _per_value().items():
        print(f"  {k:<32} {us:6.2f} µs")


if __name__ == "__main__":
    main()
