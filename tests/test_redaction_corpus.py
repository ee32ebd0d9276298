"""A corpus of realistic secret shapes: each one is removed wherever a value can hold it.

Every value below is made up (random characters in the provider's format, Luhn-valid card
numbers no issuer has given out). For each shape the redactor must remove the secret in
free text, in JSON text, nested in dicts, lists, tuples and sets, as a dict key, in bytes
and bytearrays, and whole under a sensitive key. The end-to-end test runs the corpus
through a real graph under ``External`` and searches the ledger and the workspace — with
secrets that only their key path gives away too: state channels named ``password``,
``api_key``, ``private_key`` (a large value), sensitive keys inside state values, tool
arguments, interrupt and resume values, all of which also land in pending-write lines.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import random
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ormsgpack
import psycopg
import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt
from typer.testing import CliRunner

from langgraph_external import External
from langgraph_external.cli import app as lgx_app
from langgraph_external.options import Options
from langgraph_external.record.redaction import Redactor, redact_text

ALNUM = string.ascii_letters + string.digits
UPPER_NUM = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"


def fake(alphabet: str, n: int, seed: str) -> str:
    """``n`` made-up characters of ``alphabet``, the same on every run."""
    rng = random.Random(f"{seed}:{n}")
    out = "".join(rng.choice(alphabet) for _ in range(n))
    # every real key format carries digits; make sure a made-up one does too
    return (
        out
        if any(c.isdigit() for c in out) or not any(c.isdigit() for c in alphabet)
        else (out[:-1] + "7")
    )


def luhn_card(prefix: str, length: int, seed: str) -> str:
    """A made-up card number with a valid Luhn check digit."""
    rng = random.Random(seed)
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def grouped(digits: str, sizes: tuple[int, ...], sep: str) -> str:
    parts, i = [], 0
    for n in sizes:
        parts.append(digits[i : i + n])
        i += n
    return sep.join(parts)


def pem(label: str, seed: str) -> tuple[str, str]:
    """A PEM block and one line of its body (the part that must never be recorded)."""
    lines = [fake(B64, 64, f"{seed}{i}") for i in range(6)]
    body = "\n".join(lines)
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n", lines[2]


def jwt(seed: str) -> str:
    def seg(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    claims = {"sub": f"user-{seed}", "role": "admin", "exp": 1900000000}
    return f"{seg({'alg': 'HS256', 'typ': 'JWT'})}.{seg(claims)}.{fake(B64URL, 43, seed)}"


@dataclass(frozen=True)
class Shape:
    """One secret shape.

    Attributes:
        name: what it is.
        secret: the part that must never be recorded.
        text: how it shows up in practice (with its label, header, URL...).
        bare: the secret alone is recognisable without ``text``'s context (a line of a
            PEM body, a password or an opaque token is not).
    """

    name: str
    secret: str
    text: str
    bare: bool = True


def _corpus() -> list[Shape]:
    k: dict[str, str] = {}
    k["openai"] = "sk-" + fake(ALNUM, 48, "openai")
    k["openai_proj"] = "sk-proj-" + fake(B64URL, 74, "openai_proj")
    k["openai_svc"] = "sk-svcacct-" + fake(B64URL, 58, "openai_svc")
    k["anthropic"] = "sk-ant-api03-" + fake(B64URL, 93, "anthropic") + "AA"
    k["aws_id"] = "AKIA" + fake(UPPER_NUM, 16, "aws_id")
    k["aws_sts"] = "ASIA" + fake(UPPER_NUM, 16, "aws_sts")
    k["aws_secret"] = fake(B64, 40, "aws_secret")
    k["ghp"] = "ghp_" + fake(ALNUM, 36, "ghp")
    k["gho"] = "gho_" + fake(ALNUM, 36, "gho")
    k["github_pat"] = "github_pat_" + fake(ALNUM, 22, "pat1") + "_" + fake(ALNUM, 59, "pat2")
    k["gitlab"] = "glpat-" + fake(B64URL, 20, "gitlab")
    k["slack_bot"] = "xoxb-" + "-".join(
        [fake(string.digits, 12, "sb1"), fake(string.digits, 13, "sb2"), fake(ALNUM, 24, "sb3")]
    )
    k["slack_hook"] = (
        "https://hooks.slack.com/services/T"
        + fake(UPPER_NUM, 8, "sh1")
        + "/B"
        + fake(UPPER_NUM, 10, "sh2")
        + "/"
        + fake(ALNUM, 24, "sh3")
    )
    k["google"] = "AIza" + fake(B64URL, 35, "google")
    k["stripe_sk"] = "sk_live_" + fake(ALNUM, 99, "stripe_sk")
    k["stripe_rk"] = "rk_live_" + fake(ALNUM, 99, "stripe_rk")
    k["stripe_test"] = "sk_test_" + fake(ALNUM, 24, "stripe_test")
    k["stripe_whsec"] = "whsec_" + fake(ALNUM, 32, "whsec")
    k["huggingface"] = "hf_" + fake(string.ascii_letters, 34, "hf")
    k["npm"] = "npm_" + fake(ALNUM, 36, "npm")
    k["sendgrid"] = "SG." + fake(B64URL, 22, "sg1") + "." + fake(B64URL, 43, "sg2")
    k["pypi"] = "pypi-AgEIcHlwaS5vcmc" + fake(B64URL, 70, "pypi")
    k["jwt"] = jwt("corpus")
    k["opaque"] = fake(ALNUM + "._-", 40, "opaque")
    k["basic"] = base64.b64encode(b"deploy-bot:" + fake(ALNUM, 20, "basic").encode()).decode()
    rsa, rsa_line = pem("RSA PRIVATE KEY", "rsa")
    ec, ec_line = pem("EC PRIVATE KEY", "ec")
    ssh, ssh_line = pem("OPENSSH PRIVATE KEY", "ssh")
    enc, enc_line = pem("ENCRYPTED PRIVATE KEY", "enc")
    pk8, pk8_line = pem("PRIVATE KEY", "pk8")
    pw = {n: fake(ALNUM, 14, n) + "!" for n in ("pg", "redis", "mongo", "amqp", "mysql", "git")}
    pw["redis_enc"] = fake(ALNUM, 6, "re1") + "%40" + fake(ALNUM, 8, "re2")
    pw |= {n: fake(ALNUM, 16, n) for n in ("kv", "yaml", "env", "ado", "libpq", "json")}
    azure = fake(B64, 86, "azure") + "=="
    sas = fake(B64, 43, "sas") + "="
    cookie = fake(ALNUM, 32, "cookie")
    visa = luhn_card("4", 16, "visa")
    mc = luhn_card("5", 16, "mc")
    amex = luhn_card("37", 15, "amex")
    visa13 = luhn_card("4", 13, "visa13")
    discover = luhn_card("6011", 16, "discover")

    return [
        Shape("OpenAI key", k["openai"], f"export OPENAI_API_KEY={k['openai']}"),
        Shape("OpenAI project key", k["openai_proj"], f'client = OpenAI("{k["openai_proj"]}")'),
        Shape("OpenAI service key", k["openai_svc"], f"key: {k['openai_svc']}"),
        Shape("Anthropic key", k["anthropic"], f"x-api-key: {k['anthropic']}"),
        Shape("AWS access key id", k["aws_id"], f"aws_access_key_id = {k['aws_id']}"),
        Shape("AWS STS key id", k["aws_sts"], f"AccessKeyId: {k['aws_sts']}"),
        Shape(
            "AWS secret key", k["aws_secret"], f"aws_secret_access_key = {k['aws_secret']}", False
        ),
        Shape(
            "GitHub PAT", k["ghp"], f"git clone https://x-access-token:{k['ghp']}@github.com/o/r"
        ),
        Shape("GitHub OAuth token", k["gho"], f"Authorization: token {k['gho']}"),
        Shape("GitHub fine-grained PAT", k["github_pat"], f"GH_TOKEN={k['github_pat']}"),
        Shape("GitLab PAT", k["gitlab"], f"PRIVATE-TOKEN: {k['gitlab']}"),
        Shape("Slack bot token", k["slack_bot"], f"SLACK_BOT_TOKEN={k['slack_bot']}"),
        Shape("Slack webhook", k["slack_hook"], f"curl -X POST {k['slack_hook']} -d @msg.json"),
        Shape("Google API key", k["google"], f"https://maps.example.com/api?key={k['google']}"),
        Shape("Stripe secret key", k["stripe_sk"], f"stripe.api_key = '{k['stripe_sk']}'"),
        Shape("Stripe restricted key", k["stripe_rk"], f"STRIPE_KEY={k['stripe_rk']}"),
        Shape("Stripe test key", k["stripe_test"], f"using {k['stripe_test']} in CI"),
        Shape("Stripe webhook secret", k["stripe_whsec"], f"endpoint secret {k['stripe_whsec']}"),
        Shape("Hugging Face token", k["huggingface"], f"huggingface-cli login {k['huggingface']}"),
        Shape("npm token", k["npm"], f"//registry.npmjs.org/:_authToken={k['npm']}"),
        Shape("SendGrid key", k["sendgrid"], f"SENDGRID_API_KEY={k['sendgrid']}"),
        Shape("PyPI token", k["pypi"], f"password = {k['pypi']}"),
        Shape("JWT", k["jwt"], f"id_token={k['jwt']}"),
        Shape("Bearer token", k["opaque"], f"Authorization: Bearer {k['opaque']}", False),
        Shape(
            "bearer in curl", k["opaque"], f"curl -H 'authorization: bearer {k['opaque']}'", False
        ),
        Shape("Basic credentials", k["basic"], f"Authorization: Basic {k['basic']}", False),
        Shape("RSA private key", rsa_line, rsa, False),
        Shape("EC private key", ec_line, ec, False),
        Shape("OpenSSH private key", ssh_line, ssh, False),
        Shape("encrypted PKCS#8 key", enc_line, enc, False),
        Shape(
            "PKCS#8 key in a service-account JSON",
            pk8_line,
            json.dumps({"private_key": pk8}),
            False,
        ),
        Shape("Postgres URL", pw["pg"], f"postgresql://app:{pw['pg']}@db.internal:5432/app", False),
        Shape("Redis URL, empty user", pw["redis"], f"redis://:{pw['redis']}@cache:6379/0", False),
        Shape(
            "Redis TLS URL, empty user, encoded @",
            pw["redis_enc"],
            f"rediss://:{pw['redis_enc']}@cache.example.net:6380",
            False,
        ),
        Shape(
            "MongoDB SRV URL",
            pw["mongo"],
            f"mongodb+srv://svc:{pw['mongo']}@cluster0.ab1cd.mongodb.net/db?retryWrites=true",
            False,
        ),
        Shape("AMQP URL", pw["amqp"], f"amqp://worker:{pw['amqp']}@rabbit/vhost", False),
        Shape("MySQL URL", pw["mysql"], f"mysql+pymysql://root:{pw['mysql']}@127.0.0.1/app", False),
        Shape(
            "HTTPS URL", pw["git"], f"https://deploy:{pw['git']}@git.example.com/repo.git", False
        ),
        Shape("password=", pw["kv"], f"login ok user=ann password={pw['kv']} ip=10.0.0.1", False),
        Shape("YAML passwd", pw["yaml"], f"db:\n  passwd: '{pw['yaml']}'\n", False),
        Shape(".env password", pw["env"], f"DB_PASSWORD={pw['env']}\nDEBUG=1", False),
        Shape(
            "ADO.NET connection string",
            pw["ado"],
            f"Server=tcp:sql.example.net,1433;Database=app;User ID=sa;Password={pw['ado']};",
            False,
        ),
        Shape(
            "libpq connection string",
            pw["libpq"],
            f"host=db port=5432 user=app password={pw['libpq']} sslmode=require",
            False,
        ),
        Shape("JSON client secret", pw["json"], json.dumps({"client_secret": pw["json"]}), False),
        Shape(
            "Azure storage connection string",
            azure,
            "DefaultEndpointsProtocol=https;AccountName=acme;"
            f"AccountKey={azure};EndpointSuffix=core.windows.net",
            False,
        ),
        Shape(
            "Azure Service Bus connection string",
            sas,
            "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=root;"
            f"SharedAccessKey={sas}",
            False,
        ),
        Shape("Cookie header", cookie, f"Cookie: sessionid={cookie}; theme=dark", False),
        Shape("Set-Cookie header", cookie, f"Set-Cookie: sid={cookie}; HttpOnly; Secure", False),
        Shape("Visa", visa, f"card {visa} exp 12/29"),
        Shape(
            "Visa, spaced",
            grouped(visa, (4, 4, 4, 4), " "),
            f"pay with {grouped(visa, (4, 4, 4, 4), ' ')}",
        ),
        Shape(
            "Mastercard, dashed",
            grouped(mc, (4, 4, 4, 4), "-"),
            f"mc={grouped(mc, (4, 4, 4, 4), '-')}",
        ),
        Shape("Amex", grouped(amex, (4, 6, 5), " "), f"Amex {grouped(amex, (4, 6, 5), ' ')} ok"),
        Shape("Visa, 13 digits", visa13, f"old card: {visa13}"),
        Shape("Discover", discover, f"discover:{discover}"),
    ]


CORPUS = _corpus()
CARDS = [s for s in CORPUS if s.secret.replace(" ", "").replace("-", "").isdigit()]


def test_the_corpus_is_big_and_made_up() -> None:
    assert len(CORPUS) >= 40
    assert len({s.name for s in CORPUS}) == len(CORPUS)


def strings(value: Any) -> Iterator[str]:
    """Every piece of text in ``value``: strings, keys, bytes (as Latin-1), reprs."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (bytes, bytearray)):
        yield bytes(value).decode("latin-1")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from strings(v)
    else:
        yield repr(value)


