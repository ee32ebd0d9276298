"""Captures by value: what a saver the record cannot join stored, packed for the sealer.

The official Postgres saver's rows are in the ledger's database, so its capture only
*names* them (:mod:`~langgraph_external.record.capture`). Any other saver (SQLite,
in-memory, yours) keeps its rows where the sealer cannot read them; its capture carries
them *by value* instead: the checkpoint's document (ids, versions, ``versions_seen``),
its metadata and the exact bytes the saver serialized for the changed channels — or a
task's writes — packed with msgpack and, with a deployment key, encrypted
(AES-256-GCM, the capture's event id as associated data) so the ledger never holds
them in clear before they are sealed. The sealer unpacks them into the same
:class:`~langgraph_external.record.checkpoints.CheckpointMaterial` /
:class:`~langgraph_external.record.checkpoints.WritesMaterial` it reads back from the
Postgres saver, and one builder makes the event either way. Nothing is hashed,
rendered or redacted on the app's thread.

Example:
    >>> from langgraph_external.record.checkpoints import WritesMaterial
    >>> m = WritesMaterial(thread_id="t", checkpoint_ns="", checkpoint_id="c1",
    ...                    task_id="k", task_path="~__pregel_pull, a",
    ...                    writes=[(0, "x", "msgpack", b"\\x01")], node="a")
    >>> c = writes_capture(m, None)
    >>> back = material_of(c, None)
    >>> (c.kind, back.node, back.writes)
    ('writes', 'a', [(0, 'x', 'msgpack', b'\\x01')])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ormsgpack

from langgraph_external.record.capture import Capture
from langgraph_external.record.checkpoints import CheckpointMaterial, WritesMaterial
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.escapes import mark_keys, mark_text, needs_escape, unmark
from langgraph_external.record.render import to_readable

__all__ = ["checkpoint_capture", "material_of", "writes_capture"]

_CLEAR = 0  # first byte of ``Capture.material``: packed as is
_SEALED = 1  # encrypted with the deployment key
_BIG_INT = 1  # msgpack extension: an integer beyond 64 bits

_DOC_KEYS = ("v", "id", "ts", "channel_versions", "versions_seen", "updated_channels")


class MaterialError(ValueError):
    """A by-value capture that cannot be read (another key, altered bytes, a newer format)."""


def _default(value: Any) -> Any:
    if isinstance(value, int):
        return ormsgpack.Ext(_BIG_INT, str(value).encode())
    return to_readable(value)  # metadata a user put in: recorded as it reads


def _ext(code: int, data: bytes) -> Any:
    if code == _BIG_INT:
        return int(data)
    raise MaterialError(f"unknown msgpack extension {code}")


def _aad(event_id: str) -> bytes:
    return b"lgx-capture\x1f" + event_id.encode()


def _marked(value: Any) -> Any:
    """``value`` with every text msgpack cannot encode (a lone surrogate) marked, and
    restorable by :func:`~langgraph_external.record.escapes.unmark`; the rest as is."""
    if isinstance(value, str):
        return mark_text(value) if needs_escape(value) else value
    if isinstance(value, Mapping):
        out = {k: _marked(v) for k, v in value.items()}
        return mark_keys(out) if any(isinstance(k, str) and needs_escape(k) for k in out) else out
    if isinstance(value, (list, tuple)):
        return [_marked(v) for v in value]
    return value


def _packb(body: Mapping[str, Any]) -> bytes:
    return ormsgpack.packb(body, default=_default, option=ormsgpack.OPT_PASSTHROUGH_BIG_INT)


def _pack(body: Mapping[str, Any], event_id: str, cipher: WorkspaceCipher | None) -> bytes:
    try:
        data = _packb(body)
    except TypeError:  # text with a lone surrogate (a file name, a user's metadata)
        data = _packb({**_marked(body), "marked": True})
    if cipher is None:
        return bytes((_CLEAR,)) + data
    return bytes((_SEALED,)) + cipher.encrypt(data, _aad(event_id))


def checkpoint_capture(
    m: CheckpointMaterial, cipher: WorkspaceCipher | None, *, partial: bool
) -> Capture:
    """The by-value capture of one stored checkpoint.

    ``partial``: ``m.values`` holds only the changed channels (the parent's references,
    sealed before this capture, name the rest); else every channel's bytes.
    """
    cp = m.checkpoint
    body = {
        "cp": {k: cp.get(k) for k in _DOC_KEYS},
        "meta": m.metadata,
        "values": {ch: None if v is None else [v[0], v[1]] for ch, v in m.values.items()},
        "partial": partial,
        "sends": m.sends,
        "pseen": m.parent_seen,
        "psends": m.parent_sends,
    }
    return Capture(
        "checkpoint",
        m.thread_id,
        m.checkpoint_ns,
        m.checkpoint_id,
        m.parent_id,
        changed=None if m.changed is None else list(m.changed),
        event_id=m.event_id,
        material=_pack(body, m.event_id, cipher),
    )


def writes_capture(m: WritesMaterial, cipher: WorkspaceCipher | None) -> Capture:
    """The by-value capture of one task's stored writes."""
    body = {"writes": [[idx, ch, typ, data] for idx, ch, typ, data in m.writes]}
    return Capture(
        "writes",
        m.thread_id,
        m.checkpoint_ns,
        m.checkpoint_id,
        task_id=m.task_id,
        task_path=m.task_path,
        node=m.node,
        idx=[w[0] for w in m.writes],
        event_id=m.event_id,
        material=_pack(body, m.event_id, cipher),
    )


