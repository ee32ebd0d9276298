"""The system of record in PostgreSQL: the ledger contract (incl. the in-transaction capture),
its schema and migrations, the statements, the Postgres and in-memory ledgers, the embedded
server.
"""
