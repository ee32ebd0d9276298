"""With redaction on, secrets never reach the record — ledger, events.jsonl, state.json,
checkpoint logs' readable views, artifacts — while the checkpoint itself stays exact (and
its workspace copies are encrypted when a key is configured)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_external import External
from langgraph_external.options import Options
from langgraph_external.record.crypto import WorkspaceCipher

OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3
GITHUB_TOKEN = "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8"
CARD = "4111 1111 1111 1111"
JWT = (
    base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    + "."
    + base64.urlsafe_b64encode(b'{"sub":"patient-77","role":"admin"}').decode().rstrip("=")
    + ".c2lnbmF0dXJlLWJ5dGVzLWZvci10ZXN0aW5nLW9ubHk"
)
DB_PASSWORD = "Tr0ub4dor&3-horse-battery"
SECRETS = [OPENAI_KEY, GITHUB_TOKEN, CARD, JWT, DB_PASSWORD]


class State(MessagesState):
    credentials: dict[str, str]


@tool
def charge(card: str, api_key: str) -> dict[str, Any]:
    """Charge a card with a payment provider."""
    return {"charged": True, "echo_card": card, "session": JWT, "password": DB_PASSWORD}


def _agent(checkpointer: Any) -> Any:
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    {"id": "c1", "name": "charge", "args": {"card": CARD, "api_key": OPENAI_KEY}}
                ],
            ),
            AIMessage(f"Done. Your token is {GITHUB_TOKEN}"),
        ]
    )

    def agent(state: State) -> dict[str, Any]:
        return {
            "messages": [model.invoke(state["messages"])],
            "credentials": {"password": DB_PASSWORD, "github": GITHUB_TOKEN},
        }

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([charge]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def _ledger_text(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "select table_name from information_schema.tables "
                "where table_schema = 'langgraph_external'"
            ).fetchall()
        ]
        parts = []
        for t in tables:
            rows = conn.execute(
                f'select row_to_json(x)::text from langgraph_external."{t}" x'
            ).fetchall()
            parts += [r[0] for r in rows]
            raws = (
                conn.execute(
                    "select raw from langgraph_external.events where raw is not null"
                ).fetchall()
                if t == "events"
                else []
            )
            parts += [bytes(r[0]).decode("utf-8", "replace") for r in raws]
    return "\n".join(parts)


def _workspace_text(root: Path) -> str:
    out = []
    for p in root.rglob("*"):
        if p.is_file() and ".lgx" not in p.parts:
            data = p.read_bytes()
            out.append(data.decode("utf-8", "replace"))
            if p.name == "events.jsonl":  # raw tool responses are base64 inside
                import json

                for line in data.decode().splitlines():
                    raw = json.loads(line).get("raw")
                    if raw:
                        out.append(base64.b64decode(raw).decode("utf-8", "replace"))
    return "\n".join(out)


def test_no_secret_reaches_the_record(dsn: str, tmp_path: Path, spool_dir: Path) -> None:
    ws = tmp_path / "ws"
    key = WorkspaceCipher.generate_key()
    with External(dsn=dsn, workspace=ws, key=key, options=Options(spool_dir=spool_dir)) as ext:
        app = _agent(ext.checkpointer)
        question = HumanMessage(f"Charge {CARD}, my key is {OPENAI_KEY}, password={DB_PASSWORD}")
        out = app.invoke({"messages": [question], "credentials": {}}, ext.config("secret-thread"))
        assert out["messages"][-1].content.endswith(GITHUB_TOKEN)  # the app is unchanged
        ext.flush()
        events = ext.events("secret-thread")
    assert sum(e["redactions"] for e in events) > 0
    ledger = _ledger_text(dsn)
    files = _workspace_text(ws)
    for secret in SECRETS:
        compact = secret.replace(" ", "")
        assert secret not in ledger and compact not in ledger, f"{secret[:12]}… in the ledger"
        assert secret not in files and compact not in files, f"{secret[:12]}… in the workspace"
    assert "[REDACTED:" in files and "[REDACTED:" in ledger
    # the checkpoint itself is the app's state: exact in the saver, as the saver stores it
    with psycopg.connect(dsn) as conn:
        blobs = b"".join(
            bytes(r[0])
            for r in conn.execute(
                "select blob from checkpoint_blobs where blob is not null"
            ).fetchall()
        )
    assert GITHUB_TOKEN.encode() in blobs
