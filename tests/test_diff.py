"""lgx diff's library: message-aware state diffs, node paths, sides from the record."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from replay_apps import helpful_react_app, paris_react_app, react_app, terse_react_app

from langgraph_external import External
from langgraph_external.errors import ConfigurationError
from langgraph_external.options import Options
from langgraph_external.read.diff import (
    ModelCall,
    PathEntry,
    ToolCall,
    diff_calls,
    diff_messages,
    diff_paths,
    diff_sides,
    diff_values,
    load_calls,
    message_lines,
    parse_side,
    unified_prompt_diff,
)
from langgraph_external.read.inspection import NotFoundError


def test_messages_are_compared_without_ids_and_tool_calls_by_name_and_args() -> None:
    a = [
        {"role": "user", "content": "hi", "id": "1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "f", "args": {"x": 1}}],
        },
    ]
    b = [
        {"role": "user", "content": "hi", "id": "other"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c9", "name": "f", "args": {"x": 2}}],
        },
        {"role": "assistant", "content": "done"},
    ]
    d = diff_messages(a, b)
    assert [c["index_a"] for c in d.changed] == [1]
    assert d.changed[0]["fields"]["tool_calls"] == {
        "a": [{"name": "f", "args": {"x": 1}}],
        "b": [{"name": "f", "args": {"x": 2}}],
    }
    assert d.added == [{"index": 2, "message": {"role": "assistant", "content": "done"}}]
    assert not d.removed and diff_messages(a, a).same


def test_state_diff_names_added_removed_and_changed_channels() -> None:
    d = diff_values({"n": 1, "old": True, "same": [1]}, {"n": 2, "new": "x", "same": [1]})
    assert d.added == ["new"] and d.removed == ["old"]
    assert [(c.channel, c.a, c.b) for c in d.changed] == [("n", 1, 2)]
    assert diff_values("a", "a").same and not diff_values("a", "b").same


def test_path_diff_finds_the_first_difference_and_ignores_subgraph_interleaving() -> None:
    root = [PathEntry("", 1, ("agent",)), PathEntry("", 2, ("tools",))]
    sub_a = [PathEntry("sub", 1, ("x",)), PathEntry("", 3, ("agent",))]
    sub_b = [PathEntry("", 3, ("agent",)), PathEntry("sub", 1, ("x",))]
    assert diff_paths(root + sub_a, root + sub_b).same
    d = diff_paths(root, [root[0], PathEntry("", 2, ("other",))])
    assert d.first_difference == 1
    assert d.ops[-1] == {"op": "replace", "a": ["tools@2"], "b": ["other@2"]}


def test_sides_parse_and_bad_ones_are_refused() -> None:
    assert parse_side("t@abc").checkpoint_id == "abc"
    assert parse_side("t@abc", "def").checkpoint_id == "def"
    with pytest.raises(ConfigurationError):
        parse_side("")
    with pytest.raises(ConfigurationError):
        parse_side("run:x", "cp")


def test_two_recorded_threads_checkpoints_and_runs(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LGX_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        msg = {"messages": [HumanMessage("Weather?")]}
        react_app(ext.checkpointer).invoke(msg, ext.config("a"))
        react_app(ext.checkpointer).invoke(msg, ext.config("b"))
        terse_react_app(ext.checkpointer).invoke(msg, ext.config("c"))
        ext.flush()
        runs = {
            t: next(e["run_id"] for e in ext.events(t) if e["kind"] == "run_start") for t in "ac"
        }
        cps = {
            t: [e["checkpoint_id"] for e in ext.events(t) if e["kind"] == "checkpoint"]
            for t in "ac"
        }
    ws = ext.workspace
    with psycopg.connect(dsn) as conn:
        same = diff_sides(conn, ws, parse_side("a"), parse_side("b"))
        assert same.same and same.path.a[-1] == "agent@5"
        other = diff_sides(conn, ws, parse_side("a"), parse_side("c"))
        assert not other.same and other.path.first_difference == 5
        msgs = other.state.changed[0]
        assert msgs.channel == "messages" and msgs.messages is not None
        assert not msgs.messages.same
        assert any("noon in Oslo" in line for line in other.lines())
        by_run = diff_sides(
            conn, ws, parse_side(f"run:{runs['a']}"), parse_side(f"run:{runs['c']}")
        )
        assert by_run.to_dict() == {
            **other.to_dict(),
            "a": f"run:{runs['a']}",
            "b": f"run:{runs['c']}",
        }
        early = diff_sides(
            conn, ws, parse_side(f"a@{cps['a'][2]}"), parse_side(f"c@{cps['c'][2][:30]}")
        )
        assert early.a_checkpoint_id == cps["a"][2] and early.b_checkpoint_id == cps["c"][2]
        assert early.path.same and early.path.a[-1] == "agent@1" and not early.state.same
        with pytest.raises(NotFoundError):
            diff_sides(conn, ws, parse_side("a"), parse_side("no-such-thread"))


# -- model and tool calls -----------------------------------------------------------------
def _ask(text: str, step: int = 1, answer: str = "ok") -> ModelCall:
    return ModelCall(
        seq=step,
        scope="",
        node="agent",
        step=step,
        name="m",
        model="m",
        messages=[
            {"role": "system", "content": text},
            {"role": "user", "content": "Weather?", "id": f"random-{step}-{text}"},
        ],
        tools=["get_weather"],
        params={},
        answer=[{"content": answer, "tool_calls": []}],
        status="ok",
    )


def test_model_calls_differ_in_their_prompt_or_answer_ids_left_out() -> None:
    same = diff_calls([_ask("Be brief.")], [_ask("Be brief.")])
    assert same.same  # the user message's id differs, and does not count
    prompt = diff_calls([_ask("Be brief.", 1), _ask("Be brief.", 3)], [_ask("Be kind.", 1)])
    first = prompt.first_prompt_change
    assert first is not None and (first.where_a, first.where_b) == ("agent@1", "agent@1")
    assert first.input_differs and not first.output_differs
    assert first.messages is not None and first.messages.changed[0]["fields"]["content"] == {
        "a": "Be brief.",
        "b": "Be kind.",
    }
    assert [(c.change, c.where_a) for c in prompt.changes] == [
        ("changed", "agent@1"),
        ("removed", "agent@3"),
    ]
    answer = diff_calls([_ask("Be brief.", answer="Sunny.")], [_ask("Be brief.", answer="Rain.")])
    assert answer.first_prompt_change is None
    assert answer.changes[0].output_differs and not answer.changes[0].input_differs


def test_tool_calls_differ_in_their_arguments_or_result() -> None:
    def call(city: str, result: str, seq: int = 1) -> ToolCall:
        return ToolCall(seq, "", "tools", 2, "get_weather", {"city": city}, "c1", result, "ok")

    d = diff_calls([], [], [call("Oslo", "sunny")], [call("Paris", "sunny")])
    assert [(c.kind, c.change, c.input_differs) for c in d.changes] == [("tool", "changed", True)]
    d = diff_calls([], [], [call("Oslo", "sunny")], [call("Oslo", "rain")])
    assert d.changes[0].output_differs and not d.changes[0].input_differs
    assert diff_calls([], [], [call("Oslo", "sunny")], [call("Oslo", "sunny", seq=9)]).same


def test_a_prompt_reads_as_text_and_its_diff_is_unified() -> None:
    lines = message_lines(
        [
            {"role": "system", "content": "Be brief.\nAnswer in English."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "x", "name": "f", "args": {}}],
            },
            {"role": "tool", "name": "f", "content": "42", "tool_call_id": "x", "status": "error"},
        ]
    )
    assert lines == [
        "[0] system",
        "Be brief.",
        "Answer in English.",
        "[1] assistant",
        "  -> f({})",
        "[2] tool f (error)",
        "42",
    ]
    assert (
        unified_prompt_diff([{"role": "user", "content": "a"}], [{"role": "user", "content": "a"}])
        == []
    )


def test_runs_that_differ_only_in_the_system_prompt_differ_in_what_the_model_was_asked(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same path and same state: the prompt is the only difference, and it is found."""
    monkeypatch.setenv("LGX_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        msg = {"messages": [HumanMessage("Weather?")]}
        react_app(ext.checkpointer).invoke(msg, ext.config("a"))
        helpful_react_app(ext.checkpointer).invoke(msg, ext.config("h"))
        paris_react_app(ext.checkpointer).invoke(msg, ext.config("p"))
    ws = ext.workspace
    with psycopg.connect(dsn) as conn:
        models, tools = load_calls(conn, ws, "a")
        assert [m.where for m in models] == ["agent@1", "agent@3", "agent@5"]
        assert [(t.name, t.args) for t in tools] == [
            ("get_time", {"city": "Oslo"}),
            ("get_weather", {"city": "Oslo"}),
            ("get_weather", {"city": "Bergen"}),
        ]
        d = diff_sides(conn, ws, parse_side("a"), parse_side("h"))
        assert d.path.same and d.state.same  # all that lgx diff compared before
        assert not d.same and not d.calls.same
        assert d.calls.model_calls == [3, 3] and d.calls.tool_calls == [3, 3]
        assert [c.where_a for c in d.calls.changes] == ["agent@1", "agent@3", "agent@5"]
        assert all(c.input_differs and not c.output_differs for c in d.calls.changes)
        text = d.lines()
        assert "first differing prompt: model call agent@1 / agent@1" in text
        at = text.index("--- a agent@1")
        assert text[at + 1] == "+++ h agent@1"
        assert "-You are a weather assistant." in text[at:]
        assert "+You are a helpful weather assistant." in text[at:]
        assert d.to_dict()["calls"]["changes"][0]["messages"]["changed"][0]["index_a"] == 0

        # another tool argument: the tool call differs (and what followed from it)
        other = diff_sides(conn, ws, parse_side("a"), parse_side("p"))
        tool = next(c for c in other.calls.changes if c.kind == "tool" and c.change == "changed")
        assert (tool.name, tool.where_a, tool.input_differs) == ("get_weather", "tools@2", True)
        assert tool.a is not None and tool.b is not None
        assert (tool.a.args, tool.b.args) == ({"city": "Oslo"}, {"city": "Paris"})
        assert (
            '  ~ tool call get_weather tools@2: args {"city":"Oslo"} -> {"city":"Paris"}; '
            'result "sunny in Oslo" -> "sunny in Paris"'
        ) in other.lines()
        assert "  - model call agent@5 only in a" in other.lines()


def test_a_message_list_against_a_placeholder_is_two_values_not_a_crash() -> None:
    from langgraph_external.read.diff import diff_values

    msgs = [{"role": "user", "content": "a"}]
    d = diff_values({"messages": msgs}, {"messages": {"$large": 123456}})
    (change,) = d.changed
    assert change.channel == "messages" and change.a == msgs and change.b == {"$large": 123456}
    assert diff_values({"messages": msgs}, {"messages": []}).changed[0].messages is not None
