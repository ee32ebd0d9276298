"""Security of the record: the deployment key, tamper evidence, hostile values.

Each tampering case edits what an attacker without the key can edit (the ledger's tables,
the workspace's files), as thoroughly as the unkeyed chain allows, and ``lgx verify``
must exit 1 naming what was altered.
"""

from __future__ import annotations

import base64
import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from psycopg.types.json import Jsonb
from typer.testing import CliRunner, Result

from langgraph_external import External, Workspace
from langgraph_external.cli import app
from langgraph_external.errors import ConfigurationError, RestoreError
from langgraph_external.ops.restore import restore_thread
from langgraph_external.options import Options
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import canonical_json, compute_hash
from langgraph_external.record.keys import load_key
from tests.graphs import react_agent

BIG = "y" * 40_000  # above the 16 KiB inline limit: a blob file


class S(TypedDict):
    note: str
    big: str
    x: dict[str, float]


def _graph(checkpointer: Any) -> Any:
    g = StateGraph(S)
    g.add_node("first", lambda s: {"note": "first " + "n" * 3000, "x": {"v": float("nan")}})
    g.add_node("second", lambda s: {"big": BIG, "x": {"v": float("inf")}})
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    g.add_edge("second", END)
    return g.compile(checkpointer=checkpointer)


@dataclass
class Rec:
    dsn: str
    ws: Path
    tid: str = "t"

    @property
    def tdir(self) -> Path:
        return self.ws / "threads" / self.tid


@pytest.fixture
def rec(dsn: str, tmp_path: Path, spool_dir: Path) -> Rec:
    """Thread ``t``: a ReAct run (tool events, artifacts) then a state with a blob file."""
    ws = tmp_path / "ws"
    with External(
        dsn=dsn,
        workspace=ws,
        options=Options(spool_dir=spool_dir, offload_threshold=512),
    ) as ext:
        config = ext.config("t")
        react_agent(ext.checkpointer).invoke({"messages": [HumanMessage("x" * 600)]}, config)
        ext.flush()
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        _graph(ext.checkpointer).invoke({"note": "", "big": "", "x": {}}, ext.config("t2"))
        ext.flush()
    return Rec(dsn, ws)


def lgx(rec: Rec, *args: str) -> Result:
    runner = CliRunner(env={"LGX_DSN": None, "COLUMNS": "300"})
    return runner.invoke(app, ["--dsn", rec.dsn, "--workspace", str(rec.ws), *args])


def assert_detected(rec: Rec, tid: str, *needles: str) -> None:
    res = lgx(rec, "verify", tid)
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    output = res.output.replace("\n", "")  # long paths wrap at the width of the table
    for needle in needles:
        assert needle in output, res.output


