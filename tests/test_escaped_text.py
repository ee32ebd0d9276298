"""Text PostgreSQL or UTF-8 cannot hold (a NUL, a lone surrogate) is recorded escaped,
marked, and reads back exactly — distinct from a user's literal ``\\u0000``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from typer.testing import CliRunner

from langgraph_external import External
from langgraph_external.cli import app
from langgraph_external.options import Options
from langgraph_external.record.artifacts import artifact_digests, expand
from langgraph_external.record.escapes import escape_text, has_marks, needs_escape
from langgraph_external.record.events import json_safe
from langgraph_external.replay import replay

ODD = "nul \x00 lone \udce9 literal \\u0000 end"
"""A tool result holding a NUL, a lone surrogate and the literal six characters ``\\u0000``."""
LITERAL = "only the literal text \\u0000, typed by the user"
BIG = "big \x00 " + "x" * 20_000 + " \udce9 tail"


@tool
def odd_tool(size: str) -> str:
    """Answers with text a database cannot hold as is."""
    return BIG if size == "big" else ODD


def odd_agent(checkpointer: Any) -> Any:
    """One tool call (two for ``size="big"``), then an answer."""
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    {"id": "call-1", "name": "odd_tool", "args": {"size": "small"}},
                    {"id": "call-2", "name": "odd_tool", "args": {"size": "big"}},
                ],
            ),
            AIMessage("done"),
        ]
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([odd_tool]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


@pytest.fixture
def ext(dsn: str, tmp_path: Path, spool_dir: Path) -> Iterator[External]:
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        options=Options(spool_dir=spool_dir, offload_threshold=16_384),
    ) as e:
        odd_agent(e.checkpointer).invoke({"messages": [HumanMessage(LITERAL)]}, e.config("odd"))
        assert e.flush()
        yield e


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _tool_results(envelopes: list[dict[str, Any]]) -> list[Any]:
    return [e["payload"] for e in envelopes if e["kind"] == "tool_end"]


def test_the_record_marks_escaped_text_and_keeps_a_literal_escape_plain(ext: External) -> None:
    events = ext.events("odd")
    ends = _tool_results(events)
    assert len(ends) == 2 and all(has_marks(p) for p in ends)
    assert artifact_digests(ends[1]["result"]["$escaped"])  # BIG's escaped text, offloaded
    recorded = _strings(ends)
    assert escape_text(ODD) in recorded  # escaped: \\u0000 for the user's own \u0000
    assert not any("\x00" in s for s in _strings(events))
    # the user's literal \u0000 needed no escaping: a plain string, never marked
    starts = [e for e in events if e["kind"] == "llm_start"]
    assert LITERAL in _strings(starts[0]["payload"])


def test_values_read_back_exactly_through_the_workspace_and_lgx_events(
    ext: External, dsn: str
) -> None:
    ws = ext.workspace
    assert ws is not None
    events = ext.events("odd")
    fetch = lambda d: ws.read_bytes(ws.artifact_path("odd", d))  # noqa: E731
    back = [expand(p, fetch) for p in _tool_results(events)]
    assert ODD in _strings(back) and BIG in _strings(back)
    assert any(artifact_digests(p) for p in _tool_results(events))  # BIG was offloaded
    assert LITERAL in _strings(expand(events, fetch))  # the literal stays itself

    result = CliRunner(env={"LGX_DSN": None}).invoke(
        app,
        ["--dsn", dsn, "--workspace", str(ws.location), "events", "odd", "--json", "--full"],
    )
    assert result.exit_code == 0, result.output
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    values = _strings(_tool_results(printed))
    assert ODD in values and BIG in values
    assert LITERAL in _strings(printed) and escape_text(ODD) not in values

    # without --full: the offloaded value's ends, said to be escaped text
    result = CliRunner(env={"LGX_DSN": None, "COLUMNS": "300"}).invoke(
        app, ["--dsn", dsn, "--workspace", str(ws.location), "events", "odd", "--kind", "tool_end"]
    )
    assert result.exit_code == 0, result.output
    assert "result.$escaped" in result.stdout and "text recorded escaped" in result.stdout


def test_sql_reads_escaped_text_as_its_escaped_form(ext: External, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            """
            select langgraph_external.artifact_text(e.thread_id, m.value)
            from langgraph_external.events e, jsonb_each(e.payload) m
            where e.thread_id = 'odd' and e.kind = 'tool_end'
              and jsonb_typeof(m.value) = 'object' and m.value ? '$escaped'
            """
        ).fetchall()
    texts = {t for (t,) in rows}
    assert texts == {escape_text(ODD), escape_text(BIG)}, texts


def test_replay_answers_the_graph_with_the_exact_recorded_tool_results(ext: External) -> None:
    ws = ext.workspace
    assert ws is not None
    replay(odd_agent(ext.checkpointer), "odd", ext=ext, into="odd-replay")
    fetch = lambda d: ws.read_bytes(ws.artifact_path("odd-replay", d))  # noqa: E731
    answered = [expand(p, fetch) for p in _tool_results(ext.events("odd-replay"))]
    assert [a["result"] for a in answered] == [ODD, BIG]

    def tool_texts(thread_id: str) -> list[Any]:
        state = odd_agent(ext.checkpointer).get_state({"configurable": {"thread_id": thread_id}})
        return [m.content for m in state.values["messages"] if m.type == "tool"]

    # the saver's own serializer keeps a NUL (a lone surrogate it stores as "?"): the
    # replayed state is the recorded one
    assert tool_texts("odd-replay") == tool_texts("odd")
    assert "\x00" in tool_texts("odd")[0]


_TEXT = st.text(alphabet=st.sampled_from(["a", "é", "\\", "u", "0", "\x00", "\udce9", "\ud800"]))


@settings(max_examples=300, deadline=None)
@given(st.recursive(_TEXT, lambda kids: st.lists(kids) | st.dictionaries(_TEXT, kids)))
def test_any_text_normalized_for_the_record_reads_back_exactly(value: Any) -> None:
    recorded = json_safe(value)
    stored = json.loads(json.dumps(recorded, ensure_ascii=False))  # what jsonb can hold
    assert not any(needs_escape(s) for s in _strings(stored))
    assert json_safe(stored) == stored  # normalizing twice changes nothing
    assert expand(stored, {}.get) == value
