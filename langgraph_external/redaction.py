"""Redaction: take secrets and personal data out of everything that is recorded.

A :class:`Redactor` is the ``redactor=`` of :class:`~langgraph_external.Pipeline`,
:class:`~langgraph_external.sinks.workspace.WorkspaceProjection` and
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
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import decimal
import enum
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, Literal, TypeVar, overload

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

MARKER_PREFIX = "[REDACTED"
_MARKER = re.compile(r"\[REDACTED(?::[^\]]*)?\]")

DEFAULT_SENSITIVE_KEYS: frozenset[str] = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "secrets",
        "secret_key",
        "secret_access_key",
        "private_key",
        "signing_key",
        "encryption_key",
        "token",
        "api_key",
        "apikey",
        "authorization",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "access_key",
        "account_key",
    }
)
"""Key names whose values are replaced whole (see :meth:`Redactor.is_sensitive_key`).

A key matches when it ends with one of these, word-wise and case-insensitively:
``access_token``, ``X-Api-Key``, ``clientSecret``, ``Set-Cookie`` match; ``max_tokens``,
``token_usage`` and ``keyboard`` do not.
"""

# A header's value runs to the end of the line (``Cookie: a=1; b=2``).
_LINE_VALUED = frozenset({"authorization", "cookie"})

_SAFE_SCALARS = (
    float,
    datetime.datetime,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    decimal.Decimal,
    enum.Enum,
)

_MAX_DEPTH = 100
_KEY_CACHE_SIZE = 4096

T = TypeVar("T")


# -- validators ------------------------------------------------------------------------
def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum used by payment cards.

    Example:
        >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
        (True, False)
    """
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_brand_ok(d: str) -> bool:
    # IIN ranges and lengths of the major schemes: a 16-digit order number that
    # happens to pass Luhn (1 in 10) is still rejected unless it looks like a card.
    n = len(d)
    if d[0] == "4":  # Visa
        return n in (13, 16, 19)
    two, four = int(d[:2]), int(d[:4])
    if 51 <= two <= 55 or 2221 <= four <= 2720:  # Mastercard
        return n == 16
    if two in (34, 37):  # Amex
        return n == 15
    if two in (36, 38, 39) or 300 <= int(d[:3]) <= 305:  # Diners
        return 14 <= n <= 19
    if d.startswith(("6011", "65")) or 644 <= int(d[:3]) <= 649 or 622126 <= int(d[:6]) <= 622925:
        return 16 <= n <= 19  # Discover
    if 3528 <= four <= 3589:  # JCB
        return 16 <= n <= 19
    if two == 62:  # UnionPay
        return 16 <= n <= 19
    if two in (50, 56, 57, 58, 63, 67) or d.startswith("6"):  # Maestro and others
        return 12 <= n <= 19
    return False


def _card(m: re.Match[str]) -> bool:
    d = re.sub(r"\D", "", m.group(0))
    return 13 <= len(d) <= 19 and _card_brand_ok(d) and luhn_valid(d)


def _has_digit(m: re.Match[str]) -> bool:
    return any(c.isdigit() for c in m.group(0))


def _bearer(m: re.Match[str]) -> bool:
    tok = m.group(1)
    return any(c.isdigit() for c in tok) or (len(tok) >= 20 and not tok.isalpha())


