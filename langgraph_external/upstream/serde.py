"""LangGraph's serializer, as a sealing process can get it (reads ``JsonPlusSerializer``'s
private settings: they are upstream internals, kept here).

Example:
    >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    >>> portable_serde(None) is None
    True
"""

from __future__ import annotations

from typing import Any

__all__ = ["portable_serde"]

_DEFAULT_SERDE_STATE = ("pickle_fallback", "_allowed_json_modules", "_allowed_msgpack_modules")


def portable_serde(serde: Any) -> Any:
    """``serde`` as a sealing process can get it: ``None`` (the process makes its own
    default serializer) when ``serde`` is a plain ``JsonPlusSerializer`` set up as a new
    one is — its msgpack hook is a closure no pickle can carry, which kept the sealing of
    ``InMemorySaver`` and ``SqliteSaver`` apps in the app's own threads — else ``serde``.

    Example:
        >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
        >>> portable_serde(JsonPlusSerializer()) is None
        True
        >>> s = JsonPlusSerializer(pickle_fallback=True)
        >>> portable_serde(s) is s
        True
    """
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    if type(serde) is not JsonPlusSerializer or getattr(serde, "_custom_unpack_ext_hook", True):
        return serde
    fresh = JsonPlusSerializer()
    same = all(
        getattr(serde, k, object()) == getattr(fresh, k, object()) for k in _DEFAULT_SERDE_STATE
    )
    return None if same else serde
