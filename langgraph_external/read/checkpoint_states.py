"""The state at every checkpoint of a thread, and the change each checkpoint made.

:func:`checkpoint_states` reads the readable state at each checkpoint from the
workspace's checkpoint logs; :func:`state_change` is what one checkpoint changed against
its parent (the thread view shows it under each checkpoint), read through
:class:`~langgraph_external.workspace.checkpoint_log.CheckpointLog`.

Example:
    >>> state_change({"n": 1}, {"n": 2})
    {'channels': [{'channel': 'n', 'before': 1, 'after': 2}], 'unrendered': []}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph_external.errors import RestoreError
from langgraph_external.read.state_diff import diff_messages, is_message
from langgraph_external.read.states import is_internal_channel
from langgraph_external.record.events import canonical_json
from langgraph_external.workspace.checkpoint_log import CheckpointLog

__all__ = ["checkpoint_states", "state_change"]


def state_change(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    written: Mapping[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """What a checkpoint changed: channels added, removed, changed; messages by id.

    Message lists are compared by message id (the way the ``add_messages`` reducer keys
    them), so a long conversation costs one pass; lists without ids fall back to
    :func:`~langgraph_external.read.state_diff.diff_messages`. A value the workspace's log
    holds only by reference (``$large``: too large to render there) is shown by the
    messages the step wrote to it (``written``: channel -> the values written, from the
    log's write lines; the entry says ``written``), else named in ``unrendered``.

    Example:
        >>> ch = state_change(
        ...     {"n": 1, "messages": [{"id": "a", "role": "user", "content": "hi"}]},
        ...     {"n": 2, "messages": [{"id": "a", "role": "user", "content": "hi"},
        ...                           {"id": "b", "role": "assistant", "content": "yo"}]})
        >>> [(c["channel"], len(c.get("added", ())), c.get("after")) for c in ch["channels"]]
        [('messages', 1, None), ('n', 0, 2)]
        >>> state_change({"messages": {"$large": "ab12"}}, {"messages": {"$large": "cd34"}})
        {'channels': [], 'unrendered': ['messages']}
        >>> ch = state_change({}, {"messages": {"$large": "cd34"}},
        ...                   {"messages": [[{"role": "user", "content": "long"}]]})
        >>> [(c["channel"], c["added"], c["written"]) for c in ch["channels"]]
        [('messages', [{'role': 'user', 'content': 'long'}], True)]
    """
    out: list[dict[str, Any]] = []
    unrendered: list[str] = []
    for ch in sorted(set(before) | set(after)):
        a, b = before.get(ch), after.get(ch)
        if a == b:
            continue
        if _large(a) or _large(b):  # too large for the log: its blob is not opened here
            msgs = _written_messages((written or {}).get(ch))
            if msgs:
                out.append(
                    {"channel": ch, "added": msgs, "removed": [], "changed": [], "written": True}
                )
            else:
                unrendered.append(ch)
            continue
        if (_ends_are_messages(a) or _ends_are_messages(b)) and all(
            v in (None, []) or _ends_are_messages(v) for v in (a, b)
        ):
            la, lb = list(a or []), list(b or [])
            if all(is_message(m) and m.get("id") for m in la + lb):
                ids_a = {m["id"]: m for m in la}
                ids_b = {m["id"] for m in lb}
                added = [m for m in lb if m["id"] not in ids_a]
                changed = [
                    {"before": ids_a[m["id"]], "after": m}
                    for m in lb
                    if m["id"] in ids_a and ids_a[m["id"]] != m
                ]
                removed = [m for m in la if m["id"] not in ids_b]
            else:
                md = diff_messages(la, lb)
                added = [x["message"] for x in md.added]
                removed = [x["message"] for x in md.removed]
                changed = [
                    {"before": la[x["index_a"]], "after": lb[x["index_b"]]} for x in md.changed
                ]
            if added or removed or changed:
                out.append({"channel": ch, "added": added, "removed": removed, "changed": changed})
        elif canonical_json(a) != canonical_json(b):
            out.append({"channel": ch, "before": a, "after": b})
    return {"channels": out, "unrendered": unrendered}


def _written_messages(values: Any) -> list[Any]:
    """The messages a step's writes to a channel carry (``[]``: not messages)."""
    msgs: list[Any] = []
    for v in values or ():
        for m in v if isinstance(v, list) else [v]:
            if not is_message(m):
                return []
            msgs.append(m)
    return msgs


def _ends_are_messages(v: Any) -> bool:
    """A list of readable messages, its ends checked (a channel holds one kind of value):
    checking every item would cost a pass over a long conversation per checkpoint."""
    return isinstance(v, list) and bool(v) and is_message(v[0]) and is_message(v[-1])


def _large(v: Any) -> bool:
    return isinstance(v, Mapping) and "$large" in v


def checkpoint_states(
    ws: Any, thread_id: str, namespaces: Iterable[str] = ("",)
) -> dict[tuple[str, str], dict[str, Any]]:
    """Readable state at every checkpoint of a thread, from the workspace's checkpoint logs.

    Each channel's value is the rendering recorded with the checkpoint that changed it
    (what ``lgx state`` shows, redacted like ``state.json``); a value too large to be
    rendered in the log shows as its ``$large`` reference, and what the step wrote to it
    (the log's write lines against the parent checkpoint, rendered and redacted the
    same way) is kept in ``written`` (channel -> values). Returns ``{}`` for a namespace
    the workspace does not hold (or holds torn).

    Args:
        ws: the :class:`~langgraph_external.workspace.files.Workspace`.
        thread_id: the thread.
        namespaces: the checkpoint namespaces to read (the ledger's checkpoint events
            name them).
    """
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for ns in dict.fromkeys(namespaces):
        try:
            log = CheckpointLog(ws, thread_id, ns, cipher=None)
        except (RestoreError, OSError, ValueError):  # torn or unreadable: the ledger's view
            continue
        for cid, doc in log.docs.items():
            parent = str(doc.get("parent_checkpoint_id") or "")
            values = dict(out[(ns, parent)]["values"]) if (ns, parent) in out else {}
            large: dict[str, list[Any]] = {}
            for ch, value in (doc.get("updates") or {}).items():
                if not is_internal_channel(ch):
                    values[ch] = value
                    if _large(value):
                        large[ch] = []
            if large and parent:
                for w in log.pending_writes(parent):
                    if w.get("channel") in large and "value" in w:
                        large[str(w["channel"])].append(w["value"])
            for ch, ref in (doc.get("channels") or {}).items():
                if not is_internal_channel(ch) and (ref or {}).get("type") == "empty":
                    values.pop(ch, None)
            out[(ns, cid)] = {"values": values, "parent": parent or None, "written": large}
    return out
