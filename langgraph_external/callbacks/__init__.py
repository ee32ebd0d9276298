"""Callback handlers that record what a graph *does* (node transitions, tools, LLM calls).

``AuditCallbackHandler`` lands here (see the project issues); the checkpointer in
:mod:`langgraph_external.checkpointers` already records what the graph *stores*.
"""

__all__: list[str] = []
