"""The node path of a recorded run, and how two paths differ.

A path is the thread's checkpoints in record order, each with the nodes whose writes
produced it, from the ledger's checkpoint index (``checkpoints``: which nodes wrote each
checkpoint, per namespace). Concurrent subgraph tasks interleave their checkpoints
differently from run to run, so paths are compared root entries first, then each
namespace's in order.

Example:
    >>> p = [PathEntry("", 1, ("agent",)), PathEntry("", 2, ("tools",))]
    >>> d = diff_paths(p, p[:1])
    >>> d.same, d.first_difference, d.ops[-1]
    (False, 1, {'op': 'delete', 'a': ['tools@2'], 'b': []})
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

from langgraph_external.ledger import schema as ledger
from langgraph_external.ledger.queries import SELECT_PATH
from langgraph_external.record.namespaces import SEPARATOR, scope_of
from langgraph_external.upstream.langgraph import SEEN_NOT_A_NODE

__all__ = ["PathDiff", "PathEntry", "diff_paths", "load_path"]


@dataclass(frozen=True)
class PathEntry:
    """One checkpoint on a path: its namespace (node names, task ids left out), the step
    and the nodes whose writes produced it (``[]`` for an input checkpoint)."""

    ns: str
    step: int | None
    nodes: tuple[str, ...]
    checkpoint_id: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        """``ns/node,node@step`` (``(input)`` for an input checkpoint)."""
        what = ",".join(self.nodes) or "(input)"
        return f"{self.ns + '/' if self.ns else ''}{what}@{self.step}"


def _canonical(path: Sequence[PathEntry]) -> list[PathEntry]:
    """Root entries in order, then each namespace's in order: concurrent subgraph tasks
    interleave their checkpoints differently from run to run."""
    order: dict[str, int] = {}
    for e in path:
        order.setdefault(e.ns, len(order))
    return sorted(path, key=lambda e: (e.ns != "", order[e.ns]))


@dataclass
class PathDiff:
    """How two node paths differ.

    Attributes:
        same: the paths are equal.
        first_difference: index (in the canonical order) of the first differing entry.
        ops: difflib-style operations (``equal``, ``replace``, ``delete``, ``insert``)
            with the labels of each side.
    """

    same: bool
    first_difference: int | None
    a: list[str]
    b: list[str]
    ops: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def diff_paths(a: Sequence[PathEntry], b: Sequence[PathEntry]) -> PathDiff:
    """Compare two node paths.

    Example:
        >>> p = [PathEntry("", 1, ("agent",)), PathEntry("", 2, ("tools",))]
        >>> diff_paths(p, p[:1]).first_difference
        1
    """
    ca, cb = _canonical(a), _canonical(b)
    la, lb = [e.label for e in ca], [e.label for e in cb]
    codes = difflib.SequenceMatcher(a=la, b=lb, autojunk=False).get_opcodes()
    ops = [{"op": tag, "a": la[i1:i2], "b": lb[j1:j2]} for tag, i1, i2, j1, j2 in codes]
    first = next((i1 for tag, i1, *_ in codes if tag != "equal"), None)
    return PathDiff(same=la == lb, first_difference=first, a=la, b=lb, ops=ops)


def load_path(
    conn: psycopg.Connection[Any], thread_id: str, schema: str = ledger.DEFAULT_SCHEMA
) -> list[tuple[int, PathEntry]]:
    """Every checkpoint of a thread as ``(event seq, PathEntry)``, in record order."""
    rows = conn.execute(ledger.q(SELECT_PATH, schema), (thread_id,)).fetchall()
    return [
        (
            int(seq or 0),
            PathEntry(
                SEPARATOR.join(scope_of(ns)),
                step,
                tuple(sorted(set(nodes or ()) - SEEN_NOT_A_NODE)),
                cid,
            ),
        )
        for ns, cid, step, nodes, _source, seq in rows
    ]
