"""The processes that seal, mirror and export beside the app.

Above the pipeline, the workspace and the exporters, which they put together in one
process: :mod:`~langgraph_external.processes.running` (what a sealing process runs:
the sealing service, the workspace projection, the exports), the app's helper process
(:mod:`~langgraph_external.processes.helper`, started through a
:mod:`~langgraph_external.processes.zygote`; its own side in
:mod:`~langgraph_external.processes.helper_main`), ``lgx worker``
(:mod:`~langgraph_external.processes.worker`), and the garbage-collector tuning they
share (:mod:`~langgraph_external.processes.gc_tuning`).
"""
