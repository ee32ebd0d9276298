"""Deprecated import path: use :mod:`langgraph_external.ops.restore` (this one goes in 0.3).

It re-exports what ``langgraph_external.restore`` had before the layout change (every name
of it is in the new module's ``__all__``), and warns on import.
"""

from langgraph_external._moved import warn_moved
from langgraph_external.ops.restore import *  # noqa: F403
from langgraph_external.ops.restore import __all__  # noqa: F401

warn_moved(__name__, "langgraph_external.ops.restore")
