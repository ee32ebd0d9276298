"""The event envelope: one immutable, versioned record of something the app did.

Sources (the checkpointer, later the callback handler, the guard, the memory adapter)
build :class:`Event` objects; processors fill in redaction counts, artifact references,
``seq`` and the ``prev``/``hash`` chain; sinks persist them.

Example:
    >>> e = Event.new("checkpoint", "thread-1", payload={"step": 0})
    >>> e.kind, e.thread_id, e.seq is None
    ('checkpoint', 'thread-1', True)
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import operator
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any

import orjson

from langgraph_external.record.escapes import is_utf8, mark_keys, mark_text, needs_escape

SCHEMA_VERSION = 1
"""Version of the envelope layout; stored with every event as ``v``."""


class EventKind(str, Enum):
    """Names of the event kinds. Stable: they are stored and queried."""

    RUN_START = "run_start"
    RUN_END = "run_end"
    NODE_START = "node_start"
    NODE_END = "node_end"
    ROUTE = "route"
    CHECKPOINT = "checkpoint"
    WRITES = "writes"
    TOOL_START = "tool_start"
    TOOL_END = "tool_end"
    TOOL_ERROR = "tool_error"
    LLM_START = "llm_start"
    LLM_END = "llm_end"
    RETRIEVAL = "retrieval"
    MEMORY_SEARCH = "memory_search"
    MEMORY_GET = "memory_get"
    MEMORY_PUT = "memory_put"
    MEMORY_ADD = "memory_add"
    MEMORY_UPDATE = "memory_update"
    MEMORY_DELETE = "memory_delete"
    MEMORY_ERASE = "memory_erase"
    INTERRUPT = "interrupt"
    RESUME = "resume"
    POLICY_VIOLATION = "policy_violation"
    THREAD_DELETED = "thread_deleted"
    THREAD_COPIED = "thread_copied"
    RUNS_DELETED = "runs_deleted"
    THREAD_PRUNED = "thread_pruned"
    THREAD_RESTORED = "thread_restored"
    THREAD_IMPORTED = "thread_imported"
    ERROR = "error"
    RECORD_FAILED = "record_failed"
    RECORD_FAILURE_RESOLVED = "record_failure_resolved"


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_id() -> str:
    """A random UUID4 string drawn from ``os.urandom``.

    Not ``uuid.uuid4()``: LangGraph's own tests (and users' tests) patch it with a
    sequential generator and assert exact ids; recording must not shift them.

    Example:
        >>> len(new_id()), new_id()[14]
        (36, '4')
    """
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True, slots=True)
class Event:
    """One record in a thread's timeline.

    ``seq``, ``prev`` and ``hash`` are ``None`` until the sequencing processor has run.
    ``attachments`` maps workspace-relative paths (named by sha256) to exact bytes; they
    are referenced from ``payload`` and so covered by the hash. ``detail`` carries bulky
    data only the workspace needs (a checkpoint's full skeleton and inline bytes).
    ``build`` lets a source defer the costly part of building an event to the
    background writer: the pipeline calls it before any processor. ``line`` is the
    canonical JSON of the sequenced envelope, computed once while hashing.
    """

    kind: str
    thread_id: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    ts: datetime = field(default_factory=_utcnow)
    event_id: str = field(default_factory=new_id)
    name: str | None = None
    status: str | None = None
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None
    run_id: str | None = None
    parent_run_id: str | None = None
    root_run_id: str | None = None
    node: str | None = None
    step: int | None = None
    task_id: str | None = None
    duration_ms: float | None = None
    raw: bytes | None = None
    artifact: str | None = None
    redactions: int = 0
    seq: int | None = None
    prev: str | None = None
    hash: str | None = None
    v: int = SCHEMA_VERSION
    attachments: Mapping[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    detail: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    build: Callable[[Event], Event] | None = field(default=None, compare=False, repr=False)
    line: str | None = field(default=None, compare=False, repr=False)

    @classmethod
    def new(cls, kind: str | EventKind, thread_id: str, **fields: Any) -> Event:
        """Build an unsequenced event.

        Example:
            >>> Event.new(EventKind.ERROR, "t", status="error").kind
            'error'
        """
        k = kind.value if isinstance(kind, EventKind) else kind
        return cls(kind=k, thread_id=thread_id, **fields)

    def replace(self, **changes: Any) -> Event:
        """Return a copy with ``changes`` applied (events are immutable).

        Example:
            >>> Event.new("error", "t").replace(seq=3).seq
            3
        """
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise TypeError(f"Event has no field {sorted(unknown)[0]!r}")
        # a copy of the slots through their descriptors, not dataclasses.replace: events
        # are copied on every hop of the pipeline, and __init__ with its defaults (and the
        # frozen __setattr__) is most of that cost
        new = object.__new__(Event)
        _copy_slots(self, new)
        for name, value in changes.items():
            _SLOT_OF[name].__set__(new, value)
        return new

    def payload_json(self) -> str:
        """The payload as compact JSON text (what the ledger's ``jsonb`` column gets)."""
        try:
            return orjson.dumps(self.payload).decode()
        except (TypeError, orjson.JSONEncodeError):
            return json.dumps(self.payload, ensure_ascii=False, separators=(",", ":"), default=str)

    def envelope(self) -> dict[str, Any]:
        """The JSON form stored in ``events.jsonl`` (everything but attachments; its keys
        are :data:`ENVELOPE_KEYS`)."""
        env = dict(zip(ENVELOPE_KEYS, _ENVELOPE_OF(self), strict=True))
        env["ts"] = self.ts.isoformat()
        if self.raw is not None:
            env["raw"] = base64.b64encode(self.raw).decode()
        return env

    @classmethod
    def from_envelope(cls, data: Mapping[str, Any], *, line: str | None = None) -> Event:
        """Rebuild an event from its stored JSON form (inverse of :meth:`envelope`).

        ``line``: its canonical line, when the caller has it (:func:`hashed_line`).
        """
        raw = data.get("raw")
        fields: dict[str, Any] = {k: data.get(k) for k in ENVELOPE_KEYS}
        fields.update(
            v=int(data.get("v", SCHEMA_VERSION)),
            ts=datetime.fromisoformat(data["ts"]),
            event_id=data["event_id"],
            kind=data["kind"],
            thread_id=data["thread_id"],
            checkpoint_ns=data.get("checkpoint_ns") or "",
            payload=data.get("payload") or {},
            raw=base64.b64decode(raw) if raw is not None else None,
            redactions=int(data.get("redactions") or 0),
        )
        return cls(**fields, line=line)


ENVELOPE_KEYS = (
    "v",
    "seq",
    "ts",
    "event_id",
    "kind",
    "name",
    "status",
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "run_id",
    "parent_run_id",
    "root_run_id",
    "node",
    "step",
    "task_id",
    "duration_ms",
    "payload",
    "raw",
    "artifact",
    "redactions",
    "prev",
    "hash",
)
"""The keys of :meth:`Event.envelope`, in its order (that of ``events.jsonl`` and of the
ledger's envelope columns).

Example:
    >>> tuple(Event.new("error", "t").envelope()) == ENVELOPE_KEYS
    True
"""

_ENVELOPE_OF = operator.attrgetter(*ENVELOPE_KEYS)

TEXT_FIELDS = (
    "kind",
    "name",
    "status",
    "checkpoint_ns",
    "checkpoint_id",
    "run_id",
    "parent_run_id",
    "root_run_id",
    "node",
    "task_id",
)
"""The text columns of an event besides its thread and id (their text must be storable)."""

_FIELD_NAMES_ORDERED = tuple(f.name for f in dataclasses.fields(Event))
_FIELD_NAMES = frozenset(_FIELD_NAMES_ORDERED)
_SLOT_OF: dict[str, Any] = {name: Event.__dict__[name] for name in _FIELD_NAMES_ORDERED}
_SLOTS = tuple(_SLOT_OF.values())


def _slot_copier() -> Callable[[Event, Event], None]:
    """``copy(src, dst)``: every field of ``src`` set on ``dst``, one straight line per
    slot (as :mod:`dataclasses` writes ``__init__``): half the cost of a loop over the
    slots, and :meth:`Event.replace` runs several times per event."""
    setters = "".join(f"    s{i} = slots[{i}].__set__\n" for i in range(len(_SLOTS)))
    body = "".join(
        f"        s{i}(dst, src.{name})\n" for i, name in enumerate(_FIELD_NAMES_ORDERED)
    )
    code = f"def make(slots):\n{setters}    def copy(src, dst):\n{body}    return copy\n"
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # generated from the dataclass's own field names
    copier: Callable[[Event, Event], None] = namespace["make"](_SLOTS)
    return copier


_copy_slots = _slot_copier()


def json_safe(value: Any) -> Any:
    """Normalize a payload so it survives a round-trip through PostgreSQL ``jsonb`` unchanged.

    The hash is computed over this form, so the ledger's copy verifies just like the
    workspace's: integral floats become ints (``jsonb`` prints ``1e20`` back as an integer),
    ``-0.0`` becomes ``0``, NaN/Infinity become strings (not JSON), a string PostgreSQL
    or UTF-8 cannot hold (a NUL, a lone surrogate) becomes a marked value that escapes it
    reversibly (:mod:`~langgraph_external.record.escapes`), keys become strings, tuples
    become lists and anything else its ``str``. Applying it twice changes nothing.

    Example:
        >>> json_safe({"a": 1e20, "b": -0.0, "c": float("nan"), 1: (2.5,)})
        {'a': 100000000000000000000, 'b': 0, 'c': 'NaN', '1': [2.5]}
    """
    t = type(value)
    if t is str:
        return mark_text(value) if needs_escape(value) else value
    if t is int or t is bool or value is None:
        return value
    if t is dict:
        out = {}
        marked_keys = False
        for k, v in value.items():
            tv = type(v)
            if not (
                (tv is str and v.isascii() and "\x00" not in v)
                or tv is int
                or tv is bool
                or v is None
            ):
                v = json_safe(v)
            if type(k) is not str or not k.isascii() or "\x00" in k:
                k = str.__str__(k) if isinstance(k, str) else str(k)
                marked_keys = marked_keys or needs_escape(k)
            out[k] = v
        return mark_keys(out) if marked_keys else out
    if t is list or t is tuple:
        return [json_safe(v) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        return int(value) if value.is_integer() else value
    if isinstance(value, int):  # a subclass (an IntEnum); bool is handled above
        return int(value)
    if isinstance(value, str):
        return json_safe(str.__str__(value))
    if isinstance(value, Mapping):
        return json_safe(dict(value))
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return json_safe(str(value))


def safe_text(value: str | None) -> str | None:
    r"""Text PostgreSQL and UTF-8 can hold, for optional column values (node names,
    statuses, ids): NUL made visible, lone surrogates escaped.

    Example:
        >>> safe_text("a\x00b"), safe_text("\udc80x"), safe_text(None)
        ('a\\u0000b', '\\udc80x', None)
    """
    if value is None:
        return None
    if "\x00" in value:
        value = value.replace("\x00", "\\u0000")
    if not (value.isascii() or is_utf8(value)):
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def canonical_json(obj: Any) -> str:
    """Deterministic JSON text: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


NATIVE_V = 2
"""The envelope version the sealer stamps: hashed with the native encoder (orjson).

Version 1 envelopes (sealed before 2026-12-06) were hashed with the standard library's
:func:`canonical_json`; both texts are sorted-key, whitespace-free JSON of the same
normalized values and differ only where the encoders spell a number or an escape
differently (``1e-07`` / ``1e-7``). :func:`envelope_json` picks the encoder by the
envelope's ``v``, so every record verifies as it was sealed. Only the sealer (the
:class:`~langgraph_external.record.processors.Sequencer`) stamps it: an app of this version
capturing for an older ``lgx worker`` still gets version-1 events.
"""


def envelope_json(obj: Any, v: int | None) -> str:
    """The canonical text of (part of) an envelope of version ``v``.

    Version 2 and later: orjson, sorted keys — or, for a value it refuses (an integer
    past 64 bits, a lone surrogate, a non-string key), the version-1 text, which depends
    on the value alone, so a round trip through the ledger gives the same text.

    Example:
        >>> envelope_json({"b": 1e-7, "a": "é"}, 1), envelope_json({"b": 1e-7, "a": "é"}, 2)
        ('{"a":"é","b":1e-07}', '{"a":"é","b":1e-7}')
    """
    if (v or 1) >= NATIVE_V:
        try:
            return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()
        except (TypeError, orjson.JSONEncodeError):
            pass
    return canonical_json(obj)


def compute_hash(envelope: Mapping[str, Any]) -> str:
    """sha256 of the canonical envelope without its own ``hash`` field.

    Example:
        >>> env = Event.new("error", "t").replace(seq=1).envelope()
        >>> len(compute_hash(env))
        64
    """
    body = {k: v for k, v in envelope.items() if k != "hash"}
    return hashlib.sha256(envelope_json(body, envelope.get("v")).encode()).hexdigest()


def hashed_line(envelope: Mapping[str, Any]) -> tuple[str, str]:
    """``(canonical_json(envelope), compute_hash(envelope))``, serializing the envelope once.

    Sorted keys put ``hash`` between the same neighbours in both texts, so the members
    before and after it are serialized once and shared (checking a long ``events.jsonl``
    and storing its lines costs one serialization per event, not two).

    Example:
        >>> env = Event.new("error", "t").replace(seq=1, hash="h").envelope()
        >>> hashed_line(env) == (envelope_json(env, env["v"]), compute_hash(env))
        True
    """
    v = envelope.get("v")
    head = envelope_json({k: x for k, x in envelope.items() if k < "hash"}, v)[1:-1]
    tail = envelope_json({k: x for k, x in envelope.items() if k > "hash"}, v)[1:-1]
    own = f'"hash":{envelope_json(envelope["hash"], v)}' if "hash" in envelope else ""
    body = "{" + ",".join(p for p in (head, tail) if p) + "}"
    line = "{" + ",".join(p for p in (head, own, tail) if p) + "}"
    return line, hashlib.sha256(body.encode()).hexdigest()


def canonical_line(event: Event) -> str:
    """The ``events.jsonl`` line of a sequenced event: its canonical envelope.

    Example:
        >>> e = Event.new("error", "t").replace(seq=1, hash="h")
        >>> json.loads(canonical_line(e))["hash"]
        'h'
    """
    return envelope_json(event.envelope(), event.v)


def verify_chain(envelopes: list[Mapping[str, Any]]) -> None:
    """Check that ``envelopes`` (one thread, in order) form a valid gap-free hash chain.

    Raises:
        ValueError: naming the first ``seq`` at which the chain breaks.
    """
    prev: str | None = None
    expected = None
    for env in envelopes:
        seq = env["seq"]
        if expected is not None and seq != expected:
            raise ValueError(f"gap in sequence: expected seq {expected}, found {seq}")
        if expected is not None and env["prev"] != prev:
            raise ValueError(f"seq {seq}: prev does not match the hash of seq {seq - 1}")
        if compute_hash(env) != env["hash"]:
            raise ValueError(f"seq {seq}: hash does not match the event's content")
        prev = env["hash"]
        expected = seq + 1
