"""What ``lgx ui`` reads from, how its sessions are opened, and what it answers when a
thread is not recorded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langgraph_external.ledger import schema as ledger
from langgraph_external.read.prices import PriceTable

__all__ = ["NotFound", "UiConfig", "read_only_options"]


@dataclass
class UiConfig:
    """Where the app reads from.

    Attributes:
        dsn: the ledger's database.
        schema: the ledger schema.
        workspace: the workspace (for readable states and the workspace side of the
            verification); ``None`` shows what the ledger alone holds.
        prices: the price table for costs.
    """

    dsn: str
    schema: str = ledger.DEFAULT_SCHEMA
    workspace: Any = None
    prices: PriceTable = field(default_factory=PriceTable)


def read_only_options() -> str:
    """libpq ``options`` of the app's sessions: read-only transactions, UTC."""
    return "-c default_transaction_read_only=on -c timezone=UTC"


class NotFound(LookupError):
    """The thread or checkpoint asked for is not in the ledger."""
