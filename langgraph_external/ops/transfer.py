"""Move one thread between installations: an archive of its record and workspace.

:func:`export_thread` writes a ``.tar.gz`` holding the thread's ledger events (the
system of record, with the projection detail that lets the workspace be rebuilt from
them), its workspace folder (``thread.json``, ``state.json``, ``events.jsonl``, the
checkpoint logs with the exact bytes, blobs and artifacts) and a ``manifest.json`` naming
every file with its sha256 and size. The workspace must hold exactly the ledger's events
(a lagging mirror is refused: run ``lgx repair`` first).

:func:`import_thread` puts an archive into another database and workspace. Everything is
checked before the first write: the archive's members (regular files under known names
only; no links, absolute paths or ``..``), every file against the manifest, the events'
hash chain, the workspace's ``events.jsonl`` against the ledger events, every checkpoint
log line against its event and every exact value against its address (as a restore
does), and that the thread is new to the target ledger, the official saver's tables and
the workspace. Then, in **one** database transaction, the events (same ``seq``, same
hashes), the ledger's checkpoint index, the checkpoints in the official Postgres saver's
tables and a closing ``thread_imported`` event are written; the workspace folder is
unpacked beside its place and moved in only after that commit. A failure leaves nothing
behind.

Example:
    >>> try:
    ...     read_archive("/nonexistent/thread.tar.gz")
    ... except ArchiveError as exc:
    ...     print(str(exc)[:30])
    cannot read the archive /nonex
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver

from langgraph_external.assembly import setup_saver
from langgraph_external.errors import ArchiveError, ImportConflictError, RestoreError
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger import statements as stmt
from langgraph_external.ledger.postgres import PostgresLedger
from langgraph_external.ledger.rows import unpack_detail
from langgraph_external.ops.decode import decode_all, put_all
from langgraph_external.record.checkpoints import names_old_folder
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import SCHEMA_VERSION, Event, EventKind, verify_chain
from langgraph_external.record.keys import existing_key
from langgraph_external.record.processors import Sequencer
from langgraph_external.upstream import saver_ops
from langgraph_external.workspace.checkpoint_log import verify_thread
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.lines import EVENTS_FILE, BadLine, events_path, parse_lines

__all__ = [
    "ARCHIVE_FORMAT",
    "Archive",
    "ExportReport",
    "ImportReport",
    "export_thread",
    "import_thread",
    "read_archive",
]

ARCHIVE_FORMAT = "lgx-thread-archive"
ARCHIVE_VERSION = 1
MAX_MEMBER_BYTES = 2 * 1024**3
"""Largest single file accepted from an archive (a guard against decompression bombs)."""

Progress = Callable[[int, int], None]
"""``progress(done, total)`` — called as files are written or checked."""

LEDGER_EVENTS = "ledger/events.jsonl"
LEDGER_DETAILS = "ledger/details.jsonl"
MIRROR_EVENTS = f"workspace/{EVENTS_FILE}"
"""Archive members: the ledger's events and their projection detail, and the workspace's
``events.jsonl`` (the thread folder is under ``workspace/``)."""


@dataclass(frozen=True)
class ExportReport:
    """What :func:`export_thread` wrote.

    Attributes:
        path: the archive.
        thread_id: the exported thread.
        events: ledger events in it; ``last_seq`` / ``last_hash`` its head.
        files: workspace files in it; ``bytes``: the archive's size; ``sha256``: its digest.
    """

    path: str
    thread_id: str
    events: int
    last_seq: int
    last_hash: str | None
    files: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_thread` wrote.

    Attributes:
        thread_id: the imported thread.
        events: events inserted (the archive's plus the closing ``thread_imported``).
        checkpoints: checkpoints put into the official saver's tables.
        files: workspace files unpacked.
        archive_sha256: digest of the archive file.
    """

    thread_id: str
    events: int
    checkpoints: int
    files: int
    archive_sha256: str


