"""Compare two recorded runs: the nodes they took, what their models were asked and
answered, the tools they called, and the state they reached.

The logic behind ``lgx diff`` and the report of :func:`langgraph_external.replay.replay`,
usable from Python (a compare view calls the same functions). A side is a thread (its
latest state), a checkpoint of a thread (the state there, the path and calls up to it) or
one run (one ``invoke``: the path it took, its calls, the state it left). Paths come from
the ledger's checkpoint index (which nodes wrote each checkpoint, per namespace); model
and tool calls from the ledger's ``llm_start``/``llm_end`` and ``tool_*`` events (the
recorded, redacted renderings); states are the readable renderings of the workspace (what
``lgx state`` shows).

This module loads and compares sides; each aspect has its own module, and every name
below is importable from here:

* :func:`parse_side` / :func:`load_side`: what is compared, and its path, calls and state;
* :func:`diff_sides`: everything at once, a :class:`Diff` (``.same``, ``.lines()``,
  ``.to_dict()``);
* :func:`diff_paths` (:mod:`~langgraph_external.read.path_diff`), :func:`diff_calls`
  (:mod:`~langgraph_external.read.call_diff`), :func:`diff_values`, :func:`diff_messages`
  (:mod:`~langgraph_external.read.state_diff`): one aspect each, on plain data;
* :func:`load_calls` (:mod:`~langgraph_external.read.calls`): the model and tool calls of
  a thread (or a range of its events);
* :func:`message_lines` / :func:`prompt_lines` / :func:`unified_prompt_diff`
  (:mod:`~langgraph_external.read.diff_text`): a prompt as text lines and the unified diff
  of two prompts (what ``lgx diff`` and ``lgx replay`` print for the first prompt that
  differs).

States are compared channel by channel; a list of messages is compared message by
message — added, removed, changed (role, content, tool calls, name, tool_call_id) — with
message ids left out, since LangGraph draws them at random for messages without one.
Model calls are paired in run order by where they ran (namespace and node); a pair
differs when the prompt (messages without ids, tool names, model parameters) or the answer
(content and tool calls, without ids) differs. Tool calls are paired the same way by
node and tool name; a pair differs in its arguments or its result.

Example:
    >>> d = diff_values(
    ...     {"messages": [{"role": "user", "content": "hi"}], "n": 1},
    ...     {"messages": [{"role": "user", "content": "hi"},
    ...                   {"role": "assistant", "content": "hello"}], "n": 2},
    ... )
    >>> [c.channel for c in d.changed], len(d.changed[0].messages.added)
    (['messages', 'n'], 1)
    >>> for line in unified_prompt_diff(
    ...     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    ...     [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}],
    ...     "a", "b"):
    ...     print(line)
    --- a
    +++ b
    @@ -1,4 +1,4 @@
     [0] system
    -Be brief.
    +Be kind.
     [1] user
     hi
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from langgraph_external.errors import ConfigurationError
from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.queries import SELECT_CALLS, SELECT_PATH, SELECT_RUN
from langgraph_external.read.call_diff import CallChange, CallsDiff, diff_calls
from langgraph_external.read.calls import ModelCall, ToolCall, load_calls
from langgraph_external.read.diff_text import (
    message_lines,
    prompt_lines,
    render_calls,
    render_path,
    render_state,
    unified_prompt_diff,
)
from langgraph_external.read.errors import NotFoundError
from langgraph_external.read.path_diff import (
    PathDiff,
    PathEntry,
    diff_paths,
    load_path,
)
from langgraph_external.read.state_diff import (
    ChannelChange,
    MessagesDiff,
    StateDiff,
    diff_messages,
    diff_values,
)
from langgraph_external.read.states import read_state
from langgraph_external.workspace.files import Workspace

__all__ = [
    "SELECT_CALLS",
    "SELECT_PATH",
    "SELECT_RUN",
    "CallChange",
    "CallsDiff",
    "ChannelChange",
    "Diff",
    "LoadedSide",
    "MessagesDiff",
    "ModelCall",
    "NotFoundError",
    "PathDiff",
    "PathEntry",
    "Side",
    "StateDiff",
    "ToolCall",
    "diff_calls",
    "diff_messages",
    "diff_paths",
    "diff_sides",
    "diff_values",
    "load_calls",
    "load_path",
    "load_side",
    "message_lines",
    "parse_side",
    "prompt_lines",
    "render_calls",
    "render_path",
    "render_state",
    "unified_prompt_diff",
]


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a thread, a checkpoint of it, or a run.

    Parse one with :func:`parse_side`: ``THREAD``, ``THREAD@CHECKPOINT`` (an id or a
    unique prefix) or ``run:RUN_ID`` (the ``run_id`` of a ``run_start`` event).
    """

    thread_id: str | None = None
    checkpoint_id: str | None = None
    run_id: str | None = None

    def __str__(self) -> str:
        if self.run_id:
            return f"run:{self.run_id}"
        return f"{self.thread_id}" + (f"@{self.checkpoint_id}" if self.checkpoint_id else "")


def parse_side(text: str, checkpoint_id: str | None = None) -> Side:
    """``THREAD``, ``THREAD@CHECKPOINT`` or ``run:RUN_ID`` (``checkpoint_id`` overrides).

    Example:
        >>> parse_side("thread-42@1f1e")
        Side(thread_id='thread-42', checkpoint_id='1f1e', run_id=None)
        >>> parse_side("run:0199").run_id
        '0199'
    """
    if not text:
        raise ConfigurationError("an empty thread id cannot be compared")
    if text.startswith("run:"):
        if checkpoint_id:
            raise ConfigurationError("a run is compared as a whole; drop --checkpoint")
        return Side(run_id=text[4:])
    thread, _, cp = text.rpartition("@") if "@" in text else (text, "", "")
    return Side(thread_id=thread, checkpoint_id=checkpoint_id or cp or None)


