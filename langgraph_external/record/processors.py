"""Event processors, applied in order before any sink sees an event.

A processor is a plain callable ``(event) -> event``; the chain, assembled once in
:mod:`langgraph_external.pipeline.pipeline`, is ``materialize → Redact → normalize → Offload``;
it runs on the caller's thread when a source emits, or — ``Pipeline(defer=True)`` — only
``materialize`` runs there (values are snapshotted) and the sealer runs the rest. The
:class:`Sequencer` numbers and chains events when they commit, so the hash covers
exactly what is stored.

Example:
    >>> seq = Sequencer(lambda ids: {})
    >>> e = seq(normalize(Event.new("error", "t")))
    >>> e.seq, e.prev is None, len(e.hash)
    (1, True, 64)
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from langgraph_external.record.artifacts import offload_values
from langgraph_external.record.events import (
    NATIVE_V,
    TEXT_FIELDS,
    Event,
    EventKind,
    envelope_json,
    json_safe,
    safe_text,
)
from langgraph_external.record.locations import sha256_hex

Redactor = Callable[[Any], tuple[Any, int]]
"""Returns ``(redacted_value, number_of_redactions)`` for any JSON-like value."""

PositionLookup = Callable[[Collection[str]], dict[str, tuple[int, str]]]


class Processor(Protocol):
    """One step of the pipeline."""

    def __call__(self, event: Event) -> Event:
        """Return the transformed event."""


def materialize(event: Event) -> Event:
    """Run a deferred builder (see :attr:`Event.build`), so sources stay cheap."""
    if event.build is None:
        return event
    built = event.build(event)
    return built if built.build is None else built.replace(build=None)


class Redact:
    """Apply a redactor to the payload and count what it removed.

    Example:
        >>> r = Redact(lambda v: ({"k": "[REDACTED]"}, 1) if v else (v, 0))
        >>> r(Event.new("error", "t", payload={"k": "secret"})).redactions
        1
    """

    def __init__(self, redactor: Redactor | None) -> None:
        self.redactor = redactor

    def __call__(self, event: Event) -> Event:
        if self.redactor is None:
            return event
        changes: dict[str, Any] = {}
        total = 0
        if event.kind in _STRUCTURAL:
            # references (channel names, versions, addresses) are not content: only the
            # free-form checkpoint metadata is; values are redacted in the readable views
            meta = event.payload.get("metadata")
            if meta:
                redacted, count = self.redactor(meta)
                if count:
                    changes["payload"] = {**event.payload, "metadata": redacted}
                    total += count
        elif event.payload:
            payload, count = self.redactor(event.payload)
            if count:
                changes["payload"], total = payload, total + count
        if event.raw is not None:
            # raw tool responses are text more often than not: redact them as text
            try:
                text = event.raw.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                redacted, count = self.redactor(text)
                if count:
                    changes["raw"], total = str(redacted).encode("utf-8"), total + count
        if not total:
            return event
        return event.replace(redactions=event.redactions + total, **changes)


_STRUCTURAL = frozenset({"checkpoint", "writes"})


class Offload:
    """Move large payload values and raw bytes above ``threshold`` bytes to artifacts.

    A payload over the threshold keeps its shape: its large values become references
    that show their head and tail (:func:`~langgraph_external.record.artifacts.
    offload_values`; identity and routing fields stay); raw bytes over it become
    ``artifact``. The bytes travel as attachments to ``artifacts/<sha256>``. Nothing is
    truncated. It runs after :func:`normalize`, so the text it moves is already what
    the record can hold (a string that needed escaping is a marked value whose escaped
    text moves, still marked).
    """

    def __init__(self, threshold: int = 64 * 1024) -> None:
        self.threshold = threshold

    def __call__(self, event: Event) -> Event:
        changes: dict[str, Any] = {}
        attachments = dict(event.attachments)
        if event.raw is not None and len(event.raw) > self.threshold:
            digest = sha256_hex(event.raw)
            attachments[f"artifacts/{digest}"] = event.raw
            changes.update(raw=None, artifact=digest)
        if event.payload and event.kind not in _STRUCTURAL:  # references to blobs already
            payload, files = offload_values(event.payload, self.threshold)
            if files:
                attachments.update((f"artifacts/{d}", data) for d, data in files.items())
                changes["payload"] = payload
        if not changes:
            return event
        return event.replace(attachments=attachments, **changes)


def normalize(event: Event) -> Event:
    """Make an event storable exactly as hashed: ``jsonb``-stable payload, safe text.

    NUL characters and lone surrogates would make PostgreSQL (or UTF-8) refuse the row,
    and with it the checkpoint it commits with: a payload string holding them becomes a
    marked value that escapes them reversibly (:mod:`~langgraph_external.record.escapes`);
    in a column (a node, a name, an id) they are escaped visibly (``\\u0000``), unmarked.
    """
    safe = _structural_safe if event.kind in _STRUCTURAL else json_safe
    changes: dict[str, Any] = {"payload": safe(event.payload)}
    for name in TEXT_FIELDS:
        value = getattr(event, name)
        if value is not None and not (value.isascii() and "\x00" not in value):
            changes[name] = safe_text(value)
    if not event.kind:
        changes["kind"] = ""
    if not event.checkpoint_ns:
        changes["checkpoint_ns"] = ""
    step = event.step
    if step is not None and not -(2**31) <= step < 2**31:
        changes["step"] = None
    return event.replace(**changes)


def _structural_safe(payload: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`json_safe` for a checkpoint or writes payload, walking only what is free-form
    (metadata, names, keys): the checkpointer builds channel references of strings and
    numbers, so a step costs the same whatever the number of channels."""
    out = dict(payload)
    for key in ("metadata", "writers", "nodes"):
        if key in out:
            out[key] = json_safe(out[key])
    channels = out.get("channels")
    if channels and any(
        safe_text(ch) != ch or type(ref.get("version")) not in (str, int)
        for ch, ref in channels.items()
    ):
        out["channels"] = json_safe(channels)
    writes = out.get("writes")
    if writes and any(
        safe_text(w.get("channel")) != w.get("channel") or type(w.get("idx")) is not int
        for w in writes
    ):
        out["writes"] = json_safe(writes)
    if "task_path" in out:
        out["task_path"] = safe_text(out["task_path"])
    return out


