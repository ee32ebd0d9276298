"""Readable renderings of LangGraph values for the workspace's human-facing files.

Readable views are for people and SQL; the exact bytes live next to them. Messages
become ``{"role", "content", "tool_calls", ...}`` dicts, pydantic models and dataclasses
become dicts, bytes become their size (never a hash of them), NaN and the
infinities become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> to_readable(AIMessage("hi", id="m1"))["role"]
    'assistant'
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage

_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "function",
    "chat": "chat",
    "remove": "remove",
}


def message_to_dict(msg: Any) -> dict[str, Any]:
    """Render one LangChain message as a role/content dict."""
    mtype = getattr(msg, "type", "message")
    role = _ROLES.get(str(mtype).replace("Chunk", "").lower(), str(mtype))
    out: dict[str, Any] = {"role": role, "content": to_readable(msg.content)}
    tool_calls = getattr(msg, "tool_calls", None)
    if tool_calls:
        out["tool_calls"] = [
            {"id": tc.get("id"), "name": tc.get("name"), "args": to_readable(tc.get("args"))}
            for tc in tool_calls
        ]
    for key in ("name", "tool_call_id", "status", "id"):
        val = getattr(msg, key, None)
        if val not in (None, "", "success") or (key == "status" and val == "error"):
            out[key] = val
    return out


def to_readable(value: Any, _depth: int = 0) -> Any:
    """Convert ``value`` into plain JSON data a person can read.

    Never raises: anything unknown is rendered with ``repr``.
    """
    if _depth > 50:
        return "<nested too deep>"
    if isinstance(value, float) and not math.isfinite(value):
        # NaN and the infinities are not JSON: written as the strings json_safe uses
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    d = _depth + 1
    if isinstance(value, BaseMessage):
        return message_to_dict(value)
    if isinstance(value, Mapping):
        return {str(k): to_readable(v, d) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_readable(v, d) for v in items]
    if isinstance(value, (bytes, bytearray, memoryview)):
        # a size only: an unkeyed hash of a value could be brute-forced (docs/security.md)
        return {"$bytes": len(bytes(value))}
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return to_readable(value.value, d)
    if hasattr(value, "model_dump") and callable(value.model_dump):
        try:
            return to_readable(value.model_dump(), d)
        except Exception:
            return repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_readable(getattr(value, f.name), d) for f in dataclasses.fields(value)}
    send_node = getattr(value, "node", None)
    if type(value).__name__ == "Send" and send_node is not None:
        return {"$send": send_node, "arg": to_readable(getattr(value, "arg", None), d)}
    if type(value).__name__ == "Interrupt":
        return {
            "$interrupt": to_readable(getattr(value, "value", None), d),
            "id": getattr(value, "id", None),
        }
    return repr(value)
