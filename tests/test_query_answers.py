"""Every SQL query the README and the docs show answers the same on the same recorded
threads: a fixed set of threads is recorded (scripted models, fixed ids), every statement
of the ```sql blocks of README.md, docs/sql.md and docs/audit.md is run, and the answers —
with what changes from run to run (times, durations, ids, hashes, channel versions) put
in placeholders — must equal ``tests/data/query_answers.json``.

A change to the ledger's schema (denser rows, views over them) must keep every answer;
a deliberate change to an answer updates the file:
``LGX_UPDATE_QUERY_ANSWERS=1 .venv/bin/python -m pytest tests/test_query_answers.py``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner

from langgraph_external import External
from langgraph_external.cli import app as cli
from langgraph_external.ledger import schema as ledger
from langgraph_external.options import Options
from tests.graphs import react_agent

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "data" / "query_answers.json"
PAGES = ("README.md", "docs/sql.md", "docs/audit.md")

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX = re.compile(r"\b[0-9a-f]{64}\b")
_VERSION = re.compile(r"\b\d{32}\.\d+\.\d+\b")
_TS = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?")


def statements() -> list[tuple[str, str]]:
    """``(page, statement)`` for every statement of the pages' ```sql blocks."""
    out = []
    for page in PAGES:
        for block in re.findall(r"```sql\n(.*?)```", (ROOT / page).read_text(), re.S):
            for part in block.split(";"):
                lines = [ln for ln in part.strip().splitlines() if not ln.strip().startswith("--")]
                if any(ln.strip() for ln in lines):
                    out.append((page, part.strip()))
    return out


