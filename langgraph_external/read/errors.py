"""What reading the record raises when the thread, checkpoint or run asked for is not
there, or a checkpoint prefix is not enough to pick one.

Example:
    >>> issubclass(NotFoundError, LookupError)
    True
"""

from __future__ import annotations

from langgraph_external.errors import ConfigurationError, ExternalError

__all__ = ["AmbiguousCheckpointError", "NotFoundError"]


class NotFoundError(ExternalError, LookupError):
    """The thread or checkpoint asked for was not recorded."""


class AmbiguousCheckpointError(ConfigurationError):
    """A checkpoint id prefix matches more than one checkpoint."""
