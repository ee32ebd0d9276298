"""Deprecated import path: use :mod:`langgraph_external.read.prices` (this one goes in 0.3).

It re-exports what ``langgraph_external.prices`` had before the layout change (every name
of it is in the new module's ``__all__``), and warns on import.
"""

from langgraph_external._moved import warn_moved
from langgraph_external.read.prices import *  # noqa: F403
from langgraph_external.read.prices import __all__  # noqa: F401

warn_moved(__name__, "langgraph_external.read.prices")
