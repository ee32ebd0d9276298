"""``lgx ui``: a local, read-only web app over the ledger.

Three pages, rendered on the server (Starlette + Jinja2, served by uvicorn: the ``ui``
extra, ``pip install 'langgraph-external[ui]'``; without it, importing this package raises
:class:`~langgraph_external.errors.MissingExtraError` saying so. The stylesheet and the one
script ship in the package, nothing is fetched from elsewhere):

- ``/`` — the threads: search by thread id, user, session, tag, status, node, tool,
  error and policy violation (``user:alice tool:lookup_order``), sorted by time,
  duration, tokens or cost, a page at a time;
- ``/thread?id=THREAD`` — one thread: the conversation, the run tree with timing bars,
  each model call's exact prompt and answer, tokens and cost, checkpoints with the state
  change each made, interrupts and resumes, policy violations with their rule, memory
  hits with their scores, and the thread's hash-chain verification (the checks of
  ``lgx verify``);
- ``/compare?a=THREAD&b=THREAD`` (``acp``/``bcp``: a checkpoint of each) — two threads
  or two checkpoints side by side: path, prompts, answers, tool calls and state.

The app only reads: its database sessions run with ``default_transaction_read_only=on``,
it answers GET and HEAD only, and it opens the workspace for reading. It binds to
127.0.0.1 by default and answers only requests addressed to the host it was started on
(a web page elsewhere cannot reach it through DNS rebinding).

Example:
    >>> app = create_app(UiConfig(dsn="postgresql://localhost/app"))  # doctest: +SKIP
    >>> serve(UiConfig(dsn=dsn), port=8765)                            # doctest: +SKIP
"""

from __future__ import annotations

from langgraph_external.ui._extra import require_ui_extra

require_ui_extra()  # before the modules that import the extra's packages: one clear message

from langgraph_external.ui._app import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    ThreadCache,
    create_app,
    serve,
)
from langgraph_external.ui._compare import compare_data
from langgraph_external.ui._config import NotFound, UiConfig, read_only_options
from langgraph_external.ui._pages import (
    compare_page,
    load_thread,
    render_row,
    render_thread,
    thread_page,
    threads_page,
    verification,
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "NotFound",
    "ThreadCache",
    "UiConfig",
    "compare_data",
    "compare_page",
    "create_app",
    "load_thread",
    "read_only_options",
    "render_row",
    "render_thread",
    "serve",
    "thread_page",
    "threads_page",
    "verification",
]