def leaked(secret: str, value: Any) -> bool:
    forms = {secret, secret.replace(" ", "").replace("-", "") if secret[0].isdigit() else secret}
    forms.add(json.dumps(secret)[1:-1])  # as it reads inside JSON text
    return any(form in text for text in strings(value) for form in forms)


def positions(shape: Shape) -> dict[str, Any]:
    """Every place a recorded value can hold the shape."""
    text, secret = shape.text, shape.secret
    out: dict[str, Any] = {
        "text": text,
        "text in a sentence": f"Sure! I used {text} as you asked.",
        "text between lines": f"first line\n{text}\nlast line",
        "text in JSON text": json.dumps({"tool_output": text, "ok": True}),
        "dict value": {"note": text},
        "nested dicts and lists": {"a": [{"b": [{"c": text}]}], "d": 1},
        "tuple": ("x", text),
        "set": {text, "other"},
        "dict key": {text: "value"},
        "bytes": text.encode("utf-8"),
        "bytearray": bytearray(text.encode("utf-8")),
        "bytes in a list": [b"x", text.encode("utf-8")],
        "password key": {"password": secret},
        "api-key header": {"headers": {"X-Api-Key": secret}},
        "camelCase key": {"clientSecret": secret},
        "credentials subtree": {"credentials": {"inner": [secret]}},
        "access token key": {"access_token": secret},
    }
    if shape.bare:
        out |= {
            "bare": secret,
            "bare dict value": {"note": secret},
            "bare in a list": ["x", secret, "y"],
            "bare dict key": {secret: "v"},
            "bare bytes": secret.encode(),
        }
    if shape in CARDS:
        out["int"] = int(secret.replace(" ", "").replace("-", ""))
    return out


