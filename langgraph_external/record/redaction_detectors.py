"""What counts as a secret: the built-in detectors of :mod:`~langgraph_external.record.redaction`.

A :class:`Detector` is one kind of finding: a pattern, the part of a match to replace and
a validator that rejects look-alikes (a card number must pass Luhn and look like a card
of a real scheme; a ``Bearer`` word must be followed by something token-like). The
tables here are the levels' detectors in the order they run; :data:`TRIGGERS_STANDARD`
and :data:`TRIGGERS_STRICT` are one cheap regex pass that decides which of them can
apply to a string at all (usually none). Labelled secrets in text (``password=...``)
are found by detectors built from the redactor's sensitive key names
(:func:`label_detectors`).

Every finding is replaced by :func:`marker` of its kind, ``[REDACTED:<kind>]``.

Example:
    >>> [d.kind for d in PROVIDERS[:3]]
    ['anthropic_key', 'openai_key', 'stripe_key']
    >>> is_card_number("4111111111111111"), is_card_number("1234567890123456")
    (True, False)
    >>> marker("card"), is_marker(marker("card"))
    ('[REDACTED:card]', True)
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = [
    "CARD",
    "DEFAULT_SENSITIVE_KEYS",
    "LABEL",
    "LINE_VALUED",
    "MARKER",
    "MARKER_PREFIX",
    "PEM",
    "PROVIDERS",
    "STRICT",
    "TRIGGERS_STANDARD",
    "TRIGGERS_STRICT",
    "Detector",
    "is_card_number",
    "is_marker",
    "key_words",
    "label_detectors",
    "luhn_valid",
    "marker",
    "pattern_detector",
]

MARKER_PREFIX = "[REDACTED"
"""How every replacement starts (a value that starts so is already redacted)."""
MARKER = re.compile(r"\[REDACTED(?::[^\]]*)?\]")
"""A replacement anywhere in a text."""
LABEL = "$label"
"""The kind (and trigger) of the detectors of labelled secrets: the key names the kind."""

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
"""Key names whose values are replaced whole (see
:meth:`~langgraph_external.record.redaction.Redactor.is_sensitive_key`).