def _envelopes(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_an_untouched_record_verifies(rec: Rec) -> None:
    for tid in ("t", "t2"):
        res = lgx(rec, "verify", tid)
        assert res.exit_code == 0, res.output
    assert list((rec.tdir / "artifacts").iterdir())  # the checks below have artifacts to check
    assert list((rec.ws / "threads" / "t2" / "checkpoints" / "blobs").iterdir())


def test_both_copies_truncated_consistently_are_detected(rec: Rec) -> None:
    """The attacker cuts the last events from the ledger, its index and the workspace, and
    moves the head back: only the keyed tag of the head is beyond reach."""
    events = rec.tdir / "events.jsonl"
    envs = _envelopes(events)
    keep = envs[: len(envs) - 3]
    last = keep[-1]
    with psycopg.connect(rec.dsn, autocommit=True) as conn:
        conn.execute(
            "delete from langgraph_external.events where thread_id = 't' and seq > %s",
            (last["seq"],),
        )
        conn.execute(
            "delete from langgraph_external.checkpoints where thread_id = 't' and event_seq > %s",
            (last["seq"],),
        )
        conn.execute(
            "update langgraph_external.threads set last_seq = %s, last_hash = %s "
            "where thread_id = 't'",
            (last["seq"], last["hash"]),
        )
    events.write_text("".join(canonical_json(e) + "\n" for e in keep))
    for log in (rec.tdir / "checkpoints").glob("*.jsonl"):
        lines = [x for x in _envelopes(log) if x["seq"] <= last["seq"]]
        log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert_detected(rec, "t", f"the head (seq {last['seq']}) does not carry its keyed tag")


def test_an_edit_rehashed_through_both_copies_is_detected(rec: Rec) -> None:
    """An event's payload is changed and every later hash recomputed, in both copies."""
    events = rec.tdir / "events.jsonl"
    envs = _envelopes(events)
    i = next(n for n, e in enumerate(envs) if e["kind"] == "tool_end")
    envs[i]["payload"] = {**envs[i]["payload"], "parsed": "forged result"}
    for n in range(i, len(envs)):
        envs[n]["prev"] = envs[n - 1]["hash"] if n else None
        envs[n]["hash"] = compute_hash(envs[n])
    events.write_text("".join(canonical_json(e) + "\n" for e in envs))
    with psycopg.connect(rec.dsn, autocommit=True) as conn:
        for e in envs[i:]:
            conn.execute(
                "update langgraph_external.events set payload = %s, prev = %s, hash = %s "
                "where thread_id = 't' and seq = %s",
                (Jsonb(e["payload"]), e["prev"], e["hash"], e["seq"]),
            )
        conn.execute(
            "update langgraph_external.threads set last_hash = %s where thread_id = 't'",
            (envs[-1]["hash"],),
        )
    # the unkeyed chain holds in both copies, and they agree: only the keyed tag fails
    res = lgx(rec, "verify", "t")
    assert "hash does not match" not in res.output and "different events" not in res.output
    assert_detected(rec, "t", f"the head (seq {envs[-1]['seq']}) does not carry its keyed tag")


def test_an_edited_artifact_is_detected(rec: Rec) -> None:
    artifact = next((rec.tdir / "artifacts").iterdir())
    data = bytearray(artifact.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one artifact
    artifact.write_bytes(bytes(data))
    assert_detected(rec, "t", f"artifacts/{artifact.name}", "does not match its address")


def test_an_edited_blob_is_detected_and_restore_refuses_it(rec: Rec) -> None:
    blob = next((rec.ws / "threads" / "t2" / "checkpoints" / "blobs").iterdir())
    data = bytearray(blob.read_bytes())
    data[100] ^= 1
    blob.write_bytes(bytes(data))
    assert_detected(rec, "t2", f"blobs/{blob.name}", "wrong key or altered")
    target = InMemorySaver()
    with pytest.raises(RestoreError, match=f"blobs/{blob.name}"):
        restore_thread(Workspace(rec.ws), "t2", target)
    assert list(target.list(None)) == []


def test_an_edited_inline_copy_is_detected(rec: Rec) -> None:
    log = rec.ws / "threads" / "t2" / "checkpoints" / "_root.jsonl"
    lines = _envelopes(log)
    holder = next(x for x in lines if x.get("blobs"))
    sha, b64 = next(iter(holder["blobs"].items()))
    raw = bytearray(base64.b64decode(b64))
    raw[-1] ^= 1
    holder["blobs"][sha] = base64.b64encode(bytes(raw)).decode()
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert_detected(rec, "t2", "_root.jsonl", "wrong key or altered")


def test_an_edited_state_json_is_detected(rec: Rec) -> None:
    path = rec.ws / "threads" / "t2" / "state.json"
    doc = json.loads(path.read_text())
    doc["values"]["note"] = "forged"
    path.write_text(json.dumps(doc))
    assert_detected(rec, "t2", "state.json: its content does not match its keyed tag")


def test_edited_checkpoint_nodes_in_the_ledger_are_detected(rec: Rec) -> None:
    with psycopg.connect(rec.dsn, autocommit=True) as conn:
        row = conn.execute(
            "update langgraph_external.checkpoints set nodes = '{tools}' "
            "where thread_id = 't' and 'agent' = any(nodes) returning checkpoint_id"
        ).fetchone()
    assert row is not None
    assert_detected(rec, "t", f"checkpoint {row[0]}", "nodes is ['tools'] but its event says")


def test_a_checkpoint_index_row_removed_from_the_ledger_is_detected(rec: Rec) -> None:
    with psycopg.connect(rec.dsn, autocommit=True) as conn:
        row = conn.execute(
            "delete from langgraph_external.checkpoints where thread_id = 't' "
            "and step = 2 and checkpoint_ns = '' returning checkpoint_id"
        ).fetchone()
    assert row is not None
    assert_detected(rec, "t", f"checkpoint {row[0]}", "has no row in the checkpoint index")


def test_the_record_under_another_key_does_not_verify(rec: Rec) -> None:
    res = lgx(rec, "verify", "t", "--key", WorkspaceCipher.generate_key())
    assert res.exit_code == 1 and "keyed tag" in res.output, res.output


# -- the deployment key ------------------------------------------------------------------
def test_the_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "langgraph-external" / "key"
    first = load_key(key_file=path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_key(key_file=path).key_id == first.key_id  # read back, not replaced


def test_a_key_file_readable_by_others_or_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "key"
    load_key(key_file=path)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigurationError, match="readable by others"):
        load_key(key_file=path)
    with pytest.raises(ConfigurationError, match="inside the workspace"):
        load_key(key_file=tmp_path / "ws" / "key", workspace_root=str(tmp_path / "ws"))
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_key(key_file=tmp_path / "none", create=False)


def test_a_given_key_wins_over_the_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = WorkspaceCipher.generate_key()
    assert load_key(key, key_file=tmp_path / "k").key_id == WorkspaceCipher(key).key_id
    monkeypatch.setenv("LGX_KEY", key)
    assert load_key(key_file=tmp_path / "k").key_id == WorkspaceCipher(key).key_id
    assert not (tmp_path / "k").exists()


# -- hostile values --------------------------------------------------------------------
def _strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"bare {token} token")

    return json.loads(text, parse_constant=refuse)


def test_nan_and_infinity_are_never_bare_tokens_and_restore_round_trips_them(rec: Rec) -> None:
    tdir = rec.ws / "threads" / "t2"
    state = _strict_json((tdir / "state.json").read_text())
    assert state["values"]["x"] == {"v": "Infinity"}
    for path in [tdir / "events.jsonl", *(tdir / "checkpoints").glob("*.jsonl")]:
        for line in path.read_text().splitlines():
            _strict_json(line)
    target = InMemorySaver()
    restore_thread(Workspace(rec.ws), "t2", target)
    values = _graph(target).get_state({"configurable": {"thread_id": "t2"}}).values
    assert values["x"] == {"v": math.inf}
    first = [
        t for t in target.list({"configurable": {"thread_id": "t2"}}) if t.metadata["step"] == 1
    ]
    assert math.isnan(first[0].checkpoint["channel_values"]["x"]["v"])


def test_a_symlinked_thread_directory_is_never_written_through(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """A workspace writer plants ``threads/evil`` -> a directory outside the root."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    (ws / "threads").mkdir(parents=True)
    (ws / "threads" / "evil").symlink_to(outside, target_is_directory=True)
    with External(dsn=dsn, workspace=ws, options=Options(spool_dir=spool_dir)) as ext:
        for tid in ("evil", "fine", "fine-2"):
            react_agent(ext.checkpointer).invoke(
                {"messages": [HumanMessage("hi")]}, ext.config(tid)
            )
        ext.flush(timeout=5)
        assert len(ext.events("evil")) > 0  # the ledger has it all
        failures = " ".join(f["error"] for f in ext.health()["failures"])
    assert list(outside.iterdir()) == []
    assert "outside the workspace root" in failures
    assert (ws / "threads" / "fine" / "events.jsonl").exists()


def test_a_heads_snapshot_finds_a_thread_rolled_back_or_deleted(rec: Rec, tmp_path: Path) -> None:
    """What a per-thread tag cannot show: an older, correctly tagged state put back."""
    snap = tmp_path / "heads.json"
    assert lgx(rec, "heads", str(snap)).exit_code == 0
    ok = lgx(rec, "verify", "--all", "--heads", str(snap))
    assert ok.exit_code == 0 and "every head it saw is still there" in ok.output, ok.output
    with psycopg.connect(rec.dsn, autocommit=True) as conn:  # the admin drops thread t2
        conn.execute("delete from langgraph_external.events where thread_id = 't2'")
        conn.execute("delete from langgraph_external.checkpoints where thread_id = 't2'")
        conn.execute("delete from langgraph_external.threads where thread_id = 't2'")
    res = lgx(rec, "verify", "t", "--heads", str(snap))
    assert res.exit_code == 1 and "thread 't2'" in res.output and "is gone" in res.output
    forged = json.loads(snap.read_text())
    forged["heads"].pop("t2")
    snap.write_text(json.dumps(forged))
    res = lgx(rec, "verify", "t", "--heads", str(snap))
    assert res.exit_code == 1 and "keyed tag does not match" in res.output, res.output