@dataclass
class LoadedSide:
    """A side with its path, model and tool calls, and readable state.

    Attributes:
        side: what was asked for.
        thread_id, checkpoint_id: the thread, and the root checkpoint whose state is used.
        path: the checkpoints of the side, in record order.
        values: the readable state at ``checkpoint_id``.
        model_calls, tool_calls: the calls of the side, in run order.
        after_seq, upto_seq: the range of the thread's events the side covers.
    """

    side: Side
    thread_id: str
    checkpoint_id: str | None
    path: list[PathEntry]
    values: dict[str, Any]
    model_calls: list[ModelCall] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    after_seq: int = 0
    upto_seq: int | None = None


def load_side(
    conn: psycopg.Connection[Any],
    ws: Workspace,
    side: Side,
    schema: str = ledger.DEFAULT_SCHEMA,
) -> LoadedSide:
    """The path and calls (from the ledger) and readable state (from the workspace) of
    ``side``.

    Example:
        >>> with ledger.connect(dsn) as conn:                              # doctest: +SKIP
        ...     side = load_side(conn, Workspace("./ws"), parse_side("thread-42"))
        >>> side.path[-1].label, len(side.model_calls)                     # doctest: +SKIP
        ('agent@5', 3)

    Raises:
        NotFoundError: the thread, checkpoint or run is not recorded.
        AmbiguousCheckpointError: a checkpoint prefix matches several checkpoints.
    """
    thread = side.thread_id
    lo, hi = 0, None
    if side.run_id is not None:
        rows = conn.execute(ledger.q(SELECT_RUN, schema), (side.run_id,)).fetchall()
        if not rows:
            raise NotFoundError(f"run {side.run_id!r} is not in the ledger")
        thread = rows[0][0]
        seqs = {kind: seq for _, kind, seq in rows}
        lo, hi = seqs.get("run_start", 0), seqs.get("run_end")
    assert thread is not None
    entries = load_path(conn, thread, schema)
    if not entries:
        raise NotFoundError(f"thread {thread!r} has no checkpoints in the ledger")
    checkpoint_id = side.checkpoint_id
    if checkpoint_id is not None:
        checkpoint_id = read_state(ws, thread, checkpoint_id).checkpoint_id
        hi = next((s for s, e in entries if e.checkpoint_id == checkpoint_id and not e.ns), None)
        if hi is None:
            raise NotFoundError(f"checkpoint {checkpoint_id} of {thread!r} is not in the ledger")
    picked = [e for s, e in entries if s > lo and (hi is None or s <= hi)]
    if side.run_id is not None:
        roots = [e for e in picked if e.ns == ""]
        if not roots:
            raise NotFoundError(f"run {side.run_id!r} wrote no checkpoint")
        checkpoint_id = roots[-1].checkpoint_id
    state = read_state(ws, thread, checkpoint_id)
    models, tools = load_calls(conn, ws, thread, schema, after_seq=lo, upto_seq=hi)
    return LoadedSide(
        side,
        thread,
        state.checkpoint_id,
        picked,
        dict(state.values),
        models,
        tools,
        after_seq=lo,
        upto_seq=hi,
    )


@dataclass
class Diff:
    """The comparison of two sides: node path, model and tool calls, state."""

    a: str
    b: str
    a_checkpoint_id: str | None
    b_checkpoint_id: str | None
    path: PathDiff
    state: StateDiff
    calls: CallsDiff = field(default_factory=CallsDiff)

    @property
    def same(self) -> bool:
        """Same path, same calls (asked and answered the same), same state."""
        return self.path.same and self.calls.same and self.state.same

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return {
            "a": self.a,
            "b": self.b,
            "a_checkpoint_id": self.a_checkpoint_id,
            "b_checkpoint_id": self.b_checkpoint_id,
            "same": self.same,
            "path": self.path.to_dict(),
            "calls": self.calls.to_dict(),
            "state": self.state.to_dict(),
        }

    def lines(self) -> list[str]:
        """A readable rendering: the path difference, the calls (with the unified diff of
        the first differing prompt), then the state difference."""
        out = [f"--- {self.a}", f"+++ {self.b}"]
        out += render_path(self.path)
        out += render_calls(self.calls, self.a, self.b)
        out += render_state(self.state)
        if self.same:
            out.append("same path, same model and tool calls, same state")
        return out


def diff_sides(
    conn: psycopg.Connection[Any],
    ws: Workspace,
    a: Side,
    b: Side,
    schema: str = ledger.DEFAULT_SCHEMA,
) -> Diff:
    """Compare two threads, checkpoints or runs (see :class:`Side`): node path, model
    and tool calls, state.

    Example:
        >>> with ledger.connect(dsn) as conn:                              # doctest: +SKIP
        ...     d = diff_sides(conn, Workspace("./ws"), parse_side("t-1"), parse_side("t-2"))
        >>> d.same                                                         # doctest: +SKIP
        True
    """
    la, lb = load_side(conn, ws, a, schema), load_side(conn, ws, b, schema)
    return Diff(
        a=str(a),
        b=str(b),
        a_checkpoint_id=la.checkpoint_id,
        b_checkpoint_id=lb.checkpoint_id,
        path=diff_paths(la.path, lb.path),
        state=diff_values(la.values, lb.values),
        calls=diff_calls(la.model_calls, lb.model_calls, la.tool_calls, lb.tool_calls),
    )
