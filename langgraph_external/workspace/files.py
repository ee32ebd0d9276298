"""The external file workspace: a human-readable, exact mirror of the ledger.

Layout (one directory per thread, names encoded reversibly and safely)::

    <workspace>/threads/<folder>/            (see langgraph_external.record.locations)
      thread.json        thread id, created, schema version
      state.json         latest root state, readable; replaced atomically
      events.jsonl       append-only, one event envelope per line
      checkpoints/
        <encoded-ns>.jsonl   append-only log, one JSON line per checkpoint (metadata, parent,
                             every channel's version and exact bytes, readable updates)
                             and per pending write; ``_root.jsonl`` for the root namespace
        blobs/<sha256>       exact serde bytes too large to inline
      artifacts/<sha256>                           large payloads, raw tool responses

The location is a local path or any fsspec URL (``memory://``, ``s3://bucket/prefix``, ...).

Example:
    >>> encode_thread_id("thread-42"), encode_thread_id("sp-A")
    ('thread-42', 'sp-!a')
    >>> decode_thread_id(encode_thread_id("../etc/passwd"))
    '../etc/passwd'
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import fsspec
import orjson

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, the ledger's locks only
    fcntl = None  # type: ignore[assignment]

from langgraph_external.errors import WorkspaceError
from langgraph_external.record.events import json_safe
from langgraph_external.record.locations import ROOT_NS_DIR as ROOT_NS_DIR
from langgraph_external.record.locations import decode_thread_id as decode_thread_id
from langgraph_external.record.locations import encode_ns as encode_ns
from langgraph_external.record.locations import encode_thread_id as encode_thread_id
from langgraph_external.record.locations import legacy_thread_folder as legacy_thread_folder
from langgraph_external.workspace.folders import ThreadFolders
from langgraph_external.workspace.lines import events_path, parse_lines


class Workspace:
    """File access for one workspace root, local or fsspec.

    Args:
        location: a local directory or an fsspec URL.
        fsync: fsync appended event lines and replaced files (local paths only).
        storage_options: passed to the fsspec file system.

    Example:
        >>> ws = Workspace("memory://lgx-doc")
        >>> ws.thread_dir("t-1").endswith("/threads/t-1")
        True
    """

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        fsync: bool = False,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        loc = os.fspath(location)
        try:
            fs, root = fsspec.core.url_to_fs(loc, **(storage_options or {}))
        except (ValueError, ImportError) as exc:
            raise WorkspaceError(f"unsupported workspace location {loc!r}: {exc}") from exc
        self.fs = fs
        self.storage_options = dict(storage_options or {})
        self.root = root.rstrip("/") or "/"
        self.location = loc
        self.is_local = "file" in _protocols(fs)
        self._real_root = os.path.realpath(self.root) if self.is_local else self.root
        self.identity = self._real_root if self.is_local else fs.unstrip_protocol(self.root)
        """The workspace, one way however ``location`` spells it (``./ws``, ``ws/``, an
        absolute path, a symlink): what names its projection cursors in the ledger."""
        self.fsync = fsync and self.is_local
        self._can_append = self.is_local or "memory" in _protocols(fs)
        self._locks = threading.local()  # thread -> directory fd this thread holds locked
        self.folders = ThreadFolders(lambda name: self.exists(self.path("threads", name)))
        """Which folder each thread has (see :meth:`folder`)."""

    # -- paths -------------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        """Join ``parts`` under the root (parts must already be safe names)."""
        return "/".join([self.root, *parts])

    def folder(self, thread_id: str) -> str:
        """The name of ``thread_id``'s folder under ``threads/``: its id spelled by
        :func:`~langgraph_external.record.locations.encode_thread_id`, or the folder of
        the old rule a thread recorded before keeps (:mod:`.folders`).

        Example:
            >>> ws = Workspace("memory://lgx-doc-folder")
            >>> ws.folder("sp-A")
            'sp-!a'
            >>> ws.folders.file_under("sp-A", legacy=True)
            >>> ws.folder("sp-A")
            '~onyc2qi'
        """
        return self.folders.folder(thread_id)

    def thread_dir(self, thread_id: str) -> str:
        """Directory of ``thread_id`` (see :meth:`folder`)."""
        return self.path("threads", self.folder(thread_id))

    def checkpoint_log_path(self, thread_id: str, checkpoint_ns: str) -> str:
        """Path of the append-only checkpoint log of one namespace of a thread (named by
        the rule of the thread, see :meth:`folder`; when the files do not tell which,
        the log of the old name if it exists)."""
        base = f"{self.thread_dir(thread_id)}/checkpoints"
        legacy = self.folders.is_legacy(thread_id)
        if legacy is None:
            old = f"{base}/{encode_ns(checkpoint_ns, legacy=True)}.jsonl"
            if self.exists(old):
                return old
            legacy = False
        return f"{base}/{encode_ns(checkpoint_ns, legacy=legacy)}.jsonl"

    def blob_path(self, thread_id: str, digest: str) -> str:
        """Path of exact serde bytes named by their sha256."""
        return f"{self.thread_dir(thread_id)}/checkpoints/blobs/{digest}"

    def artifact_path(self, thread_id: str, digest: str) -> str:
        """Path of a content-addressed artifact."""
        return f"{self.thread_dir(thread_id)}/artifacts/{digest}"

    def relative(self, path: str) -> str:
        """``path`` relative to the workspace root (as stored in the ledger)."""
        return path[len(self.root) + 1 :] if path.startswith(self.root + "/") else path

    # -- checks ------------------------------------------------------------------------
    def check_writable(self) -> None:
        """Create the root and prove a file can be written and removed there.

        Raises:
            WorkspaceError: the location is not writable.
        """
        probe = self.path(f".lgx-probe-{os.urandom(8).hex()}")
        try:
            self.fs.makedirs(self.path("threads"), exist_ok=True)
            with self.fs.open(probe, "wb") as f:
                f.write(b"ok")
            self.fs.rm_file(probe)
        except OSError as exc:
            raise WorkspaceError(f"workspace {self.location!r} is not writable: {exc}") from exc

    # -- writing -----------------------------------------------------------------------
    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data`` so readers never see a partial file."""
        parent = path.rsplit("/", 1)[0]
        if not self.is_local:
            self.fs.makedirs(parent, exist_ok=True)
            self.fs.pipe_file(path, data)  # object stores replace whole objects
            return
        tmp = f"{parent}/.tmp-{os.urandom(8).hex()}"
        try:
            self._write_local(tmp, data, os.O_TRUNC)
            os.replace(tmp, path)
        except BaseException:  # a full disk: no half-written temp file stays behind
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _inside(self, path: str) -> None:
        """Refuse a local write whose directory resolves outside the root (a symlink):
        raises :class:`WorkspaceError`."""
        directory = path.rsplit("/", 1)[0]
        checked = getattr(self._locks, "checked", None)
        if checked is not None and directory in checked:
            return  # resolved inside during this hold of the thread's lock
        root = self._real_root
        real = os.path.realpath(directory)
        if real != root and not real.startswith(root + os.sep):
            raise WorkspaceError(
                f"refusing to write {path}: its directory resolves to {real}, outside the "
                f"workspace root {root} (a symlink?)"
            )
        if checked is not None:
            checked.add(directory)

    def _open_local(self, path: str, flags: int) -> Any:
        """Open for writing inside the root, never through a symlink (``O_NOFOLLOW``)."""
        flags |= os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            self._inside(path)
            fd = os.open(path, flags, 0o666)
        except FileNotFoundError:
            os.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            self._inside(path)
            fd = os.open(path, flags, 0o666)
        return os.fdopen(fd, "ab" if flags & os.O_APPEND else "wb")

    def _write_local(self, path: str, data: bytes, flags: int) -> None:
        with self._open_local(path, flags) as f:
            f.write(data)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())

    @contextlib.contextmanager
    def thread_lock(self, thread_id: str, *, create: bool = True) -> Iterator[None]:
        """Hold the thread's directory for writing, against every other process and thread
        (a local workspace: ``flock`` on the directory; released by the kernel if the
        holder dies). Writers also hold the ledger's projection lock; this one still holds
        when a database restart ends the session that held that one while its pass goes
        on. Re-entrant on one thread; a no-op on other file systems, and (``create``
        false) for a thread without a directory.

        Raises:
            BlockingIOError: another writer held it for 30 s (the write is retried).
        """
        held = self._locks.__dict__.setdefault("held", {})
        if not self.is_local or fcntl is None or thread_id in held:
            yield
            return
        path = self.thread_dir(thread_id)
        if create:
            os.makedirs(path, exist_ok=True)
        elif not os.path.isdir(path):
            yield
            return
        self._inside(f"{path}/x")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            deadline = time.monotonic() + 30.0
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.002)
            held[thread_id] = fd
            # directories found inside the root are not resolved again while the lock is
            # held (a pass writes several files into each): resolving every path was a
            # sixth of the mirror's CPU
            outer = getattr(self._locks, "checked", None)
            self._locks.checked = set() if outer is None else outer
            try:
                yield
            finally:
                del held[thread_id]
                self._locks.checked = outer
        finally:
            os.close(fd)  # releases the lock

    def last_seq(self, path: str) -> int:
        """The ``seq`` of the last complete line of a JSONL log (0: none), changing
        nothing — a torn last line, perhaps another writer's append in progress, is
        skipped, not cut (:meth:`repair_tail` cuts, under :meth:`thread_lock`)."""
        for line in self.lines_from_end(path):
            try:
                return int(json.loads(line).get("seq") or 0)
            except (ValueError, AttributeError):
                return 0
        return 0

    def write_if_absent(self, path: str, data: bytes) -> None:
        """Write a content-addressed file unless it already exists."""
        if not self.exists(path):
            self.write_atomic(path, data)

    def append_lines(self, path: str, lines: Iterable[str]) -> None:
        """Append text lines (each without its newline) to ``path``."""
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
        if not data:
            return
        if self.is_local:
            self._write_local(path, data, os.O_APPEND)
            return
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        if self._can_append and self.fs.exists(path):
            with self.fs.open(path, "ab") as f:
                f.write(data)
            return
        old = self.fs.cat_file(path) if self.fs.exists(path) else b""
        self.fs.pipe_file(path, old + data)

    def repair_tail(self, path: str) -> int:
        """Cut a torn last line of an append-only JSONL file; return its last line's ``seq``.

        A crash (or a full disk) in the middle of an append leaves a line without its
        newline; the next append would glue onto it. Returns 0 for a missing or empty file.
        """
        if not self.exists(path):
            return 0
        size = self.fs.size(path)
        keep, end, chunk = 0, size, 65536
        with self.fs.open(path, "rb") as f:  # the end of the last complete line
            while end > 0:
                start = max(0, end - chunk)
                f.seek(start)
                cut = f.read(end - start).rfind(b"\n")
                if cut >= 0:
                    keep = start + cut + 1
                    break
                end, chunk = start, chunk * 4
        if keep < size:
            self._truncate(path, keep)
        return self.last_seq(path)

    def _truncate(self, path: str, size: int) -> None:
        if self.is_local:
            with open(path, "r+b") as f:
                f.truncate(size)
                if self.fsync:
                    os.fsync(f.fileno())
            return
        self.fs.pipe_file(path, self.fs.cat_file(path)[:size])

    def write_json(self, path: str, obj: Any, *, clean: bool = False) -> None:
        """Atomically write ``obj`` as indented UTF-8 JSON (``clean``: ``obj`` is JSON
        already, see :func:`dumps_clean`)."""
        text = dumps_clean(obj, indent=True) if clean else dumps_json(obj, indent=2)
        self.write_atomic(path, (text + "\n").encode("utf-8", "surrogatepass"))

    def remove_thread(self, thread_id: str) -> None:
        """Delete a thread's whole directory (no error if it is absent)."""
        d = self.thread_dir(thread_id)
        if self.fs.exists(d):
            self.fs.rm(d, recursive=True)
        self.folders.removed(thread_id)

    def remove(self, path: str) -> None:
        """Delete one file if it exists."""
        if self.fs.exists(path):
            self.fs.rm_file(path)

    # -- reading -----------------------------------------------------------------------
    def read_json(self, path: str) -> Any:
        """Load a JSON file."""
        return json.loads(self.fs.cat_file(path))

    def read_bytes(self, path: str) -> bytes:
        """Raw content of a file."""
        return bytes(self.fs.cat_file(path))

    def lines_from_end(self, path: str, chunk: int = 65536) -> Iterator[bytes]:
        """The complete lines of ``path``, last first, read from the end in growing
        chunks: finding a recent line of a long log reads its tail, not the whole file.
        A missing file has none.

        Example:
            >>> ws = Workspace("memory://lgx-doc-tail")
            >>> ws.append_lines(ws.path("x.jsonl"), ["a", "b"])
            >>> list(ws.lines_from_end(ws.path("x.jsonl")))
            [b'b', b'a']
        """
        if not self.exists(path):
            return
        with self.fs.open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            carry: bytes | None = None  # None: the last newline is not found yet
            while end > 0:
                start = max(0, end - chunk)
                f.seek(start)
                block = f.read(end - start) + (carry or b"")
                end, chunk = start, min(chunk * 2, 1 << 24)
                if carry is None:  # what follows the last newline: nothing, or a torn line
                    cut = block.rfind(b"\n")
                    if cut < 0:
                        continue
                    block = block[:cut]
                lines = block.split(b"\n")
                carry = lines.pop(0) if start > 0 else b""  # may be the end of a line
                for line in reversed(lines):
                    if line.strip():
                        yield line

    def size(self, path: str) -> int | None:
        """Size of ``path`` in bytes, ``None`` if it does not exist."""
        try:
            return os.path.getsize(path) if self.is_local else int(self.fs.size(path))
        except (FileNotFoundError, OSError):
            return None

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""
        return os.path.exists(path) if self.is_local else bool(self.fs.exists(path))

    def iter_events(self, thread_id: str) -> Iterator[dict[str, Any]]:
        """Yield the envelopes of ``events.jsonl`` in order, streamed (read by
        :func:`~langgraph_external.workspace.lines.parse_lines`, the one reader)."""
        path = events_path(self, thread_id)
        if not self.exists(path):
            return
        with self.fs.open(path, "rb") as f:
            yield from (doc for _, _, doc in parse_lines(f))

    def list_threads(self) -> list[str]:
        """Thread ids present in the workspace, sorted."""
        base = self.path("threads")
        if not self.fs.exists(base):
            return []
        out = []
        for entry in self.fs.ls(base, detail=False):
            name = entry.rstrip("/").rsplit("/", 1)[-1]
            tid = decode_thread_id(name)
            if tid is None:
                try:
                    tid = self.read_json(f"{entry}/thread.json")["thread_id"]
                except (OSError, KeyError, ValueError, TypeError):
                    continue
            if not isinstance(tid, str) or not tid:
                continue
            if name not in (encode_thread_id(tid), legacy_thread_folder(tid)):
                continue  # not a folder either rule names (made by hand)
            self.folders.found(tid, name)
            out.append(tid)
        return sorted(out)


