"""Stand-ins for a saver's lock when its connection pool already isolates operations."""

from __future__ import annotations

from typing import Any


class NoLock:
    """A no-op lock usable with ``with`` and ``async with``.

    The official Postgres savers take one lock per instance around every query, even
    over a connection pool where each operation checks out its own connection; over a
    pool that lock only serializes independent threads. ``External`` owns its pool, so
    it swaps in this no-op.
    """

    def __enter__(self) -> NoLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    async def __aenter__(self) -> NoLock:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def release(self) -> None:
        return None

    def locked(self) -> bool:
        return False
