"""``python -m langgraph_external.cli``: the ``lgx`` command."""

from langgraph_external.cli import main

main()
