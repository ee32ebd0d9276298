"""The user's graph named on the command line as ``module:attribute`` (``lgx policy --graph``,
``lgx replay --app``): imported like ``python -m`` would, from the current directory too.

Example:
    >>> split_ref("app.graphs:builder"), split_ref("no-colon")
    (('app.graphs', 'builder'), None)
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from langgraph_external.cli.console import CliError, one_line
from langgraph_external.errors import ConfigurationError


def split_ref(ref: str) -> tuple[str, str] | None:
    """``module:attribute`` as its two parts, or ``None`` when it is not of that shape."""
    module_name, _, attr = ref.partition(":")
    return (module_name, attr) if module_name and attr else None


def import_ref(module_name: str, attr: str) -> Any:
    """Import ``module_name`` and follow the dotted ``attr`` in it.

    The current directory is put on ``sys.path`` first, as ``python -m`` does, so the
    modules next to the user's files are found. Raises whatever the import raises.
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def load_graph(ref: str) -> Any:
    """The graph ``lgx policy --graph`` names: a builder, a compiled graph, or a function
    returning one (called without arguments).

    Raises:
        CliError: the reference is malformed or the graph cannot be loaded (exit 2).
    """
    parts = split_ref(ref)
    if parts is None:
        raise CliError(f"--graph must look like module:attribute, not {ref!r}")
    try:
        obj = import_ref(*parts)
        if callable(obj) and not hasattr(obj, "get_graph") and not hasattr(obj, "branches"):
            obj = obj()  # a factory such as build_graph()
    except Exception as exc:  # the user's module may raise anything on import
        raise CliError(
            f"cannot load the graph {ref!r}: {type(exc).__name__}: {one_line(exc)}"
        ) from exc
    return obj


def load_app(ref: str, checkpointer: Any) -> Any:
    """The graph ``lgx replay --app`` names, compiled with (or switched to) ``checkpointer``.

    The attribute may be a ``StateGraph`` (compiled here), a compiled graph or an
    entrypoint (copied with the checkpointer), or a factory taking the checkpointer and
    returning either.

    Raises:
        ConfigurationError: the reference is malformed or the module cannot be loaded.

    Example:
        >>> try:
        ...     load_app("no-colon", None)
        ... except ConfigurationError as exc:
        ...     print(exc)
        --app must look like module:attribute, not 'no-colon'
    """
    parts = split_ref(ref)
    if parts is None:
        raise ConfigurationError(f"--app must look like module:attribute, not {ref!r}")
    try:
        obj = import_ref(*parts)
        if callable(obj) and not hasattr(obj, "compile") and not hasattr(obj, "get_graph"):
            obj = obj(checkpointer)
    except Exception as exc:  # the user's module may raise anything on import
        raise ConfigurationError(
            f"cannot load the app {ref!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if hasattr(obj, "compile"):
        return obj.compile(checkpointer=checkpointer)
    if hasattr(obj, "get_graph") and hasattr(obj, "copy"):
        return obj if obj.checkpointer is checkpointer else obj.copy({"checkpointer": checkpointer})
    raise ConfigurationError(f"{ref!r} is not a graph, a compiled graph or a factory of one")
