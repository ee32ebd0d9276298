"""Redaction: secrets never reach the record, everything else is left exactly as it was.

The secrets are fake but format-valid (Luhn-valid card numbers, real JWT structure,
provider prefixes and lengths), generated here so no real credential is in the repo.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from langgraph_external import Event, Workspace
from langgraph_external.ledger.memory import InMemoryLedger
from langgraph_external.pipeline.pipeline import Pipeline
from langgraph_external.record.redaction import (
    DEFAULT_SENSITIVE_KEYS,
    Redactor,
    as_redactor,
    luhn_valid,
    redact_text,
)
from langgraph_external.workspace.projection import WorkspaceProjection

RNG = random.Random(20240501)
ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    # at least one digit and one letter, like real keys
    body = "".join(RNG.choice(alphabet) for _ in range(n - 2))
    return body + RNG.choice(string.digits) + RNG.choice(string.ascii_letters)


def card(prefix: str, length: int) -> str:
    """A Luhn-valid card number with the given IIN prefix."""
    body = prefix + "".join(RNG.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        if luhn_valid(body + check):
            return body + check
    raise AssertionError("unreachable")


def b64url(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def jwt() -> str:
    header = b64url({"alg": "HS256", "typ": "JWT"})
    claims = b64url({"sub": "user-42", "email": "ann@example.com", "exp": 1900000000})
    sig = base64.urlsafe_b64encode(RNG.randbytes(32)).decode().rstrip("=")
    return f"{header}.{claims}.{sig}"


PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join(rand(64, ALNUM + "+/") for _ in range(4))
    + "\n-----END RSA PRIVATE KEY-----"
)
SECRETS: dict[str, str] = {
    "openai": "sk-proj-" + rand(48, ALNUM + "_-"),
    "openai_legacy": "sk-" + rand(48),
    "anthropic": "sk-ant-api03-" + rand(93, ALNUM + "_-"),
    "aws_id": "AKIA" + rand(16, string.ascii_uppercase + string.digits).upper(),
    "github": "ghp_" + rand(36),
    "github_pat": "github_pat_" + rand(22) + "_" + rand(59),
    "slack": "xoxb-123456789012-1234567890123-" + rand(24),
    "google": "AIza" + rand(35, ALNUM + "_-"),
    "stripe": "sk_live_" + rand(24),
    "stripe_restricted": "rk_live_" + rand(24),
    "jwt": jwt(),
    "bearer": rand(40, ALNUM + "._-"),
    "basic": base64.b64encode(b"svc-user:Tr0ub4dor&3").decode(),
    "visa": card("4", 16),
    "mastercard": card("53", 16),
    "amex": card("37", 15),
}
VISA_SPACED = " ".join(SECRETS["visa"][i : i + 4] for i in range(0, 16, 4))
AMEX_DASHED = f"{SECRETS['amex'][:4]}-{SECRETS['amex'][4:10]}-{SECRETS['amex'][10:]}"
AWS_SECRET = rand(40, ALNUM + "/+")
PASSWORD = "Tr0ub4dor&3-correct"


def leaks(output: Any, secrets: list[str]) -> list[str]:
    text = json.dumps(output, default=str)
    digits_only = "".join(c for c in text if c.isdigit())
    found = []
    for s in secrets:
        if s in text or (s.isdigit() and s in digits_only):
            found.append(s)
    return found


def corpus() -> tuple[Any, list[str], int]:
    """Secrets in tool args, tool results, LLM messages and state: (value, secrets, count)."""
    s = SECRETS
    value = {
        "tool_start": {
            "name": "http_request",
            "args": {
                "url": f"https://api.example.com/v1/charges?api_key={s['stripe']}",
                "headers": {"Authorization": f"Bearer {s['bearer']}", "X-Trace": "t-1"},
                "body": {"card_number": VISA_SPACED, "cvc": "123", "amount": 4200},
            },
        },
        "tool_end": {
            "output": json.dumps(
                {"access_token": s["jwt"], "aws_access_key_id": s["aws_id"], "ok": True}
            ),
            "raw_text": f"aws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1\n",
        },
        "llm": [
            {"role": "system", "content": "You are a deploy bot."},
            {
                "role": "user",
                "content": (
                    f"Use {s['openai']} or {s['openai_legacy']} for OpenAI, {s['anthropic']} "
                    f"for Claude and {s['google']} for Maps. Clone with {s['github']} "
                    f"or {s['github_pat']}; post to Slack with {s['slack']}."
                ),
            },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "name": "charge",
                        "args": {"card": AMEX_DASHED, "key": s["stripe_restricted"]},
                    }
                ],
            },
            {"role": "tool", "content": f"curl -H 'Authorization: Basic {s['basic']}' ..."},
        ],
        "state": {
            "config": {
                "db": {"dsn": f"postgresql://app:{PASSWORD}@db.internal:5432/shop"},
                "deploy": {"ssh_key": PEM, "password": PASSWORD, "apiKey": s["openai"]},
            },
            "cards_on_file": [int(s["mastercard"])],
        },
    }
    secrets = [*s.values(), VISA_SPACED, AMEX_DASHED, AWS_SECRET, PASSWORD, PEM.splitlines()[1]]
    # 1 api_key= label, 1 Authorization key, 1 card, 1 access_token label (covers the JWT),
    # 1 AWS id, 1 AWS secret label, 7 keys in the user message, 1 Amex, 1 rk_live,
    # 1 Basic credential, 1 URL password, 1 PEM, 1 password key, 1 apiKey key, 1 int card
    return value, secrets, 21


# -- the corpus ------------------------------------------------------------------------
def test_corpus_has_no_leaks_and_exact_count() -> None:
    value, secrets, expected = corpus()
    assert leaks(value, secrets)  # the test would prove nothing otherwise
    out, count = Redactor()(value)
    assert leaks(out, secrets) == []
    assert count == expected


def test_markers_say_what_was_there() -> None:
    out, _ = Redactor()(corpus()[0])
    text = json.dumps(out)
    for kind in (
        "openai_key",
        "anthropic_key",
        "aws_access_key_id",
        "github_token",
        "slack_token",
        "google_api_key",
        "stripe_key",
        "card",
        "private_key",
        "password",
        "api_key",
        "authorization",
        "token",
        "secret_access_key",
    ):
        assert f"[REDACTED:{kind}]" in text, kind


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_secret_alone_in_text(name: str) -> None:
    secret = SECRETS[name]
    if name == "bearer":
        secret = f"Bearer {secret}"
    if name == "basic":
        secret = f"Basic {secret}"
    text = f"see: {secret} (rotated 2024-05-01)"
    out, n = redact_text(text)
    assert n == 1, out
    assert SECRETS[name] not in out
    assert out.startswith("see: ") and out.endswith(" (rotated 2024-05-01)")


def test_unlabelled_jwts_and_pem_keys_are_redacted() -> None:
    out, n = Redactor().text(f"id_token={SECRETS['jwt']}")
    assert (out, n) == ("id_token=[REDACTED:token]", 1)
    out, n = Redactor().text(f"jwt {SECRETS['jwt']} end")
    assert (out, n) == ("jwt [REDACTED:jwt] end", 1)
    out, n = Redactor().text(f"key:\n{PEM}\nthanks")
    assert (out, n) == ("key:\n[REDACTED:private_key]\nthanks", 1)


# -- what must stay untouched -------------------------------------------------------
NON_SECRETS = [
    "ORD-2024-000123",
    "order 1234567890123 shipped",
    "order 4539 1488 0343 6468 9",  # a 17-digit run that is not a valid card
    "4111111111111112",  # Visa-like but not Luhn-valid
    "tracking 1000000000000009",  # Luhn-valid, but no card scheme starts with 1
    "550e8400-e29b-41d4-a716-446655440000",
    "2024-05-01T12:34:56.789Z",
    "1714567890123",
    "version 1.2.3.4, build 20240501",
    "The bearer of bad news had a basic idea about keys and tokens.",
    "max_tokens=512, token_usage: prompt_tokens=12",
    "def login(password: str) -> str:\n    token = get_token(password)\n    return token",
    "if api_key is None: api_key = os.environ['OPENAI_API_KEY']",
    "pk_live_" + "a" * 24,  # publishable, not secret
    "call_8c1f2b7d9e0a4c3b",
    "sk-learn is a library",
    "Ask the desk (ext. 4412) or mail support",
]


@pytest.mark.parametrize("text", NON_SECRETS)
def test_non_secrets_are_untouched(text: str) -> None:
    assert Redactor().text(text) == (text, 0)


def test_non_secret_structures_are_untouched_and_shared() -> None:
    value = {
        "usage": {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52},
        "token_usage": {"input_tokens": 3},
        "max_tokens": 512,
        "keyboard": "qwerty",
        "ids": [123456789012, 4111111111111112, 3.5, None, True],
        "when": "2024-05-01T12:34:56Z",
        "code": "def f(x):\n    return {'a': x}\n",
    }
    out, n = Redactor()(value)
    assert n == 0
    assert out is value  # nothing to change: no copy at all


# -- sensitive keys --------------------------------------------------------------------
@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "db_password",
        "clientSecret",
        "access_token",
        "refreshToken",
        "X-Api-Key",
        "apiKey",
        "APIKey",
        "Authorization",
        "Proxy-Authorization",
        "Cookie",
        "Set-Cookie",
        "credentials",
        "aws_secret_access_key",
        "private_key",
    ],
)
def test_sensitive_keys_hide_their_value_whole(key: str) -> None:
    out, n = Redactor()({"outer": {key: {"nested": ["anything", 1]}}, "keep": "me"})
    assert n == 1
    assert out["outer"][key].startswith("[REDACTED:")
    assert out["keep"] == "me"


@pytest.mark.parametrize(
    "key", ["max_tokens", "token_usage", "tokens", "keyboard", "key", "passenger", "secretary"]
)
def test_similar_keys_are_not_sensitive(key: str) -> None:
    assert Redactor().is_sensitive_key(key) is None


def test_empty_values_of_sensitive_keys_are_not_counted() -> None:
    value = {"password": "", "token": None, "secret": False}
    assert Redactor()(value) == (value, 0)


def test_custom_sensitive_keys_replace_the_defaults() -> None:
    r = Redactor(sensitive_keys=DEFAULT_SENSITIVE_KEYS | {"ssn"})
    out, n = r({"ssn": "078-05-1120", "password": "x", "note": "ssn: 078051120"})
    assert out == {
        "ssn": "[REDACTED:ssn]",
        "password": "[REDACTED:password]",
        "note": "ssn: [REDACTED:ssn]",
    }
    assert n == 3
    only = Redactor(sensitive_keys=["ssn"])
    assert only({"password": "hunter2"}) == ({"password": "hunter2"}, 0)


def test_labelled_secrets_in_text() -> None:
    r = Redactor()
    cases = {
        'password="p@ss w0rd"': 'password="[REDACTED:password]"',
        "{'api_key': 'abc'}": "{'api_key': '[REDACTED:api_key]'}",
        '{"token": "x\\"y"}': '{"token": "[REDACTED:token]"}',
        "DB_PASSWORD=hunter2\nDEBUG=1": "DB_PASSWORD=[REDACTED:password]\nDEBUG=1",
        "GET /cb?code=1&access_token=abcDEF123&state=9": (
            "GET /cb?code=1&access_token=[REDACTED:token]&state=9"
        ),
        "Cookie: sid=abc123; theme=dark\nAccept: */*": ("Cookie: [REDACTED:cookie]\nAccept: */*"),
    }
    for text, expected in cases.items():
        assert r.text(text) == (expected, 1), text


# -- levels ----------------------------------------------------------------------------
PII = (
    "Mail ann.lee@example.co.uk or call +1 415 555 0132 / (415) 555-0199 from 10.0.0.12; "
    "acct 123456789"
)


def test_strict_level_also_redacts_emails_phones_ips_and_numbers() -> None:
    off = Redactor.from_level("off")
    value, _, _ = corpus()
    assert off(value) == (value, 0)
    assert Redactor("standard").text(PII) == (PII, 0)
    out, n = Redactor("strict").text(PII)
    assert out == (
        "Mail [REDACTED:email] or call [REDACTED:phone] / [REDACTED:phone] from "
        "[REDACTED:ipv4]; acct [REDACTED:number]"
    )
    assert n == 5
    strict_out, strict_n = Redactor("strict")(value)
    assert leaks(strict_out, corpus()[1]) == []
    assert strict_n >= corpus()[2]


def test_unknown_level_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown redaction level"):
        Redactor("paranoid")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown redaction level"):
        as_redactor("paranoid")  # type: ignore[arg-type]


def test_as_redactor_turns_levels_into_redactors_and_off_into_none() -> None:
    assert as_redactor(None) is None
    assert as_redactor("off") is None
    r = as_redactor("strict")
    assert isinstance(r, Redactor) and r.level == "strict"
    fn = Redactor()
    assert as_redactor(fn) is fn
    with pytest.raises(TypeError):
        as_redactor(42)  # type: ignore[arg-type]


# -- user detectors ------------------------------------------------------------------
def test_callables_run_after_the_builtins() -> None:
    seen: list[str] = []

    def employee_ids(text: str) -> tuple[str, int]:
        seen.append(text)
        n = text.count("EMP-")
        return text.replace("EMP-", "[REDACTED:employee]-"), n

    r = Redactor(callables=[employee_ids])
    out, n = r({"who": "EMP-0042", "key": SECRETS["github"]})
    assert out == {"who": "[REDACTED:employee]-0042", "key": "[REDACTED:github_token]"}
    assert n == 2
    assert "[REDACTED:github_token]" in seen  # it saw the built-ins' result


def test_extra_patterns_redact_the_whole_match_or_the_secret_group() -> None:
    r = Redactor(extra_patterns={"ticket": r"TCK-\d{6}", "pin": r"pin (?P<secret>\d{4})"})
    assert r.text("TCK-123456 with pin 9876") == (
        "[REDACTED:ticket] with pin [REDACTED:pin]",
        2,
    )


def test_off_level_still_runs_explicit_user_detectors() -> None:
    r = Redactor("off", callables=[lambda t: ("[REDACTED:x]", 1) if t == "x" else (t, 0)])
    assert r({"a": "x", "password": "y"}) == ({"a": "[REDACTED:x]", "password": "y"}, 1)


# -- value handling ------------------------------------------------------------------
def test_input_is_never_mutated() -> None:
    value, _, _ = corpus()
    before = copy.deepcopy(value)
    Redactor()(value)
    assert value == before


def test_redacting_twice_changes_nothing_and_returns_the_same_object() -> None:
    r = Redactor("strict")
    once, n1 = r(corpus()[0])
    twice, n2 = r(once)
    assert n1 > 0
    assert (twice, n2) == (once, 0)
    assert twice is once


def test_tuples_bytes_bytearrays_and_sets_keep_their_type() -> None:
    r = Redactor()
    gh = SECRETS["github"]
    out, n = r(
        {
            "t": (gh, 1),
            "raw": f"token {gh}".encode(),
            "buf": bytearray(gh.encode()),
            "bin": b"\xff\xfe" + gh.encode() + b"\x00",
            1: gh,
            None: "x",
            "s": {gh},
        }
    )
    assert out["t"] == ("[REDACTED:github_token]", 1)
    assert out["raw"] == b"token [REDACTED:github_token]"
    assert out["buf"] == bytearray(b"[REDACTED:github_token]")
    assert out["bin"] == b"\xff\xfe[REDACTED:github_token]\x00"  # invalid UTF-8 still scanned
    assert out[1] == "[REDACTED:github_token]" and out[None] == "x"
    assert out["s"] == {"[REDACTED:github_token]"}
    assert n == 6


def test_secret_used_as_a_key() -> None:
    a, b = SECRETS["github"], "ghp_" + rand(36)
    out, n = Redactor()({a: 1, b: 2, "plain": 3})
    assert n == 2
    assert sorted(out.values()) == [1, 2, 3]
    assert a not in json.dumps(out) and b not in json.dumps(out)


@dataclass
class Creds:
    user: str
    password: str


class Opaque:
    def __str__(self) -> str:
        return f"Opaque(token={SECRETS['slack']})"


def test_objects_holding_secrets_become_dicts_or_redacted_text() -> None:
    r = Redactor()
    out, n = r({"c": Creds("ann", "pw-1234"), "o": Opaque(), "plain": Creds("bob", "")})
    assert out["c"] == {"user": "ann", "password": "[REDACTED:password]"}
    assert out["o"] == "Opaque(token=[REDACTED:token])"
    assert isinstance(out["plain"], Creds)
    assert n == 2


def test_deep_nesting_does_not_crash() -> None:
    value: Any = SECRETS["github"]
    for _ in range(500):
        value = [value]
    out, n = Redactor()(value)
    assert n == 1 and SECRETS["github"] not in repr(out)


def test_redact_text_for_raw_responses() -> None:
    raw = json.dumps({"key": SECRETS["openai"], "email": "ann@example.com"}).encode()
    out, n = redact_text(raw)
    assert isinstance(out, bytes) and n == 1
    assert SECRETS["openai"].encode() not in out and b"ann@example.com" in out
    out, n = redact_text(raw, level="strict")
    assert n == 2 and b"ann@example.com" not in out
    assert redact_text(b"nothing here") == (b"nothing here", 0)


def test_every_trigger_maps_to_a_detector() -> None:
    # a trigger without a detector would raise, one without a trigger would leak
    for level in ("standard", "strict"):
        r = Redactor(level)  # type: ignore[arg-type]
        assert r._trigger is not None
        for branch in r._trigger.pattern.split("|"):
            if branch[0].isalpha() or branch[0] in ":@":
                key = branch[:2] if branch[0] != "@" else "@"
                assert r._by_trigger.get(key), branch
        for det in r._detectors:
            assert det.triggers, det.kind


# -- the pipeline ----------------------------------------------------------------------
def test_pipeline_counts_redactions_per_event(tmp_path: Path) -> None:
    sink = InMemoryLedger()
    with Pipeline(sink, redactor=Redactor(), spool_dir=tmp_path / "spool") as p:
        p.emit(Event.new("tool_end", "t", payload={"password": "x", "ok": "fine"}))
        p.emit(Event.new("tool_end", "t", payload={"ok": "fine"}))
        p.flush()
    assert [e.redactions for e in sink.events] == [1, 0]


def test_workspace_holds_no_secrets(tmp_path: Path) -> None:
    value, secrets, expected = corpus()
    sink = WorkspaceProjection(Workspace(tmp_path / "ws"), redactor=Redactor())
    pipeline = Pipeline(
        InMemoryLedger(), projections=[sink], redactor=Redactor(), spool_dir=tmp_path / "spool"
    )
    pipeline.emit(Event.new("tool_end", "thread-secret", payload=value, name="http_request"))
    pipeline.close()

    files = [p for p in (tmp_path / "ws").rglob("*") if p.is_file()]
    assert any(p.name == "events.jsonl" for p in files)
    for path in files:
        data = path.read_bytes()
        digits = bytes(c for c in data if 48 <= c <= 57)
        for s in secrets:
            assert s.encode() not in data, (path, s)
            if s.isdigit():
                assert s.encode() not in digits, (path, s)
    events = [
        json.loads(line)
        for p in files
        if p.name == "events.jsonl"
        for line in p.read_text().splitlines()
    ]
    assert [e["redactions"] for e in events] == [expected]
    assert "[REDACTED:card]" in json.dumps(events[0]["payload"])


@pytest.mark.parametrize(
    "text",
    [
        "a" * 100_000 + "@",
        "a.a@b" * 20_000,
        "password=" * 10_000,
        "4" * 100_000,
        'token: "' + "\\x" * 50_000,
        "Authorization: " + "a " * 50_000,
        "http://a:b" * 10_000,
        "1.2.3." * 20_000,
    ],
    ids=lambda t: repr(t[:12]),
)
def test_adversarial_input_takes_linear_time(text: str) -> None:
    # a generous bound: quadratic backtracking on 100k characters takes seconds to minutes
    start = time.perf_counter()
    Redactor("strict").text(text)
    assert time.perf_counter() - start < 1.0