@pytest.mark.parametrize("shape", CORPUS, ids=[s.name for s in CORPUS])
def test_every_secret_is_removed_in_every_position(shape: Shape) -> None:
    redactor = Redactor()
    for where, value in positions(shape).items():
        out, n = redactor(value)
        assert n >= 1, f"{shape.name}: nothing found in the {where}"
        assert not leaked(shape.secret, out), f"{shape.name}: leaked from the {where}: {out!r}"
        assert redactor(out) == (out, 0), f"{shape.name}: not idempotent in the {where}"


@pytest.mark.parametrize("shape", CORPUS, ids=[s.name for s in CORPUS])
def test_redact_text_removes_every_secret_from_str_and_bytes(shape: Shape) -> None:
    text, n = redact_text(shape.text)
    raw, m = redact_text(shape.text.encode())
    assert n >= 1 and m >= 1
    assert not leaked(shape.secret, text) and not leaked(shape.secret, raw)


def test_strict_level_removes_the_corpus_too() -> None:
    redactor = Redactor("strict")
    for shape in CORPUS:
        out, _ = redactor(positions(shape))
        assert not leaked(shape.secret, out), shape.name


def test_url_credentials_with_an_empty_user() -> None:
    assert redact_text("redis://:hunter2hunter2@cache:6379/0") == (
        "redis://:[REDACTED:password]@cache:6379/0",
        1,
    )
    assert redact_text("see redis://:p4ss@w0rd@cache:6379") == (
        "see redis://:[REDACTED:password]@cache:6379",
        1,
    )
    # no credentials, nothing to hide
    for clean in ("redis://cache:6379/0", "http://[::1]:8080/x", "mailto:ann@example.com"):
        assert redact_text(clean) == (clean, 0)


