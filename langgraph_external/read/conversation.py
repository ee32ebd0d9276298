"""The conversation of the thread view: every message the runs and nodes added to the
thread, in order, with the tool calls and their results, and the violations,
interrupts and resumes between them.

Example:
    >>> c = Conversation()
    >>> c.say({"id": "1", "role": "ai", "content": "",
    ...        "tool_calls": [{"id": "c1", "name": "lookup", "args": {}}]}, {"seq": 3}, "agent")
    >>> c.say({"id": "2", "role": "tool", "content": "found", "tool_call_id": "c1"},
    ...       {"seq": 5}, "tools")
    >>> c.say({"id": "1", "role": "ai", "content": ""}, {"seq": 6}, "input")  # once
    >>> c.link_tool_results()
    >>> len(c.entries), c.entries[0]["tool_calls"][0]["result"]["content"]
    (2, 'found')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Conversation"]


class Conversation:
    """The thread's messages and the events a reader sees between them."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.message_at: dict[str, int] = {}

    def say(self, m: Mapping[str, Any], env: Mapping[str, Any], source: str) -> None:
        """Message ``m``, added by the event ``env`` (``source``: the node, or ``input``);
        a message already said (by id, e.g. in a later run's input) is not said again."""
        mid = m.get("id")
        if m.get("role") == "remove" or (mid and mid in self.message_at):
            return  # removed, or the same message again (a run's input): once
        entry = {
            "role": str(m.get("role")),
            "content": m.get("content"),
            "name": m.get("name"),
            "tool_calls": m.get("tool_calls") or [],
            "tool_call_id": m.get("tool_call_id"),
            "status": m.get("status"),
            "id": m.get("id"),
            "seq": env.get("seq"),
            "source": source,
            "step": env.get("step"),
        }
        if mid:
            self.message_at[str(mid)] = len(self.entries)
        self.entries.append(entry)

    def event(self, kind: str, label: str, env: Mapping[str, Any], row: Mapping[str, Any]) -> None:
        """A violation, interrupt or resume between the messages (its row in the run tree)."""
        self.entries.append(
            {
                "role": "event",
                "kind": kind,
                "label": label,
                "seq": env.get("seq"),
                "row": row["id"],
                "status": row["status"],
            }
        )

    def link_tool_results(self) -> None:
        """Put each tool result next to the call that asked for it."""
        results = {m["tool_call_id"]: m for m in self.entries if m.get("role") == "tool"}
        for m in self.entries:
            for call in m.get("tool_calls") or ():
                res = results.get(call.get("id"))
                if res is not None:
                    call["result"] = res
                    res["answers"] = call.get("name")
