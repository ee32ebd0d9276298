"""Deprecated import path: use :mod:`langgraph_external.read.prices` (this one goes in 0.3).

It re-exports what ``langgraph_external.prices`` had before the layout change, and warns
on import.
"""

from langgraph_external._moved import warn_moved
from langgraph_external.read.prices import (
    ModelPrice,
    PricesError,
    PriceTable,
    load_prices,
)

__all__ = [
    "ModelPrice",
    "PriceTable",
    "PricesError",
    "load_prices",
]

warn_moved(__name__, "langgraph_external.read.prices")
