"""What an auditor takes away, and what the deployment checks: bundles, consistency
proofs, and the ledger against its signed log.

* :func:`export_bundle` — one thread as a self-contained bundle: its events as the exact
  text that was hashed, the log leaf of its newest head that a signed head covers, the
  inclusion proof of that leaf, the signed head, and (``values=True``, with the
  deployment key) the exact checkpoint bytes with the salts that open their commitments.
  :func:`~langgraph_external.proof.verify.verify_bundle` checks it offline.
* :func:`consistency_document` — two signed heads and the proof that the later extends
  the earlier (:func:`~langgraph_external.proof.verify.verify_consistency_file`).
* :func:`check_log` — the ledger against the newest head a trusted key signed: the log's
  leaves still hash to the signed root, and every head the log recorded is still in the
  record (a thread cut back, deleted or replaced after a head covered it is named).

Example (with a database)::

    bundle = export_bundle(conn, "langgraph_external", "thread-42")
    print(verify_bundle(bundle, [load_signer().verifier]).report())
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from langgraph_external.errors import ExternalError
from langgraph_external.ledger import queries
from langgraph_external.ledger.rows import unpack_detail
from langgraph_external.ledger.schema import fetch_events
from langgraph_external.ledger.statements import q
from langgraph_external.proof.heads import SignedHead, log_state
from langgraph_external.proof.tree import consistency_proof, inclusion_proof, tree_root
from langgraph_external.proof.verify import (
    BUNDLE_FORMAT,
    CONSISTENCY_FORMAT,
    Head,
    VerifierKey,
    parse_head,
)
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import hashed_line

__all__ = [
    "LogCheck",
    "ProofError",
    "check_log",
    "consistency_document",
    "export_bundle",
    "trusted_head",
]

LEAVES = "select leaf_hash from {schema}.log_leaves where idx < %s order by idx"
LEAF_ROWS = """
select idx, thread_id, seq, head_hash, ts, leaf_hash from {schema}.log_leaves
where idx < %s order by idx
"""
THREAD_LEAF = """
select idx, thread_id, seq, head_hash, (extract(epoch from ts) * 1000000)::bigint
from {schema}.log_leaves where thread_id = %s and idx < %s order by idx desc limit 1
"""
HEADS = "select note from {schema}.signed_heads order by size desc, signed_at desc"
EVENT_DETAILS = """
select seq, detail from {schema}.events
where thread_id = %s and seq <= %s and kind in ('checkpoint', 'writes') and detail is not null
"""
EVENT_HASHES = "select thread_id, seq, hash from {schema}.events where thread_id = any(%s)"
THREAD_HEADS = "select thread_id, last_seq, last_hash from {schema}.threads"


class ProofError(ExternalError):
    """A bundle or proof cannot be made (no signed head yet, a thread the log does not
    cover, a head that is not of this log)."""


def trusted_head(
    conn: psycopg.Connection[Any], schema: str, keys: Sequence[VerifierKey] | None = None
) -> SignedHead:
    """The newest stored head signed by one of ``keys`` (any stored head when ``None``).

    Raises:
        ProofError: no such head is stored yet.
    """
    for (note,) in conn.execute(q(HEADS, schema)).fetchall():
        try:
            head = parse_head(note)
        except ValueError:
            continue
        if keys is None or head.signed_by(keys) is not None:
            return SignedHead(note, head)
    raise ProofError(
        "no signed head of the log is stored yet"
        + (" by the keys given" if keys is not None else "")
        + ": the sealer signs one a few seconds after it seals (or run `lgx log sign`)"
    )


def _leaves(conn: psycopg.Connection[Any], schema: str, size: int) -> list[bytes]:
    return [bytes(r[0]) for r in conn.execute(q(LEAVES, schema), (size,)).fetchall()]


def export_bundle(
    conn: psycopg.Connection[Any],
    schema: str,
    thread_id: str,
    *,
    head: SignedHead | None = None,
    cipher: WorkspaceCipher | None = None,
    values: bool = False,
) -> dict[str, Any]:
    """A thread's bundle, up to its newest head that ``head`` (default: the newest signed
    head stored) covers. ``values=True`` adds the exact checkpoint and write bytes the
    record holds inline, with the salts that open their commitments (needs ``cipher``,
    the deployment key; values kept only in the saver's tables are left out).

    Raises:
        ProofError: no signed head, or the head does not cover the thread yet.
    """
    conn.execute(queries.SET_TIME_ZONE_UTC)  # timestamps render as they were hashed
    signed = head or trusted_head(conn, schema)
    size = signed.head.size
    row = conn.execute(q(THREAD_LEAF, schema), (thread_id, size)).fetchone()
    if row is None:
        raise ProofError(
            f"thread {thread_id!r} is not covered by the signed head of {size} leaves yet "
            "(no head move of it is in that log): wait for the next head or run `lgx log sign`"
        )
    index, _tid, seq, head_hash, ts_us = row
    envelopes = [e for e in fetch_events(conn, thread_id, schema) if e["seq"] <= seq]
    bundle: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "origin": signed.head.origin,
        "thread_id": thread_id,
        "events": [hashed_line(e)[0] for e in envelopes],
        "leaf": {
            "index": int(index),
            "thread_id": thread_id,
            "seq": int(seq),
            "hash": head_hash,
            "ts_us": int(ts_us),
        },
        "inclusion": [h.hex() for h in inclusion_proof(_leaves(conn, schema, size), int(index))],
        "head": signed.note,
    }
    if values:
        if cipher is None:
            raise ProofError("the exact values need the deployment key (--key)")
        bundle["values"] = _values(conn, schema, thread_id, int(seq), cipher)
    return bundle


def _values(
    conn: psycopg.Connection[Any], schema: str, thread_id: str, seq: int, cipher: WorkspaceCipher
) -> dict[str, dict[str, str]]:
    """Address -> exact bytes and commitment salt, for the values the events carry."""
    out: dict[str, dict[str, str]] = {}
    for _seq, blob in conn.execute(q(EVENT_DETAILS, schema), (thread_id, seq)).fetchall():
        detail, files = unpack_detail(blob)
        enc = (detail or {}).get("enc")
        held = dict((detail or {}).get("inline") or {})
        for path, data in files.items():
            held.setdefault(path.rsplit("/", 1)[-1], base64.b64encode(data).decode())
        for address, b64 in held.items():
            data = base64.b64decode(b64)
            if enc:
                data = cipher.decrypt(data, address.encode())
            out[address] = {
                "data": base64.b64encode(data).decode(),
                "salt": cipher.commitment_salt(address).hex(),
            }
    return out


def consistency_document(
    conn: psycopg.Connection[Any], schema: str, old_note: str, new: SignedHead | None = None
) -> dict[str, Any]:
    """Two signed heads (``old_note``, an auditor kept; ``new``, default the newest
    stored) and the proof, from this log, that the later extends the earlier.

    Raises:
        ProofError: the earlier head is larger than the later, or not a head at all.
    """
    try:
        old = parse_head(old_note)
    except ValueError as exc:
        raise ProofError(f"the earlier head cannot be read: {exc}") from None
    later = new or trusted_head(conn, schema)
    if old.size > later.head.size:
        raise ProofError(
            f"the earlier head ({old.size} leaves) is larger than the later one ({later.head.size})"
        )
    leaves = _leaves(conn, schema, later.head.size)
    return {
        "format": CONSISTENCY_FORMAT,
        "old": old_note,
        "new": later.note,
        "proof": [h.hex() for h in consistency_proof(leaves, old.size)],
    }


@dataclass
class LogCheck:
    """What :func:`check_log` found (``problems`` empty: the record matches its log)."""

    head: Head | None = None
    leaves: int = 0
    threads: int = 0
    problems: list[str] = field(default_factory=list)


def check_log(conn: psycopg.Connection[Any], schema: str, keys: Sequence[VerifierKey]) -> LogCheck:
    """The ledger against the newest head one of ``keys`` signed: its leaves must hash
    to the signed root and every head move they record must still be in the record."""
    out = LogCheck()
    try:
        signed = trusted_head(conn, schema, keys)
    except ProofError as exc:
        out.problems.append(str(exc))
        return out
    head = out.head = signed.head
    _origin, size_now, _root = log_state(conn, schema)
    if _origin != head.origin:
        out.problems.append(
            f"the signed head is of log {head.origin!r}, this ledger's is {_origin!r}"
        )
        return out
    rows = conn.execute(q(LEAF_ROWS, schema), (head.size,)).fetchall()
    out.leaves = len(rows)
    if len(rows) != head.size or size_now < head.size:
        out.problems.append(
            f"the log holds {len(rows)} of the {head.size} leaves the signed head covers: "
            "leaves were deleted"
        )
    if tree_root([bytes(r[5]) for r in rows]) != head.root:
        out.problems.append(
            f"the log's first {head.size} leaves no longer hash to the signed root: the log "
            "was rewritten"
        )
    recorded: dict[str, dict[int, str]] = {}  # thread -> seq -> head hash the log names
    for _idx, tid, seq, head_hash, _ts, _lh in rows:
        recorded.setdefault(tid, {})[int(seq)] = head_hash
    out.threads = len(recorded)
    stored: dict[str, dict[int, str]] = {}
    for tid, seq, h in conn.execute(q(EVENT_HASHES, schema), (list(recorded),)).fetchall():
        stored.setdefault(tid, {})[int(seq)] = h
    threads = {r[0]: (int(r[1]), r[2]) for r in conn.execute(q(THREAD_HEADS, schema))}
    for tid in sorted(recorded):
        seq = max(recorded[tid])  # the newest head the log names
        if tid not in threads and not stored.get(tid):
            out.problems.append(
                f"thread {tid!r} is gone: the signed log has its head at seq "
                f"{seq}, the record has no such thread"
            )
            continue
        last = threads.get(tid, (0, ""))[0]
        if last < seq or seq not in stored.get(tid, {}):
            out.problems.append(
                f"thread {tid!r} was cut back: the signed log has its head at "
                f"seq {seq}, the record ends at seq {last}"
            )
            continue
        for s, h in sorted(recorded[tid].items()):
            have = stored.get(tid, {}).get(s)
            if have is not None and have != h:
                out.problems.append(
                    f"thread {tid!r} was replaced: its event seq {s} is not "
                    "the one the signed log recorded"
                )
                break
    return out