def _unpack(c: Capture, cipher: WorkspaceCipher | None) -> dict[str, Any]:
    raw = c.material or b""
    if not raw or raw[0] not in (_CLEAR, _SEALED):
        raise MaterialError(f"capture {c.id}: material of an unknown format")
    data = memoryview(raw)[1:]
    if raw[0] == _SEALED:
        if cipher is None:
            raise MaterialError(f"capture {c.id} is encrypted and this sealer has no key")
        try:
            data = memoryview(cipher.decrypt(bytes(data), _aad(c.event_id)))
        except Exception as exc:  # DecryptionError: another deployment key, altered bytes
            raise MaterialError(f"capture {c.id}: {exc}") from exc
    body = ormsgpack.unpackb(data, ext_hook=_ext)
    if not isinstance(body, dict):
        raise MaterialError(f"capture {c.id}: material of an unknown format")
    return unmark(body) if body.pop("marked", False) else body


def _pairs(values: Mapping[str, Any]) -> dict[str, tuple[str, bytes] | None]:
    return {ch: None if v is None else (str(v[0]), bytes(v[1])) for ch, v in values.items()}


def material_of(c: Capture, cipher: WorkspaceCipher | None) -> CheckpointMaterial | WritesMaterial:
    """What the sealer builds ``c``'s event from (``c.material`` unpacked).

    A checkpoint's material has ``partial`` set when it carries only the changed
    channels. Raises :class:`MaterialError` when it cannot be read.
    """
    body = _unpack(c, cipher)
    if c.kind == "writes":
        writes: Sequence[Any] = body.get("writes") or []
        return WritesMaterial(
            thread_id=c.thread_id,
            checkpoint_ns=c.checkpoint_ns,
            checkpoint_id=c.checkpoint_id,
            task_id=str(c.task_id),
            task_path=c.task_path or "",
            writes=[(int(w[0]), str(w[1]), str(w[2]), bytes(w[3])) for w in writes],
            node=c.node,
            event_id=c.event_id,
            ts=c.captured_at,
        )
    return CheckpointMaterial(
        thread_id=c.thread_id,
        checkpoint_ns=c.checkpoint_ns,
        checkpoint_id=str(c.checkpoint_id),
        parent_id=c.parent_id,
        checkpoint=body.get("cp") or {},
        metadata=body.get("meta") or {},
        changed=None if c.changed is None else list(c.changed),
        values=_pairs(body.get("values") or {}),
        parent_seen=body.get("pseen"),
        parent_sends=body.get("psends"),
        sends=body.get("sends"),
        event_id=c.event_id,
        ts=c.captured_at,
        partial=bool(body.get("partial")),
    )
