"""``lgx export`` / ``lgx import``: a thread moves to another database and workspace whole."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner, Result

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.errors import ArchiveError, ImportConflictError
from langgraph_external.ledger import schema as ledger
from langgraph_external.ops.transfer import (
    ARCHIVE_FORMAT,
    ARCHIVE_VERSION,
    import_thread,
    read_archive,
)
from langgraph_external.options import Options
from langgraph_external.workspace.files import Workspace
from tests.conftest import _with_db
from tests.graphs import fanout_with_subgraph, react_agent


@dataclass
class Place:
    dsn: str
    ws: Path


@pytest.fixture
def other_dsn(pg_server: str) -> Iterator[str]:
    name = f"lgx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    try:
        yield _with_db(pg_server, name)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


@pytest.fixture
def source(dsn: str, tmp_path: Path, spool_dir: Path) -> Place:
    ws = tmp_path / "ws-a"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        react_agent(ext.checkpointer).invoke(
            {"messages": [HumanMessage("weather?")]}, ext.config("react")
        )
        fanout_with_subgraph(ext.checkpointer).invoke({"items": [], "total": 0}, ext.config("fan"))
    return Place(dsn, ws)


@pytest.fixture
def target(other_dsn: str, tmp_path: Path) -> Place:
    return Place(other_dsn, tmp_path / "ws-b")


def lgx(place: Place, *args: str) -> Result:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})
    return runner.invoke(app, ["--dsn", place.dsn, "--workspace", str(place.ws), *args])


def events(dsn: str, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, options="-c timezone=UTC") as conn:
        return ledger.fetch_events(conn, thread_id)


def saver_rows(dsn: str, thread_id: str) -> int:
    with psycopg.connect(dsn) as conn:
        exists = conn.execute("select to_regclass('checkpoints')").fetchone()
        if not exists or exists[0] is None:
            return 0
        row = conn.execute("select count(*) from checkpoints where thread_id = %s", (thread_id,))
        return int(row.fetchone()[0])  # type: ignore[index]


def export(place: Place, thread_id: str, path: Path) -> dict[str, Any]:
    result = lgx(place, "export", thread_id, "-o", str(path), "--json")
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def rewrite(archive: Path, out: Path, change: Any, *, fix_manifest: bool) -> None:
    """Copy an archive, changing members with ``change(name, data) -> data``."""
    with tarfile.open(archive, "r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar}  # type: ignore[union-attr]
    manifest = json.loads(files.pop("manifest.json"))
    files = {k: change(k, v) for k, v in files.items()}
    if fix_manifest:
        manifest["files"] = {
            k: {"sha256": hashlib.sha256(v).hexdigest(), "size": len(v)} for k, v in files.items()
        }
    with tarfile.open(out, "w:gz") as tar:
        for name, data in {"manifest.json": json.dumps(manifest).encode(), **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def assert_nothing_imported(target: Place, thread_id: str) -> None:
    assert events(target.dsn, thread_id) == [] if _ledger_exists(target.dsn) else True
    assert saver_rows(target.dsn, thread_id) == 0
    assert not Workspace(target.ws).exists(Workspace(target.ws).thread_dir(thread_id))
    staging = target.ws / ".lgx"
    assert not staging.exists() or not any(staging.glob("import-*"))


def _ledger_exists(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select to_regclass('langgraph_external.events')").fetchone()
        return bool(row and row[0])


# -- round trip ---------------------------------------------------------------------------
@pytest.mark.parametrize("thread_id", ["react", "fan"])
def test_a_thread_moves_whole_and_resumes_in_the_other_database(
    source: Place, target: Place, tmp_path: Path, spool_dir: Path, thread_id: str
) -> None:
    archive = tmp_path / "t.tar.gz"
    info = export(source, thread_id, archive)
    original = events(source.dsn, thread_id)
    assert info["events"] == len(original) and info["last_hash"] == original[-1]["hash"]
    assert info["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()

    result = lgx(target, "import", str(archive), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["thread_id"] == thread_id and report["events"] == len(original) + 1
    moved = events(target.dsn, thread_id)
    assert [(e["seq"], e["hash"]) for e in moved[:-1]] == [(e["seq"], e["hash"]) for e in original]
    assert moved[-1]["kind"] == "thread_imported"
    assert moved[-1]["payload"]["archive_sha256"] == info["sha256"]
    assert (
        report["checkpoints"]
        == saver_rows(source.dsn, thread_id)
        == saver_rows(target.dsn, thread_id)
    )
    verified = lgx(target, "verify", thread_id)
    assert verified.exit_code == 0, verified.output

    # the same state in both places; the imported thread runs on
    with External(dsn=source.dsn, workspace=source.ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = (react_agent if thread_id == "react" else fanout_with_subgraph)(ext.checkpointer)
        before = graph.get_state(ext.config(thread_id)).values
    with External(dsn=target.dsn, workspace=target.ws, options=Options(spool_dir=spool_dir)) as ext:
        graph = (react_agent if thread_id == "react" else fanout_with_subgraph)(ext.checkpointer)
        assert graph.get_state(ext.config(thread_id)).values == before
        if thread_id == "react":
            graph.invoke({"messages": [HumanMessage("and now?")]}, ext.config(thread_id))
            assert len(graph.get_state(ext.config(thread_id)).values["messages"]) > len(
                before["messages"]
            )
    assert lgx(target, "verify", thread_id).exit_code == 0


def test_the_imported_ledger_can_rebuild_the_workspace(
    source: Place, target: Place, tmp_path: Path
) -> None:
    archive = tmp_path / "t.tar.gz"
    export(source, "fan", archive)
    assert lgx(target, "import", str(archive)).exit_code == 0
    ws = Workspace(target.ws)
    log = ws.checkpoint_log_path("fan", "")
    before = Path(log).read_bytes()
    rebuilt = lgx(target, "repair", "--rebuild", "fan", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert Path(log).read_bytes() == before
    assert lgx(target, "verify", "fan").exit_code == 0


# -- refusals -----------------------------------------------------------------------------
def test_an_existing_thread_is_a_conflict_and_nothing_changes(
    source: Place, target: Place, tmp_path: Path
) -> None:
    archive = tmp_path / "t.tar.gz"
    export(source, "react", archive)
    assert lgx(target, "import", str(archive)).exit_code == 0
    held = events(target.dsn, "react")
    again = lgx(target, "import", str(archive))
    assert again.exit_code == 1 and "already in the ledger" in again.stderr
    assert events(target.dsn, "react") == held
    with pytest.raises(ImportConflictError):
        import_thread(source.dsn, Workspace(tmp_path / "fresh-ws"), archive)
    assert not (tmp_path / "fresh-ws" / "threads" / "react").exists()


@pytest.mark.parametrize(
    ("what", "fix_manifest", "message"),
    [
        ("blob byte", False, "does not match its sha256"),
        ("inline value", True, "wrong key or altered"),  # sealed copies: the AEAD refuses
        ("event payload", True, "hash chain broken"),
        ("missing event", True, "workspace/events.jsonl does not hold"),
    ],
)
def test_an_altered_archive_is_refused_and_nothing_is_written(
    source: Place, target: Place, tmp_path: Path, what: str, fix_manifest: bool, message: str
) -> None:
    archive, bad = tmp_path / "t.tar.gz", tmp_path / "bad.tar.gz"
    export(source, "react", archive)

    def change(name: str, data: bytes) -> bytes:
        if what == "blob byte" and name == "workspace/checkpoints/_root.jsonl":
            return data.replace(b"Oslo", b"Oslx", 1)
        if what == "inline value" and name == "workspace/checkpoints/_root.jsonl":
            lines = data.splitlines()
            # the last checkpoint line with inline values (writes lines may follow it: a
            # task's writes can be recorded after the next checkpoint when durability is async)
            i = max(n for n, line in enumerate(lines) if json.loads(line).get("blobs"))
            doc = json.loads(lines[i])
            sha, b64 = next(iter(doc["blobs"].items()))
            doc["blobs"][sha] = b64[:-4] + ("AAAA" if b64[-4:] != "AAAA" else "BBBB")
            lines[i] = json.dumps(doc).encode()
            return b"\n".join(lines) + b"\n"
        if what == "event payload" and name == "ledger/events.jsonl":
            return data.replace(b"weather?", b"weather!", 1)
        if what == "missing event" and name == "workspace/events.jsonl":
            return b"\n".join(data.splitlines()[:-1]) + b"\n"
        return data

    rewrite(archive, bad, change, fix_manifest=fix_manifest)
    result = lgx(target, "import", str(bad))
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: import refused") and message in result.stderr
    assert "Traceback" not in result.output
    assert_nothing_imported(target, "react")


def test_unsafe_members_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "evil.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("../evil")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ArchiveError, match="unsafe path"):
        read_archive(bad)
    link = tmp_path / "link.tar.gz"
    with tarfile.open(link, "w:gz") as tar:
        info = tarfile.TarInfo("workspace/x")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(ArchiveError, match="not a regular file"):
        read_archive(link)
    not_tar = tmp_path / "junk.tar.gz"
    not_tar.write_bytes(b"not a tar")
    with pytest.raises(ArchiveError, match="cannot read"):
        read_archive(not_tar)


@pytest.mark.parametrize(
    "listed",
    [["ledger/events.jsonl"], {"ledger/events.jsonl": "0" * 64}, "ledger/events.jsonl"],
    ids=["a list", "a string per file", "a string"],
)
def test_a_manifest_whose_file_list_is_malformed_is_refused_by_name(
    tmp_path: Path, listed: Any
) -> None:
    """A crafted manifest gets the archive's typed error, not a traceback from inside."""
    bad = tmp_path / "crafted.tar.gz"
    members = {
        "manifest.json": json.dumps(
            {"format": ARCHIVE_FORMAT, "version": ARCHIVE_VERSION, "files": listed}
        ).encode(),
        "ledger/events.jsonl": b"",
    }
    with tarfile.open(bad, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ArchiveError, match="files is not a map"):
        read_archive(bad)


