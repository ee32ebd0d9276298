"""lgx diff's library: message-aware state diffs, node paths, sides from the record."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from replay_apps import react_app, terse_react_app

from langgraph_external import External
from langgraph_external.diff import (
    PathEntry,
    diff_messages,
    diff_paths,
    diff_sides,
    diff_values,
    parse_side,
)
from langgraph_external.errors import ConfigurationError
from langgraph_external.inspection import NotFoundError


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
    with External(dsn=dsn, workspace=tmp_path / "ws", spool_dir=spool_dir) as ext:
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
