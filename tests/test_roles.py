"""Least privilege: the application's role appends to the record and cannot rewrite it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typer.testing import CliRunner

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.errors import ConfigurationError
from langgraph_external.ops.roles import apply_grants, grant_script
from langgraph_external.options import Options
from tests.graphs import REACT_PATH, react_agent


def _as(dsn: str, user: str) -> str:
    params = conninfo_to_dict(dsn)
    params["user"] = user
    return make_conninfo(**params)


@pytest.fixture
def app_dsn(dsn: str, tmp_path: Path, spool_dir: Path) -> str:
    """The owner sets the ledger and the saver's tables up, then grants ``lgx_app_<db>``."""
    role = "lgx_app_" + str(conninfo_to_dict(dsn)["dbname"])[-12:]
    with External(dsn=dsn, workspace=tmp_path / "owner-ws", options=Options(spool_dir=spool_dir)):
        pass
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"drop role if exists {role}")
        conn.execute(f"create role {role} login")
        apply_grants(conn, "langgraph_external", role)
    return _as(dsn, role)


APPEND_ONLY_VIOLATIONS = [
    "update langgraph_external.events set payload = '{}'",
    "delete from langgraph_external.events",
    "truncate langgraph_external.events",
    "update langgraph_external.threads set last_seq = 1",
    "delete from langgraph_external.threads",
    "select langgraph_external.advance_thread('r', 0, null, 1, 'h', now())",
]


def test_the_app_runs_normally_under_the_append_only_role_and_cannot_rewrite(
    app_dsn: str, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    ws = tmp_path / "ws"
    with External(dsn=app_dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        out = react_agent(ext.checkpointer).invoke(
            {"messages": [HumanMessage("weather?")]}, ext.config("r")
        )
        assert out["messages"][-1].content == "Sunny at noon in Oslo."
        react_agent(ext.checkpointer).invoke({"messages": [HumanMessage("x")]}, ext.config("gone"))
        ext.checkpointer.delete_thread("gone")  # erasure goes through its tombstone
        ext.flush()
        assert ext.health()["failures"] == []
        kinds = [e["kind"] for e in ext.events("r")]
    assert kinds.count("checkpoint") == len(REACT_PATH) + 1 and "tool_end" in kinds
    res = CliRunner(env={"LGX_DSN": None}).invoke(
        app, ["--dsn", dsn, "--workspace", str(ws), "verify", "--all"]
    )
    assert res.exit_code == 0, res.output
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        for stmt in APPEND_ONLY_VIOLATIONS:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt.encode())
        # history goes only with a recorded tombstone
        with pytest.raises(psycopg.Error, match="no tombstone"):
            conn.execute("select langgraph_external.forget_thread('r', 5, now())")
        n = conn.execute("select count(*) from langgraph_external.events where thread_id = 'r'")
        assert n.fetchone() == (len(kinds),)


def test_lgx_setup_roles_prints_or_applies_the_grants(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    runner = CliRunner(env={"LGX_DSN": None})
    base = ["--dsn", dsn, "--workspace", str(tmp_path / "ws"), "setup", "--roles"]
    printed = runner.invoke(app, [*base, "--app-role", "lgx_printed"])
    assert printed.exit_code == 0, printed.output
    assert printed.stdout == grant_script("langgraph_external", "lgx_printed", saver=True)
    missing = runner.invoke(app, [*base, "--app-role", "lgx_missing", "--apply"])
    assert missing.exit_code == 2 and "does not exist" in missing.output, missing.output
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("drop role if exists lgx_applied")
        conn.execute("create role lgx_applied login")
    applied = runner.invoke(app, [*base, "--app-role", "lgx_applied", "--apply"])
    assert applied.exit_code == 0, applied.output
    with (
        psycopg.connect(_as(dsn, "lgx_applied"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("delete from langgraph_external.events")


def test_role_names_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="role name"):
        grant_script("langgraph_external", "app; drop table x")
