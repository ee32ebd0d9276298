"""How our sealing processes (a helper, ``lgx worker``; never the app's own) run: at a
lower CPU priority than the app, and with the garbage collector tuned for sealing.

Example:
    >>> GC_THRESHOLDS[0] > 700
    True
"""

from __future__ import annotations

import contextlib
import gc
import os

__all__ = ["GC_THRESHOLDS", "HELPER_NICENESS", "tune_gc", "yield_to_the_app"]


HELPER_NICENESS = 10
"""How much lower the helper's CPU priority is than the app's: sealing is never urgent (it
catches up in the app's idle moments), the app's latency is."""


def yield_to_the_app() -> None:
    """Lower this process's CPU priority by :data:`HELPER_NICENESS`."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(HELPER_NICENESS)


GC_THRESHOLDS = (10_000, 20, 20)
"""The cyclic garbage collector's thresholds in a sealing process (Python's default is
``(700, 10, 10)``). Sealing allocates many short-lived objects and creates almost no
cycles, so a young generation of 700 objects sends the collector through the caches of
recent checkpoints over and over: a quarter of the sealer's CPU in ``cpu_accounting``."""


def tune_gc() -> None:
    """In a process of ours that seals (a helper, ``lgx worker``; never the app's own):
    what is imported so far is kept out of every collection (``gc.freeze``) and the
    collector runs less often (:data:`GC_THRESHOLDS`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
