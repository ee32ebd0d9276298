"""Reading the record: inspection, diffs, thread views, timelines, prices.

Inspection (``lgx threads``, ``show``, ``events``, ``state``, ``sql``):
:mod:`~langgraph_external.read.inspection` (threads and events from the ledger),
:mod:`~langgraph_external.read.event_order` (events by run and step),
:mod:`~langgraph_external.read.states` (readable states from the workspace),
:mod:`~langgraph_external.read.sql_shell` (ad-hoc SQL), :mod:`~langgraph_external.read.errors`.

Diffs (``lgx diff``, ``lgx replay``, the compare page): :mod:`~langgraph_external.read.diff`
(sides; every diff name importable from it), :mod:`~langgraph_external.read.path_diff`,
:mod:`~langgraph_external.read.state_diff`, :mod:`~langgraph_external.read.calls`,
:mod:`~langgraph_external.read.call_diff`, :mod:`~langgraph_external.read.diff_text`.

Thread view (``lgx ui``, ``lgx timeline``): :mod:`~langgraph_external.read.thread_view`
(the whole view), :mod:`~langgraph_external.read.run_tree`,
:mod:`~langgraph_external.read.conversation`, :mod:`~langgraph_external.read.llm_calls`,
:mod:`~langgraph_external.read.checkpoint_states`, :mod:`~langgraph_external.read.view_labels`,
:mod:`~langgraph_external.read.envelopes`, :mod:`~langgraph_external.read.timeline`,
:mod:`~langgraph_external.read.prices`.
"""
