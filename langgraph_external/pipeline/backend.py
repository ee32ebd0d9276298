"""What the capturing side asks of wherever its captures are sealed (a
:class:`~langgraph_external.pipeline.service.SealingService` in this process, the app's
helper process, ``lgx worker`` processes): :class:`SealingBackend` (wake, flush, close;
:class:`ReportsHealth` where it says how sealing goes), and the one :class:`FlushRequest`
a flush hands down to it.

Example:
    >>> FlushRequest(("t-1",), "0/16B3748", 5.0).exports
    True
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["FlushRequest", "ReportsHealth", "SealingBackend"]


@dataclass(frozen=True)
class FlushRequest:
    """Wait until the captures of ``threads`` committed before ``horizon`` (a position
    in commit order) are sealed — and, where projections run, projected; with
    ``exports``, exported where exports run — for at most ``timeout`` seconds
    (``None``: no limit). Picklable: it travels to a helper process as it is."""

    threads: Collection[str]
    horizon: str
    timeout: float | None
    exports: bool = True


class SealingBackend(Protocol):
    """Where captures are sealed and projections run: what the capturing side asks."""

    def wake(self) -> None:
        """Captures were committed."""

    def flush(self, request: FlushRequest) -> bool:
        """Wait for ``request``; ``False`` if it did not finish in time."""

    def close(self, timeout: float = 30.0) -> bool:
        """Seal what is sealable and stop."""


@runtime_checkable
class ReportsHealth(Protocol):
    """A sealing backend that also says how sealing goes (all of ours do; ``health()``
    leaves the ``sealing`` part out for one that does not)."""

    def health(self) -> dict[str, Any]:
        """Sealing and projection health."""
