"""A thread's readable state at one checkpoint, read from the workspace.

The logic behind ``lgx state`` (and the states ``lgx diff`` compares): each channel's
value is the rendering recorded with the checkpoint that stored it, redacted like
``state.json``. Reading a state needs LangGraph (its serializer decodes large values) and
langchain-core (rendering); they are imported when a state is read, so the commands that
only list threads or events start without them.

Example:
    >>> try:
    ...     read_state(Workspace("memory://lgx-states-doc"), "no-such-thread")
    ... except NotFoundError as exc:
    ...     print(exc)
    thread 'no-such-thread' has no checkpoints in the workspace memory://lgx-states-doc
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph_external.read.errors import AmbiguousCheckpointError, NotFoundError
from langgraph_external.record.keys import load_key
from langgraph_external.record.redaction import as_redactor, redact_at
from langgraph_external.workspace.checkpoint_log import CheckpointLog
from langgraph_external.workspace.files import Workspace

__all__ = [
    "INTERNAL_CHANNEL_PREFIXES",
    "StateView",
    "is_internal_channel",
    "read_state",
]


INTERNAL_CHANNEL_PREFIXES = ("__", "branch:")
"""LangGraph's own channels (``__start__``, ``__pregel_tasks``, ``branch:...``): never
rendered readable."""


def is_internal_channel(channel: str) -> bool:
    """Whether ``channel`` is one of LangGraph's own (see :data:`INTERNAL_CHANNEL_PREFIXES`).

    Example:
        >>> is_internal_channel("branch:to:agent"), is_internal_channel("messages")
        (True, False)
    """
    return channel.startswith(INTERNAL_CHANNEL_PREFIXES)


@dataclass
class StateView:
    """The readable state of a thread at one checkpoint, from the workspace.

    Values are the workspace's readable renderings (redacted like ``state.json``), not
    the exact bytes.

    Attributes:
        thread_id: the thread.
        checkpoint_ns: the namespace (``""`` for the root graph).
        checkpoint_id: the checkpoint.
        parent_checkpoint_id: its parent, if any.
        step: the step that produced it (``-1`` for the input).
        source: ``input``, ``loop``, ``update`` or ``fork``.
        ts: the checkpoint's own timestamp.
        nodes: the nodes whose writes produced it.
        latest: it is the newest checkpoint of the namespace.
        values: channel -> readable value (``None`` for an empty channel).
        pending_writes: writes recorded against it (by tasks of the next step).
        path: the checkpoint log it was read from, relative to the workspace root.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    step: int | None
    source: str | None
    ts: str | None
    nodes: list[str]
    latest: bool
    values: dict[str, Any]
    pending_writes: list[dict[str, Any]] = field(default_factory=list)
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def _resolve_checkpoint(log: CheckpointLog, wanted: str) -> str:
    if wanted in log.docs:
        return wanted
    found = [cid for cid in log.docs if cid.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    where = f"thread {log.thread_id!r}" + (
        f" (namespace {log.checkpoint_ns!r})" if log.checkpoint_ns else ""
    )
    if not found:
        raise NotFoundError(f"checkpoint {wanted!r} is not in the workspace for {where}")
    raise AmbiguousCheckpointError(
        f"checkpoint prefix {wanted!r} matches {len(found)} checkpoints of {where}; "
        "give more characters"
    )


def _renderings(log: CheckpointLog) -> dict[tuple[str, str], Any]:
    """(channel, sha256) -> readable value, from every checkpoint line's ``updates``."""
    known: dict[tuple[str, str], Any] = {}
    for doc in log.docs.values():
        channels: Mapping[str, Any] = doc.get("channels") or {}
        for ch, value in (doc.get("updates") or {}).items():
            sha = (channels.get(ch) or {}).get("sha256")
            if sha and not (isinstance(value, dict) and "$large" in value):
                known[(ch, sha)] = value
    return known


def _rendered_blob(ws: Workspace, thread_id: str, channel: str, ref: Mapping[str, Any]) -> Any:
    """A large value the checkpoint log does not render (``$large``), decoded from its
    blob file and redacted like ``state.json`` (under its channel's name); ``None`` when
    it cannot be (encrypted)."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # lazy: see read_state

    from langgraph_external.record.render import to_readable  # lazy: imports langchain-core

    path = ws.blob_path(thread_id, ref["sha256"])
    if ref.get("inline") or not ws.exists(path):
        return None
    try:
        data = ws.read_bytes(path)
        if ref.get("enc"):  # sealed with the deployment key: open it if this machine has it
            data = load_key(create=False).decrypt(data, ref["sha256"].encode())
        value = JsonPlusSerializer().loads_typed((ref.get("type") or "", data))
    except Exception:  # no key here, or bytes this version cannot decode
        return None
    redact = as_redactor("standard")
    assert redact is not None
    return redact_at(redact, [channel], to_readable(value))[0]


def read_state(
    ws: Workspace,
    thread_id: str,
    checkpoint_id: str | None = None,
    *,
    checkpoint_ns: str = "",
) -> StateView:
    """The readable state of ``thread_id`` at ``checkpoint_id`` (default: the latest).

    Read from the workspace's checkpoint log (``checkpoints/<ns>.jsonl``): each channel's
    value is the rendering recorded with the checkpoint that stored it. For the latest
    root checkpoint ``state.json`` is used, so a pruned history loses nothing.

    Args:
        ws: the workspace.
        thread_id: the thread.
        checkpoint_id: a checkpoint id, or an unambiguous prefix of one.
        checkpoint_ns: the namespace of a subgraph (``""``: the root graph).

    Raises:
        NotFoundError: the thread or the checkpoint is not in the workspace.
        AmbiguousCheckpointError: the prefix matches several checkpoints.
    """
    log = CheckpointLog(ws, thread_id, checkpoint_ns)
    if not log.docs:
        raise NotFoundError(
            f"thread {thread_id!r} has no checkpoints in the workspace {ws.location}"
            + (f" (namespace {checkpoint_ns!r})" if checkpoint_ns else "")
        )
    newest = next(reversed(log.docs))
    cid = newest if checkpoint_id is None else _resolve_checkpoint(log, checkpoint_id)
    doc = log.doc(cid)

    state_json = _state_json(ws, thread_id, checkpoint_ns, cid)
    if isinstance(state_json.get("values"), dict):
        values = dict(state_json["values"])
    else:
        values = _channel_values(ws, thread_id, log, doc)

    writes = [
        {k: w.get(k) for k in ("node", "task_id", "channel", "value")}
        for w in log.pending_writes(cid)
    ]
    skel = doc.get("checkpoint") or {}
    return StateView(
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=cid,
        parent_checkpoint_id=doc.get("parent_checkpoint_id"),
        step=doc.get("step"),
        source=doc.get("source"),
        ts=skel.get("ts"),
        nodes=[str(w["node"]) for w in doc.get("writers") or [] if w.get("node")],
        latest=cid == newest,
        values=values,
        pending_writes=writes,
        path=ws.relative(ws.checkpoint_log_path(thread_id, checkpoint_ns)),
    )


def _state_json(
    ws: Workspace, thread_id: str, checkpoint_ns: str, checkpoint_id: str
) -> Mapping[str, Any]:
    """The thread's ``state.json`` when it is the state at ``checkpoint_id`` (a root
    checkpoint), else ``{}``."""
    state_path = f"{ws.thread_dir(thread_id)}/state.json"
    if checkpoint_ns != "" or not ws.exists(state_path):
        return {}
    try:
        loaded = ws.read_json(state_path)
    except (OSError, ValueError):
        loaded = None
    if isinstance(loaded, dict) and loaded.get("checkpoint_id") == checkpoint_id:
        return loaded
    return {}


def _channel_values(
    ws: Workspace, thread_id: str, log: CheckpointLog, doc: Mapping[str, Any]
) -> dict[str, Any]:
    """Each channel's readable value at the checkpoint ``doc``: the rendering recorded
    with the checkpoint that stored it, else its blob's (``$unmirrored``, ``$unrendered``:
    neither is there)."""
    known = _renderings(log)
    values: dict[str, Any] = {}
    for ch, ref in (doc.get("channels") or {}).items():
        if is_internal_channel(ch):
            continue
        sha = ref.get("sha256")
        if sha is None:
            values[ch] = None if ref.get("type") == "empty" else {"$unmirrored": ref.get("version")}
        elif (ch, sha) in known:
            values[ch] = known[(ch, sha)]
        else:
            rendered = _rendered_blob(ws, thread_id, ch, ref)
            values[ch] = {"$unrendered": sha} if rendered is None else rendered
    return values