# -- end to end ---------------------------------------------------------------------------
# Secrets no pattern recognises (a password is just text): only the key path they sit
# under — a channel's name, a field's name — gives them away.
KEYED: dict[str, str] = {
    where: fake(ALNUM, 18, where)
    for where in (
        "the channel `password`",
        "the channel `api_key`",
        "the large channel `private_key`",
        "the state key `clientSecret`",
        "the nested state key `access_token`",
        "the tool argument `password`",
        "the interrupt value's `password`",
        "the resume value's `token`",
    )
}
LARGE = 20 * 1024  # above the checkpoint line's rendering limit: rendered from the blob


class State(MessagesState):
    vault: dict[str, Any]
    answer: Any
    password: str
    api_key: str
    private_key: str
    settings: dict[str, Any]


def _texts() -> list[str]:
    return [s.text for s in CORPUS]


@tool
def lookup(query: str, config_blob: dict[str, Any]) -> dict[str, Any]:
    """Look something up in the vault (returns every secret it knows)."""
    return {"found": _texts(), "by_name": {s.name: s.secret for s in CORPUS if s.bare}}


@tool
def login(user: str, password: str) -> str:
    """Log in to the vault."""
    return f"welcome {user}"


@tool
def broken(query: str) -> str:
    """Fails, quoting every secret in its error message."""
    raise ValueError("vault unreachable with " + " | ".join(_texts()))


