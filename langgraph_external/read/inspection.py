"""Read what was recorded: threads and events from the ledger.

The logic behind ``lgx threads``, ``show`` and ``events``, usable from Python too; every
statement takes the ledger schema as ``{schema}`` (see
:func:`langgraph_external.ledger.schema.q`). The other readers have their own modules,
and their names are importable from here too: readable states (``lgx state``,
:mod:`~langgraph_external.read.states`), events in step order
(:mod:`~langgraph_external.read.event_order`) and ad-hoc SQL (``lgx sql``,
:mod:`~langgraph_external.read.sql_shell`).

Example:
    >>> flt = EventFilter(kinds=("checkpoint",), since=parse_time("2026-01-31T12:00"))
    >>> flt.since.isoformat()
    '2026-01-31T12:00:00+00:00'
    >>> from langgraph_external.workspace.files import Workspace
    >>> try:
    ...     read_state(Workspace("memory://lgx-inspect-doc"), "no-such-thread")
    ... except NotFoundError as exc:
    ...     print(exc)
    thread 'no-such-thread' has no checkpoints in the workspace memory://lgx-inspect-doc
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
from psycopg.rows import dict_row

from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.queries import (
    COUNT_THREADS,
    SELECT_EVENTS,
    SELECT_STEP_CONTEXT,
    SELECT_THREADS,
    THREAD_IN_LEDGER,
)
from langgraph_external.read.errors import AmbiguousCheckpointError, NotFoundError
from langgraph_external.read.event_order import Placed, place_events, step_context
from langgraph_external.read.sql_shell import (
    EXAMPLE_QUERIES,
    SET_READ_ONLY,
    SET_SEARCH_PATH,
    QueryResult,
    example_queries,
    prepare_session,
    run_query,
)
from langgraph_external.read.states import StateView, read_state
from langgraph_external.record.events import EventKind
from langgraph_external.record.thread_ids import REPLAY_PREFIX, is_replay_copy

__all__ = [
    "EVENT_KINDS",
    "EXAMPLE_QUERIES",
    "REPLAY_PREFIX",
    "SELECT_STEP_CONTEXT",
    "SET_READ_ONLY",
    "SET_SEARCH_PATH",
    "TIME_FORMS",
    "AmbiguousCheckpointError",
    "EventFilter",
    "NotFoundError",
    "Placed",
    "QueryResult",
    "StateView",
    "example_queries",
    "is_replay_copy",
    "kind_families",
    "list_threads",
    "parse_duration",
    "parse_since",
    "parse_time",
    "place_events",
    "prepare_session",
    "query_events",
    "read_state",
    "resolve_kinds",
    "run_query",
    "step_context",
    "thread_in_ledger",
]


ENVELOPE_COLUMNS = ledger.ENVELOPE_COLUMNS
"""Keys of an event envelope, in the order of ``events.jsonl``."""


def parse_time(text: str) -> datetime:
    """An ISO 8601 date or time; without a UTC offset it is taken as UTC.

    Raises:
        ValueError: not an ISO 8601 date or time.

    Example:
        >>> parse_time("2026-01-31").isoformat()
        '2026-01-31T00:00:00+00:00'
        >>> parse_time("2026-01-31T12:00:00Z").isoformat()
        '2026-01-31T12:00:00+00:00'
    """
    value = datetime.fromisoformat(text.strip())
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
TIME_FORMS = (
    "a duration ago (30s, 5m, 2h, 1d, 2w, or combined: 1h30m) or an ISO 8601 date or "
    "time (2026-01-31, 2026-01-31T12:00:00Z; UTC when it has no offset)"
)
"""The forms :func:`parse_since` accepts, for help texts and error messages."""


def parse_duration(text: str) -> timedelta | None:
    """A duration: ``30s``, ``5m``, ``2h``, ``1d``, ``2w`` or a sum of them (``1h30m``);
    ``None`` when ``text`` is not one.

    Example:
        >>> parse_duration("1h30m"), parse_duration("2026-01-31")
        (datetime.timedelta(seconds=5400), None)
    """
    compact = "".join(text.split())  # "1h 30m" too
    if not _DURATION.fullmatch(compact):
        return None
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(compact))
    return timedelta(seconds=seconds)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """A point in time given as a duration before ``now`` (``5m``: five minutes ago) or as
    an ISO 8601 date or time (:func:`parse_time`); see :data:`TIME_FORMS`.

    Raises:
        ValueError: neither form; the message names both.

    Example:
        >>> parse_since("1d", datetime(2026, 1, 31, tzinfo=timezone.utc)).isoformat()
        '2026-01-30T00:00:00+00:00'
        >>> parse_since("2026-01-31").isoformat()
        '2026-01-31T00:00:00+00:00'
    """
    ago = parse_duration(text)
    if ago is not None:
        return (now or datetime.now(timezone.utc)) - ago
    try:
        return parse_time(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither {TIME_FORMS}") from None


EVENT_KINDS: tuple[str, ...] = tuple(k.value for k in EventKind)
"""Every event kind the library records (``kind`` of an event, as ``lgx events`` prints it)."""


def kind_families(known: Iterable[str] = EVENT_KINDS) -> dict[str, list[str]]:
    """Families of kinds: the part before the first ``_`` and the kinds sharing it.

    Example:
        >>> kind_families()["llm"]
        ['llm_start', 'llm_end']
    """
    families: dict[str, list[str]] = {}
    for kind in dict.fromkeys(known):
        family, sep, _ = kind.partition("_")
        if sep:
            families.setdefault(family, []).append(kind)
    return families


def resolve_kinds(requested: Iterable[str], known: Iterable[str] = EVENT_KINDS) -> tuple[str, ...]:
    """The event kinds a kind filter names: each entry is a kind, or a family of kinds
    (:func:`kind_families`: ``llm`` is ``llm_start`` and ``llm_end``). A name that is a
    kind is that kind only.

    Raises:
        ValueError: an entry is neither; the message lists the kinds and the families.

    Example:
        >>> resolve_kinds(["llm", "checkpoint"])
        ('llm_start', 'llm_end', 'checkpoint')
    """
    kinds = list(dict.fromkeys([*EVENT_KINDS, *known]))
    families = kind_families(kinds)
    out: list[str] = []
    for name in requested:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{name[:80]!r} is not valid Unicode text") from None
        if name in kinds:
            out.append(name)
        elif name in families:
            out.extend(families[name])
        else:
            listed = ", ".join(f for f, members in families.items() if len(members) > 1)
            raise ValueError(
                f"{name!r} is not an event kind. Kinds: {', '.join(kinds)}. "
                f"Families (every kind starting with FAMILY_): {listed}"
            )
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class EventFilter:
    """Which events of a thread to return; empty fields do not filter.

    Attributes:
        kinds: event kinds (``checkpoint``, ``writes``, ``node_end``, ``tool_start``, ...).
        nodes: graph node names.
        names: event names (tool or model names, ...).
        since: events at or after this time.
        until: events before this time.
        limit: only the last ``limit`` matching events (``None``: all).
    """

    kinds: Sequence[str] = ()
    nodes: Sequence[str] = ()
    names: Sequence[str] = ()
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None

    def params(self, thread_id: str) -> dict[str, Any]:
        """The parameters of :data:`SELECT_EVENTS`."""
        # a NULL parameter switches its condition off: the statement stays one fixed text
        return {
            "thread_id": thread_id,
            "kinds": list(self.kinds) or None,
            "nodes": list(self.nodes) or None,
            "names": list(self.names) or None,
            "since": self.since,
            "until": self.until,
            "limit": self.limit or None,
        }


def query_events(
    conn: psycopg.Connection[Any],
    thread_id: str,
    flt: EventFilter | None = None,
    schema: str = ledger.DEFAULT_SCHEMA,
) -> list[dict[str, Any]]:
    """The events of ``thread_id`` that pass ``flt``, oldest first, as envelopes.

    The envelopes have the form of ``events.jsonl`` lines (``ts`` in the session's time
    zone, ``raw`` in base64).
    """
    rows = conn.execute(
        ledger.q(SELECT_EVENTS, schema), (flt or EventFilter()).params(thread_id)
    ).fetchall()
    return [ledger.row_to_envelope(r) for r in rows]


def thread_in_ledger(
    conn: psycopg.Connection[Any], thread_id: str, schema: str = ledger.DEFAULT_SCHEMA
) -> bool:
    """Whether the ledger has a thread row or any event for ``thread_id``."""
    row = conn.execute(ledger.q(THREAD_IN_LEDGER, schema), {"t": thread_id}).fetchone()
    return bool(row and row[0])


def list_threads(
    conn: psycopg.Connection[Any],
    schema: str = ledger.DEFAULT_SCHEMA,
    *,
    limit: int | None = 50,
    replays: bool = False,
) -> tuple[list[dict[str, Any]], int, int]:
    """Recorded threads, most recently updated first: ``(rows, total, replay copies)``.

    Each row has ``thread_id``, ``created_at``, ``updated_at``, ``last_seq``,
    ``checkpoints`` and ``deleted_at``. Replay copies (:func:`is_replay_copy`) are left
    out unless ``replays``; ``total`` counts the other threads, ``replay copies`` those.

    Example:
        >>> with ledger.connect(dsn) as conn:                       # doctest: +SKIP
        ...     rows, total, copies = list_threads(conn, limit=10)
    """
    cur = conn.cursor(row_factory=dict_row)
    rows = cur.execute(
        ledger.q(SELECT_THREADS, schema),
        {"replays": replays, "prefix": REPLAY_PREFIX, "limit": limit or None},
    ).fetchall()
    counts = cur.execute(ledger.q(COUNT_THREADS, schema), {"prefix": REPLAY_PREFIX}).fetchone()
    total, copies = (int(counts["n"]), int(counts["replays"])) if counts else (len(rows), 0)
    return rows, total, copies
