"""The serializer tap: the exact bytes a wrapped saver serialized, reused by the record.

The mirror must hold exactly what the saver stored. A value can change between two
serializations (``add_messages`` assigns message ids in place while a saver with
``durability="async"`` is still writing), so instead of serializing again the recorder
keeps the bytes the saver produced — which is also cheaper. The checkpointer installs a
:class:`SerdeTap` on the wrapped saver and opens a :class:`capturing` block around each
``put`` / ``put_writes``: what the saver serializes inside the block is kept by object
identity (:class:`SerializedValues`), and a serializer failure becomes a typed
:class:`~langgraph_external.errors.SerializationError`.

Example:
    >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    >>> tap = SerdeTap(JsonPlusSerializer())
    >>> value = {"n": 1}
    >>> with capturing("checkpoint") as seen:
    ...     stored = tap.dumps_typed(value)
    >>> seen.get(value) == stored, untapped_serde(tap) is tap.inner
    (True, True)
"""

from __future__ import annotations

import contextvars
from typing import Any

import psycopg
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_external.errors import SerializationError

__all__ = [
    "SerdeTap",
    "SerializedValues",
    "capturing",
    "serialization_error",
    "untapped_serde",
]


class SerializedValues:
    """What the wrapped saver serialized during one call, by object identity
    (``record=False``: only whether serializing failed, for a typed error)."""

    __slots__ = ("failed", "record", "seen")

    def __init__(self, record: bool = True) -> None:
        self.seen: dict[int, tuple[Any, tuple[str, bytes]]] = {}
        self.failed: BaseException | None = None
        self.record = record

    def get(self, value: Any) -> tuple[str, bytes] | None:
        """The ``(type, bytes)`` produced for this very object in the block, if any."""
        hit = self.seen.get(id(value))
        return hit[1] if hit is not None and hit[0] is value else None

    def dump(self, serde: SerializerProtocol, value: Any) -> tuple[str, bytes]:
        """``value``'s bytes: the ones produced in the block, else ``serde``'s (kept, so
        the saver, serializing the same object afterwards, gets these)."""
        hit = self.get(value)
        if hit is not None:
            return hit
        try:
            out = serde.dumps_typed(value)
        except Exception as exc:
            self.failed = exc
            raise
        self.seen[id(value)] = (value, out)
        return out


_OPEN: contextvars.ContextVar[SerializedValues | None] = contextvars.ContextVar(
    "lgx_serde_capture", default=None
)


class SerdeTap:
    """Transparent serializer wrapper that lets the recorder reuse the saver's bytes."""

    def __init__(self, inner: SerializerProtocol) -> None:
        self.inner = inner

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """The wrapped serializer's bytes, also kept by the open :class:`capturing`; an
        object the recorder serialized already in that block gets those very bytes (the
        saver stores exactly what was captured, and nothing is serialized twice)."""
        cap = _OPEN.get()
        if cap is not None:
            hit = cap.get(obj)
            if hit is not None:
                return hit
        try:
            out = self.inner.dumps_typed(obj)
        except BaseException as exc:
            if cap is not None:
                cap.failed = exc
            raise
        if cap is not None and cap.record:
            cap.seen[id(obj)] = (obj, out)
        return out

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The wrapped serializer's decoding."""
        return self.inner.loads_typed(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def untapped_serde(serde: SerializerProtocol) -> SerializerProtocol:
    """The serializer a recording checkpointer's tap wraps (``serde`` itself otherwise).

    Example:
        >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
        >>> plain = JsonPlusSerializer()
        >>> untapped_serde(SerdeTap(plain)) is plain, untapped_serde(plain) is plain
        (True, True)
    """
    return serde.inner if isinstance(serde, SerdeTap) else serde


class capturing:
    """Capture what the wrapped saver serializes inside the block (see :class:`SerdeTap`).

    A serializer failure inside the saver becomes a :class:`SerializationError`.
    (A class, not a generator: it runs around every ``put`` and ``put_writes``.)
    """

    __slots__ = ("cap", "token", "what")

    def __init__(self, what: str, *, record: bool = True) -> None:
        self.what = what
        self.cap = SerializedValues(record)
        self.token: Any = None

    def __enter__(self) -> SerializedValues:
        self.token = _OPEN.set(self.cap)
        return self.cap

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> None:
        _OPEN.reset(self.token)
        if exc is None or not isinstance(exc, Exception):
            return
        err = serialization_error(self.cap, exc, self.what)
        if err is not exc:
            raise err from exc


def serialization_error(cap: SerializedValues, exc: Exception, what: str) -> Exception:
    """Turn a serializer failure inside the saver into a typed error; pass others on.

    A value the database driver cannot send (a channel or task named with NUL or with
    text that is not valid Unicode, as hostile node names make them) is one too.

    Example:
        >>> type(serialization_error(SerializedValues(), ValueError("x"), "write")).__name__
        'ValueError'
    """
    if isinstance(exc, (UnicodeEncodeError, psycopg.DataError)):
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return SerializationError(f"the saver cannot store this {what}: {detail}")
    if cap.failed is None or isinstance(exc, SerializationError):
        return exc
    return SerializationError(
        f"cannot serialize a {what} value: {cap.failed}. The saver stored nothing "
        "and nothing was recorded."
    )
