"""The system of record in PostgreSQL: the ledger contract, its schema and migrations, the
statements, the Postgres and in-memory ledgers, the embedded server. (The in-transaction
capture the checkpointer needs is a contract of the sources: ``sources/ports.py``.)
"""
