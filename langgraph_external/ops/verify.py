"""Verify the record: hash chains, ledger ↔ workspace, and saver ↔ ledger agreement.

``lgx verify`` calls :func:`verify_thread` per thread; a problem in one thread never stops
the others. Each problem names the first ``seq`` (or file line) where it starts.

With the deployment key (``cipher``) it also checks what an unkeyed chain cannot prove:
the thread's head carries its keyed tag (so an edit re-hashed through both copies, or a
truncation of both, is found), every exact copy opens and matches its keyed address and
its hash-chained event, ``state.json`` carries its keyed tag, and every artifact matches
its address. Without the key it checks the derived tables (``checkpoints``) against the
events either way.

Example:
    >>> VerifyResult("t").ok
    True
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import psycopg

from langgraph_external.errors import ExternalError, RestoreError
from langgraph_external.ledger import queries
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger import statements as stmt
from langgraph_external.ledger.rows import checkpoint_row
from langgraph_external.ops.failures import record_failures
from langgraph_external.ops.failures import resolve_record_failure as resolve_record_failure
from langgraph_external.record.artifacts import artifact_digests
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import Event, verify_chain
from langgraph_external.record.keys import head_tag, heads_tag, state_tag
from langgraph_external.record.locations import sha256_hex
from langgraph_external.record.thread_ids import is_replay_copy
from langgraph_external.upstream import saver_ops
from langgraph_external.workspace.checkpoint_log import verify_thread as verify_copies
from langgraph_external.workspace.files import Workspace
from langgraph_external.workspace.lines import events_path, read_file


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
    pending: int = 0  # captures committed with the saver's rows, not sealed yet

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_thread(
    conn: psycopg.Connection[Any],
    ws: Workspace,
    thread_id: str,
    schema: str,
    *,
    cipher: WorkspaceCipher | None = None,
    copies: bool = True,
) -> VerifyResult:
    """Check one thread: the ledger's chain, the workspace's chain, and that they agree.

    Each problem names the first ``seq`` (or ``events.jsonl`` line) where it starts.
    ``cipher`` (the deployment key) adds the keyed checks (see the module docs).
    ``copies=False`` leaves out the exact copies (encrypted, with keyed addresses: without
    the key that wrote them they cannot be checked; see :func:`heads_under_key`).

    Raises:
        ThreadNotFoundError: the thread is in neither the ledger nor the workspace.
    """
    res = VerifyResult(thread_id)
    ledger.file_workspace(conn, ws, [thread_id], schema)  # its folder, by the ledger's word
    res.pending = pending_captures(conn, thread_id, schema)
    row = conn.execute(
        ledger.q(queries.SELECT_THREAD_POSITION, schema),
        (thread_id,),
    ).fetchone()
    lg = ledger.fetch_events(conn, thread_id, schema)
    path = events_path(ws, thread_id)
    wk, bad_line = read_jsonl(ws, path)
    res.ledger_events, res.workspace_events = len(lg), len(wk)
    if row is None and not lg and not wk and bad_line is None:
        in_saver = saver_problems(conn, thread_id, schema)
        if not in_saver and not res.pending:
            raise ThreadNotFoundError(
                f"thread {thread_id!r} not found in the ledger or the workspace"
            )
        res.problems.extend(in_saver)  # none: captured, nothing sealed yet (pending, not a failure)
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
        if p := _chain_problem(lg):
            res.problems.append(f"ledger: {p}")
        if row is not None and (row[0] != lg[-1]["seq"] or row[1] != lg[-1]["hash"]):
            res.problems.append(
                f"ledger: threads row says last seq {row[0]}, "
                f"but the last event is seq {lg[-1]['seq']} (or its hash differs)"
            )
    if bad_line is not None:
        res.problems.append(f"workspace {path}: {bad_line}")
    elif not wk and _deleted_copy(thread_id, lg):
        pass  # a deleted replay copy leaves no folder: its tombstone is the ledger's
    elif not wk:
        res.problems.append(f"workspace: no events at {path} (wrong --workspace?)")
    elif p := _chain_problem(wk):
        res.problems.append(f"workspace events.jsonl: {p}")
    if lg and wk and bad_line is None and (p := _agreement_problem(lg, wk)):
        res.problems.append(p)
    if cipher and row is not None and lg and (p := _head_problem(conn, thread_id, schema, cipher)):
        res.problems.append(p)
    if lg:
        res.problems.extend(derived_problems(conn, thread_id, schema, lg))
        res.problems.extend(record_failures(lg))
        res.problems.extend(folder_problems(ws, thread_id, lg))
    if wk and bad_line is None:
        res.problems.extend(workspace_problems(ws, thread_id, wk, lg, cipher, copies=copies))
    res.problems.extend(saver_problems(conn, thread_id, schema))
    return res


def _head_problem(
    conn: psycopg.Connection[Any], thread_id: str, schema: str, cipher: WorkspaceCipher
) -> str | None:
    """The threads row's head must carry the keyed tag only a key holder can compute."""
    row = conn.execute(ledger.q(stmt.SELECT_HEAD_TAG, schema), (thread_id,)).fetchone()
    if row is None:
        return None
    seq, hash_, tag = row
    if tag is None:
        return (
            f"ledger: the head (seq {seq}) carries no keyed tag: its chain is not anchored "
            "(recorded without a key, by an older version, or the tag was removed)"
        )
    if not hmac.compare_digest(str(tag), head_tag(cipher, thread_id, seq, hash_) or ""):
        return (
            f"ledger: the head (seq {seq}) does not carry its keyed tag: the record was "
            "edited and re-hashed, truncated, or written with another key"
        )
    return None