class VaultRetriever(BaseRetriever):
    """Returns one document per corpus secret (text and metadata)."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return [Document(s.text, metadata={"secret": s.secret, "name": s.name}) for s in CORPUS]


def _graph(checkpointer: Any, store: Any) -> Any:
    calls = [
        {
            "id": "call-1",
            "name": "lookup",
            "args": {
                "query": "\n".join(_texts()),
                "config_blob": {"password": "x", "texts": _texts()},
            },
        },
        {"id": "call-2", "name": "broken", "args": {"query": _texts()[1]}},
        {
            "id": "call-3",
            "name": "login",
            "args": {"user": "ann", "password": KEYED["the tool argument `password`"]},
        },
    ]
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage("", tool_calls=calls),
            AIMessage("Here is everything: " + " | ".join(_texts())),
        ]
    )

    def agent(state: State) -> dict[str, Any]:
        return {
            "messages": [model.invoke(state["messages"])],
            "vault": {"texts": _texts(), "secrets": [s.secret for s in CORPUS if s.bare]},
            "password": KEYED["the channel `password`"],
            "api_key": KEYED["the channel `api_key`"],
            "private_key": "-" * LARGE + KEYED["the large channel `private_key`"],
            "settings": {
                "clientSecret": KEYED["the state key `clientSecret`"],
                "oauth": {"access_token": KEYED["the nested state key `access_token`"]},
                "theme": "dark",
            },
        }

    def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
        store.put(("vault",), "all", {"texts": _texts(), "token": CORPUS[0].secret})
        found = store.get(("vault",), "all")
        docs = VaultRetriever().invoke("everything", config)
        answer = interrupt(
            {
                "confirm": _texts(),
                "found": found.value if found else None,
                "password": KEYED["the interrupt value's `password`"],
            }
        )
        return {"answer": {"resumed": answer, "docs": [d.page_content for d in docs]}}

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([lookup, broken, login], handle_tool_errors=True))
    g.add_node("remember", remember)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "remember"})
    g.add_edge("tools", "agent")
    g.add_edge("remember", END)
    return g.compile(checkpointer=checkpointer, store=store)


_B64 = re.compile(r"^[A-Za-z0-9+/=_-]{16,}$")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def expand(value: Any) -> Iterator[str]:
    """Every text a value holds, also inside base64 text, msgpack bytes and JSON text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        yield data.decode("latin-1")
        try:
            unpacked = ormsgpack.unpackb(data)
        except Exception:
            return
        yield from expand(unpacked)
    elif isinstance(value, str):
        yield value
        if _B64.match(value):
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                with contextlib.suppress(ValueError):
                    yield from expand(decode(value + "=" * (-len(value) % 4)))
        if value[:1] in "[{":
            with contextlib.suppress(ValueError):
                yield from expand(json.loads(value))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from expand(k)
            yield from expand(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from expand(v)
    elif value is not None:
        yield str(value)


def _ledger_schema_texts(dsn: str) -> list[str]:
    """Every value of every table of the ledger schema."""
    out: list[str] = []
    with psycopg.connect(dsn) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "select table_name from information_schema.tables "
                "where table_schema = 'langgraph_external' and table_type = 'BASE TABLE'"
            )
        ]
        assert {"events", "threads", "checkpoints"} <= set(tables)
        for table in tables:
            for row in conn.execute(f"select * from langgraph_external.{table}"):
                out.extend(t for v in row for t in expand(v))
    return out


