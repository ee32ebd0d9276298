"""Verify the record: hash chains, ledger ↔ workspace, and saver ↔ ledger agreement.

``lgx verify`` calls :func:`verify_thread` per thread; a problem in one thread never stops
the others. Each problem names the first ``seq`` (or file line) where it starts.

Example:
    >>> VerifyResult("t").ok
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from langgraph_external import inspection, ledger
from langgraph_external.errors import ExternalError
from langgraph_external.events import verify_chain
from langgraph_external.workspace import Workspace


class ThreadNotFoundError(ExternalError, LookupError):
    """The thread is in neither the ledger nor the workspace."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


@dataclass
class VerifyResult:
    """Outcome of verifying one thread."""

    thread_id: str
    ledger_events: int = 0
    workspace_events: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_thread(
    conn: psycopg.Connection[Any], ws: Workspace, thread_id: str, schema: str
) -> VerifyResult:
    """Check one thread: the ledger's chain, the workspace's chain, and that they agree.

    Each problem names the first ``seq`` (or ``events.jsonl`` line) where it starts.

    Raises:
        ThreadNotFoundError: the thread is in neither the ledger nor the workspace.
    """
    res = VerifyResult(thread_id)
    row = conn.execute(
        ledger.q(inspection.SELECT_THREAD_POSITION, schema),
        (thread_id,),
    ).fetchone()
    lg = ledger.fetch_events(conn, thread_id, schema)
    path = f"{ws.thread_dir(thread_id)}/events.jsonl"
    wk, bad_line = read_jsonl(ws, path)
    res.ledger_events, res.workspace_events = len(lg), len(wk)
    if row is None and not lg and not wk and bad_line is None:
        in_saver = saver_problems(conn, thread_id, schema)
        if not in_saver:
            raise ThreadNotFoundError(
                f"thread {thread_id!r} not found in the ledger or the workspace"
            )
        res.problems.extend(in_saver)
        return res

    if row is None and not lg:
        res.problems.append(
            f"ledger: the thread is not in the ledger, but the workspace holds {len(wk)} "
            "events (still spooled, or another --dsn/--schema?)"
        )
    elif row is None:
        res.problems.append("ledger: events without a row in the threads table")
    elif not lg:
        res.problems.append("ledger: the threads row has no events")
    if lg:
        p = _chain_problem(lg)
        if p:
            res.problems.append(f"ledger: {p}")
        if row is not None and (row[0] != lg[-1]["seq"] or row[1] != lg[-1]["hash"]):
            res.problems.append(
                f"ledger: threads row says last seq {row[0]}, "
                f"but the last event is seq {lg[-1]['seq']} (or its hash differs)"
            )
    if bad_line is not None:
        res.problems.append(f"workspace {path}: {bad_line}")
    elif not wk:
        res.problems.append(f"workspace: no events at {path} (wrong --workspace?)")
    else:
        p = _chain_problem(wk)
        if p:
            res.problems.append(f"workspace events.jsonl: {p}")
    if lg and wk and bad_line is None:
        p = _agreement_problem(lg, wk)
        if p:
            res.problems.append(p)
    res.problems.extend(saver_problems(conn, thread_id, schema))
    return res


SAVER_AGREEMENT = """
select
  (select count(*) from public.checkpoints c where c.thread_id = %(t)s and not exists (
     select 1 from {schema}.checkpoints l where l.thread_id = c.thread_id
       and l.checkpoint_ns = c.checkpoint_ns and l.checkpoint_id = c.checkpoint_id)),
  (select count(*) from (select distinct checkpoint_ns, checkpoint_id, task_id
     from public.checkpoint_writes where thread_id = %(t)s) w where not exists (
     select 1 from {schema}.events e where e.thread_id = %(t)s and e.kind = 'writes'
       and e.checkpoint_ns = w.checkpoint_ns and e.checkpoint_id = w.checkpoint_id
       and e.task_id = w.task_id)),
  (select count(*) from {schema}.checkpoints l where l.thread_id = %(t)s and not exists (
     select 1 from public.checkpoints c where c.thread_id = l.thread_id
       and c.checkpoint_ns = l.checkpoint_ns and c.checkpoint_id = l.checkpoint_id))
"""


