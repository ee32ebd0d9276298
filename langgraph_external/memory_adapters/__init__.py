"""Long-term memory adapters (Mem0 over the ledger's Postgres) land here."""

__all__: list[str] = []