def _workspace_file_texts(ws: Path) -> dict[str, list[str]]:
    """Every workspace file (exact copies included), with base64 and JSON expanded."""
    out = {}
    for p in sorted(ws.rglob("*")):
        if not p.is_file() or ".lgx" in p.parts:
            continue
        data = p.read_bytes()
        texts = list(expand(data))
        if p.suffix in (".json", ".jsonl"):
            for line in data.decode().splitlines():
                if line.strip():
                    texts.extend(expand(json.loads(line)) if p.suffix == ".jsonl" else [])
            if p.suffix == ".json":
                texts.extend(expand(json.loads(data)))
        out[str(p.relative_to(ws))] = texts
    return out


def files_raw(ws: Path) -> Iterator[str]:
    """Each line of each checkpoint log, as text."""
    for p in ws.rglob("*.jsonl"):
        yield from p.read_text().splitlines()


def _exports(dsn: str, ws: Path, thread_id: str, checkpoints: list[str]) -> dict[str, str]:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "200"})
    out = {}
    for args in (
        ["events", thread_id, "--json"],
        ["show", thread_id, "--json", "--limit", "0"],
        ["state", thread_id, "--json"],
        # older checkpoints: rendered from the checkpoint log and the blob files
        *(["state", thread_id, "--json", "--checkpoint", c] for c in checkpoints),
    ):
        res = runner.invoke(lgx_app, ["--dsn", dsn, "--workspace", str(ws), *args])
        assert res.exit_code == 0, res.output
        out[" ".join(args)] = res.stdout
    return out