@dataclass
class Archive:
    """A read and verified archive (see :func:`read_archive`)."""

    manifest: dict[str, Any]
    files: dict[str, bytes]
    envelopes: list[dict[str, Any]]
    details: dict[int, bytes] = field(default_factory=dict)
    sha256: str = ""

    @property
    def thread_id(self) -> str:
        return str(self.manifest["thread_id"])

    def workspace_files(self) -> dict[str, bytes]:
        """Workspace-relative path inside the thread folder -> bytes."""
        return {
            k[len("workspace/") :]: v for k, v in self.files.items() if k.startswith("workspace/")
        }


# -- export ------------------------------------------------------------------------------
def _manifest(
    thread_id: str, ws: Workspace, envelopes: Sequence[Mapping[str, Any]], members: dict[str, bytes]
) -> dict[str, Any]:
    """The archive's ``manifest.json``: what it holds, and each member's SHA-256."""
    return {
        "format": ARCHIVE_FORMAT,
        "version": ARCHIVE_VERSION,
        "thread_id": thread_id,
        "exported_at": datetime.now(timezone.utc).isoformat(),
        "event_schema_version": SCHEMA_VERSION,
        "ledger_schema_version": len(ledger.MIGRATIONS) - 1,
        "source_workspace": ws.location,
        "events": len(envelopes),
        "last_seq": envelopes[-1]["seq"],
        "last_hash": envelopes[-1]["hash"],
        "encrypted": any(
            b'"enc":' in data
            for k, data in members.items()
            if k.startswith("workspace/checkpoints/")
        ),
        "files": {
            k: {"sha256": hashlib.sha256(v).hexdigest(), "size": len(v)} for k, v in members.items()
        },
    }


