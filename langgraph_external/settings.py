"""The recording's configuration: resolved once, frozen, and handed to every process.

:meth:`Settings.resolve` reads the environment (``LGX_DSN``, ``LGX_SEALING``,
``LGX_SIGN_INTERVAL``, ``LGX_SPOOL_DIR``), loads the deployment key, checks the schema
name and the sealing mode, and picks the embedded server's data directory when no DSN is
configured — each in this one place, for :class:`~langgraph_external.External`, a
standalone :class:`~langgraph_external.sources.checkpointer.ExternalCheckpointer`,
``lgx`` commands and ``lgx worker``. The result is picklable: the app's sealing helper
process gets the very object the app resolved (:mod:`langgraph_external.processes`).

Example:
    >>> s = Settings.resolve(dsn="postgresql://db/app", workspace=None, key=b"k" * 32,
    ...                      sealing="worker")
    >>> s.sealing, s.schema, s.offload_threshold
    ('worker', 'langgraph_external', 65536)
    >>> import pickle; pickle.loads(pickle.dumps(s)).sealing
    'worker'
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_external.errors import ConfigurationError
from langgraph_external.ledger.schema import DEFAULT_SCHEMA, validate_schema
from langgraph_external.options import Options
from langgraph_external.pipeline.wal import default_spool_dir
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.keys import load_key
from langgraph_external.record.processors import Processor, Redactor
from langgraph_external.record.redaction import as_redactor
from langgraph_external.workspace.files import Workspace

__all__ = [
    "DEFAULT_OFFLOAD_THRESHOLD",
    "DEFAULT_SIGN_INTERVAL",
    "SEALING_MODES",
    "Settings",
    "resolve_sealing",
    "sign_interval_from_env",
]

SEALING_MODES = ("process", "thread", "worker")
"""Where captures are sealed: the app's helper process, threads of the app, ``lgx worker``."""

DEFAULT_OFFLOAD_THRESHOLD = 64 * 1024
"""Payloads or raw bytes larger than this many bytes become artifacts."""

DEFAULT_SIGN_INTERVAL = 5.0
"""Seconds between signed heads while anything is sealed (``LGX_SIGN_INTERVAL``)."""


def sign_interval_from_env() -> float:
    """``$LGX_SIGN_INTERVAL`` in seconds (default :data:`DEFAULT_SIGN_INTERVAL`; ``0`` or
    ``off``: no heads are signed).

    Raises:
        ConfigurationError: the value is neither a number of seconds nor ``off``.
    """
    text = os.environ.get("LGX_SIGN_INTERVAL", "").strip().lower()
    if not text:
        return DEFAULT_SIGN_INTERVAL
    if text in ("off", "no", "false"):
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(
            f"LGX_SIGN_INTERVAL={text!r} is neither a number of seconds nor 'off'"
        ) from None
    if value < 0 or value != value:
        raise ConfigurationError(f"LGX_SIGN_INTERVAL={text!r} must be 0 or more seconds")
    return value


def resolve_sealing(sealing: str | None) -> str:
    """``sealing``, else ``$LGX_SEALING``, else ``"process"``; checked.

    Raises:
        ConfigurationError: not one of :data:`SEALING_MODES`.

    Example:
        >>> resolve_sealing("thread")
        'thread'
    """
    mode = sealing or os.environ.get("LGX_SEALING") or "process"
    if mode not in SEALING_MODES:
        raise ConfigurationError(f"sealing must be one of {', '.join(SEALING_MODES)}, not {mode!r}")
    return mode


def resolve_redactor(redaction: Any = "standard") -> Redactor | None:
    """The redactor of a level name (``None`` for ``"off"``), or ``redaction`` itself
    when it is a callable.

    Raises:
        ConfigurationError: an unknown level, or neither a level nor a callable.
    """
    try:
        return as_redactor(redaction)
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(str(exc)) from exc


