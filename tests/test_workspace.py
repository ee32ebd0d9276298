"""Workspace naming and file handling: hostile thread ids never escape the root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_external import (
    ExternalCheckpointer,
    InvalidThreadIdError,
    Pipeline,
    Workspace,
    WorkspaceError,
    decode_thread_id,
    encode_thread_id,
)
from langgraph_external.ledger.memory import InMemoryLedger
from langgraph_external.options import Options
from langgraph_external.workspace.projection import WorkspaceProjection

HOSTILE = [
    "../x",
    "../../etc/passwd",
    "a/b",
    "a\\b",
    "nul\x00byte",
    "x" * 1000,
    "🦜🔗 thread",
    ".",
    "..",
    "~abc",
    "~~deadbeef",
    "CON",
    "Thread-UPPER",
    " leading space",
    "-dash",
    "\n",
]


@pytest.mark.parametrize("tid", HOSTILE)
def test_encoded_names_are_one_safe_path_component(tid: str) -> None:
    name = encode_thread_id(tid)
    assert "/" not in name and "\\" not in name and "\x00" not in name
    assert name not in (".", "..") and not name.startswith("-")
    assert len(name.encode()) <= 255
    assert name == name.lower()  # safe on case-insensitive file systems
    decoded = decode_thread_id(name)
    assert decoded in (tid, None)  # None: hashed name, id kept in thread.json
    if len(tid) < 100:
        assert decoded == tid


def test_distinct_ids_get_distinct_names() -> None:
    ids = [*HOSTILE, "a", "A", "ma", "~ma", "thread-42", "THREAD-42"]
    names = [encode_thread_id(t) for t in ids]
    assert len(set(names)) == len(ids)


def test_plain_ids_stay_readable() -> None:
    assert encode_thread_id("thread-42") == "thread-42"
    assert encode_thread_id("1f1ecc7f-a24b-6b56") == "1f1ecc7f-a24b-6b56"


@pytest.mark.parametrize("bad", ["", None, 42, b"bytes"])
def test_non_text_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidThreadIdError):
        encode_thread_id(bad)  # type: ignore[arg-type]


class _S(TypedDict):
    n: int


def _graph(saver: ExternalCheckpointer):  # type: ignore[no-untyped-def]
    g = StateGraph(_S)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    return g.compile(checkpointer=saver)


def test_hostile_ids_run_and_stay_under_the_root(tmp_path: Path, spool_dir: Path) -> None:
    root = tmp_path / "ws"
    ws = Workspace(root)
    pipeline = Pipeline(
        InMemoryLedger(), projections=[WorkspaceProjection(ws)], spool_dir=spool_dir
    )
    saver = ExternalCheckpointer(InMemorySaver(), pipeline=pipeline, reject_nul=False)
    app = _graph(saver)
    for tid in HOSTILE:
        assert app.invoke({"n": 1}, {"configurable": {"thread_id": tid}}) == {"n": 2}
    pipeline.close()
    assert pipeline.failures == []
    real_root = os.path.realpath(root)
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            assert os.path.realpath(os.path.join(dirpath, f)).startswith(real_root + os.sep)
    assert sorted(ws.list_threads()) == sorted(HOSTILE)
    for tid in HOSTILE:
        thread_json = ws.read_json(f"{ws.thread_dir(tid)}/thread.json")
        assert thread_json["thread_id"] == tid
        assert {e["kind"] for e in ws.iter_events(tid)} == {"checkpoint", "writes"}
    # nothing was written outside <root>/threads except nothing at all
    assert sorted(os.listdir(root)) == ["threads"]
    assert not (tmp_path / "x").exists() and not (tmp_path / "etc").exists()


def test_state_json_is_replaced_atomically_and_readable(tmp_path: Path, spool_dir: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    pipeline = Pipeline(
        InMemoryLedger(), projections=[WorkspaceProjection(ws)], spool_dir=spool_dir
    )
    app = _graph(ExternalCheckpointer(InMemorySaver(), pipeline=pipeline))
    app.invoke({"n": 1}, {"configurable": {"thread_id": "t"}})
    app.invoke({"n": 10}, {"configurable": {"thread_id": "t"}})
    pipeline.close()
    state = ws.read_json(f"{ws.thread_dir('t')}/state.json")
    assert state["values"] == {"n": 11}
    leftovers = [p for p in (tmp_path / "ws").rglob(".tmp-*")]
    assert leftovers == []


def test_read_only_workspace_is_a_clear_error(tmp_path: Path) -> None:
    import zipfile

    archive = tmp_path / "ro.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("threads/keep.txt", "x")
    with pytest.raises(WorkspaceError, match="not writable"):
        Workspace(f"zip://::{archive}").check_writable()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(WorkspaceError, match="not writable"):
        Workspace(blocker / "ws").check_writable()


def test_fsspec_memory_workspace_works(spool_dir: Path) -> None:
    ws = Workspace("memory://lgx-test-ws")
    pipeline = Pipeline(
        InMemoryLedger(), projections=[WorkspaceProjection(ws)], spool_dir=spool_dir
    )
    app = _graph(ExternalCheckpointer(InMemorySaver(), pipeline=pipeline))
    app.invoke({"n": 1}, {"configurable": {"thread_id": "a/b"}})
    pipeline.close()
    assert pipeline.failures == []
    envs = list(ws.iter_events("a/b"))
    assert [e["seq"] for e in envs] == list(range(1, len(envs) + 1))
    assert ws.read_json(f"{ws.thread_dir('a/b')}/state.json")["values"] == {"n": 2}


def test_checkpointer_builds_its_own_pipeline_from_a_workspace(tmp_path: Path) -> None:
    ws_dir = tmp_path / "ws"
    with ExternalCheckpointer(
        InMemorySaver(),
        workspace=ws_dir,
        options=Options(spool_dir=tmp_path / "s"),
    ) as cp:
        _graph(cp).invoke({"n": 41}, {"configurable": {"thread_id": "solo"}})
    state = Workspace(ws_dir).read_json(f"{Workspace(ws_dir).thread_dir('solo')}/state.json")
    assert state["values"] == {"n": 42}
    with pytest.raises(Exception, match="workspace"):
        ExternalCheckpointer(InMemorySaver())


def test_a_deferred_state_json_never_goes_back_behind_another_writer(
    tmp_path: Path, spool_dir: Path
) -> None:
    """Two processes mirror one thread (an app and ``lgx prune``/``repair``). One defers its
    ``state.json`` for checkpoint X, the other writes the newer Y, then the first appends
    writes lines of its own and settles: ``state.json`` must stay at Y, not go back to X."""
    ledger = InMemoryLedger()
    pipeline = Pipeline(ledger, projections=[], spool_dir=spool_dir)
    app = _graph(ExternalCheckpointer(InMemorySaver(), pipeline=pipeline))
    for n in (1, 10, 100):
        app.invoke({"n": n}, {"configurable": {"thread_id": "t"}})
    pipeline.close()
    events = ledger.read("t", 0, limit=10**6)
    roots = [i for i, e in enumerate(events) if e.kind == "checkpoint" and not e.checkpoint_ns]
    # X and Y: two root checkpoints, Y followed by writes events before the next one
    y = next(i for i in roots[2:] if i + 1 < len(events) and events[i + 1].kind == "writes")
    x = max(i for i in roots if i < y)
    w = next(i for i in range(y + 1, len(events)) if events[i].kind != "writes") - 1
    ws = Workspace(tmp_path / "mirror")
    first, second = WorkspaceProjection(ws), WorkspaceProjection(ws)
    assert roots[0] < x < y < w
    first.apply("t", events[: roots[0] + 1])  # writes state.json at once (first time)
    first.apply("t", events[roots[0] + 1 : x + 1])  # X: deferred (STATE_INTERVAL)
    assert first.due() == ["t"]
    second.apply("t", events[x + 1 : y + 1])  # the other writer: state.json of Y at once
    state = f"{ws.thread_dir('t')}/state.json"
    assert ws.read_json(state)["checkpoint_id"] == events[y].checkpoint_id
    first.revalidate("t")  # what the pipeline does under the thread's lock
    first.apply("t", events[y + 1 : w + 1])  # writes lines only: no root checkpoint
    first.settle()
    assert ws.read_json(state)["checkpoint_id"] == events[y].checkpoint_id


def _two_turns(spool_dir: Path) -> tuple[InMemoryLedger, list[Any]]:
    """The ledger of a thread ``t`` after two turns of the graph, and its events."""
    ledger = InMemoryLedger()
    pipeline = Pipeline(ledger, projections=[], spool_dir=spool_dir)
    app = _graph(ExternalCheckpointer(InMemorySaver(), pipeline=pipeline))
    for n in (1, 10):
        app.invoke({"n": n}, {"configurable": {"thread_id": "t"}})
    pipeline.close()
    return ledger, ledger.read("t", 0, limit=10**6)


def test_a_writer_that_died_with_state_json_deferred_leaves_it_to_the_next_one(
    tmp_path: Path, spool_dir: Path
) -> None:
    """A sealing process defers ``state.json`` for checkpoint X (its cursor held back) and
    is SIGKILLed; the next process is handed only writes events of the thread (no root
    checkpoint). It must still write X's state, and hold the cursor back until it has —
    the 30-minute soak's ``lgx verify`` failures ("state.json shows checkpoint …, but the
    latest is …")."""
    _, events = _two_turns(spool_dir)
    roots = [i for i, e in enumerate(events) if e.kind == "checkpoint" and not e.checkpoint_ns]
    x = next(i for i in roots[1:] if i + 1 < len(events) and events[i + 1].kind == "writes")
    w = next((i for i in range(x + 1, len(events)) if events[i].kind != "writes"), len(events))
    ws = Workspace(tmp_path / "mirror")
    state = f"{ws.thread_dir('t')}/state.json"
    dead = WorkspaceProjection(ws)
    dead.apply("t", events[: roots[0] + 1])  # state.json at once (first time)
    dead.apply("t", events[roots[0] + 1 : x + 1])  # X: deferred (STATE_INTERVAL)
    cursor = dead.settled("t", dead.position("t"))
    assert cursor < events[x].seq  # recorded: the thread lags behind its files
    assert ws.read_json(state)["checkpoint_id"] != events[x].checkpoint_id
    del dead  # SIGKILL: nothing settled

    nxt = WorkspaceProjection(ws)
    nxt.apply("t", events[x + 1 : w])  # writes lines only
    pos = nxt.position("t")
    assert pos == events[w - 1].seq
    assert nxt.due() == ["t"]
    assert nxt.settled("t", pos) < pos  # killed now too: the one after it still knows
    nxt.settle()
    assert ws.read_json(state)["checkpoint_id"] == events[x].checkpoint_id
    assert nxt.settled("t", pos) == pos


