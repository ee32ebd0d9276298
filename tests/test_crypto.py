"""Encryption at rest of the workspace's exact checkpoint copies."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_external import ConfigurationError, External
from langgraph_external.ops.restore import RestoreError, iter_checkpoint_ids, load_checkpoint
from langgraph_external.options import Options
from langgraph_external.record.crypto import DecryptionError, WorkspaceCipher

SECRET_STATE = "patient-record-4711-otter"


class S(TypedDict):
    note: str
    big: str


def _graph(checkpointer: Any) -> Any:
    g = StateGraph(S)
    g.add_node("write", lambda s: {"note": SECRET_STATE, "big": SECRET_STATE * 2000})
    g.add_edge(START, "write")
    g.add_edge("write", END)
    return g.compile(checkpointer=checkpointer)


def test_exact_copies_are_encrypted_and_restore_needs_the_key(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = WorkspaceCipher.generate_key()
    ws_dir = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws_dir, key=key, options=Options(spool_dir=spool_dir)) as ext:
        _graph(ext.checkpointer).invoke({"note": "", "big": ""}, ext.config("enc"))
        ext.flush()
        saver = ext.checkpointer
        ws = ext.workspace
        ids = list(iter_checkpoint_ids(ws, "enc"))
        cipher = WorkspaceCipher(key)
        for ns, cid in ids:
            want = saver.get_tuple(
                {"configurable": {"thread_id": "enc", "checkpoint_ns": ns, "checkpoint_id": cid}}
            )
            got = load_checkpoint(ws, "enc", ns, cid, serde=saver.serde, cipher=cipher)
            assert want is not None
            assert got.checkpoint["channel_values"] == want.checkpoint["channel_values"]
    # no exact copy holds the plaintext: not the log's inline bytes, not the blob files
    log_lines = [
        json.loads(x)
        for x in (ws_dir / "threads" / "enc" / "checkpoints" / "_root.jsonl")
        .read_text()
        .split("\n")
        if x
    ]
    inline = [base64.b64decode(v) for line in log_lines for v in line.get("blobs", {}).values()]
    inline += [base64.b64decode(line["b64"]) for line in log_lines if "b64" in line]
    assert inline and all(SECRET_STATE.encode() not in b for b in inline)
    blob_files = list((ws_dir / "threads" / "enc" / "checkpoints" / "blobs").iterdir())
    assert blob_files and all(SECRET_STATE.encode() not in p.read_bytes() for p in blob_files)
    # addresses are keyed: nobody can confirm a guessed value from its address
    plain_sha = {hashlib.sha256(b).hexdigest() for b in inline}
    addresses = {sha for line in log_lines for sha in line.get("blobs", {})}
    assert addresses and not (addresses & plain_sha)
    # without the key, or with another one, restore refuses
    ns, cid = ids[-1]
    from langgraph_external import Workspace

    monkeypatch.setenv("LGX_KEY_FILE", str(tmp_path / "no-key-here"))  # no deployment key
    with pytest.raises(RestoreError, match="encrypted"):
        load_checkpoint(Workspace(ws_dir), "enc", ns, cid)
    with pytest.raises(DecryptionError):
        load_checkpoint(
            Workspace(ws_dir),
            "enc",
            ns,
            cid,
            cipher=WorkspaceCipher(WorkspaceCipher.generate_key()),
        )


def test_a_malformed_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="32 bytes"):
        WorkspaceCipher("too-short")


def test_addresses_nonces_and_tags_are_stable_across_versions() -> None:
    """Known answers computed by the first release of the keyed formats: a record written
    then must verify, and a value re-sealed from the saver's row must give the same bytes,
    whatever this code is rewritten into."""
    c = WorkspaceCipher(bytes(range(32)))
    addr = c.address(b"state")
    assert addr == "88e59c076e430738befdefdb17bbd5ca2f9a362bd89e0a293bfee722e79da2cf"
    assert c.seal(b"state", addr.encode()).hex() == (
        "1026de7bc792de474cb4b7dd225a6864f393cb03e31a1f4ba0a7ea29d9a6ce2a55"
    )
    assert c.tag("head", "t", 1, "h") == (
        "9acd363e4301b6bdec004c3e49cc78a3fbe768b121cc90fd1fef68cd404f2163"
    )
    assert c.decrypt(c.seal(b"state", addr.encode()), addr.encode()) == b"state"


@pytest.mark.slow  # seconds: a subprocess or a 30 s wait
def test_a_process_that_does_not_encrypt_never_loads_the_cipher_library(
    dsn: str, tmp_path: Path
) -> None:
    """``encrypt=False`` keeps the keyed addresses but not AES-GCM: the ``cryptography``
    library (several MB of memory) is never imported by recording, mirroring or reading."""
    import subprocess
    import sys

    script = f"""
import sys
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict
from langgraph_external import External

class S(TypedDict):
    note: str

g = StateGraph(S)
g.add_node("write", lambda s: {{"note": "x" * 9000}})
g.add_edge(START, "write")
g.add_edge("write", END)
with External(dsn={dsn!r}, workspace={str(tmp_path / "ws")!r},
              spool_dir={str(tmp_path / "spool")!r}, encrypt=False) as ext:
    app = g.compile(checkpointer=ext.checkpointer)
    app.invoke({{"note": ""}}, ext.config("plain"))
    assert ext.flush()
    assert ext.checkpointer.get_tuple(ext.config("plain")).checkpoint["channel_values"]
    assert ext.events("plain")
print(sorted(m for m in sys.modules if m.split(".")[0] == "cryptography"))
"""
    env = {"LGX_KEY": WorkspaceCipher.generate_key(), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
