"""Sinks persist sequenced events: the workspace, the Postgres ledger, memory (tests)."""

from langgraph_external.sinks.base import Sink
from langgraph_external.sinks.memory import InMemorySink

__all__ = ["InMemorySink", "Sink"]