def test_a_writer_that_resumes_its_own_settled_thread_writes_nothing_twice(
    tmp_path: Path, spool_dir: Path
) -> None:
    """Files found settled by a writer that went on at once with a root checkpoint: its
    own state.json is the one written, and nothing stays due."""
    _, events = _two_turns(spool_dir)
    last_root = max(
        i for i, e in enumerate(events) if e.kind == "checkpoint" and not e.checkpoint_ns
    )
    ws = Workspace(tmp_path / "mirror")
    first = WorkspaceProjection(ws)
    first.apply("t", events[:3])
    first.settle()
    nxt = WorkspaceProjection(ws)
    nxt.apply("t", events[3:])
    assert nxt.due() == []
    state = ws.read_json(f"{ws.thread_dir('t')}/state.json")
    assert state["checkpoint_id"] == events[last_root].checkpoint_id


def test_a_writer_with_nothing_new_to_write_does_not_vouch_for_a_dead_writers_files(
    tmp_path: Path, spool_dir: Path
) -> None:
    """The soak's remaining ``lgx verify`` failures: a sealer deferred ``state.json`` of
    the thread's last checkpoint and never settled it; another process retried the thread
    later (its own write had failed on the full disk) and found every event already in the
    files — nothing to apply — and recorded the thread's cursor at the head. A process
    records no cursor for files another writer left that it did not write to; the resume
    of a recheck (which knows the recorded cursor) writes their newest state, then moves it."""
    from langgraph_external.pipeline.apply import apply_thread, cursor_of

    ledger, events = _two_turns(spool_dir)
    roots = [i for i, e in enumerate(events) if e.kind == "checkpoint" and not e.checkpoint_ns]
    ws = Workspace(tmp_path / "mirror")
    state = f"{ws.thread_dir('t')}/state.json"
    dead = WorkspaceProjection(ws)
    dead.apply("t", events[: roots[0] + 1])  # state.json at once (first time)
    dead.apply("t", events[roots[0] + 1 :])  # the last root checkpoint: deferred
    recorded = dead.settled("t", dead.position("t"))
    assert recorded is not None and recorded < events[-1].seq
    assert ws.read_json(state)["checkpoint_id"] != events[roots[-1]].checkpoint_id
    del dead  # SIGKILL: nothing settled

    other = WorkspaceProjection(ws)
    pos, mark = apply_thread(ledger, other, "t", lambda _pos: [], cursor=None)
    assert pos == events[-1].seq
    assert mark is None  # not vouched for: nothing written here
    assert other.due() == []  # nor taken over
    pos, mark = apply_thread(ledger, other, "t", lambda _pos: [], cursor=recorded, resume=True)
    assert ws.read_json(state)["checkpoint_id"] == events[roots[-1]].checkpoint_id
    assert mark == pos == events[-1].seq
    assert cursor_of(other, "t", pos) == pos