def test_export_refuses_a_lagging_workspace_and_unknown_threads(
    source: Place, tmp_path: Path
) -> None:
    missing = lgx(source, "export", "nope", "-o", str(tmp_path / "n.tar.gz"))
    assert missing.exit_code == 1 and "no events in the ledger" in missing.stderr
    path = Workspace(source.ws).thread_dir("react") + "/events.jsonl"
    lines = Path(path).read_bytes().splitlines(keepends=True)
    Path(path).write_bytes(b"".join(lines[:-2]))
    lagging = lgx(source, "export", "react", "-o", str(tmp_path / "r.tar.gz"))
    assert lagging.exit_code == 1 and "lgx repair" in lagging.stderr
    assert not (tmp_path / "r.tar.gz").exists()
    # a thread named like a subcommand goes through `export thread`
    Path(path).write_bytes(b"".join(lines))
    named = lgx(source, "export", "thread", "react", "-o", str(tmp_path / "r.tar.gz"), "--json")
    assert named.exit_code == 0, named.output
    assert read_archive(tmp_path / "r.tar.gz").thread_id == "react"


def test_an_encrypted_workspace_moves_with_its_key_only(
    dsn: str, other_dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    from langgraph_external.record.crypto import WorkspaceCipher

    key = WorkspaceCipher.generate_key()
    source = Place(dsn, tmp_path / "enc-a")
    with External(
        dsn=dsn, workspace=source.ws, key=key, options=Options(spool_dir=spool_dir)
    ) as ext:
        react_agent(ext.checkpointer).invoke(
            {"messages": [HumanMessage("weather?")]}, ext.config("secret")
        )
    archive = tmp_path / "s.tar.gz"
    export(source, "secret", archive)
    assert read_archive(archive).manifest["encrypted"] is True
    target = Place(other_dsn, tmp_path / "enc-b")
    without = lgx(target, "import", str(archive))  # this deployment's key is another one
    assert without.exit_code == 1 and "wrong key" in without.stderr
    wrong = lgx(target, "import", str(archive), "--key", WorkspaceCipher.generate_key())
    assert wrong.exit_code == 1
    assert_nothing_imported(target, "secret")
    right = lgx(target, "import", str(archive), "--key", key, "--json")
    assert right.exit_code == 0, right.output
    assert json.loads(right.stdout)["checkpoints"] == saver_rows(dsn, "secret")
    # the thread stays sealed, and its head tagged, under the key it came with
    assert lgx(target, "verify", "secret", "--key", key).exit_code == 0