A key matches when it ends with one of these, word-wise and case-insensitively:
``access_token``, ``X-Api-Key``, ``clientSecret``, ``Set-Cookie`` match; ``max_tokens``,
``token_usage`` and ``keyboard`` do not.
"""

LINE_VALUED = frozenset({"authorization", "cookie"})
"""Keys whose labelled value runs to the end of the line (``Cookie: a=1; b=2``)."""


def marker(kind: str) -> str:
    """What a finding of ``kind`` is replaced by."""
    return f"{MARKER_PREFIX}:{kind}]"


def is_marker(text: str) -> bool:
    """Whether ``text`` is (starts with) a replacement: it is never redacted again."""
    return text.startswith(MARKER_PREFIX)


def key_words(key: str) -> list[str]:
    """The lower-case words of a key name, camelCase and separators split.

    Example:
        >>> key_words("X-Api-Key"), key_words("clientSecret"), key_words("HTTPHeader")
        (['x', 'api', 'key'], ['client', 'secret'], ['http', 'header'])
    """
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", key)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


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
    # Discover (its 622126-622925 is in UnionPay's 62), JCB, UnionPay
    if d.startswith(("6011", "65", "62")) or 644 <= int(d[:3]) <= 649 or 3528 <= four <= 3589:
        return 16 <= n <= 19
    if two in (50, 56, 57, 58, 63, 67) or d.startswith("6"):  # Maestro and others
        return 12 <= n <= 19
    return False


def is_card_number(digits: str) -> bool:
    """Whether a string of digits is a payment card number: its length, a scheme's
    number range (IIN) and the Luhn checksum."""
    return 13 <= len(digits) <= 19 and _card_brand_ok(digits) and luhn_valid(digits)


def _card(m: re.Match[str]) -> bool:
    return is_card_number(re.sub(r"\D", "", m.group(0)))


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
class Detector:
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


PEM = Detector(
    "private_key",
    re.compile(
        r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)",
        _A | re.S,
    ),
    triggers=("PR",),
)
PROVIDERS = (
    Detector("anthropic_key", _word("sk-ant-", r"[A-Za-z0-9_\-]{20,}"), ("k-",)),
    Detector(
        "openai_key",
        _word("sk-", r"(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
        ("k-",),
        check=_has_digit,
    ),
    Detector(
        "stripe_key",
        re.compile(
            r"(?:sk_(?<![A-Za-z0-9_]sk_)|rk_(?<![A-Za-z0-9_]rk_))(?:live|test)_[A-Za-z0-9]{16,}"
            r"|whsec_(?<![A-Za-z0-9_]whsec_)[A-Za-z0-9]{24,}",
            _A,
        ),
        ("k_", "wh"),
    ),
    Detector("aws_access_key_id", _word("A", r"(?:KIA|SIA)[A-Z0-9]{16}\b"), ("KI", "SI")),
    Detector(
        "github_token",
        _word("g", r"(?:h[pousr]_[A-Za-z0-9]{36,255}|ithub_pat_[A-Za-z0-9_]{22,255})"),
        ("gh", "gi"),
    ),
    Detector("slack_token", _word("xox", r"[abeoprs]-[A-Za-z0-9\-]{10,}"), ("xo",)),
    Detector(
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+", _A),
        (":/",),
    ),
    Detector("google_api_key", _word("AIza", r"[0-9A-Za-z_\-]{35}"), ("za",)),
    Detector(
        "huggingface_token",
        _word("hf_", r"[A-Za-z]{34}(?![A-Za-z0-9_])"),
        ("hf",),
        check=_mixed_case,
    ),
    Detector("gitlab_token", _word("glpat-", r"[A-Za-z0-9_\-]{20,}"), ("gl",)),
    Detector("npm_token", _word("npm_", r"[A-Za-z0-9]{36}(?![A-Za-z0-9])"), ("np",)),
    Detector("sendgrid_key", _word("SG.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"), ("SG",)),
    Detector("pypi_token", _word("pypi-AgE", r"[A-Za-z0-9_\-]{50,}"), ("py",)),
    Detector(
        "jwt",
        _word("eyJ", rf"{_B64URL}{{8,}}\.{_B64URL}{{2,}}\.{_B64URL}*(?:\.{_B64URL}+){{0,2}}"),
        ("yJ",),
    ),
    Detector(
        "bearer_token",
        re.compile(r"\b(?:Bearer|bearer|BEARER)[ \t]+([A-Za-z0-9._~+/\-]{8,}=*)", _A),
        ("Be", "be", "BE"),
        group=1,
        check=_bearer,
    ),
    Detector(
        "basic_auth",
        re.compile(r"\b(?:Basic|basic|BASIC)[ \t]+([A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])", _A),
        ("Ba", "ba", "BA"),
        group=1,
        check=_basic,
    ),
    Detector(
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
CARD = Detector(
    "card",
    re.compile(rf"[2-6](?<!{_NOT_BEFORE_CARD}[2-6])\d{{3}}(?:[ \-]?\d){{9,15}}(?!\d)", _A),
    triggers=("#",),
    check=_card,
)
STRICT = (
    Detector(
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
    Detector(
        "ipv4",
        re.compile(
            r"\d(?<![\w.]\d)\d{0,2}(?:\.\d{1,3}){3}(?!\.?\d)",
            _A,
        ),
        ("#",),
        check=_ipv4,
    ),
    Detector(
        "phone",
        re.compile(
            r"(?<![\w+])(?:\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]?\d{2,4}){1,4}"
            r"|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4}|\d{3}[ .\-]\d{3}[ .\-]\d{4})(?![\w])",
            _A,
        ),
        ("#",),
        check=_phone,
    ),
    Detector("number", re.compile(r"\d(?<![\w.\-]\d)\d{8,}(?!\d)", _A), ("#",)),
)

# One regex pass decides whether any built-in detector can apply. It only states necessary
# conditions, loosely (``k-`` for ``sk-``, ``za`` for ``AIza``): every branch starts with
# a literal that is rare in ordinary text, so the engine's first-character scan in C
# stops seldom. A branch that starts with a character class would disable that scan.
TRIGGERS_STANDARD = (
    r"k-|k_live_|k_test_|whsec_|KIA|SIA|gh[pousr]_|github_pat_|xox|za|yJ|"
    r"hf_|glpat-|npm_|SG\.|pypi-AgE|"
    r"Bearer|bearer|BEARER|Basic|basic|BASIC|PRIVATE|://|"
    # a card's first 8 digits, not inside a longer number, a word or a UUID
    + "|".join(rf"{d}(?<!{_NOT_BEFORE_CARD}{d})\d{{3}}[ \-]?\d{{4}}" for d in "23456")
)
TRIGGERS_STRICT = r"|@|" + "|".join(rf"{d}\d\d|{d}\.\d" for d in "0123456789")


def pattern_detector(kind: str, pattern: str | re.Pattern[str]) -> Detector:
    """A user's ``extra_patterns`` entry: the match (or its group ``secret``) is replaced.

    Example:
        >>> pattern_detector("ssn", r"ssn (?P<secret>\\d+)").group
        'secret'
    """
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    group: int | str = "secret" if "secret" in rx.groupindex else 0
    return Detector(kind, rx, group=group)


def label_detectors(sensitive_keys: Iterable[str]) -> list[Detector]:
    """Detectors of labelled secrets in text (``password=...``, ``"api_key": "..."``,
    ``Authorization: ...``) for these key names (words joined by ``_``, as
    :func:`key_words` splits them).

    Example:
        >>> [d.kind for d in label_detectors(["password", "authorization"])]
        ['$label', '$label']
    """

    def alternation(keys: Iterable[str]) -> str:
        parts = [r"[_.\- ]?".join(map(re.escape, k.split("_"))) for k in keys]
        return "|".join(sorted(parts, key=len, reverse=True))

    names = list(sensitive_keys)
    sep = r"""(?P<key>(?i:{keys}))(?![A-Za-z0-9])\\*["']?[ \t]*(?::=|=>|[:=])[ \t]*"""
    quoted = r"""(?:"(?P<dq>(?:[^"\\\r\n]|\\.)+)"|'(?P<sq>[^'\r\n]+)'"""
    line = [k for k in names if k.split("_")[-1] in LINE_VALUED]
    other = [k for k in names if k not in line]
    out = []
    for keys, unquoted in (
        (line, r"(?P<u>[^\s\"'][^\r\n\"']*[^\s\"'])"),
        # atomic (look-ahead + back-reference): ``get_token(`` must not match ``get_toke``
        (other, r"""\\*["']?(?=(?P<u>[^\s"'\\<>,;&(){}\[\]]+))(?P=u)(?![(\[])"""),
    ):
        if not keys:
            continue
        rx = re.compile(sep.format(keys=alternation(keys)) + quoted + "|" + unquoted + ")", _A)
        out.append(Detector(LABEL, rx, (LABEL,), check=_label_value))
    return out
