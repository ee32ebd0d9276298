"""The spool: fsync'd local files of events that must survive a crash before they reach
the ledger (events that outlived a close while the ledger was down, ``Pipeline.emit(...,
durable=True)``, and the checkpoints of other savers that versions before the v13
migration logged here), and the events the ledger refused, kept for a person. Checkpoints
of every saver are captured in the ledger now (:mod:`langgraph_external.record.by_value`).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from langgraph_external.record.events import Event
    >>> log = WriteAheadLog(Path(tempfile.mkdtemp()) / "wal" / "ledger")
    >>> f = log.append([Event.new("error", "t")])
    >>> len(log.pending()); log.settled([f]); log.close(); len(log.pending())
    1
    0
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from langgraph_external.record.events import Event

logger = logging.getLogger("langgraph_external")

__all__ = ["WriteAheadLog", "default_spool_dir", "keep_aside", "spool_for"]


class WriteAheadLog:
    """fsync'd local log of events that must survive a crash before they reach the ledger.

    One file per process generation under ``dir``, locked while its process lives; a file
    whose events are all recorded is deleted. Files of dead processes are replayed by the
    next :class:`Pipeline` (or ``lgx repair``); events already in the ledger are skipped.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._open_count: dict[str, int] = {}
        self._written = 0

    def _current(self) -> tuple[IO[bytes], Path]:
        if self._file is None or self._written > 5000:
            self._rotate()
        assert self._file is not None and self._path is not None
        return self._file, self._path

    def _rotate(self) -> None:
        if self._file is not None and self._path is not None:
            old = str(self._path)
            self._file.close()  # releases the lock; the file stays until settled
            if not self._open_count.get(old):
                self._path.unlink(missing_ok=True)
                self._open_count.pop(old, None)
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}.wal"
        self._path = self.dir / name
        self._file = open(self._path, "ab")  # noqa: SIM115 - held open for appends
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._written = 0

    def append(self, events: Sequence[Event]) -> str:
        """Append ``events`` and fsync; returns the file that holds them."""
        data = b"".join(_wal_line(e) for e in events)
        with self._lock:
            f, path = self._current()
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            self._written += len(events)
            key = str(path)
            self._open_count[key] = self._open_count.get(key, 0) + len(events)
            return key

    def settled(self, files: Iterable[str | None]) -> None:
        """Events of ``files`` reached the ledger; delete files with nothing left."""
        with self._lock:
            for key in files:
                if key is None or key not in self._open_count:
                    continue
                self._open_count[key] -= 1
                if self._open_count[key] <= 0 and (self._path is None or key != str(self._path)):
                    Path(key).unlink(missing_ok=True)
                    del self._open_count[key]

    def adopt(self, path: Path, count: int) -> None:
        """Track a replayed orphan file until its events are recorded."""
        with self._lock:
            self._open_count[str(path)] = count
            if count == 0:
                path.unlink(missing_ok=True)

    def orphans(self) -> list[tuple[Path, list[Event]]]:
        """Files no live process holds, with their (complete) events."""
        out: list[tuple[Path, list[Event]]] = []
        for path in self.pending():
            try:
                with open(path, "rb") as f:
                    try:
                        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        continue  # its process is alive
                    events = [_wal_event(line) for line in f.read().split(b"\n") if line]
            except (OSError, ValueError) as exc:
                logger.error("unreadable write-ahead log %s: %s", path, exc)
                continue
            out.append((path, [e for e in events if e is not None]))
        return out

    def pending(self) -> list[Path]:
        """Log files present (this process's and orphans)."""
        return sorted(self.dir.glob("*.wal")) if self.dir.is_dir() else []

    def quarantine(self, events: Sequence[Event], why: str) -> Path:
        """Keep events the ledger refused, with the reason, for a person to look at."""
        return keep_aside(
            self.dir.parent.parent / "quarantine" / self.dir.name, {"reason": why}, events
        )

    def release(self) -> None:
        """Delete this process's file if everything in it is recorded."""
        with self._lock:
            if self._path is not None and not self._open_count.get(str(self._path)):
                self._path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close (and unlock) this process's file."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
                if self._path is not None and not self._open_count.get(str(self._path)):
                    self._path.unlink(missing_ok=True)


def keep_aside(
    directory: Path, head: dict[str, Any], events: Sequence[Event], errors: str = "strict"
) -> Path:
    """Write what the ledger refused for a person, in a new file of ``directory``: a line
    with ``head`` (the reason, what it was), then one line per event (fsync'd)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{time.time_ns():020d}-{os.urandom(4).hex()}.jsonl"
    with open(path, "wb") as f:
        f.write(json.dumps(head, default=str).encode() + b"\n")
        f.write(b"".join(_wal_line(e, errors) for e in events))
        f.flush()
        os.fsync(f.fileno())
    return path


def _wal_line(e: Event, errors: str = "strict") -> bytes:
    env = e.envelope()
    env["attachments"] = {k: base64.b64encode(v).decode() for k, v in e.attachments.items()}
    env["detail"] = e.detail
    return json.dumps(env, ensure_ascii=False, default=str).encode("utf-8", errors) + b"\n"


def _wal_event(line: bytes) -> Event | None:
    try:
        env = json.loads(line)
    except ValueError:
        return None  # a torn last line: its write never returned, so nothing relied on it
    atts = {k: base64.b64decode(v) for k, v in env.pop("attachments", {}).items()}
    detail = env.pop("detail", None)
    return Event.from_envelope(env).replace(attachments=atts, detail=detail)


def spool_for(spool: Path, ledger: Any) -> tuple[WriteAheadLog, Path]:
    """``ledger``'s write-ahead log and quarantine folder under ``spool`` (one per ledger,
    so two databases never share a log)."""
    identity = getattr(ledger, "identity", None)
    key = identity() if callable(identity) else ledger.name
    return WriteAheadLog(spool / "wal" / key), spool / "quarantine" / key


def default_spool_dir() -> Path:
    """``$LGX_SPOOL_DIR`` or ``~/.cache/langgraph-external/spool``."""
    if env := os.environ.get("LGX_SPOOL_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "langgraph-external" / "spool"