def _basic(m: re.Match[str]) -> bool:
    tok = m.group(1)
    try:
        raw = base64.b64decode(tok + "=" * (-len(tok) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in raw and raw.isascii()


_CODE_LIKE = re.compile(r"[a-z_]+(?:\.[a-z_]+)*|none|null|true|false|undefined|nil", re.I)


def _label_value(m: re.Match[str]) -> bool:
    # Unquoted values that look like code (``password=password``, ``token=self.token``,
    # ``token: None``) are left alone; quoted values are always secrets.
    unquoted = m.group("u")
    if unquoted is None:
        return True
    if _CODE_LIKE.fullmatch(unquoted) and (unquoted.islower() or unquoted.isupper()):
        return False
    return len(unquoted) >= 3


def _mixed_case(m: re.Match[str]) -> bool:
    # a Hugging Face token mixes cases; ``hf_`` + one long lower-case word is a name
    tail = m.group(0)[3:]
    return not (tail.islower() or tail.isupper())


def _phone(m: re.Match[str]) -> bool:
    n = sum(c.isdigit() for c in m.group(0))
    return 8 <= n <= 15


def _ipv4(m: re.Match[str]) -> bool:
    return all(int(part) <= 255 for part in m.group(0).split("."))


def _email(m: re.Match[str]) -> bool:
    local = m.group(0).split("@", 1)[0]
    return not (local.startswith(".") or local.endswith("."))


# -- detectors -------------------------------------------------------------------------
@dataclass(frozen=True)
class _Detector:
    """One kind of finding: a pattern, the part of a match to replace, and a validator.

    ``triggers`` are the branches of the trigger regex (``"#"``: any of its digit
    branches) that make the pattern worth running. ``group`` names the replaced part.
    """

    kind: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...] = ()
    group: int | str = 0
    check: Callable[[re.Match[str]], bool] | None = None


_A = re.ASCII
_NOT_BEFORE_CARD = r"[A-Za-z0-9_.\-]"
_B64URL = r"[A-Za-z0-9_\-]"


def _word(prefix: str, rest: str) -> re.Pattern[str]:
    """``prefix`` at the start of a word, then ``rest``.

    Written literal-first (the boundary is a look-behind after it), so the engine finds
    candidates with its fast literal search instead of trying every position.
    """
    lit = re.escape(prefix)
    return re.compile(rf"{lit}(?<![A-Za-z0-9_]{lit}){rest}", _A)


_PEM = _Detector(
    "private_key",
    re.compile(
        r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)",
        _A | re.S,
    ),
    triggers=("PR",),
)
_PROVIDERS = (
    _Detector("anthropic_key", _word("sk-ant-", r"[A-Za-z0-9_\-]{20,}"), ("k-",)),
    _Detector(
        "openai_key",
        _word("sk-", r"(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
        ("k-",),
        check=_has_digit,
    ),
    _Detector(
        "stripe_key",
        re.compile(
            r"(?:sk_(?<![A-Za-z0-9_]sk_)|rk_(?<![A-Za-z0-9_]rk_))(?:live|test)_[A-Za-z0-9]{16,}"
            r"|whsec_(?<![A-Za-z0-9_]whsec_)[A-Za-z0-9]{24,}",
            _A,
        ),
        ("k_", "wh"),
    ),
    _Detector("aws_access_key_id", _word("A", r"(?:KIA|SIA)[A-Z0-9]{16}\b"), ("KI", "SI")),
    _Detector(
        "github_token",
        _word("g", r"(?:h[pousr]_[A-Za-z0-9]{36,255}|ithub_pat_[A-Za-z0-9_]{22,255})"),
        ("gh", "gi"),
    ),
    _Detector("slack_token", _word("xox", r"[abeoprs]-[A-Za-z0-9\-]{10,}"), ("xo",)),
    _Detector(
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+", _A),
        (":/",),
    ),
    _Detector("google_api_key", _word("AIza", r"[0-9A-Za-z_\-]{35}"), ("za",)),
    _Detector(
        "huggingface_token",
        _word("hf_", r"[A-Za-z]{34}(?![A-Za-z0-9_])"),
        ("hf",),
        check=_mixed_case,
    ),
    _Detector("gitlab_token", _word("glpat-", r"[A-Za-z0-9_\-]{20,}"), ("gl",)),
    _Detector("npm_token", _word("npm_", r"[A-Za-z0-9]{36}(?![A-Za-z0-9])"), ("np",)),
    _Detector("sendgrid_key", _word("SG.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"), ("SG",)),
    _Detector("pypi_token", _word("pypi-AgE", r"[A-Za-z0-9_\-]{50,}"), ("py",)),
    _Detector(
        "jwt",
        _word("eyJ", rf"{_B64URL}{{8,}}\.{_B64URL}{{2,}}\.{_B64URL}*(?:\.{_B64URL}+){{0,2}}"),
        ("yJ",),
    ),
    _Detector(
        "bearer_token",
        re.compile(r"\b(?:Bearer|bearer|BEARER)[ \t]+([A-Za-z0-9._~+/\-]{8,}=*)", _A),
        ("Be", "be", "BE"),
        group=1,
        check=_bearer,
    ),
    _Detector(
        "basic_auth",
        re.compile(r"\b(?:Basic|basic|BASIC)[ \t]+([A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])", _A),
        ("Ba", "ba", "BA"),
        group=1,
        check=_basic,
    ),
    _Detector(
        "password",
        # ``redis://:PASSWORD@host`` has an empty user; an unencoded "@" in a password
        # ends at the last "@" before the path, as URL parsers read it
        re.compile(r"://[^\s:/@\"'<>]*:([^\s/\"'<>]+)@", _A),
        (":/",),
        group=1,
    ),
)
# The first digit is matched before the look-behind so that the regex engine can skip
# ahead with its fast first-character scan.
_CARD = _Detector(
    "card",
    re.compile(rf"[2-6](?<!{_NOT_BEFORE_CARD}[2-6])\d{{3}}(?:[ \-]?\d){{9,15}}(?!\d)", _A),
    triggers=("#",),
    check=_card,
)
_STRICT = (
    _Detector(
        "email",
        # the look-behind starts a local part only at its first character: linear time
        re.compile(
            r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]{1,64}@"
            r"[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,8}\.[A-Za-z]{2,24}\b",
            _A,
        ),
        ("@",),
        check=_email,
    ),
    _Detector(
        "ipv4",
        re.compile(
            r"\d(?<![\w.]\d)\d{0,2}(?:\.\d{1,3}){3}(?!\.?\d)",
            _A,
        ),
        ("#",),
        check=_ipv4,
    ),
    _Detector(
        "phone",
        re.compile(
            r"(?<![\w+])(?:\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]?\d{2,4}){1,4}"
            r"|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4}|\d{3}[ .\-]\d{3}[ .\-]\d{4})(?![\w])",
            _A,
        ),
        ("#",),
        check=_phone,
    ),
    _Detector("number", re.compile(r"\d(?<![\w.\-]\d)\d{8,}(?!\d)", _A), ("#",)),
)

