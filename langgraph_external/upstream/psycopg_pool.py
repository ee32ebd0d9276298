"""psycopg_pool internals: the pool a connection is handed out by.

Checked against (``CHECKED_AGAINST``) psycopg-pool 3.3.3; ``tests/test_compat.py`` fails when
it moves.
"""

from __future__ import annotations

from typing import Any

CHECKED_AGAINST = {"psycopg-pool": "3.3.3"}


def pool_of(conn: Any) -> Any:
    """The pool handing ``conn`` out, while its ``check`` callback runs (else ``None``).

    psycopg_pool sets the connection's private ``_pool`` before it calls ``check``.

    Example:
        >>> pool_of(object()) is None
        True
    """
    return getattr(conn, "_pool", None)