def _protocols(fs: Any) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)


def dumps_clean(obj: Any, *, sort_keys: bool = False, indent: bool = False) -> str:
    """:func:`dumps_json` of a value that is JSON already (rendered by ``to_readable`` or
    normalized by ``json_safe``: string keys, no NaN or infinities), with the native
    encoder — compact (or, ``indent``, two-space) text. What orjson refuses (a lone
    surrogate, an integer past 64 bits, a non-string key) goes through :func:`dumps_json`.
    A non-finite float would be written as ``null``: the mirror's views never hold one.

    Example:
        >>> dumps_clean({"b": 1, "a": ["é"]}, sort_keys=True)
        '{"a":["é"],"b":1}'
    """
    option = (orjson.OPT_SORT_KEYS if sort_keys else 0) | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(obj, default=str, option=option).decode()
    except (TypeError, orjson.JSONEncodeError):
        return dumps_json(obj, 2 if indent else None, sort_keys=sort_keys)


def dumps_json(obj: Any, indent: int | None = None, *, sort_keys: bool = False) -> str:
    """JSON text every parser accepts: non-finite floats become ``"NaN"``/``"Infinity"``.

    Example:
        >>> dumps_json([1.5, float("-inf")])
        '[1.5, "-Infinity"]'
    """
    options: dict[str, Any] = {"indent": indent, "default": str, "sort_keys": sort_keys}
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, **options)
    except ValueError:  # a non-finite float somewhere (rare): encode it as json_safe does
        return json.dumps(json_safe(obj), ensure_ascii=False, **options)