def _write_archive(target: Path, manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    """Write the ``.tar.gz`` to a temporary file beside ``target``, then rename it there."""
    tmp = target.with_name(f".{target.name}.tmp-{os.urandom(4).hex()}")
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            _add(tar, "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False).encode())
            for name, data in members.items():
                _add(tar, name, data)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ArchiveError(f"cannot write the archive {target}: {exc}") from exc


def export_thread(
    conn: psycopg.Connection[Any],
    ws: Workspace,
    thread_id: str,
    path: str | os.PathLike[str],
    *,
    schema: str = ledger.DEFAULT_SCHEMA,
    progress: Progress | None = None,
) -> ExportReport:
    """Write ``thread_id``'s ledger events and workspace folder to a ``.tar.gz``.

    ``conn`` must be in UTC (``set time zone 'UTC'``) so timestamps read back as hashed.
    The archive is written to a temporary file next to ``path`` and renamed into place.

    Raises:
        ArchiveError: the thread is not in the ledger, or its workspace does not hold
            exactly the ledger's events (run ``lgx repair``), or ``path`` cannot be written.
    """
    envelopes = ledger.fetch_events(conn, thread_id, schema)
    if not envelopes:
        raise ArchiveError(f"thread {thread_id!r} has no events in the ledger (schema {schema})")
    details = conn.execute(ledger.q(stmt.SELECT_DETAILS, schema), (thread_id,)).fetchall()
    ledger.file_workspace(conn, ws, [thread_id], schema)
    tdir = ws.thread_dir(thread_id)
    ws_files = sorted(ws.fs.find(tdir)) if ws.fs.exists(tdir) else []
    mirror = events_path(ws, thread_id)
    held = [env for _, _, env in parse_lines(ws.read_bytes(mirror))] if mirror in ws_files else []
    if [(e["seq"], e["hash"]) for e in held] != [(e["seq"], e["hash"]) for e in envelopes]:
        raise ArchiveError(
            f"the workspace {ws.location} holds {len(held)} of the thread's "
            f"{len(envelopes)} ledger events (or different ones): run `lgx repair` first"
        )
    members: dict[str, bytes] = {
        LEDGER_EVENTS: _jsonl(envelopes),
        LEDGER_DETAILS: _jsonl(
            [{"seq": int(s), "detail": base64.b64encode(bytes(d)).decode()} for s, d in details]
        ),
    }
    total = len(ws_files) + len(members)
    for n, f in enumerate(ws_files, 1):
        members[f"workspace/{f[len(tdir) + 1 :]}"] = ws.read_bytes(f)
        if progress:
            progress(n, total)
    target = Path(path)
    _write_archive(target, _manifest(thread_id, ws, envelopes, members), members)
    if progress:
        progress(total, total)
    return ExportReport(
        path=str(target),
        thread_id=thread_id,
        events=len(envelopes),
        last_seq=int(envelopes[-1]["seq"]),
        last_hash=envelopes[-1]["hash"],
        files=len(ws_files),
        bytes=target.stat().st_size,
        sha256=_file_sha256(target),
    )


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows).encode(
        "utf-8", "surrogatepass"
    )


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- reading -----------------------------------------------------------------------------
def read_archive(path: str | os.PathLike[str]) -> Archive:
    """Read an archive and verify it: members, manifest hashes, the events' hash chain.

    Raises:
        ArchiveError: naming what is wrong; the archive is not trusted for anything.
    """
    p = Path(path)
    try:
        digest = _file_sha256(p)
        files: dict[str, bytes] = {}
        with tarfile.open(p, "r:gz") as tar:
            for info in tar:
                name = info.name
                if not info.isfile():
                    raise ArchiveError(f"{p}: member {name!r} is not a regular file")
                parts = name.split("/")
                if name.startswith("/") or ".." in parts or "" in parts or "\\" in name:
                    raise ArchiveError(f"{p}: member {name!r} has an unsafe path")
                if info.size > MAX_MEMBER_BYTES:
                    raise ArchiveError(f"{p}: member {name!r} is larger than {MAX_MEMBER_BYTES}")
                if name in files:
                    raise ArchiveError(f"{p}: member {name!r} appears twice")
                f = tar.extractfile(info)
                assert f is not None
                files[name] = f.read()
    except ArchiveError:
        raise
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise ArchiveError(f"cannot read the archive {p}: {exc}") from exc
    try:
        manifest = json.loads(files.pop("manifest.json"))
    except KeyError:
        raise ArchiveError(f"{p}: no manifest.json (not an lgx thread archive)") from None
    except ValueError as exc:
        raise ArchiveError(f"{p}: manifest.json is not JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != ARCHIVE_FORMAT:
        raise ArchiveError(
            f"{p}: not an lgx thread archive (format {manifest.get('format')!r})"
            if isinstance(manifest, dict)
            else f"{p}: manifest.json is not an object"
        )
    if manifest.get("version") != ARCHIVE_VERSION:
        raise ArchiveError(f"{p}: archive version {manifest.get('version')!r} is not supported")
    listed = manifest.get("files") or {}
    if not isinstance(listed, dict) or not all(isinstance(v, dict) for v in listed.values()):
        raise ArchiveError(f"{p}: manifest.json's files is not a map of name to size and sha256")
    if set(listed) != set(files):
        extra, missing = sorted(set(files) - set(listed)), sorted(set(listed) - set(files))
        raise ArchiveError(f"{p}: files not in the manifest {extra[:3]}, missing {missing[:3]}")
    for name, data in files.items():
        want = listed[name]
        if len(data) != want.get("size") or hashlib.sha256(data).hexdigest() != want.get("sha256"):
            raise ArchiveError(f"{p}: {name} does not match its sha256 in the manifest")
    envelopes = _parse_jsonl(p, files, LEDGER_EVENTS)
    try:
        verify_chain(list[Any](envelopes))
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveError(f"{p}: {LEDGER_EVENTS}: hash chain broken: {exc}") from exc
    thread_id = manifest.get("thread_id")
    if not envelopes or envelopes[0].get("seq") != 1 or envelopes[0].get("prev") is not None:
        raise ArchiveError(f"{p}: the events do not start at seq 1")
    if any(e.get("thread_id") != thread_id for e in envelopes):
        raise ArchiveError(f"{p}: events of another thread than {thread_id!r}")
    last = envelopes[-1]
    if (last["seq"], last["hash"]) != (manifest.get("last_seq"), manifest.get("last_hash")):
        raise ArchiveError(f"{p}: the events do not end where the manifest says")
    mirror = _parse_jsonl(p, files, MIRROR_EVENTS)
    if [(e.get("seq"), e.get("hash")) for e in mirror] != [
        (e["seq"], e["hash"]) for e in envelopes
    ]:
        raise ArchiveError(f"{p}: {MIRROR_EVENTS} does not hold the ledger's events")
    details = {
        int(d["seq"]): base64.b64decode(d["detail"]) for d in _parse_jsonl(p, files, LEDGER_DETAILS)
    }
    return Archive(manifest, files, envelopes, details, digest)


def _parse_jsonl(p: Path, files: dict[str, bytes], name: str) -> list[dict[str, Any]]:
    if name not in files:
        raise ArchiveError(f"{p}: {name} is missing")
    try:
        return [obj for _, _, obj in parse_lines(files[name])]
    except BadLine as bad:
        if bad.error is None:
            raise ArchiveError(f"{p}: {name}: line {bad.lineno} is not a JSON object") from bad
        raise ArchiveError(f"{p}: {name}: line {bad.lineno} is not JSON ({bad.error})") from bad


# -- import ------------------------------------------------------------------------------
def _unpack(files: Mapping[str, bytes], tdir: Path, progress: Progress | None) -> None:
    """Write the archive's workspace files under the staged thread folder ``tdir``."""
    for n, (rel, data) in enumerate(files.items(), 1):
        target = tdir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if progress:
            progress(n, len(files))


def _imported_event(archive: Archive, events: Sequence[Event], checkpoints: int) -> Event:
    """The ``thread_imported`` event that closes an imported thread, sealed after its last
    event."""
    tid = archive.thread_id
    head = {tid: (int(events[-1].seq or 0), events[-1].hash or "")}
    note = Event.new(
        EventKind.THREAD_IMPORTED,
        tid,
        name="import",
        payload={
            "archive_sha256": archive.sha256,
            "exported_at": archive.manifest.get("exported_at"),
            "source_workspace": archive.manifest.get("source_workspace"),
            "events": len(events),
            "checkpoints": checkpoints,
        },
    )
    return Sequencer(lambda _ids: head).seal([note])[0]


def import_thread(
    dsn: str,
    ws: Workspace,
    path: str | os.PathLike[str],
    *,
    schema: str = ledger.DEFAULT_SCHEMA,
    cipher: WorkspaceCipher | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import an archive into the ledger and saver of ``dsn`` and the workspace ``ws``.

    Sets up the ledger schema and the official saver's tables when missing.

    Raises:
        ArchiveError: the archive is damaged, altered or unsafe (nothing written).
        ImportConflictError: the thread already exists in the ledger, the saver's tables
            or the workspace (nothing written).
        RestoreError: a checkpoint log does not verify or decode (nothing written).
    """
    archive = read_archive(path)
    tid = archive.thread_id
    if archive.manifest.get("encrypted") and cipher is None:
        cipher = existing_key()  # this deployment's key (the same key where it was made)
        if cipher is None:
            raise ArchiveError(
                f"{path}: the archive's checkpoint copies are encrypted: give the workspace key"
            )
    # unpack into a staging workspace on the target's file system, verify it there
    staging_root = _staging_dir(ws)
    legacy = names_old_folder(archive.envelopes, tid)
    ws.folders.file_under(tid, legacy=legacy)
    imported = False
    try:
        staged = Workspace(staging_root)
        staged.folders.file_under(tid, legacy=legacy)
        ws_files = archive.workspace_files()
        _unpack(ws_files, Path(staged.thread_dir(tid)), progress)
        try:
            logs = verify_thread(staged, tid, cipher=cipher)
        except RestoreError as exc:
            raise ArchiveError(f"{path}: {str(exc).replace(staging_root, '<archive>')}") from exc
        with ledger.connect(dsn, autocommit=True) as conn:
            conn.execute("set time zone 'UTC'")
            ledger.setup(conn, schema)
            saver = PostgresSaver(conn)
            setup_saver(saver.setup)
            plan = decode_all(staged, tid, logs, saver.serde)
            _check_conflicts(conn, ws, tid, schema)
            events = []
            for env in archive.envelopes:
                detail, files = unpack_detail(archive.details.get(env["seq"]))
                events.append(Event.from_envelope(env).replace(detail=detail, attachments=files))
            closing = _imported_event(archive, events, len(plan))
            # the thread's head is tagged with this deployment's key
            sink = PostgresLedger(dsn, schema, cipher=cipher or existing_key())
            # the mirror's events.jsonl gets the closing event too: both stay equal
            staged.append_lines(events_path(staged, tid), [closing.line or ""])
            moved = False
            try:
                with conn.transaction():
                    result = put_all(plan, saver, tid)
                    with conn.cursor() as cur:
                        sink.execute_in(cur, [*events, closing])
                        if legacy:  # its record names the old folder: it keeps it here
                            cur.execute(ledger.q(stmt.MARK_LEGACY_NAMED, schema), (tid,))
                    _move_in(staged, ws, tid)
                    moved = True
            except BaseException:
                if moved:  # the commit itself failed: take the folder out again
                    ws.remove_thread(tid)
                raise
        imported = True
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
        if not imported:
            ws.folders.forget(tid)  # nothing imported: the word was the archive's
    return ImportReport(
        thread_id=tid,
        events=len(events) + 1,
        checkpoints=result.checkpoints,
        files=len(ws_files),
        archive_sha256=archive.sha256,
    )


def _staging_dir(ws: Workspace) -> str:
    if ws.is_local:
        base = Path(ws.root) / ".lgx"
        base.mkdir(parents=True, exist_ok=True)
        return tempfile.mkdtemp(prefix="import-", dir=base)
    return tempfile.mkdtemp(prefix="lgx-import-")


def _check_conflicts(conn: psycopg.Connection[Any], ws: Workspace, tid: str, schema: str) -> None:
    row = conn.execute(ledger.q(stmt.THREAD_EXISTS, schema), (tid,)).fetchone()
    if row and row[0]:
        raise ImportConflictError(f"thread {tid!r} is already in the ledger (schema {schema})")
    row = conn.execute(saver_ops.SAVER_HAS_THREAD, (tid,)).fetchone()
    if row and row[0]:
        raise ImportConflictError(f"thread {tid!r} already has checkpoints in the saver's tables")
    if ws.exists(ws.thread_dir(tid)):
        raise ImportConflictError(f"thread {tid!r} is already in the workspace {ws.location}")


def _move_in(staged: Workspace, ws: Workspace, tid: str) -> None:
    """Move the staged thread folder into the workspace (a rename when local), inside the
    database transaction: if it fails, the transaction rolls back."""
    src, dst = staged.thread_dir(tid), ws.thread_dir(tid)
    if ws.is_local:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.exists(dst):
            raise ImportConflictError(f"thread {tid!r} appeared in the workspace meanwhile")
        os.rename(src, dst)
        return
    try:
        for f in staged.fs.find(src):
            ws.write_atomic(f"{dst}/{f[len(src) + 1 :]}", staged.read_bytes(f))
    except BaseException:
        ws.remove_thread(tid)
        raise


def report_dict(report: ExportReport | ImportReport) -> dict[str, Any]:
    """A report as a JSON-ready dict (``lgx export/import --json``)."""
    return asdict(report)
