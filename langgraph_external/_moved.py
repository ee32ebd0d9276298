"""Import paths that moved, and names that go: kept working for one minor version with a
warning.

The layout change of 0.1 (folders that show the data flow) moved five modules whose
import paths the README and docs had shown; each old path is a module that re-exports
what it had and warns once, on import (CHANGELOG, "Deprecated import paths"). A name
that goes (an alias, an earlier environment variable) warns where it is used
(:func:`warn_deprecated`).

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn_moved("langgraph_external.restore", "langgraph_external.ops.restore")
    >>> "langgraph_external.ops.restore" in str(seen[0].message)
    True
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["REMOVED_IN", "deprecated_names", "warn_deprecated", "warn_moved"]

REMOVED_IN = "0.3"
"""The version that drops the old paths and the deprecated names."""


def warn_moved(old: str, new: str) -> None:
    """Warn that ``old`` moved to ``new`` (a :class:`DeprecationWarning` at the importer)."""
    warnings.warn(
        f"{old} moved to {new}; the old import path is deprecated and goes in "
        f"langgraph-external {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=3,
    )


def warn_deprecated(old: str, instead: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated and goes in :data:`REMOVED_IN`; ``instead`` says
    what to use (a :class:`DeprecationWarning`; the default ``stacklevel`` points at the
    caller of the function that calls this).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     warn_deprecated("x.old()", "call x.new()")
        >>> str(seen[0].message)
        'x.old() is deprecated and goes in langgraph-external 0.3: call x.new()'
    """
    warnings.warn(
        f"{old} is deprecated and goes in langgraph-external {REMOVED_IN}: {instead}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def deprecated_names(
    module: str, names: Mapping[str, tuple[Callable[[], Any], str]]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that gives each of ``names`` — ``(value, instead)``: a
    function returning it, and what to use — with a :func:`warn_deprecated` warning.

    Example:
        >>> getattr_ = deprecated_names("m", {"Old": (lambda: int, "use New")})
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     getattr_("Old")
        <class 'int'>
    """

    def module_getattr(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value, instead = names[name]
        warn_deprecated(f"{module}.{name}", instead)
        return value()

    return module_getattr
