"""Signed tree heads: sign the log as it is and store the head.

The ledger appends a leaf to the log whenever a thread's head moves (``advance_thread``,
migration v14); :func:`sign_head` reads the log's size and right edge, computes its root,
signs the head as a C2SP signed note with every given :class:`~langgraph_external.proof.
keys.Signer`, and stores it through ``store_signed_head`` (which takes only a head of the
log as it is). :class:`HeadSigner` is what a sealing service runs: it signs at most every
``interval`` seconds, and only when the log grew since its last head.

Example (with a database)::

    with psycopg.connect(dsn, autocommit=True) as conn:
        head = sign_head(conn, "langgraph_external", [load_signer()])
        print(head.note)
"""

from __future__ import annotations

import base64
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import psycopg

from langgraph_external.errors import ConfigurationError
from langgraph_external.ledger.statements import q
from langgraph_external.proof.keys import Signer, load_signer
from langgraph_external.proof.tree import frontier_root
from langgraph_external.proof.verify import SIGNATURE_DASH, Head, parse_head
from langgraph_external.settings import DEFAULT_SIGN_INTERVAL

logger = logging.getLogger("langgraph_external")

__all__ = [
    "HeadSigner",
    "SignedHead",
    "head_note",
    "log_state",
    "make_signer",
    "sign_head",
]


LOG_STATE = "select origin, size, frontier from {schema}.log_state where one"
LOG_SNAPSHOT = "select origin, size, frontier from {schema}.log_snapshot()"
STORE_HEAD = (
    "select {schema}.store_signed_head(%s::text, %s::bigint, %s::bigint, %s::bytea,"
    " %s::timestamptz, %s::text)"
)
REGISTER_KEY = "select {schema}.register_log_key(%s::text)"


@dataclass(frozen=True)
class SignedHead:
    """A stored signed head: its note text, and what it says."""

    note: str
    head: Head


def log_state(conn: psycopg.Connection[Any], schema: str) -> tuple[str, int, bytes]:
    """``(origin, size, root)`` of the log now."""
    return _state(conn.execute(q(LOG_STATE, schema)).fetchone())


def _state(row: Any) -> tuple[str, int, bytes]:
    assert row is not None, "the ledger has no log (run lgx setup)"
    return str(row[0]), int(row[1]), frontier_root([bytes(f) for f in row[2]])


def head_note(
    origin: str, size: int, root: bytes, when: datetime, signers: Sequence[Signer]
) -> str:
    """The signed note of a tree head (C2SP tlog checkpoint + one line per signature).

    Example:
        >>> s = Signer.generate("k")
        >>> note = head_note("o", 1, bytes(32), datetime(2026, 12, 7, tzinfo=timezone.utc), [s])
        >>> note.splitlines()[:4]
        ['o', '1', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=', 'time 2026-12-07T00:00:00Z']
        >>> parse_head(note).signed_by([s.verifier]) == s.verifier
        True
    """
    stamp = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = f"{origin}\n{size}\n{base64.b64encode(root).decode()}\ntime {stamp}\n"
    lines = []
    for s in signers:
        sig = s.verifier.key_hash.to_bytes(4, "big") + s.sign(body.encode())
        lines.append(f"{SIGNATURE_DASH}{s.name} {base64.b64encode(sig).decode()}\n")
    return body + "\n" + "".join(lines)


def sign_head(conn: psycopg.Connection[Any], schema: str, signers: Sequence[Signer]) -> SignedHead:
    """Sign the log as it is now with every one of ``signers`` and store the head.

    The log is held still while the head is signed (a share lock on its state, so the
    head signed is the head stored); ``conn`` must not be inside a transaction.
    """
    if not signers:
        raise ValueError("a head needs at least one signing key")
    when = datetime.now(timezone.utc).replace(microsecond=0)
    with conn.transaction():
        origin, size, root = _state(conn.execute(q(LOG_SNAPSHOT, schema)).fetchone())
        note = head_note(origin, size, root, when, signers)
        for s in signers:
            conn.execute(q(REGISTER_KEY, schema), (s.verifier.text,))
            conn.execute(
                q(STORE_HEAD, schema), (s.name, s.verifier.key_hash, size, root, when, note)
            )
    return SignedHead(note, parse_head(note))


def make_signer(
    ledger: Any, *, interval: float, key_file: str | os.PathLike[str] | None = None
) -> HeadSigner | None:
    """The head signer of a sealing service on ``ledger`` (``None`` when ``interval`` is
    0 or the ledger is not a database). Loads the signing key, creating it on first use;
    when it cannot (an unwritable home, a malformed key), heads go unsigned — sealing
    does not stop — and the reason is logged as an error.
    """
    dsn = getattr(ledger, "dsn", None)
    if interval <= 0 or dsn is None:
        return None
    try:
        signer = load_signer(key_file)
    except ConfigurationError as exc:
        # sealing goes on (the record is whole without signed heads); said loudly
        logger.error(
            "langgraph-external: the log's heads are not signed: %s (set LGX_SIGNING_KEY, "
            "LGX_SIGNING_KEY_FILE, or LGX_SIGN_INTERVAL=off)",
            exc,
        )
        return None
    # a connection of its own for each head (one every few seconds at most): the sealer's
    # pool stays the sealer's
    return HeadSigner(
        lambda: psycopg.connect(dsn, autocommit=True, connect_timeout=10),
        ledger.schema,
        signer,
        interval,
    )


class HeadSigner:
    """Signs the log's head for a sealing service: at most every ``interval`` seconds,
    and only when the log grew since its last head (a failure is logged and retried at
    the next look; sealing never waits on it).

    Args:
        connect: a context manager factory giving an autocommit connection.
        schema: the ledger schema.
        signer: the signing key.
        interval: seconds between heads while the log grows.
    """

    def __init__(
        self,
        connect: Callable[[], AbstractContextManager[psycopg.Connection[Any]]],
        schema: str,
        signer: Signer,
        interval: float = DEFAULT_SIGN_INTERVAL,
    ) -> None:
        self.connect = connect
        self.schema = schema
        self.signer = signer
        self.interval = interval
        self.signed = 0  # heads signed by this signer
        self.last_size = -1
        self.last_error: str | None = None
        self._last = 0.0
        self._dirty = False  # something was sealed since the last head
        self._lock = threading.Lock()

    def note_sealed(self) -> None:
        """Something was sealed (the log grew): the next look signs."""
        self._dirty = True

    def maybe_sign(self, *, force: bool = False) -> SignedHead | None:
        """Sign when something was sealed since the last head and ``interval`` seconds
        passed since the last look (at once with ``force``)."""
        if not self._dirty or (not force and time.monotonic() - self._last < self.interval):
            return None
        with self._lock:
            self._last = time.monotonic()
            self._dirty = False
            try:
                with self.connect() as conn:
                    _origin, size, _root = log_state(conn, self.schema)
                    if size == self.last_size:
                        return None
                    head = sign_head(conn, self.schema, [self.signer])
            except Exception as exc:  # the ledger is away: the next look signs
                self._dirty = True
                self.last_error = f"{type(exc).__name__}: {exc}"
                logger.warning("langgraph-external: the log head was not signed (%s)", exc)
                return None
            self.last_error = None
            self.last_size = head.head.size
            self.signed += 1
            return head

    def health(self) -> dict[str, Any]:
        """What the signer did: heads signed, the size of the last, the last error."""
        return {
            "key": f"{self.signer.name}+{self.signer.verifier.key_hash:08x}",
            "signed": self.signed,
            "size": self.last_size if self.last_size >= 0 else None,
            "error": self.last_error,
        }
