"""What the web UI needs beyond the core install: the ``ui`` extra.

:mod:`langgraph_external.ui` checks it before importing its modules, so ``lgx ui``,
``lgx timeline`` and code that imports the package say what to install rather than fail
on the first missing module. The check only locates the modules (importing Starlette and
uvicorn is left to the app that serves).

Example:
    >>> missing_modules(["json", "no_such_module_lgx"])
    ['no_such_module_lgx']
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from langgraph_external.errors import MissingExtraError

__all__ = ["INSTALL", "MODULES", "missing_modules", "require_ui_extra"]

MODULES = ("jinja2", "markupsafe", "starlette", "uvicorn")
"""The modules of the ``ui`` extra (``pyproject.toml``), as they are imported."""

INSTALL = "pip install 'langgraph-external[ui]'"


def missing_modules(names: Iterable[str]) -> list[str]:
    """Which of ``names`` cannot be imported here (located, not imported)."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder refused it; a module without a spec
            found = False
        if not found:
            missing.append(name)
    return missing


def require_ui_extra() -> None:
    """Raise unless every module of the ``ui`` extra is installed.

    Raises:
        MissingExtraError: one is missing; the message says what to install.
    """
    missing = missing_modules(MODULES)
    if missing:
        raise MissingExtraError(
            f"the web UI (lgx ui, lgx timeline) needs the 'ui' extra, which is not installed "
            f"(no module {', '.join(missing)}): {INSTALL}",
            name=missing[0],
        )
