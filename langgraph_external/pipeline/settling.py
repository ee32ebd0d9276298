"""Projections that defer work (the workspace's ``state.json``): which threads a scan must
visit, and the settle that writes what they deferred.

Optional hooks of a projection target: ``peek(tid)`` (its position, read without holding
the thread: changing nothing), ``resume(tid)`` and ``due()`` (threads whose
settling is pending here), ``overdue()`` (those pending long enough to be settled even
while the runner is busy), ``settle(threads)``, ``revalidate(tid)``, ``settled(tid, pos)``.

Example:
    >>> from langgraph_external.ledger.memory import InMemoryLedger
    >>> class View:
    ...     name = "view"
    ...     def position(self, tid): return 0
    >>> lagging_threads(InMemoryLedger(), View(), recheck=False)
    {}
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langgraph_external.ledger.contract import Projection
from langgraph_external.pipeline.apply import cursor_of
from langgraph_external.pipeline.failures import Failures

logger = logging.getLogger("langgraph_external")

__all__ = ["lagging_threads", "settle_deferred", "settle_projection"]


def lagging_threads(ledger: Any, proj: Projection, recheck: bool) -> dict[str, int]:
    """Threads the ledger says ``proj`` is behind on, with their recorded cursors.

    Of a projection that settles after it applies (it has ``resume``), left out: a thread
    whose files hold the ledger's head and whose settling is pending here (the settle
    records it), and, unless ``recheck``, any thread whose files hold the head (nothing to
    read; its writer may be settling it).
    """
    lag = ledger.lagging(proj.name)
    if getattr(proj, "resume", None) is None:
        return {t: cursor for t, _, cursor in lag}
    due = getattr(proj, "due", None)
    pending = set(due()) if due is not None else set()
    peek = getattr(proj, "peek", None) or proj.position  # not holding the threads
    return {
        t: cursor for t, head, cursor in lag if (recheck and t not in pending) or head > peek(t)
    }


def settle_projection(
    ledger: Any, proj: Projection, failures: Failures, *, overdue: bool = False
) -> bool:
    """Let ``proj`` write what it deferred, and move the cursors past it (``overdue``: only
    what it has deferred long enough, its ``overdue()`` hook). ``False``: it failed
    (reported; retried by the next settle)."""
    settle = getattr(proj, "settle", None)
    if settle is None:
        return True
    due = getattr(proj, "overdue" if overdue else "due", None)
    if overdue and due is None:
        return True
    locks = getattr(ledger, "projection_locks", None)
    try:
        if due is None or locks is None:
            pending = due() if due is not None else None
            settle(pending)
            for tid in pending or ():
                mark = cursor_of(proj, tid, proj.position(tid))
                if mark is not None:
                    ledger.set_cursor(proj.name, tid, mark, None)
        elif threads := due():
            # under the threads' projection locks, like any other write; a thread another
            # process holds is left to it (its state is the newer one)
            revalidate = getattr(proj, "revalidate", None)
            with locks(proj.name, threads) as held:
                settle(held.threads)
                for tid in held.threads:
                    if revalidate is not None:
                        revalidate(tid)
                    mark = cursor_of(proj, tid, proj.position(tid))
                    if mark is not None:
                        held.positions[tid] = mark
    except Exception as exc:  # a derived view: reported, retried by the next settle
        failures.add(proj.name, exc)
        logger.warning("projection %s could not settle: %s", proj.name, exc)
        return False
    return True


def settle_deferred(
    ledger: Any, projections: Sequence[Projection], failures: Failures, busy: bool
) -> bool:
    """After a pass: what the projections deferred (a busy thread's ``state.json`` is
    rewritten at most every few seconds) is written in a quiet pass, and in a ``busy`` one
    once it has waited long enough — not at the next flush, which a long-running worker
    never gets; until then its cursor is held back. ``False``: a settle failed."""
    ok = True
    for proj in projections:
        due = getattr(proj, "overdue" if busy else "due", None)
        if due is not None and due():
            ok = settle_projection(ledger, proj, failures, overdue=busy) and ok
    return ok