class Sequencer:
    """Number events per thread (1, 2, 3, ... without gaps) and chain their hashes.

    A sequencer lives for one transaction: the sealer builds one over the heads
    ``(seq, hash)`` of the threads its transaction claimed (``Sequencer(lambda _ids:
    dict(tx.heads))``; the threads stay locked against other sealers until it ends),
    seals that transaction's events and drops it; pruning and importing a thread seal
    their one event after the head they read the same way. :meth:`seal` asks ``lookup``
    once for the heads of threads it has not seen, numbers each thread's events from its
    head and moves the head past them, so later events of the same sequencer chain after
    the earlier ones. The ledger stores them only if each thread is still where its first
    event says (see :class:`~langgraph_external.ledger.postgres.PostgresLedger`); a
    refused transaction is sealed again, by a new sequencer over the heads read again.
    """

    def __init__(self, lookup: PositionLookup) -> None:
        self.lookup = lookup
        self._head: dict[str, tuple[int, str | None]] = {}
        self._lock = threading.Lock()

    def prime(self, thread_ids: Collection[str]) -> None:
        """Load the heads of all unknown ``thread_ids`` at once."""
        unknown = [t for t in set(thread_ids) if t not in self._head]
        if not unknown:
            return
        found = self.lookup(unknown)
        with self._lock:
            for t in unknown:
                self._head.setdefault(t, found.get(t, (0, None)))

    def seal(self, events: Sequence[Event]) -> list[Event]:
        """Number, chain and hash ``events`` (normalized already), moving the heads."""
        self.prime({e.thread_id for e in events})
        out = []
        with self._lock:
            for event in events:
                tid = event.thread_id
                seq, prev = self._head.get(tid, (0, None))
                seq += 1
                v = max(event.v, NATIVE_V)  # sealed now: the native encoder's version
                envelope = event.envelope()
                envelope["seq"], envelope["prev"], envelope["v"] = seq, prev, v
                del envelope["hash"]
                body = envelope_json(envelope, v)
                digest = hashlib.sha256(body.encode()).hexdigest()
                # the stored line is the hashed body with the hash in its sorted place
                cut = body.index(',"kind":')
                line = f'{body[:cut]},"hash":"{digest}"{body[cut:]}'
                self._head[tid] = (seq, digest)
                out.append(event.replace(seq=seq, prev=prev, hash=digest, line=line, v=v))
        return out

    def __call__(self, event: Event) -> Event:
        """Seal one event (see :meth:`seal`)."""
        return self.seal([event])[0]


def failed_record(
    event: Event, failed: Processor, exc: Exception, processors: Sequence[Processor]
) -> Event:
    """The ``record_failed`` event that takes ``event``'s place when ``failed`` raised.

    It names what was not recorded (kind, node, step, run ids), where (the processor)
    and why (the error's type and message — not the message of a failing redactor,
    which may quote what it failed to redact), and passes through the other processors.

    Example:
        >>> def broken(e): raise ValueError("no")
        >>> out = failed_record(Event.new("tool_end", "t", node="n"), broken, ValueError("no"), [])
        >>> out.kind, out.node, out.payload["processor"], out.payload["error"]
        ('record_failed', 'n', 'broken', 'no')
    """
    where = getattr(failed, "__name__", None) or type(failed).__name__
    out = Event.new(
        EventKind.RECORD_FAILED,
        event.thread_id,
        ts=event.ts,
        status="error",
        name=event.kind,
        checkpoint_ns=event.checkpoint_ns,
        checkpoint_id=event.checkpoint_id,
        run_id=event.run_id,
        parent_run_id=event.parent_run_id,
        root_run_id=event.root_run_id,
        node=event.node,
        step=event.step,
        task_id=event.task_id,
        payload={
            "kind": event.kind,
            "event_id": event.event_id,
            "processor": where,
            "error_type": type(exc).__name__,
            "error": None if isinstance(failed, Redact) else str(exc)[:500],
        },
    )
    for proc in processors:
        if proc is failed:
            continue
        try:
            out = proc(out)
        except Exception:  # the message itself cannot pass (the redactor fails on it)
            out = out.replace(payload={**out.payload, "error": None})
    return out


def run_all(
    event: Event,
    processors: Sequence[Processor],
    *,
    strict: bool = False,
    failed: Callable[[Event, Exception], None] | None = None,
) -> Event:
    """``event`` through ``processors`` in order.

    An event the processors cannot turn into a record (a redactor or processor of the
    app's that raises, a value nothing can encode) is not dropped in silence: its place
    in the thread's chain is taken by a ``record_failed`` event (:func:`failed_record`),
    and ``failed`` hears of it (``health()`` counts it; ``lgx verify`` fails the thread).
    ``strict``: raise instead.

    Example:
        >>> def broken(e): raise ValueError("no")
        >>> run_all(Event.new("tool_end", "t"), [broken]).kind
        'record_failed'
    """
    original = event
    for proc in processors:
        try:
            event = proc(event)
        except Exception as exc:
            if strict:
                raise
            if failed is not None:
                failed(original, exc)
            return failed_record(original, proc, exc, processors)
    return event
