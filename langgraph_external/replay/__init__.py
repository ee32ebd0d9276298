"""Replay a recorded thread without calling the model or the tools again.

``replay(graph, thread_id, ext=ext)`` re-issues the thread's recorded invocations (inputs,
resume values) into a new thread. The graph's own code runs; every chat-model call and
tool call is answered from the record, found by where it ran (namespace, node, step,
task path), its place among the task's calls and a hash of its input. ``mode="regression"``
runs the current model live against the recorded tools and reports where the run first
differs. See ``docs/replay.md``.

Example:
    >>> from langgraph_external.replay import replay             # doctest: +SKIP
    >>> report = replay(graph, "thread-42", ext=ext)             # doctest: +SKIP
    >>> report.diverged, report.model_calls                      # doctest: +SKIP
    (False, 0)
"""

from langgraph_external.replay._intercept import (
    Divergence,
    RecordedCallError,
    ReplayDivergenceError,
)
from langgraph_external.replay._run import MODES, TOOL_MODES, ReplayReport, areplay, replay

__all__ = [
    "MODES",
    "TOOL_MODES",
    "Divergence",
    "RecordedCallError",
    "ReplayDivergenceError",
    "ReplayReport",
    "areplay",
    "replay",
]