def saver_thread_ids(conn: psycopg.Connection[Any]) -> set[str]:
    """Threads the official saver holds in this database (none for other savers)."""
    row = conn.execute("select to_regclass('public.checkpoints')").fetchone()
    if row is None or row[0] is None:
        return set()
    return {r[0] for r in conn.execute("select distinct thread_id from public.checkpoints")}


def saver_problems(conn: psycopg.Connection[Any], thread_id: str, schema: str) -> list[str]:
    """Disagreements between the official saver's tables (same database) and the ledger."""
    row = conn.execute("select to_regclass('public.checkpoint_writes')").fetchone()
    if row is None or row[0] is None:
        return []  # another saver: nothing to compare here
    counts = conn.execute(ledger.q(SAVER_AGREEMENT, schema), {"t": thread_id}).fetchone()
    assert counts is not None
    cps, writes, extra = (int(x) for x in counts)
    out = []
    if cps:
        out.append(f"saver: {_n(cps, 'committed checkpoint')} without a checkpoint event")
    if writes:
        out.append(f"saver: {_n(writes, 'committed task write')} without a writes event")
    if extra:
        out.append(f"ledger: {_n(extra, 'checkpoint')} the saver does not hold")
    if out:
        out[-1] += " (`lgx repair` records what the saver holds)"
    return out


def read_jsonl(ws: Workspace, path: str) -> tuple[list[dict[str, Any]], str | None]:
    """Envelopes of ``events.jsonl`` and the first unreadable line, if any."""
    envelopes: list[dict[str, Any]] = []
    if not ws.exists(path):
        return envelopes, None
    with ws.fs.open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                env = json.loads(line)
            except ValueError as exc:
                return envelopes, f"line {lineno} is not valid JSON ({_one_line(exc)})"
            if not isinstance(env, dict):
                return envelopes, f"line {lineno} is not a JSON object"
            envelopes.append(env)
    return envelopes, None


def _chain_problem(envelopes: Sequence[Mapping[str, Any]]) -> str | None:
    first = envelopes[0]
    try:
        verify_chain(list(envelopes))
    except ValueError as exc:
        return str(exc)
    except (KeyError, TypeError) as exc:
        return f"malformed envelope ({type(exc).__name__}: {exc})"
    # verify_chain checks links; the head must be the thread's start (or a deletion,
    # after which the ledger keeps numbering but drops older events).
    if first.get("kind") != "thread_deleted" and (first["seq"] != 1 or first["prev"] is not None):
        return f"events before seq {first['seq']} are missing"
    return None


def _agreement_problem(
    lg: Sequence[Mapping[str, Any]], wk: Sequence[Mapping[str, Any]]
) -> str | None:
    for a, b in zip(lg, wk, strict=False):
        if a["seq"] != b["seq"]:
            return f"seq {a['seq']} in the ledger faces seq {b['seq']} in the workspace"
        if a["hash"] != b["hash"]:
            return (
                f"seq {a['seq']}: the ledger and the workspace hold different events "
                f"(hash {str(a['hash'])[:12]}… vs {str(b['hash'])[:12]}…)"
            )
    if len(lg) > len(wk):
        return (
            f"seq {lg[len(wk)]['seq']} and later ({_n(len(lg) - len(wk), 'event')}) are in the "
            "ledger but missing from the workspace"
        )
    if len(wk) > len(lg):
        return (
            f"seq {wk[len(lg)]['seq']} and later ({_n(len(wk) - len(lg), 'event')}) are in the "
            "workspace but missing from the ledger (still spooled?)"
        )
    return None