@dataclass(frozen=True)
class Settings:
    """Everything the record is configured with, resolved (see :meth:`resolve`).

    Attributes:
        dsn: the database with the saver's tables, the ledger and the captures; ``None``
            until the embedded server in ``embedded_dir`` is started.
        schema: the ledger schema.
        workspace: the workspace's local path (absolute) or fsspec URL; ``None``: none
            here (``sealing="worker"``: the workers mirror).
        storage_options, fsync: the workspace's fsspec options, and fsync of its files.
        cipher: the deployment key.
        encrypt: encrypt the exact checkpoint copies with the key.
        redactor: applied to every payload before it is recorded (``None``: off).
        offload_threshold: payloads or raw bytes larger than this go to artifacts.
        processors: the app's own event processors, run after redaction.
        strict: raise into the app when recording fails.
        sealing: one of :data:`SEALING_MODES`.
        embedded_dir: the embedded server's data directory (only without ``dsn``).
        spool_dir: the write-ahead log and quarantine (absolute).
        serde: the saver's serializer (``None``: LangGraph's default).
        exports: resolved exporter configurations
            (:class:`~langgraph_external.exporters.OtlpExport`).
        poll_interval, retry_interval: a sealer's seconds between looks for work, and
            between retries while the ledger is unavailable.
        sign_interval: seconds between signed heads of the log (0: none).
        signing_key_file: the log's signing key (``None``: the default file).
    """

    dsn: str | None
    schema: str = DEFAULT_SCHEMA
    workspace: str | None = None
    storage_options: dict[str, Any] | None = None
    fsync: bool = False
    cipher: WorkspaceCipher | None = None
    encrypt: bool = True
    redactor: Redactor | None = None
    offload_threshold: int = DEFAULT_OFFLOAD_THRESHOLD
    processors: tuple[Processor, ...] = ()
    strict: bool = False
    sealing: str = "process"
    embedded_dir: str | None = None
    spool_dir: str | None = None
    serde: Any = None
    exports: tuple[Any, ...] = ()
    poll_interval: float = 1.0
    retry_interval: float = 1.0
    sign_interval: float = DEFAULT_SIGN_INTERVAL
    signing_key_file: str | None = None

    @classmethod
    def resolve(
        cls,
        *,
        dsn: str | None = None,
        workspace: str | os.PathLike[str] | Workspace | None = None,
        key: str | bytes | None = None,
        cipher: WorkspaceCipher | None = None,
        create_key: bool = True,
        redaction: Any = "standard",
        sealing: str | None = None,
        exports: Sequence[Any] = (),
        options: Options | None = None,
        sign_interval: float | None = None,
        signing_key_file: str | None = None,
        poll_interval: float = 1.0,
    ) -> Settings:
        """Resolve a configuration: environment, key, schema, sealing mode, embedded server.

        ``dsn=None`` reads ``LGX_DSN``; if that is unset too, the embedded server's data
        directory is ``options.embedded_dir`` (default ``<workspace>/.lgx/pgdata``). The
        key is ``cipher``, else ``key``, else the deployment key (``$LGX_KEY`` or the key
        file, created on first use unless ``create_key=False``; see
        :mod:`langgraph_external.record.keys`). ``redaction`` is a level name or your
        own ``(value) -> (value, count)`` callable; ``options`` the rest
        (:class:`~langgraph_external.options.Options`).

        Raises:
            ConfigurationError: a bad schema name, sealing mode, redaction level, offload
                threshold or key; no workspace where one is needed; no DSN and nowhere
                to keep an embedded server.
        """
        opts = options or Options()
        mode = resolve_sealing(sealing)
        ws = workspace
        if ws is not None and not isinstance(ws, Workspace):
            storage = dict(opts.storage_options) if opts.storage_options else None
            ws = Workspace(ws, fsync=opts.fsync, storage_options=storage)
        if ws is None and mode != "worker":
            raise ConfigurationError(
                "a workspace is needed unless sealing='worker' (workers mirror)"
            )
        _check_threshold(opts.offload_threshold)
        local_root = ws.root if ws is not None and ws.is_local else None
        dsn, emb = _database(dsn, ws, local_root, opts.embedded_dir)
        return cls(
            dsn=dsn,
            schema=validate_schema(opts.schema or DEFAULT_SCHEMA),
            # absolute: a helper forked where another cwd held reads the same place
            workspace=None if ws is None else (ws.root if ws.is_local else ws.location),
            storage_options=None if ws is None else (ws.storage_options or None),
            fsync=False if ws is None else ws.fsync,
            cipher=cipher
            if cipher is not None
            else load_key(key, create=create_key, workspace_root=local_root),
            encrypt=opts.encrypt,
            redactor=resolve_redactor(redaction),
            offload_threshold=opts.offload_threshold,
            processors=tuple(opts.processors),
            strict=opts.strict,
            sealing=mode,
            embedded_dir=emb,
            spool_dir=os.path.abspath(opts.spool_dir or default_spool_dir()),
            exports=tuple(exports),
            sign_interval=sign_interval_from_env() if sign_interval is None else sign_interval,
            signing_key_file=signing_key_file,
            poll_interval=poll_interval,
        )

    def open_workspace(self) -> Workspace | None:
        """A :class:`~langgraph_external.workspace.files.Workspace` for ``workspace``."""
        if self.workspace is None:
            return None
        return Workspace(self.workspace, fsync=self.fsync, storage_options=self.storage_options)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (e.g. the embedded server's DSN once it is started)."""
        return dataclasses.replace(self, **changes)


def _check_threshold(offload_threshold: Any) -> None:
    if isinstance(offload_threshold, bool) or not isinstance(offload_threshold, int):
        raise ConfigurationError(
            f"offload_threshold must be a number of bytes, not {offload_threshold!r}"
        )
    if offload_threshold < 0:
        raise ConfigurationError(f"offload_threshold must be 0 or more, not {offload_threshold}")


def _database(
    dsn: str | None,
    ws: Workspace | None,
    local_root: str | None,
    embedded_dir: str | os.PathLike[str] | None,
) -> tuple[str | None, str | None]:
    """``(dsn, embedded_dir)``: ``dsn``, else ``$LGX_DSN``, else no DSN yet and the
    embedded server's data directory (absolute)."""
    dsn = dsn if dsn is not None else os.environ.get("LGX_DSN") or None
    if dsn is not None:
        return dsn, None
    if ws is None:
        raise ConfigurationError("sealing='worker' needs dsn=... (the database it shares)")
    if embedded_dir is None:
        if local_root is None:
            raise ConfigurationError(
                "a remote workspace needs dsn=... or embedded_dir=... for Postgres"
            )
        embedded_dir = Path(local_root) / ".lgx" / "pgdata"
    return None, os.path.abspath(embedded_dir)