def heads_under_key(
    conn: psycopg.Connection[Any], schema: str, cipher: WorkspaceCipher, sample: int = 1000
) -> tuple[int, int]:
    """``(tagged heads looked at, how many carry the tag of cipher)``, of the newest
    ``sample`` threads whose head carries a keyed tag.

    Tells a key that did not write the record from tampering: an edit re-hashed through
    a thread fails that thread's tag, but a different key fails every tag. None matching
    of several means the key is missing or different (or every head was rewritten).
    """
    rows = conn.execute(ledger.q(queries.SELECT_TAGGED_HEADS, schema), (sample,)).fetchall()
    matching = sum(
        1
        for tid, seq, hash_, tag in rows
        if hmac.compare_digest(str(tag), head_tag(cipher, tid, seq, hash_) or "")
    )
    return len(rows), matching


_DERIVED = (
    "parent_checkpoint_id",
    "step",
    "source",
    "run_id",
    "nodes",
    "channels",
    "size_bytes",
    "workspace_path",
    "event_seq",
)


def derived_problems(
    conn: psycopg.Connection[Any],
    thread_id: str,
    schema: str,
    lg: Sequence[Mapping[str, Any]],
) -> list[str]:
    """The ledger's checkpoint index (``checkpoints``) must be what its events say.

    Every checkpoint event (not pruned or deleted since) has its row, with the same
    parent, step, source, run, nodes, channels, size, path and event ``seq``; no row
    claims an event the thread does not hold. (Rows copied by ``copy_thread`` name no
    event of this thread and are left alone.)
    """
    expected: dict[tuple[str, str], dict[str, Any]] = {}
    for env in lg:
        kind = env["kind"]
        if kind == "checkpoint" and env.get("checkpoint_id"):
            row = checkpoint_row(Event.from_envelope(env))
            expected[(env["checkpoint_ns"] or "", env["checkpoint_id"])] = dict(
                zip(stmt.CHECKPOINT_INDEX_COLUMNS, row, strict=True)
            )
        elif kind in ("thread_pruned", "runs_deleted"):
            for ns, ids in ((env.get("payload") or {}).get("removed") or {}).items():
                for cid in ids or ():
                    expected.pop((ns, cid), None)
    rows = conn.execute(ledger.q(stmt.SELECT_CHECKPOINT_ROWS, schema), (thread_id,)).fetchall()
    names = ("checkpoint_ns", "checkpoint_id", *_DERIVED)
    held = {(r[0], r[1]): dict(zip(names, r, strict=True)) for r in rows}
    out = []
    for key, want in expected.items():
        got = held.get(key)
        if got is None:
            out.append(
                f"ledger checkpoints: checkpoint {key[1]} (seq {want['event_seq']}) "
                "has no row in the checkpoint index"
            )
            continue
        for col in _DERIVED:
            a, b = got[col], want[col]
            if col in ("nodes", "channels"):
                a, b = sorted(a or []), sorted(b or [])
            if a != b:
                out.append(
                    f"ledger checkpoints: checkpoint {key[1]} (seq {want['event_seq']}): "
                    f"{col} is {a!r} but its event says {b!r} (the index was edited)"
                )
                break
    for key, got in held.items():
        if key not in expected and got["event_seq"] is not None:
            out.append(
                f"ledger checkpoints: checkpoint {key[1]} claims event seq "
                f"{got['event_seq']}, which is not a checkpoint event of the thread"
            )
    return out[:20]