def _unkeyed_digests(values: list[Any]) -> set[str]:
    """sha256 of each corpus value as a dictionary attack would compute it."""
    serde = JsonPlusSerializer()
    out = set()
    for v in values:
        forms: list[bytes] = []
        if isinstance(v, str):
            forms += [v.encode(), json.dumps(v).encode()]
        forms.append(serde.dumps_typed(v)[1])
        out |= {hashlib.sha256(f).hexdigest() for f in forms}
    return out


def test_the_corpus_leaves_no_secret_and_no_unkeyed_hash_in_the_ledger_workspace_or_exports(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """Tool args and results, LLM input and output, state (sensitive channel names and
    state keys too), interrupt and resume values, pending writes, retriever documents,
    store values, config metadata and exceptions: 0 occurrences."""
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        app = _graph(ext.checkpointer, ext.store(InMemoryStore()))
        config = ext.config("corpus-thread")
        config["metadata"] = {"note": "\n".join(_texts()), "api_key": CORPUS[0].secret}
        question = HumanMessage("Please use these:\n" + "\n".join(_texts()))
        app.invoke({"messages": [question], "vault": {}, "answer": None}, config)
        resume = {"ok": _texts(), "token": KEYED["the resume value's `token`"]}
        out = app.invoke(Command(resume=resume), config)
        assert out["vault"]["texts"] == _texts()  # the app itself is unchanged
        assert out["answer"]["resumed"] == resume
        assert out["password"] == KEYED["the channel `password`"]
        assert len(out["answer"]["docs"]) == len(CORPUS)
        ext.flush()
        kinds = {e["kind"] for e in ext.events("corpus-thread")}
        state_values = [out["vault"], out["answer"], out["messages"], _texts()]
        state_values += [out["settings"], out["private_key"], *KEYED.values()]
        checkpoints = [
            t.config["configurable"]["checkpoint_id"] for t in ext.checkpointer.list(config)
        ]
    # every position was recorded
    assert {
        "tool_start",
        "tool_end",
        "tool_error",
        "llm_start",
        "llm_end",
        "checkpoint",
        "interrupt",
        "resume",
        "retrieval",
        "memory_put",
        "memory_get",
    } <= kinds, kinds
    ledger_texts = _ledger_schema_texts(dsn)
    files = _workspace_file_texts(ws)
    exports = _exports(dsn, ws, "corpus-thread", checkpoints)
    assert any("[REDACTED:" in t for t in ledger_texts)
    assert {"events.jsonl", "state.json", "_root.jsonl"} <= {Path(n).name for n in files}
    assert any("checkpoints/blobs/" in n for n in files)  # exact copies are searched too
    leaks = [s.name for s in CORPUS if leaked(s.secret, ledger_texts)]
    assert leaks == [], f"in the ledger schema: {leaks}"
    for name, texts in files.items():
        leaks = [s.name for s in CORPUS if leaked(s.secret, texts)]
        assert leaks == [], f"in {name}: {leaks}"
    for name, text in exports.items():
        leaks = [s.name for s in CORPUS if leaked(s.secret, text)]
        assert leaks == [], f"in `lgx {name}`: {leaks}"
    # what only a key path gives away: hidden wherever the value is shown readably
    lines = [json.loads(t) for t in files_raw(ws) if t.strip()]
    assert any(d.get("record") == "write" and d.get("channel") == "password" for d in lines)
    for where, secret in KEYED.items():
        assert not leaked(secret, ledger_texts), f"{where}: in the ledger schema"
        for name, texts in files.items():
            assert not leaked(secret, texts), f"{where}: in {name}"
        for name, text in exports.items():
            assert not leaked(secret, text), f"{where}: in `lgx {name}`"
    # no stored hash of a corpus value is its plain sha256 (each would invert by guessing)
    digests = _unkeyed_digests([s.secret for s in CORPUS] + [s.text for s in CORPUS] + state_values)
    stored = {h for t in [*ledger_texts, *exports.values()] for h in _HEX64.findall(t)}
    stored |= {h for texts in files.values() for t in texts for h in _HEX64.findall(t)}
    stored |= {Path(n).name for n in files}
    assert stored, "content addresses are expected in the record"
    assert digests & stored == set()