def stable(value: Any) -> Any:
    """``value`` with what differs between two recordings of the same run replaced."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return "<time>"
    if isinstance(value, dt.timedelta):
        return "<interval>"
    if isinstance(value, float | decimal.Decimal):
        return "<number>"
    if isinstance(value, bytes | memoryview):
        return f"<{len(bytes(value))} bytes>"
    if isinstance(value, str):
        for pattern, name in ((_TS, "<time>"), (_UUID, "<id>"), (_HEX, "<hex>")):
            value = pattern.sub(name, value)
        return _VERSION.sub("<version>", value)
    if isinstance(value, dict):
        return {
            str(k): "<commitment>" if k == "commit" else stable(v)  # keyed: differs per key
            for k, v in value.items()
            if k not in _VOLATILE_KEYS
        }
    if isinstance(value, list | tuple):
        return [stable(v) for v in value]
    return value


# payload members that hold measured times, or sizes of serialized values (they carry
# generated ids of varying length)
_VOLATILE_KEYS = frozenset({"duration_ms", "elapsed_ms", "size_bytes", "size"})


def answers(dsn: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with psycopg.connect(dsn) as conn:
        for page, sql in statements():
            cur = conn.execute(sql)
            columns = [d.name for d in cur.description or ()]
            # a thread's seq numbers follow commit order, which LangGraph's background
            # writes make differ between two recordings of the same run: the rows
            # compared are what was recorded, not at which seq
            # (and sizes of serialized values carry generated ids of varying length)
            ordinal = [
                c.endswith("seq") or c == "events" or "size" in c or "bytes" in c for c in columns
            ]
            rows = sorted(
                json.dumps(
                    [("<seq>" if o else stable(v)) for o, v in zip(ordinal, r, strict=True)],
                    sort_keys=True,
                    default=str,
                )
                for r in cur.fetchall()
            )
            out[f"{page}: {' '.join(sql.split())}"] = {"columns": columns, "rows": rows}
    return out


def test_every_query_in_the_docs_answers_as_recorded(dsn: str, tmp_path: Path) -> None:
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=tmp_path / "spool"),
    ) as ext:
        for thread in ("thread-42", "thread-43"):
            graph = react_agent(ext.checkpointer)
            graph.invoke({"messages": [HumanMessage(f"Weather for {thread}?")]}, ext.config(thread))
        assert ext.flush()
    got = answers(dsn)
    assert len(got) >= 11  # every statement of the three pages ran
    if os.environ.get("LGX_UPDATE_QUERY_ANSWERS") == "1":
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"wrote {GOLDEN}")
    expected = json.loads(GOLDEN.read_text())
    assert set(got) == set(expected), "the docs' queries changed: update the answers file"
    for query, answer in expected.items():
        assert got[query] == answer, query


# -- the v12 migration (index what is read): an upgrade keeps the record and the answers --
V9 = 10  # migrations v0..v9 (so also the version v10 gets)
LATEST = len(ledger.MIGRATIONS) - 1
READ_INDEXES = {
    "captures": {"captures_thread_idx"},
    "checkpoints": set(),
    "events": {
        "events_errors_idx",
        "events_kind_ts_idx",
        "events_run_idx",
        "events_session_idx",
        "events_thread_run_idx",
        "events_ts_brin",
    },
}
"""The secondary indexes of the latest schema: what the CLI, ``lgx ui`` and the docs read
(docs/benchmarks.md, "Index what is read")."""


def secondary_indexes(conn: psycopg.Connection[Any]) -> dict[str, set[str]]:
    rows = conn.execute(
        "select tablename, indexname from pg_indexes where schemaname = 'langgraph_external'"
        " and tablename in ('events', 'checkpoints', 'captures') and indexname not like '%pkey'"
    ).fetchall()
    out: dict[str, set[str]] = {"captures": set(), "checkpoints": set(), "events": set()}
    for table, index in rows:
        out[table].add(index)
    return out


def back_to_v9(conn: psycopg.Connection[Any]) -> None:
    """The ledger as v9 left it, as far as indexes go: v12 only changes indexes, and v10
    (a function replaced) and v11 (a column added if absent) run again harmlessly, so the
    indexes and the ``migrations`` rows are what differ."""
    for indexes in secondary_indexes(conn).values():
        for index in indexes:
            conn.execute(f"drop index langgraph_external.{index}".encode())
    text = "\n".join(ledger.MIGRATIONS[:V9])
    for stmt in re.findall(r"create index if not exists .*?;", text, re.S):
        conn.execute(ledger.q(stmt.rstrip(";"), "langgraph_external"))
    conn.execute("delete from langgraph_external.migrations where v >= %s", (V9,))


def test_the_latest_schema_indexes_what_is_read(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert ledger.setup(conn) == len(ledger.MIGRATIONS) - 1
        assert secondary_indexes(conn) == READ_INDEXES
        (session,) = conn.execute(
            "select indexdef from pg_indexes where indexname = 'events_session_idx'"
        ).fetchone()  # type: ignore[misc]
        assert "IS NOT NULL" in session  # only the checkpoints that name a session


def test_an_upgrade_from_v9_keeps_the_record_verified_and_the_answers(
    dsn: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=tmp_path / "spool")) as ext:
        for thread in ("thread-42", "thread-43"):
            graph = react_agent(ext.checkpointer)
            graph.invoke({"messages": [HumanMessage(f"Weather for {thread}?")]}, ext.config(thread))
        assert ext.flush()
    with psycopg.connect(dsn, autocommit=True) as conn:
        back_to_v9(conn)
        before = secondary_indexes(conn)
        assert "events_name_ts_idx" in before["events"] and before["checkpoints"]
        assert ledger.setup(conn) == LATEST == 14  # v10..v14, over the populated ledger
        assert secondary_indexes(conn) == READ_INDEXES
        applied = conn.execute("select max(v) from langgraph_external.migrations").fetchone()
        assert applied == (LATEST,)

    verified = CliRunner(env={"LGX_DSN": None}).invoke(
        cli, ["--dsn", dsn, "--workspace", str(ws), "verify", "--all"]
    )
    assert verified.exit_code == 0, verified.output
    assert "2 threads" in verified.stdout

    got = answers(dsn)
    expected = json.loads(GOLDEN.read_text())
    assert set(got) == set(expected)
    for query, answer in expected.items():
        assert got[query] == answer, query