def test_a_live_writers_deferred_state_json_is_left_to_it_by_the_other_writers(
    tmp_path: Path, spool_dir: Path
) -> None:
    """The soak's mirror fell ever further behind: three sealing processes saw each other's
    busy threads lagging (a deferred ``state.json`` holds the cursor back) and each took
    them over, rewriting ``state.json`` from the whole log on every scan. A process that
    finds such a thread with nothing new to write leaves the files and the cursor alone."""
    from langgraph_external.pipeline.apply import apply_thread

    ledger, events = _two_turns(spool_dir)
    roots = [i for i, e in enumerate(events) if e.kind == "checkpoint" and not e.checkpoint_ns]
    ws = Workspace(tmp_path / "mirror")
    state = Path(ws.thread_dir("t")) / "state.json"
    live = WorkspaceProjection(ws)
    live.apply("t", events[: roots[0] + 1])
    live.apply("t", events[roots[0] + 1 :])  # deferred, the cursor held back
    recorded = live.settled("t", live.position("t"))
    assert recorded is not None and recorded < events[-1].seq
    before = state.read_bytes(), state.stat().st_mtime_ns
    for _ in range(3):  # the other processes' scans, again and again
        other = WorkspaceProjection(ws)
        pos, mark = apply_thread(ledger, other, "t", None, cursor=recorded)
        assert (pos, mark) == (events[-1].seq, recorded)
        assert other.due() == [] and other.overdue() == []
    assert (state.read_bytes(), state.stat().st_mtime_ns) == before
    live.settle()  # the live writer settles it in its time
    assert ws.read_json(str(state))["checkpoint_id"] == events[roots[-1]].checkpoint_id
    assert live.settled("t", live.position("t")) == events[-1].seq


