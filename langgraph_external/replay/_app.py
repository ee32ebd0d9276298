"""Load the app to replay from ``module:attribute`` (for ``lgx replay --app``)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from langgraph_external.errors import ConfigurationError


def load_app(ref: str, checkpointer: Any) -> Any:
    """The graph named ``module:attribute``, compiled with (or switched to) ``checkpointer``.

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
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"--app must look like module:attribute, not {ref!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the app's modules are found
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
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