def _deleted_copy(thread_id: str, lg: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the record of ``thread_id`` is a replay copy's tombstone and nothing else."""
    return is_replay_copy(thread_id) and len(lg) == 1 and lg[0]["kind"] == "thread_deleted"


def folder_problems(ws: Workspace, thread_id: str, lg: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every checkpoint event names the log the workspace keeps its namespace in: one
    folder per thread, whichever rule named it (see :meth:`Workspace.folder`)."""
    for env in lg:
        if env["kind"] != "checkpoint":
            continue
        named = (env.get("payload") or {}).get("path")
        kept = ws.relative(ws.checkpoint_log_path(thread_id, env.get("checkpoint_ns") or ""))
        if named is not None and named != kept:
            return [
                f"ledger: checkpoint seq {env['seq']} names {named}, but the thread's log is {kept}"
            ]
    return []


def workspace_problems(
    ws: Workspace,
    thread_id: str,
    wk: Sequence[Mapping[str, Any]],
    lg: Sequence[Mapping[str, Any]],
    cipher: WorkspaceCipher | None,
    *,
    copies: bool = True,
) -> list[str]:
    """Exact copies, checkpoint logs, artifacts and ``state.json`` against the record
    (the exact copies and checkpoint logs only when ``copies``)."""
    out = []
    try:
        if copies:
            verify_copies(ws, thread_id, cipher=cipher)
    except RestoreError as exc:  # DecryptionError too: an edited ciphertext or wrong key
        out.append(f"workspace exact copies: {_one_line(exc)}")
    out.extend(_artifact_problems(ws, thread_id, wk))
    if p := _state_problem(ws, thread_id, lg or wk, cipher):
        out.append(p)
    return out


def _artifact_problems(ws: Workspace, thread_id: str, wk: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every artifact an event names exists and matches its address (sha256 of content)."""
    names: dict[str, int] = {}
    for env in wk:
        for name in (env.get("artifact"), *artifact_digests(env.get("payload"))):
            if isinstance(name, str):
                names.setdefault(name, env["seq"])
    out = []
    for name, seq in sorted(names.items(), key=lambda x: x[1]):
        path = ws.artifact_path(thread_id, name)
        try:
            data = ws.read_bytes(path)
        except FileNotFoundError:
            out.append(f"workspace {path}: missing (named by seq {seq})")
            continue
        if sha256_hex(data) != name:
            out.append(
                f"workspace {path}: the artifact of seq {seq} does not match its address "
                "(it was edited)"
            )
    return out


def _state_problem(
    ws: Workspace,
    thread_id: str,
    events: Sequence[Mapping[str, Any]],
    cipher: WorkspaceCipher | None,
) -> str | None:
    """``state.json`` shows the latest root checkpoint, under its keyed tag."""
    latest = next(
        (
            e
            for e in reversed(events)
            if e["kind"] == "checkpoint" and not (e.get("checkpoint_ns") or "")
        ),
        None,
    )
    path = f"{ws.thread_dir(thread_id)}/state.json"
    if latest is None or not ws.exists(path):
        return None if latest is None else f"workspace {path}: missing"
    try:
        doc = json.loads(ws.read_bytes(path))
    except ValueError as exc:
        return f"workspace {path}: not JSON ({_one_line(exc)})"
    if not isinstance(doc, dict):
        return f"workspace {path}: not a JSON object"
    if doc.get("checkpoint_id") != latest.get("checkpoint_id"):
        return (
            f"workspace {path}: shows checkpoint {doc.get('checkpoint_id')}, but the latest "
            f"is {latest.get('checkpoint_id')} (seq {latest.get('seq')})"
        )
    if cipher is None:
        return None
    tag = doc.get("tag")
    if not isinstance(tag, str) or not hmac.compare_digest(tag, state_tag(cipher, doc)):
        return f"workspace {path}: its content does not match its keyed tag (it was edited)"
    return None


def pending_captures(conn: psycopg.Connection[Any], thread_id: str, schema: str) -> int:
    """How many captures of ``thread_id`` wait for a sealer."""
    row = conn.execute(ledger.q(stmt.PENDING_OF_THREAD, schema), (thread_id,)).fetchone()
    return int(row[0]) if row else 0


def saver_thread_ids(conn: psycopg.Connection[Any]) -> set[str]:
    """Threads the official saver holds in this database (none for other savers)."""
    row = conn.execute(saver_ops.HAS_CHECKPOINTS_TABLE).fetchone()
    if row is None or row[0] is None:
        return set()
    return {r[0] for r in conn.execute(saver_ops.SAVER_THREAD_IDS)}


def saver_problems(conn: psycopg.Connection[Any], thread_id: str, schema: str) -> list[str]:
    """Disagreements between the official saver's tables (same database) and the ledger."""
    row = conn.execute(saver_ops.HAS_WRITES_TABLE).fetchone()
    if row is None or row[0] is None:
        return []  # another saver: nothing to compare here
    counts = conn.execute(ledger.q(saver_ops.LEDGER_AGREEMENT, schema), {"t": thread_id}).fetchone()
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


def mirror_behind(
    conn: psycopg.Connection[Any], ws: Workspace, thread_id: str, schema: str, last_seq: int
) -> str | None:
    """What of ``thread_id``'s workspace mirror is behind its ledger, read from the files
    as :func:`verify_thread` reads them (``None``: nothing).

    ``last_seq`` is the ledger's. Behind: ``events.jsonl`` ends before it (or is not
    there), or ``state.json`` does not show the latest root checkpoint — each a problem
    ``lgx verify`` fails the thread for. The projection's cursor is not consulted: it says
    how far the projector got, not what the files hold.
    """
    path = events_path(ws, thread_id)
    have = ws.last_seq(path)
    if have < last_seq:
        return (
            f"seq {have + 1} and later are in the ledger but missing from the workspace"
            if have
            else f"workspace: no events at {path}"
        )
    latest = conn.execute(
        ledger.q(queries.SELECT_LATEST_ROOT_CHECKPOINT, schema), (thread_id,)
    ).fetchone()
    if latest is None:
        return None
    head = {"kind": "checkpoint", "checkpoint_ns": "", "seq": latest[0], "checkpoint_id": latest[1]}
    return _state_problem(ws, thread_id, [head], None)


def threads_mirror_behind(
    conn: psycopg.Connection[Any], ws: Workspace, schema: str
) -> dict[str, str]:
    """Every thread of the ledger whose workspace mirror is behind it (:func:`mirror_behind`),
    with what is behind — the threads ``lgx verify --all`` fails for that reason
    (``lgx db status``, ``lgx worker --status``)."""
    out: dict[str, str] = {}
    for tid, last_seq in conn.execute(ledger.q(queries.SELECT_THREAD_HEADS, schema)).fetchall():
        if (p := mirror_behind(conn, ws, tid, schema, int(last_seq))) is not None:
            out[tid] = p
    return out


def read_jsonl(ws: Workspace, path: str) -> tuple[list[dict[str, Any]], str | None]:
    """Envelopes of ``events.jsonl`` and the first unreadable line, if any."""
    envelopes, bad = read_file(ws, path)
    if bad is None:
        return envelopes, None
    if bad.error is not None:
        return envelopes, f"line {bad.lineno} is not valid JSON ({_one_line(bad.error)})"
    return envelopes, f"line {bad.lineno} is not a JSON object"


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


# -- signed snapshots of every head ---------------------------------------------------------


def snapshot_heads(
    conn: psycopg.Connection[Any], schema: str, cipher: WorkspaceCipher
) -> dict[str, Any]:
    """A keyed snapshot of every thread's head, to keep outside the database.

    Checked later by :func:`heads_problems`: a thread that is gone, or whose record no
    longer holds the head it had (rolled back to an older backup, rewritten), is found,
    which a per-thread tag alone cannot show. Take one periodically (``lgx heads FILE``).
    """
    rows = conn.execute(ledger.q(stmt.SELECT_HEADS, schema)).fetchall()
    body = {
        "v": 1,
        "schema": schema,
        "taken": datetime.now(timezone.utc).isoformat(),
        "key_id": cipher.key_id,
        "heads": {r[0]: [int(r[1]), r[2]] for r in rows if r[3] is None and int(r[1]) > 0},
    }
    return {**body, "tag": heads_tag(cipher, body)}


def heads_problems(
    conn: psycopg.Connection[Any],
    schema: str,
    snapshot: Mapping[str, Any],
    cipher: WorkspaceCipher,
) -> list[str]:
    """What changed since ``snapshot`` other than appending (see :func:`snapshot_heads`)."""
    body = {k: v for k, v in snapshot.items() if k != "tag"}
    tag = snapshot.get("tag")
    if not isinstance(tag, str) or not hmac.compare_digest(tag, heads_tag(cipher, body)):
        return ["heads snapshot: its keyed tag does not match (edited, or another key)"]
    heads = snapshot.get("heads")
    if not isinstance(heads, Mapping):
        return ["heads snapshot: no heads"]
    deleted = {
        r[0]
        for r in conn.execute(ledger.q(stmt.SELECT_HEADS, schema)).fetchall()
        if r[3] is not None
    }
    out = []
    for tid, (seq, hash_) in sorted(heads.items()):
        row = conn.execute(ledger.q(stmt.SELECT_EVENT_HASH, schema), (tid, seq)).fetchone()
        if (row is not None and row[0] == hash_) or tid in deleted:
            continue  # unchanged, or erased since by a recorded tombstone
        what = "is gone" if row is None else "holds another event there"
        out.append(
            f"thread {tid!r}: the snapshot of {snapshot.get('taken')} saw seq {seq}; the "
            f"ledger {what} (rolled back, rewritten or deleted)"
        )
    return out
