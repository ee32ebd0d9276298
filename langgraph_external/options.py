"""``Options``: what :class:`~langgraph_external.External` and a standalone
:class:`~langgraph_external.ExternalCheckpointer` take beyond the day-one parameters.

The day-one parameters (``dsn``, ``workspace``, ``key``, ``redaction``, ``sealing``,
``export``) are keywords of ``External`` itself; everything else a deployment may tune
is here, typed and documented once. The earlier keywords of ``External`` for these
(``schema=``, ``spool_dir=``, ``inner=``, ``record_behaviour=``, ...) still work until
0.3, with a :class:`DeprecationWarning` (:func:`options_from_keywords`).

Example:
    >>> from langgraph_external import Options
    >>> Options(schema="audit", spool_dir="/var/spool/lgx").offload_threshold
    65536
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph_external._moved import warn_deprecated
from langgraph_external.record.processors import Processor

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from langgraph_external.ledger.contract import Projection

__all__ = ["Options", "options_from_keywords"]


@dataclass(frozen=True, kw_only=True)
class Options:
    """How the record is kept, beyond the day-one parameters.

    Args:
        schema: the ledger's Postgres schema (default ``langgraph_external``).
        strict: raise into the app when recording fails, instead of spooling the record
            and retrying.
        offload_threshold: payloads or raw bytes larger than this many bytes become
            artifacts (the event keeps a preview and the artifact's address). Means the
            same in every sealing mode; with ``sealing="worker"`` it is the worker's
            (``lgx worker --offload-threshold``), so an app that sets another is refused.
        processors: your own event processors (``(Event) -> Event``), run on every
            event after redaction, before normalization and offloading — on the app's
            thread and in its sealer alike. With ``sealing="process"`` they must pickle
            (else the record is sealed in a thread of the app, with a log line); not with
            ``sealing="worker"`` (a worker cannot run your code).
        encrypt: encrypt the exact checkpoint copies (ledger and workspace) with the
            deployment key, AES-256-GCM. ``False`` keeps them in clear: they are your
            app's state, unredacted.
        spool_dir: where records that could not be captured yet, and refused captures,
            are kept (default ``$LGX_SPOOL_DIR`` or ``~/.cache/langgraph-external/spool``).
        embedded_dir: the embedded server's data directory, used without a DSN (default
            ``<workspace>/.lgx/pgdata``).
        fsync: fsync workspace files as they are written.
        storage_options: fsspec options of a remote workspace (``s3://...``).
        pool_size: most connections the official saver's pool opens.
        saver: a checkpoint saver to wrap instead of the official Postgres saver
            (``External`` only).
        projections: more views fed from the ledger after the workspace mirror; they
            run in this process (``sealing="thread"``).
        audit_callbacks: attach the audit callback handler in ``External.config`` (node
            transitions, tool and model calls, retriever hits).
    """

    schema: str | None = None
    strict: bool = False
    offload_threshold: int = 64 * 1024
    processors: Sequence[Processor] = ()
    encrypt: bool = True
    spool_dir: str | os.PathLike[str] | None = None
    embedded_dir: str | os.PathLike[str] | None = None
    fsync: bool = False
    storage_options: Mapping[str, Any] | None = None
    pool_size: int = 8
    saver: BaseCheckpointSaver[Any] | None = None
    projections: Sequence[Projection] = ()
    audit_callbacks: bool = True


_RENAMED = {"inner": "saver", "record_behaviour": "audit_callbacks"}
_FIELDS = {f.name for f in dataclasses.fields(Options)}


def options_from_keywords(
    options: Options | None, keywords: dict[str, Any], *, owner: str, allowed: Sequence[str]
) -> Options:
    """``options`` with the earlier keywords of ``owner`` folded in, each with a
    :class:`DeprecationWarning` that names its new spelling.

    Raises:
        TypeError: a keyword ``owner`` never took, or one given both ways.
    """
    result = options or Options()
    changes: dict[str, Any] = {}
    for name, value in keywords.items():
        field = _RENAMED.get(name, name)
        if name not in allowed or field not in _FIELDS:
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}")
        if options is not None:
            raise TypeError(f"{owner}(): pass {field} in options=Options(...), not beside it")
        warn_deprecated(f"{owner}({name}=...)", f"pass options=Options({field}=...)", stacklevel=4)
        changes[field] = value
    return dataclasses.replace(result, **changes) if changes else result