# One regex pass decides whether any built-in detector can apply. It only states necessary
# conditions, loosely (``k-`` for ``sk-``, ``za`` for ``AIza``): every branch starts with
# a literal that is rare in ordinary text, so the engine's first-character scan in C
# stops seldom. A branch that starts with a character class would disable that scan.
_TRIGGERS_STANDARD = (
    r"k-|k_live_|k_test_|whsec_|KIA|SIA|gh[pousr]_|github_pat_|xox|za|yJ|"
    r"hf_|glpat-|npm_|SG\.|pypi-AgE|"
    r"Bearer|bearer|BEARER|Basic|basic|BASIC|PRIVATE|://|"
    # a card's first 8 digits, not inside a longer number, a word or a UUID
    + "|".join(rf"{d}(?<!{_NOT_BEFORE_CARD}{d})\d{{3}}[ \-]?\d{{4}}" for d in "23456")
)
_TRIGGERS_STRICT = r"|@|" + "|".join(rf"{d}\d\d|{d}\.\d" for d in "0123456789")


def _camel_words(key: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", key)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def _contains_any(text: str, words: tuple[str, ...]) -> bool:
    # a plain loop: twice as fast as any() over a generator for a handful of words
    for w in words:  # noqa: SIM110
        if w in text:
            return True
    return False


def _is_marker(text: str) -> bool:
    return text.startswith(MARKER_PREFIX)


class Redactor:
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
        self.extra: tuple[_Detector, ...] = tuple(
            self._extra_detector(kind, pat) for kind, pat in (extra_patterns or {}).items()
        )
        builtin = level != "off"
        if sensitive_keys is None:
            keys = DEFAULT_SENSITIVE_KEYS if builtin else frozenset()
        else:
            keys = frozenset("_".join(_camel_words(k)) for k in sensitive_keys)
            keys = frozenset(k for k in keys if k)
        self.sensitive_keys: frozenset[str] = keys
        self._key_cache: dict[str, str | None] = {}
        self._detectors: tuple[_Detector, ...] = ()
        self._trigger: re.Pattern[str] | None = None
        self._label_gate: tuple[str, ...] | None = None
        self._by_trigger: dict[str, list[int]] = {"$label": [], "#": []}
        self._min_len = 0
        if builtin:
            self._detectors = self._build_detectors()
            for i, det in enumerate(self._detectors):
                for key in det.triggers:
                    self._by_trigger.setdefault(key, []).append(i)
            strict = _TRIGGERS_STRICT if level == "strict" else ""
            self._trigger = re.compile(_TRIGGERS_STANDARD + strict, _A)
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

    @staticmethod
    def _extra_detector(kind: str, pattern: str | re.Pattern[str]) -> _Detector:
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        group: int | str = "secret" if "secret" in rx.groupindex else 0
        return _Detector(kind, rx, group=group)

    def _build_detectors(self) -> tuple[_Detector, ...]:
        detectors = [_PEM]
        if self.sensitive_keys:
            detectors.extend(self._label_detectors())
        detectors.extend(_PROVIDERS)
        detectors.append(_CARD)
        if self.level == "strict":
            detectors.extend(_STRICT)
        return tuple(detectors)

    def _label_detectors(self) -> list[_Detector]:
        def alternation(keys: Iterable[str]) -> str:
            parts = [r"[_.\- ]?".join(map(re.escape, k.split("_"))) for k in keys]
            return "|".join(sorted(parts, key=len, reverse=True))

        sep = r"""(?P<key>(?i:{keys}))(?![A-Za-z0-9])\\*["']?[ \t]*(?::=|=>|[:=])[ \t]*"""
        quoted = r"""(?:"(?P<dq>(?:[^"\\\r\n]|\\.)+)"|'(?P<sq>[^'\r\n]+)'"""
        line = [k for k in self.sensitive_keys if k.split("_")[-1] in _LINE_VALUED]
        other = [k for k in self.sensitive_keys if k not in line]
        out = []
        for keys, unquoted in (
            (line, r"(?P<u>[^\s\"'][^\r\n\"']*[^\s\"'])"),
            # atomic (look-ahead + back-reference): ``get_token(`` must not match ``get_toke``
            (other, r"""\\*["']?(?=(?P<u>[^\s"'\\<>,;&(){}\[\]]+))(?P=u)(?![(\[])"""),
        ):
            if not keys:
                continue
            rx = re.compile(sep.format(keys=alternation(keys)) + quoted + "|" + unquoted + ")", _A)
            out.append(_Detector("$label", rx, ("$label",), check=_label_value))
        return out

    # -- the walk --------------------------------------------------------------------
    def __call__(self, value: Any) -> tuple[Any, int]:
        """Return ``(redacted_value, number_of_redactions)``."""
        if not self._active:
            return value, 0
        return self._walk(value, 0)

    def __repr__(self) -> str:
        extras = f", extra_patterns={len(self.extra)}" if self.extra else ""
        calls = f", callables={len(self.callables)}" if self.callables else ""
        return f"Redactor(level={self.level!r}{extras}{calls})"

    def _walk(self, value: Any, depth: int) -> tuple[Any, int]:
        t = type(value)
        if t is str:
            return self.text(value)
        if value is None or t is bool:
            return value, 0
        if t is int:
            return self._int(value)
        if depth > _MAX_DEPTH:
            return self.text(repr(value))
        if t is dict:
            return self._dict(value, depth)
        if t is list or t is tuple:
            return self._sequence(value, depth)
        return self._other(value, depth)

    def _dict(self, value: Mapping[Any, Any], depth: int) -> tuple[Any, int]:
        total = 0
        out: dict[Any, Any] | None = None
        d = depth + 1
        for i, (k, v) in enumerate(value.items()):
            nk, kc = self.text(k) if type(k) is str else (k, 0)
            kind = self._key_kind(nk) if type(k) is str else None
            if kind is not None and _worth_hiding(v):
                nv: Any = f"{MARKER_PREFIX}:{kind}]"
                vc = 1
            else:
                nv, vc = self._walk(v, d)
            if kc or vc:
                if out is None:
                    out = dict(list(value.items())[:i])
                total += kc + vc
            if out is not None:
                while nk in out:  # two keys redacted to the same marker keep both values
                    nk = f"{nk}#"
                out[nk] = nv
        return (value if out is None else out), total

    def _sequence(self, value: list[Any] | tuple[Any, ...], depth: int) -> tuple[Any, int]:
        total = 0
        out: list[Any] | None = None
        d = depth + 1
        for i, item in enumerate(value):
            nv, n = self._walk(item, d)
            if n:
                if out is None:
                    out = list(value[:i])
                total += n
            if out is not None:
                out.append(nv)
        if out is None:
            return value, 0
        return (tuple(out) if isinstance(value, tuple) else out), total

    def _int(self, value: int) -> tuple[Any, int]:
        if -100_000_000 < value < 100_000_000 or not self._detectors:
            return value, 0
        digits = str(abs(value))
        if 13 <= len(digits) <= 19 and _card_brand_ok(digits) and luhn_valid(digits):
            return f"{MARKER_PREFIX}:card]", 1
        if self.level == "strict" and len(digits) >= 9:
            return f"{MARKER_PREFIX}:number]", 1
        return value, 0

    def _other(self, value: Any, depth: int) -> tuple[Any, int]:
        if isinstance(value, (bytes, bytearray)):
            text, n = self.text(bytes(value).decode("latin-1"))
            if not n:
                return value, 0
            data = text.encode("latin-1", errors="replace")
            return (bytearray(data) if isinstance(value, bytearray) else data), n
        if isinstance(value, str):  # str subclasses (str enums) come back as str
            text, n = self.text(str.__str__(value))
            return (text, n) if n else (value, 0)
        if isinstance(value, bool) or (
            isinstance(value, _SAFE_SCALARS) and not isinstance(value, int)
        ):
            return value, 0
        if isinstance(value, int):
            return self._int(int(value))
        if isinstance(value, Mapping):
            return self._dict(value, depth)
        if isinstance(value, (list, tuple)):
            return self._sequence(value, depth)
        if isinstance(value, (set, frozenset)):
            items, n = self._sequence(list(value), depth)
            return (type(value)(items) if n else value), n
        as_dict = _fields(value)
        if as_dict is not None:
            out, n = self._dict(as_dict, depth)
            return (out if n else value), n
        try:
            text = str(value)
        except Exception:  # an object that cannot be shown cannot leak through str() either
            return value, 0
        redacted, n = self.text(text)
        return (redacted if n else value), n

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

    def _select(self, text: str) -> list[_Detector]:
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
        chosen: set[int] = set(by_trigger["$label"]) if label else set()
        for k in fired:
            chosen.update(by_trigger["#" if k[0].isdigit() else k[:2]])
        dets = self._detectors
        return [dets[i] for i in sorted(chosen)]

    def _apply(self, text: str, detectors: Iterable[_Detector]) -> tuple[str, int]:
        total = 0
        for det in detectors:
            if det.pattern.search(text) is None:  # cheaper than sub() with a callback
                continue
            found = [0]
            new = det.pattern.sub(partial(self._replace, det, found), text)
            if found[0]:
                text, total = new, total + found[0]
        return text, total

    def _replace(self, det: _Detector, found: list[int], m: re.Match[str]) -> str:
        group = det.group
        if det.kind == "$label":
            group = next(g for g in ("dq", "sq", "u") if m.group(g) is not None)
        secret = m.group(group)
        if not secret or _is_marker(secret) or (det.check is not None and not det.check(m)):
            return m.group(0)
        kind = self._label_kind(m.group("key")) if det.kind == "$label" else det.kind
        found[0] += 1
        whole, base = m.group(0), m.start()
        start, end = m.span(group)
        return f"{whole[: start - base]}{MARKER_PREFIX}:{kind}]{whole[end - base :]}"

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
        found = None
        if self.sensitive_keys:
            words = _camel_words(key)
            for i in range(len(words)):
                cand = "_".join(words[i:])
                if cand in self.sensitive_keys:
                    found = cand
                    break
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
            redacted_key = _MARKER.sub(" ", redacted_key)
        return self.is_sensitive_key(redacted_key)

    def _label_kind(self, key: str) -> str:
        return self.is_sensitive_key(key) or "secret"


def _worth_hiding(value: Any) -> bool:
    # nothing to hide in an empty value, and a marker is already hidden (idempotence)
    if value is None or value == "" or type(value) is bool:
        return False
    return not (isinstance(value, str) and _is_marker(value))


def _fields(value: Any) -> dict[str, Any] | None:
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            out = dump()
        except Exception:
            return None
        return out if isinstance(out, dict) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


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
    wrapped = value
    for key in reversed(path):
        wrapped = {key: wrapped}
    out, count = redactor(wrapped)
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
        if spec not in LEVELS:
            raise ValueError(f"unknown redaction level {spec!r}; use one of {LEVELS}")
        return Redactor(spec)
    if not callable(spec):
        raise TypeError(f"redaction must be a level name or a callable, got {spec!r}")
    return spec
