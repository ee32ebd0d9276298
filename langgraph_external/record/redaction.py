"""Redaction: take secrets and personal data out of everything that is recorded.

A :class:`Redactor` is the ``redactor=`` of :class:`~langgraph_external.pipeline.pipeline.Pipeline`,
:class:`~langgraph_external.workspace.projection.WorkspaceProjection` and
:class:`~langgraph_external.External`: a callable ``(value) -> (redacted_value, count)``
over any JSON-like value. Each finding is replaced by ``[REDACTED:<kind>]``, so a reader
sees *what* was there, never the secret itself and never a hash of it (a hash of a
low-entropy value such as a card number or a password can be brute-forced).

Levels:

* ``"off"``: nothing built in runs (user ``callables`` and ``extra_patterns`` still do).
* ``"standard"`` (default): API keys and tokens (OpenAI, Anthropic, AWS, GitHub, GitLab,
  Slack, Google, Stripe, Hugging Face, npm, SendGrid, PyPI), ``Bearer``/``Basic``
  credentials, private-key PEM blocks, JWTs, passwords in URLs (``redis://:PASSWORD@host``
  too), payment card numbers (Luhn- and brand-checked), labelled secrets in
  text (``password=...``, ``"api_key": "..."``, ``Authorization: ...``) and the values of
  sensitive keys in dicts (``password``, ``api_key``, ``accessToken``, ``Set-Cookie``...).
* ``"strict"``: standard plus emails, phone numbers, IPv4 addresses and runs of nine or
  more digits.

Example:
    >>> r = Redactor()
    >>> r({"user": "ann", "password": "hunter2", "note": "key sk-proj-4f9QeA2b7XcD1eF0gH3iJ5kL"})
    ({'user': 'ann', 'password': '[REDACTED:password]', 'note': 'key [REDACTED:openai_key]'}, 2)
    >>> redact_text("mail me at ann@example.com", level="strict")
    ('mail me at [REDACTED:email]', 1)

What counts as a secret (the detectors, their validators and trigger regexes) is in
:mod:`~langgraph_external.record.redaction_detectors`; how a value is walked (mappings,
sequences, bytes, models) in :mod:`~langgraph_external.record.redaction_walk`; this
module holds the configuration (levels, keys, user detectors), the text scan and the
entry points.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, partial, reduce
from typing import Any, Literal, overload

from langgraph_external.record.redaction_detectors import (
    CARD,
    DEFAULT_SENSITIVE_KEYS,
    LABEL,
    MARKER,
    MARKER_PREFIX,
    PEM,
    PROVIDERS,
    STRICT,
    TRIGGERS_STANDARD,
    TRIGGERS_STRICT,
    Detector,
    is_card_number,
    is_marker,
    key_words,
    label_detectors,
    luhn_valid,
    marker,
    pattern_detector,
)
from langgraph_external.record.redaction_walk import ValueWalker

__all__ = [
    "DEFAULT_SENSITIVE_KEYS",
    "LEVELS",
    "Level",
    "Redactor",
    "TextRedactor",
    "as_redactor",
    "luhn_valid",
    "redact_at",
    "redact_text",
]

Level = Literal["off", "standard", "strict"]
LEVELS: tuple[Level, ...] = ("off", "standard", "strict")

TextRedactor = Callable[[str], tuple[str, int]]
"""A user detector: ``(text) -> (redacted_text, number_of_redactions)``."""

_KEY_CACHE_SIZE = 4096


def _contains_any(text: str, words: tuple[str, ...]) -> bool:
    # a plain loop: twice as fast as any() over a generator for a handful of words
    for w in words:  # noqa: SIM110
        if w in text:
            return True
    return False


class Redactor(ValueWalker):
    """Find and replace secrets in any JSON-like value; ``redactor(value) -> (value, count)``.

    Args:
        level: ``"off"``, ``"standard"`` or ``"strict"`` (see the module docs).
        extra_patterns: more detectors, ``{kind: regex}``; a match (or its group named
            ``secret`` when the regex has one) becomes ``[REDACTED:<kind>]``. They run on
            every string, after the built-ins.
        sensitive_keys: key names whose values are replaced whole. ``None`` means
            :data:`DEFAULT_SENSITIVE_KEYS` (add to it with
            ``DEFAULT_SENSITIVE_KEYS | {"ssn"}``); an empty set turns the check off.
            Also used to find labelled secrets in text (``password=...``).
        callables: user detectors ``(text) -> (text, count)``, run on every string after
            the built-ins and ``extra_patterns``.

    What it walks: dicts and other mappings (string keys are scanned too: a secret used
    as a key is still a secret), lists, tuples, sets, strings, ``bytes``/``bytearray``
    (scanned as Latin-1, so every ASCII secret is found even in invalid UTF-8, and given
    back as the same type), ``int`` (card numbers; long numbers in strict mode),
    dataclasses and pydantic models (walked as dicts; returned as dicts only when
    something was redacted). Other objects are scanned through ``str()`` and replaced by
    the redacted string only when something was found.

    The input is never mutated. The result shares every part that needed no change with
    the input (a value without findings comes back as the same object), so treat both as
    read-only, as the pipeline does. Redacting a redacted value again finds nothing.

    Example:
        >>> r = Redactor.from_level("standard")
        >>> r({"headers": {"Authorization": "Bearer abc.def-123"}, "n": 4111111111111111})
        ({'headers': {'Authorization': '[REDACTED:authorization]'}, 'n': '[REDACTED:card]'}, 2)
        >>> r(["order 1234-5678-9012-3456", "at 2024-05-01T12:00:00Z"])  # not Luhn-valid
        (['order 1234-5678-9012-3456', 'at 2024-05-01T12:00:00Z'], 0)
        >>> def bob(text):
        ...     return text.replace("Bob", "B."), text.count("Bob")
        >>> r2 = Redactor(sensitive_keys={"ssn"}, callables=[bob])
        >>> r2({"ssn": "078-05-1120", "who": "Bob"})
        ({'ssn': '[REDACTED:ssn]', 'who': 'B.'}, 2)
    """

    def __init__(
        self,
        level: Level = "standard",
        *,
        extra_patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        sensitive_keys: Iterable[str] | None = None,
        callables: Iterable[TextRedactor] = (),
    ) -> None:
        if level not in LEVELS:
            raise ValueError(f"unknown redaction level {level!r}; use one of {LEVELS}")
        self.level: Level = level
        self.callables: tuple[TextRedactor, ...] = tuple(callables)
        for fn in self.callables:
            if not callable(fn):
                raise TypeError(f"redaction callables must be callable, got {fn!r}")
        self.extra: tuple[Detector, ...] = tuple(
            pattern_detector(kind, pat) for kind, pat in (extra_patterns or {}).items()
        )
        builtin = level != "off"
        if sensitive_keys is None:
            keys = DEFAULT_SENSITIVE_KEYS if builtin else frozenset()
        else:
            keys = frozenset(w for k in sensitive_keys if (w := "_".join(key_words(k))))
        self.sensitive_keys: frozenset[str] = keys
        self._key_cache: dict[str, str | None] = {}
        self._detectors: tuple[Detector, ...] = ()
        self._trigger: re.Pattern[str] | None = None
        self._label_gate: tuple[str, ...] | None = None
        self._by_trigger: dict[str, list[int]] = {LABEL: [], "#": []}
        self._min_len = 0
        if builtin:
            self._detectors = self._build_detectors()
            for i, det in enumerate(self._detectors):
                for key in det.triggers:
                    self._by_trigger.setdefault(key, []).append(i)
            strict = TRIGGERS_STRICT if level == "strict" else ""
            self._trigger = re.compile(TRIGGERS_STANDARD + strict, re.ASCII)
            self._min_len = 6 if level == "strict" else 8
            if keys:
                # a labelled secret needs its key's last word and a ":" or "=" (checked first)
                words = {k.split("_")[-1] for k in keys} | {k.replace("_", "") for k in keys}
                minimal = sorted(w for w in words if not any(o != w and o in w for o in words))
                self._label_gate = tuple(minimal)
        self._active = builtin or bool(self.extra or self.callables or keys)

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_level(cls, level: Level) -> Redactor:
        """The redactor of a level with default settings.

        Example:
            >>> Redactor.from_level("off")({"password": "x"})
            ({'password': 'x'}, 0)
        """
        return cls(level)

    def _build_detectors(self) -> tuple[Detector, ...]:
        strict = STRICT if self.level == "strict" else ()
        return (PEM, *label_detectors(self.sensitive_keys), *PROVIDERS, CARD, *strict)

    # -- calling it; the leaves of the walk (ValueWalker) ----------------------------
    def __call__(self, value: Any) -> tuple[Any, int]:
        """Return ``(redacted_value, number_of_redactions)``."""
        if not self._active:
            return value, 0
        return self._walk(value, 0)

    def __repr__(self) -> str:
        extras = f", extra_patterns={len(self.extra)}" if self.extra else ""
        calls = f", callables={len(self.callables)}" if self.callables else ""
        return f"Redactor(level={self.level!r}{extras}{calls})"

    def _int(self, value: int) -> tuple[Any, int]:
        if -100_000_000 < value < 100_000_000 or not self._detectors:
            return value, 0
        digits = str(abs(value))
        if is_card_number(digits):
            return marker("card"), 1
        if self.level == "strict" and len(digits) >= 9:
            return marker("number"), 1
        return value, 0

    # -- text ------------------------------------------------------------------------
    def text(self, text: str) -> tuple[str, int]:
        """Redact one string.

        Example:
            >>> Redactor().text("curl -H 'Authorization: Bearer eyJhbGciOiJI.eyJzdWIiOjF9.c2ln'")
            ("curl -H 'Authorization: [REDACTED:authorization]'", 1)
        """
        total = 0
        if self._trigger is not None and len(text) >= self._min_len:
            selected = self._select(text)
            if selected:
                text, total = self._apply(text, selected)
        if self.extra:
            text, n = self._apply(text, self.extra)
            total += n
        for fn in self.callables:
            text, n = fn(text)
            total += n
        return text, total

    def _select(self, text: str) -> list[Detector]:
        """The built-in detectors worth running on ``text``, in order (usually none)."""
        assert self._trigger is not None
        fired = self._trigger.findall(text)
        label = (
            self._label_gate is not None
            and ("=" in text or ":" in text)
            and _contains_any(text.lower(), self._label_gate)
        )
        if not fired and not label:
            return []
        by_trigger = self._by_trigger
        chosen: set[int] = set(by_trigger[LABEL]) if label else set()
        for k in fired:
            chosen.update(by_trigger["#" if k[0].isdigit() else k[:2]])
        dets = self._detectors
        return [dets[i] for i in sorted(chosen)]

    def _apply(self, text: str, detectors: Iterable[Detector]) -> tuple[str, int]:
        total = 0
        for det in detectors:
            if det.pattern.search(text) is None:  # cheaper than sub() with a callback
                continue
            found = [0]
            new = det.pattern.sub(partial(self._replace, det, found), text)
            if found[0]:
                text, total = new, total + found[0]
        return text, total

    def _replace(self, det: Detector, found: list[int], m: re.Match[str]) -> str:
        group = det.group
        if det.kind == LABEL:
            group = next(g for g in ("dq", "sq", "u") if m.group(g) is not None)
        secret = m.group(group)
        if not secret or is_marker(secret) or (det.check is not None and not det.check(m)):
            return m.group(0)
        kind = det.kind
        if kind == LABEL:
            kind = self.is_sensitive_key(m.group("key")) or "secret"
        found[0] += 1
        whole, base = m.group(0), m.start()
        start, end = m.span(group)
        return f"{whole[: start - base]}{marker(kind)}{whole[end - base :]}"

    # -- keys ------------------------------------------------------------------------
    def is_sensitive_key(self, key: str) -> str | None:
        """The sensitive name ``key`` ends with (its value is hidden whole), else ``None``.

        Example:
            >>> r = Redactor()
            >>> [r.is_sensitive_key(k) for k in ("accessToken", "X-Api-Key", "max_tokens")]
            ['token', 'api_key', None]
        """
        cache = self._key_cache
        if key in cache:
            return cache[key]
        words = key_words(key) if self.sensitive_keys else []
        tails = ("_".join(words[i:]) for i in range(len(words)))
        found = next((tail for tail in tails if tail in self.sensitive_keys), None)
        if len(cache) >= _KEY_CACHE_SIZE:
            cache.clear()
        cache[key] = found
        return found

    def _key_kind(self, redacted_key: str) -> str | None:
        """Sensitivity of a key, judged on its redacted text without the markers.

        A second pass then sees the same words as the first (redaction is idempotent),
        and a marker's kind (``[REDACTED:github_token]``) never makes a key sensitive.
        """
        if MARKER_PREFIX in redacted_key:
            redacted_key = MARKER.sub(" ", redacted_key)
        return self.is_sensitive_key(redacted_key)


@cache
def _for_level(level: Level) -> Redactor:
    return Redactor(level)


@overload
def redact_text(text: str, level: Level = "standard") -> tuple[str, int]: ...
@overload
def redact_text(text: bytes, level: Level = "standard") -> tuple[bytes, int]: ...
def redact_text(text: str | bytes, level: Level = "standard") -> tuple[str | bytes, int]:
    """Redact a raw string or raw bytes (e.g. a tool's response body) at ``level``.

    Bytes are scanned as Latin-1, so ASCII secrets are found whatever the encoding, and
    come back as bytes.

    Example:
        >>> redact_text(b'{"token": "abc123xyz"}')
        (b'{"token": "[REDACTED:token]"}', 1)
    """
    redactor = _for_level(level)
    if isinstance(text, (bytes, bytearray)):
        out, n = redactor.text(bytes(text).decode("latin-1"))
        return (out.encode("latin-1") if n else bytes(text)), n
    return redactor.text(text)


def redact_at(
    redactor: Callable[[Any], tuple[Any, int]], path: Sequence[str], value: Any
) -> tuple[Any, int]:
    """Redact ``value`` as it sits under the keys ``path`` of a larger document.

    A readable view that shows one part of a state on its own (a pending write of one
    channel, a field) must hide what the whole state would hide: the value of a channel
    named ``password`` is hidden whole, even though the value alone looks harmless. The
    value is redacted wrapped in one mapping per key of ``path`` (so every key rule sees
    the path) and unwrapped again.

    Example:
        >>> r = Redactor()
        >>> r("hunter2hunter2")
        ('hunter2hunter2', 0)
        >>> redact_at(r, ["password"], "hunter2hunter2")
        ('[REDACTED:password]', 1)
        >>> redact_at(r, ["settings"], {"api_key": "k-123456", "theme": "dark"})
        ({'api_key': '[REDACTED:api_key]', 'theme': 'dark'}, 1)
    """
    out, count = redactor(reduce(lambda inner, key: {key: inner}, reversed(path), value))
    for _ in path:
        # one entry per level (a key that was itself a secret comes back renamed)
        if not isinstance(out, Mapping) or len(out) != 1:
            return redactor(value)  # a redactor that reshapes documents: the value alone
        out = next(iter(out.values()))
    return out, count


def as_redactor(
    spec: Level | Redactor | Callable[[Any], tuple[Any, int]] | None,
) -> Callable[[Any], tuple[Any, int]] | None:
    """Turn a configuration value into a ``redactor=``: a level name, a redactor, or ``None``.

    ``None`` and ``"off"`` give ``None`` (the pipeline then skips redaction entirely).

    Example:
        >>> as_redactor("strict")
        Redactor(level='strict')
        >>> as_redactor("off") is None
        True
    """
    if spec is None or spec == "off":
        return None
    if isinstance(spec, str):
        return Redactor(spec)  # an unknown level: Redactor's ValueError
    if not callable(spec):
        raise TypeError(f"redaction must be a level name or a callable, got {spec!r}")
    return spec