def test_a_deferred_state_json_is_overdue_after_state_interval(
    tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy sealing process never has a quiet pass: what it deferred for
    ``STATE_INTERVAL`` is overdue, which the runner settles in a busy pass too."""
    from langgraph_external.workspace import projection

    _, events = _two_turns(spool_dir)
    roots = [i for i, e in enumerate(events) if e.kind == "checkpoint" and not e.checkpoint_ns]
    monkeypatch.setattr(projection, "STATE_INTERVAL", 3600.0)
    proj = WorkspaceProjection(Workspace(tmp_path / "mirror"))
    proj.apply("t", events[: roots[0] + 1])
    proj.apply("t", events[roots[0] + 1 :])
    assert proj.due() == ["t"] and proj.overdue() == []  # written under an hour ago
    monkeypatch.setattr(projection, "STATE_INTERVAL", 0.0)
    assert proj.overdue() == ["t"]
    proj.settle(proj.overdue())
    assert proj.due() == proj.overdue() == []


def test_a_reader_that_does_not_hold_the_thread_never_cuts_another_writers_append(
    tmp_path: Path, spool_dir: Path
) -> None:
    """The soak's gaps in ``events.jsonl``: a sealing process looking at a thread another
    process was writing (its lagging scan, a thread held elsewhere) read the position with
    the torn-tail repair, and cut the other's append in progress — which then lost its
    lines. A position read without holding the thread cuts nothing."""
    from langgraph_external.ledger.memory import InMemoryLedger as Ledger
    from langgraph_external.pipeline.settling import lagging_threads

    ledger, events = _two_turns(spool_dir)
    ws = Workspace(tmp_path / "mirror")
    writer = WorkspaceProjection(ws)
    writer.apply("t", events[:-1])
    path = Path(ws.thread_dir("t")) / "events.jsonl"
    with path.open("ab") as f:  # the next append, half way through
        f.write(b'{"seq": ' + str(events[-1].seq).encode() + b', "kind": "che')
    before = path.read_bytes()
    reader = WorkspaceProjection(Workspace(tmp_path / "mirror"))
    assert reader.peek("t") == events[-2].seq
    assert lagging_threads(ledger, reader, recheck=False) == {"t": 0}
    assert isinstance(ledger, Ledger) and path.read_bytes() == before
    assert reader.position("t") == events[-2].seq  # the holder's read cuts the torn line
    assert path.read_bytes() == before[: before.rindex(b"\n") + 1]


@pytest.mark.parametrize("attempt", range(10))
def test_two_writers_of_one_thread_at_once_write_each_event_once(
    tmp_path: Path, spool_dir: Path, attempt: int
) -> None:
    """The soak's duplicated lines: a database restart ended the session that held a
    thread's projection lock while its writer went on, and another process took the lock
    and wrote the same events. The thread's directory lock still keeps them apart: two
    writers applying the same batches at once (another thread burning CPU) leave every
    event in ``events.jsonl`` once, in order."""
    import threading

    _, events = _two_turns(spool_dir)
    batches = [events[i : i + 3 + attempt % 3] for i in range(0, len(events), 3 + attempt % 3)]
    stop = threading.Event()

    def burn() -> None:
        x = 0
        while not stop.is_set():
            x = (x * 31 + 7) % 1_000_003

    errors: list[BaseException] = []

    def write(proj: WorkspaceProjection) -> None:
        try:
            for batch in batches:
                proj.apply("t", batch)
        except BaseException as exc:  # reported below
            errors.append(exc)

    burner = threading.Thread(target=burn, daemon=True)
    burner.start()
    writers = [
        threading.Thread(target=write, args=(WorkspaceProjection(Workspace(tmp_path / "m")),))
        for _ in range(2)
    ]
    try:
        for w in writers:
            w.start()
        for w in writers:
            w.join(60)
    finally:
        stop.set()
    assert not errors
    ws = Workspace(tmp_path / "m")
    assert [e["seq"] for e in ws.iter_events("t")] == [e.seq for e in events]
