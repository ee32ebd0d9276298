"""Replay: a recorded thread runs again without its model or tools, or against a new model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import replay_apps
from graphs import cpu_burner
from langchain_core.messages import HumanMessage
from langgraph.types import Command
from replay_apps import (
    MODEL_CALLS,
    async_react_app,
    complex_app,
    functional_app,
    parallel_interrupts_app,
    paris_react_app,
    react_app,
    streaming_app,
    terse_react_app,
    tool_runs,
)

from langgraph_external import External
from langgraph_external.errors import ConfigurationError
from langgraph_external.options import Options
from langgraph_external.read.diff import diff_values
from langgraph_external.read.inspection import NotFoundError
from langgraph_external.record.artifacts import artifact_digests
from langgraph_external.record.render import to_readable
from langgraph_external.replay import areplay, replay
from langgraph_external.replay._intercept import installed


@pytest.fixture
def ext(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[External]:
    monkeypatch.setenv("LGX_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    MODEL_CALLS[0] = 0
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as e:
        yield e


def _state(graph: Any, thread_id: str) -> Any:
    return to_readable(graph.get_state({"configurable": {"thread_id": thread_id}}).values)


def _record_react(ext: External, thread_id: str = "t-react") -> Any:
    graph = react_app(ext.checkpointer)
    graph.invoke({"messages": [HumanMessage("Weather in Oslo and Bergen?")]}, ext.config(thread_id))
    assert len(tool_runs()) == 3 and MODEL_CALLS[0] == 3
    return graph


def _reset() -> None:
    Path(replay_apps.tool_log()).unlink(missing_ok=True)
    MODEL_CALLS[0] = 0


def test_recorded_replay_runs_no_tool_and_no_model_and_ends_where_the_record_ends(
    ext: External,
) -> None:
    graph = _record_react(ext)
    _reset()
    report = replay(react_app(ext.checkpointer), "t-react", ext=ext, into="t-react-replay")
    assert tool_runs() == [] and MODEL_CALLS[0] == 0
    assert report.tool_calls_executed == 0 and report.model_calls == 0
    assert report.tool_calls_answered == 3 and report.model_calls_answered == 3
    assert not report.diverged and report.completed, report.divergences
    assert report.path.same and report.path.b[-1] == "agent@5"
    assert diff_values(_state(graph, "t-react"), _state(graph, "t-react-replay")).same
    # the replay is a recorded thread of its own, with the answered calls in its record
    kinds = [e["kind"] for e in ext.events("t-react-replay")]
    assert kinds.count("tool_end") == 3 and kinds.count("llm_end") == 3
    assert not installed()  # the interception is gone once the replay ends


def test_replay_reproduces_the_exact_model_answers(ext: External) -> None:
    graph = _record_react(ext)
    _reset()
    replay(react_app(ext.checkpointer), "t-react", ext=ext, into="t-exact")
    orig = graph.get_state({"configurable": {"thread_id": "t-react"}}).values["messages"]
    again = graph.get_state({"configurable": {"thread_id": "t-exact"}}).values["messages"]
    ai = [(m.id, m.content, m.tool_calls) for m in orig if m.type == "ai"]
    assert ai == [(m.id, m.content, m.tool_calls) for m in again if m.type == "ai"]


def test_recorded_replay_of_subgraph_send_fanout_and_interrupt(ext: External) -> None:
    graph = complex_app(ext.checkpointer)
    cfg = ext.config("t-complex")
    first = graph.invoke({"items": []}, cfg)
    assert first["__interrupt__"][0].value["total"] == 60
    graph.invoke(Command(resume="yes, ship it"), cfg)
    assert len(tool_runs()) == 3 and MODEL_CALLS[0] == 1
    _reset()

    report = replay(complex_app(ext.checkpointer), "t-complex", ext=ext, into="t-complex-r")
    assert tool_runs() == [] and MODEL_CALLS[0] == 0
    assert not report.diverged, report.divergences
    assert report.invocations == 2 and report.tool_calls_answered == 3
    assert "report/summarize@1" in report.path.b and report.path.same
    state = _state(graph, "t-complex-r")
    assert state["approved"] == "yes, ship it" and state["summary"] == "All measured."
    assert diff_values(_state(graph, "t-complex"), state).same


def test_recorded_replay_of_the_functional_api(ext: External) -> None:
    app = functional_app(ext.checkpointer)
    out = app.invoke("Oslo", ext.config("t-func"))
    assert out == "sunny in Oslo; All measured." and len(tool_runs()) == 1
    _reset()
    report = replay(functional_app(ext.checkpointer), "t-func", ext=ext, into="t-func-r")
    assert tool_runs() == [] and MODEL_CALLS[0] == 0
    assert not report.diverged, report.divergences
    assert _state(app, "t-func-r") == _state(app, "t-func")


def test_recorded_replay_of_a_natively_streaming_model(ext: External) -> None:
    graph = streaming_app(ext.checkpointer)
    graph.invoke({"messages": [HumanMessage("Sum up.")]}, ext.config("t-stream"))
    assert MODEL_CALLS[0] == 1
    assert _state(graph, "t-stream")["messages"][-1]["content"] == "All measured."
    _reset()
    report = replay(streaming_app(ext.checkpointer), "t-stream", ext=ext, into="t-stream-r")
    assert not report.diverged and report.model_calls_answered == 1, report.divergences
    assert MODEL_CALLS[0] == 0
    assert diff_values(_state(graph, "t-stream"), _state(graph, "t-stream-r")).same


def test_parallel_interrupts_resumed_by_id_are_resumed_in_the_replay(ext: External) -> None:
    graph = parallel_interrupts_app(ext.checkpointer)
    cfg = ext.config("t-asks")
    pending = graph.invoke({"answers": []}, cfg)["__interrupt__"]
    graph.invoke(Command(resume={i.id: f"ok {i.value['item']}" for i in pending}), cfg)
    assert sorted(_state(graph, "t-asks")["answers"]) == ["ok 1", "ok 2"]
    report = replay(parallel_interrupts_app(ext.checkpointer), "t-asks", ext=ext, into="t-asks-r")
    assert not report.diverged, report.divergences
    assert sorted(_state(graph, "t-asks-r")["answers"]) == ["ok 1", "ok 2"]


def test_offloaded_payloads_are_answered_from_their_artifacts(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LGX_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    MODEL_CALLS[0] = 0
    ws = tmp_path / "ws"
    with External(
        dsn=dsn,
        workspace=ws,
        options=Options(spool_dir=spool_dir, offload_threshold=200),
    ) as e:
        graph = _record_react(e, "t-big")
        offloaded = [ev for ev in e.events("t-big") if artifact_digests(ev["payload"])]
        assert {ev["kind"] for ev in offloaded} >= {"llm_start", "llm_end"}
        _reset()
        report = replay(react_app(e.checkpointer), "t-big", ext=e, into="t-big-r")
        assert not report.diverged, report.divergences
        assert report.model_calls_answered == 3 and MODEL_CALLS[0] == 0 and tool_runs() == []
        assert diff_values(_state(graph, "t-big"), _state(graph, "t-big-r")).same


def test_async_replay_of_an_async_graph(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LGX_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    MODEL_CALLS[0] = 0

    async def run() -> Any:
        async with External(
            dsn=dsn,
            workspace=tmp_path / "ws",
            options=Options(spool_dir=spool_dir),
        ) as aext:
            graph = async_react_app(aext.checkpointer)
            await graph.ainvoke({"messages": [HumanMessage("Weather?")]}, aext.config("t-async"))
            assert len(tool_runs()) == 3 and MODEL_CALLS[0] == 3
            _reset()
            report = await areplay(
                async_react_app(aext.checkpointer), "t-async", ext=aext, keep=True
            )
            a = await graph.aget_state({"configurable": {"thread_id": "t-async"}})
            b = await graph.aget_state({"configurable": {"thread_id": report.thread_id}})
            # without keep, the copy is deleted once compared
            gone = await areplay(async_react_app(aext.checkpointer), "t-async", ext=aext)
            assert not gone.kept and not gone.diverged
            cfg = {"configurable": {"thread_id": gone.thread_id}}
            assert await aext.checkpointer.aget_tuple(cfg) is None  # type: ignore[arg-type]
            return report, to_readable(a.values), to_readable(b.values)

    report, a, b = asyncio.run(run())
    assert report.kept and report.thread_id.startswith("lgx-replay:t-async:")
    assert not report.diverged and report.completed, report.divergences
    assert report.model_calls == 0 and report.tool_calls_executed == 0
    assert report.tool_calls_answered == 3 and tool_runs() == [] and MODEL_CALLS[0] == 0
    assert diff_values(a, b).same


def test_replay_from_a_checkpoint_runs_only_what_followed_it(ext: External) -> None:
    graph = _record_react(ext)
    _reset()
    cps = [e for e in ext.events("t-react") if e["kind"] == "checkpoint"]
    after_tools = next(e for e in cps if e["step"] == 2)
    report = replay(
        react_app(ext.checkpointer),
        "t-react",
        ext=ext,
        into="t-from-2",
        checkpoint_id=after_tools["checkpoint_id"][:30],
    )
    assert not report.diverged, report.divergences
    assert report.from_checkpoint_id == after_tools["checkpoint_id"]
    assert report.path.b == ["agent@3", "tools@4", "agent@5"]
    assert report.model_calls_answered == 2 and report.tool_calls_answered == 1
    assert tool_runs() == [] and MODEL_CALLS[0] == 0
    assert diff_values(_state(graph, "t-react"), _state(graph, "t-from-2")).same


def test_regression_replay_reports_a_changed_prompt_where_it_first_matters(
    ext: External,
) -> None:
    _record_react(ext)
    _reset()
    report = replay(
        terse_react_app(ext.checkpointer), "t-react", ext=ext, mode="regression", into="t-reg"
    )
    assert report.diverged
    first = report.divergence
    assert first is not None
    assert (first.kind, first.step, first.node) == ("llm_input", 1, "agent")
    changed = first.diff["changed"][0]["fields"]["content"]
    assert changed == {
        "a": "You are a weather assistant.",
        "b": "You are a terse weather assistant.",
    }
    # the live model planned one tool call (answered from the record), then answered
    kinds = [d.kind for d in report.divergences]
    assert kinds[:3] == ["llm_input", "llm_output", "llm_input"] and "path" in kinds
    assert (report.divergences[2].step, report.divergences[2].node) == (3, "agent")
    assert report.path.b == ["(input)@-1", "__start__@0", "agent@1", "tools@2", "agent@3"]
    assert report.model_calls == 2 and report.tool_calls_answered == 1
    assert report.tool_calls_executed == 0 and tool_runs() == [] and report.completed


def test_regression_replay_stops_at_a_tool_call_the_record_cannot_answer(
    ext: External,
) -> None:
    _record_react(ext)
    _reset()
    report = replay(paris_react_app(ext.checkpointer), "t-react", ext=ext, mode="regression")
    tool = next(d for d in report.divergences if d.kind == "tool_call")
    assert (tool.step, tool.node) == (2, "tools")
    assert tool.actual == {"name": "get_weather", "args": {"city": "Paris"}}
    assert tool.expected["name"] in ("get_weather", "get_time")
    assert not report.completed and tool_runs() == []  # the tool never ran


def test_regression_replay_of_an_unchanged_app_does_not_diverge(ext: External) -> None:
    _record_react(ext)
    _reset()
    report = replay(react_app(ext.checkpointer), "t-react", ext=ext, mode="regression")
    assert not report.diverged, report.divergences
    assert report.model_calls == 3 and MODEL_CALLS[0] == 3
    assert report.tool_calls_executed == 0 and tool_runs() == []
    live = replay(react_app(ext.checkpointer), "t-react", ext=ext, mode="regression", tools="live")
    assert not live.diverged and live.tool_calls_executed == 3 and len(tool_runs()) == 3


def test_recorded_replay_stops_at_a_changed_prompt(ext: External) -> None:
    _record_react(ext)
    _reset()
    report = replay(terse_react_app(ext.checkpointer), "t-react", ext=ext, into="t-stop")
    assert report.diverged and not report.completed
    assert report.divergence is not None and report.divergence.kind == "llm_input"
    assert MODEL_CALLS[0] == 0 and tool_runs() == []


def test_bad_requests_are_typed_errors(ext: External) -> None:
    _record_react(ext)
    graph = react_app(ext.checkpointer)
    with pytest.raises(NotFoundError):
        replay(graph, "no-such-thread", ext=ext)
    with pytest.raises(ConfigurationError):
        replay(graph, "t-react", ext=ext, mode="sometimes")
    with pytest.raises(ConfigurationError):
        replay(graph, "t-react", ext=ext, into="t-react")  # the thread exists
    with pytest.raises(NotFoundError):
        replay(graph, "t-react", ext=ext, checkpoint_id="ffff")
    with pytest.raises(ConfigurationError):
        replay(react_app(None), "t-react", ext=ext)  # not compiled with ext.checkpointer
    assert not installed()


def test_live_calls_in_other_threads_are_untouched_during_a_replay(ext: External) -> None:
    """While replays run, graphs outside them call their real model and tools."""
    _record_react(ext)
    errors: list[BaseException] = []
    live_runs = [0]

    def live() -> None:
        try:
            for i in range(15):
                before = MODEL_CALLS[0]
                react_app(None).invoke({"messages": [HumanMessage(f"live {i}")]})
                assert MODEL_CALLS[0] - before >= 3  # other threads may add to it too
                live_runs[0] += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with cpu_burner():
        t = threading.Thread(target=live)
        t.start()
        for i in range(5):
            report = replay(react_app(ext.checkpointer), "t-react", ext=ext, into=f"t-par-{i}")
            assert not report.diverged and report.model_calls == 0, report.divergences
            assert report.tool_calls_executed == 0
        t.join()
    assert not errors and live_runs[0] == 15
    assert len(tool_runs()) == 3 + 15 * 3
    assert not installed()
