"""The Mem0 adapter: the adapter, its self-managed Postgres vector store, erasure, SQL, errors."""
