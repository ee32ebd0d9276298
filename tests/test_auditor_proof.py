"""The auditor's proof: a signed Merkle log of head moves, bundles and proofs that anyone
verifies with the public key alone, and what each of them catches."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typer.testing import CliRunner

from langgraph_external import External
from langgraph_external.cli import app as cli
from langgraph_external.errors import ConfigurationError
from langgraph_external.ops.roles import apply_grants
from langgraph_external.options import Options
from langgraph_external.proof import audit, heads
from langgraph_external.proof import verify as v
from langgraph_external.proof.keys import Signer, load_signer, rotate_signer
from langgraph_external.proof.tree import (
    consistency_proof,
    frontier_of,
    frontier_root,
    inclusion_proof,
    tree_root,
)
from langgraph_external.record.keys import load_key
from langgraph_external.settings import sign_interval_from_env
from tests.graphs import react_agent

S = "langgraph_external"
VERIFIER = Path(v.__file__)


# -- the tree ---------------------------------------------------------------------------
def test_every_inclusion_and_consistency_proof_verifies_and_a_changed_leaf_does_not() -> None:
    leaves = [v.leaf_hash(v.leaf_bytes(f"t{i}", i, f"{i:064x}", i)) for i in range(40)]
    for n in range(1, 41):
        root = tree_root(leaves[:n])
        assert frontier_root(frontier_of(leaves[:n])) == root
        for i in range(n):
            proof = inclusion_proof(leaves[:n], i)
            assert v.verify_inclusion(i, n, leaves[i], proof, root)
            assert not v.verify_inclusion(i, n, v.leaf_hash(b"other"), proof, root)
        for m in range(n + 1):
            proof = consistency_proof(leaves[:n], m)
            assert v.verify_consistency(m, n, tree_root(leaves[:m]), root, proof)
            if 0 < m < n:
                changed = [*leaves[:n]]
                changed[m - 1] = v.leaf_hash(b"rewritten")
                assert not v.verify_consistency(
                    m, n, tree_root(leaves[:m]), tree_root(changed), consistency_proof(changed, m)
                )


def test_the_tree_is_rfc_9162s() -> None:
    # RFC 9162 §2.1.1: MTH({}) = SHA-256(); leaves and nodes are domain-separated
    import hashlib

    a, b, c = (v.leaf_hash(x) for x in (b"a", b"b", b"c"))
    assert a == hashlib.sha256(b"\x00a").digest()
    assert tree_root([]) == hashlib.sha256(b"").digest()
    assert tree_root([a, b, c]) == v.node_hash(v.node_hash(a, b), c)


# -- the log in the ledger ----------------------------------------------------------------
def _advance(conn: psycopg.Connection[Any], tid: str, seq: int, prev: str | None) -> str:
    h = f"{seq:02d}{tid}".encode().hex().ljust(64, "0")[:64]
    conn.execute(
        f"select {S}.advance_thread(%s, %s, %s, %s, %s, %s, null)",
        (tid, seq - 1, prev, seq, h, datetime(2026, 12, 7, 1, 2, 3, 456789, tzinfo=timezone.utc)),
    )
    return h


def _leaves(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"select idx, thread_id, seq, head_hash, (extract(epoch from ts) * 1000000)::bigint,"
        f" leaf_hash from {S}.log_leaves order by idx"
    ).fetchall()


def test_the_database_appends_the_leaf_the_verifier_hashes_and_keeps_the_root(dsn: str) -> None:
    from langgraph_external.ledger import schema as ledger

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger.setup(conn)
        prev: dict[str, str | None] = {}
        for tid in ["a", "thread with spaces", "日本語-スレッド", "a:b\\c\nd", "a"] * 3:
            n = conn.execute(
                f"select last_seq from {S}.threads where thread_id = %s", (tid,)
            ).fetchone()
            last = n[0] if n else 0
            prev[tid] = _advance(conn, tid, last + 1, prev.get(tid) if last else None)
        rows = _leaves(conn)
        assert [r[0] for r in rows] == list(range(len(rows))) == list(range(15))
        for _idx, tid, seq, h, ts_us, leaf in rows:
            assert bytes(leaf) == v.leaf_hash(v.leaf_bytes(tid, seq, h, ts_us))
        origin, size, root = heads.log_state(conn, S)
        assert size == 15 and root == tree_root([bytes(r[5]) for r in rows])
        assert origin.startswith("langgraph-external/")


def test_a_head_that_is_not_the_log_as_it_is_is_refused(dsn: str) -> None:
    from langgraph_external.ledger import schema as ledger

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger.setup(conn)
        _advance(conn, "t", 1, None)
        with pytest.raises(psycopg.Error, match="not the log as it is"):
            conn.execute(f"select {S}.store_signed_head('k', 1, 1, %s, now(), 'x')", (bytes(32),))
        with pytest.raises(psycopg.Error, match="not the log as it is"):
            conn.execute(f"select {S}.store_signed_head('k', 1, 7, %s, now(), 'x')", (bytes(32),))


def test_concurrent_sealers_and_a_signer_keep_one_gapless_log_every_head_true(dsn: str) -> None:
    """Races are bugs: four writers move heads in transactions of several moves while a
    signer signs and another thread burns CPU; the log has no gap, each thread's leaves
    are in seq order, and every stored head is the root of the log at its size."""
    from langgraph_external.ledger import schema as ledger

    with psycopg.connect(dsn, autocommit=True) as conn:
        ledger.setup(conn)
    signer = Signer.generate("race")
    stop = threading.Event()
    errors: list[BaseException] = []

    def burn() -> None:
        while not stop.is_set():
            sum(i * i for i in range(2000))

    def write(w: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                prev: dict[str, str | None] = {}
                for round_ in range(25):
                    with conn.transaction():
                        for k in range(3):
                            tid = f"w{w}-{k}"
                            prev[tid] = _advance(conn, tid, round_ + 1, prev.get(tid))
        except BaseException as exc:  # reported below
            errors.append(exc)

    def sign() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                while not stop.is_set():
                    heads.sign_head(conn, S, [signer])
        except BaseException as exc:  # reported below
            errors.append(exc)

    burners = [threading.Thread(target=burn) for _ in range(2)]
    signing = threading.Thread(target=sign)
    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in [*burners, signing, *writers]:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in [*burners, signing]:
        t.join()
    assert errors == []
    with psycopg.connect(dsn, autocommit=True) as conn:
        heads.sign_head(conn, S, [signer])
        rows = _leaves(conn)
        assert [r[0] for r in rows] == list(range(4 * 25 * 3))
        seen: dict[str, int] = {}
        for _idx, tid, seq, *_ in rows:
            assert seq == seen.get(tid, 0) + 1
            seen[tid] = seq
        leaves = [bytes(r[5]) for r in rows]
        notes = [r[0] for r in conn.execute(f"select note from {S}.signed_heads")]
    assert len(notes) > 1
    for note in notes:
        head = v.parse_head(note)
        assert head.signed_by([signer.verifier]) is not None
        assert head.root == tree_root(leaves[: head.size])


# -- a recorded deployment ------------------------------------------------------------------
@pytest.fixture
def recorded(dsn: str, tmp_path: Path, spool_dir: Path) -> Iterator[dict[str, Any]]:
    """Two ReAct threads recorded by ``External`` (sealing in a thread); closing it signs
    the head that covers them."""
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        sealing="thread",
        options=Options(spool_dir=spool_dir),
    ) as ext:
        for tid in ("thread-a", "thread-b"):
            react_agent(ext.checkpointer).invoke(
                {"messages": [("user", f"weather for {tid}?")]}, ext.config(tid)
            )
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield {"conn": conn, "dsn": dsn, "key": load_signer(create=False).verifier}


def _bundle(conn: psycopg.Connection[Any], tid: str, **kw: Any) -> dict[str, Any]:
    return json.loads(json.dumps(audit.export_bundle(conn, S, tid, **kw)))


def test_closing_signs_a_head_and_a_bundle_verifies_with_the_public_key_alone(
    recorded: dict[str, Any],
) -> None:
    conn, key = recorded["conn"], recorded["key"]
    bundle = _bundle(conn, "thread-a", cipher=load_key(create=False), values=True)
    verdict = v.verify_bundle(bundle, [key])
    assert verdict.ok, verdict.report()
    events = [json.loads(line) for line in bundle["events"]]
    assert events[-1]["seq"] == bundle["leaf"]["seq"] == len(events)
    assert {"checkpoint", "writes", "tool_end", "llm_end"} <= {e["kind"] for e in events}
    assert bundle["values"] and "exact checkpoint values match" in verdict.report()


@pytest.mark.parametrize(
    ("tamper", "found"),
    [
        ("edit_event", "was edited"),
        ("edit_value", "does not match its commitment"),
        ("drop_event", "chain is broken"),
        ("cut_back", "cut back or replaced"),
        ("edit_proof", "not in the signed head's log"),
        ("forge_head", "not signed by a trusted key"),
    ],
)
def test_a_changed_bundle_fails_naming_what(
    recorded: dict[str, Any], tamper: str, found: str
) -> None:
    conn, key = recorded["conn"], recorded["key"]
    b = _bundle(conn, "thread-b", cipher=load_key(create=False), values=True)
    if tamper == "edit_event":  # which tool ran
        i = next(i for i, ln in enumerate(b["events"]) if '"kind":"tool_end"' in ln)
        b["events"][i] = b["events"][i].replace('"name":"', '"name":"another_', 1)
    elif tamper == "edit_value":  # one byte of the exact checkpoint bytes
        address, item = next(iter(b["values"].items()))
        data = bytearray(base64.b64decode(item["data"]))
        data[-1] ^= 1
        b["values"][address]["data"] = base64.b64encode(bytes(data)).decode()
    elif tamper == "drop_event":
        del b["events"][3]
    elif tamper == "cut_back":  # a shorter thread, the same leaf
        b["events"] = b["events"][:-2]
    elif tamper == "edit_proof":  # the leaf's time, so its hash
        b["leaf"]["ts_us"] += 1
    elif tamper == "forge_head":  # the same head, signed with another key
        h = v.parse_head(b["head"])
        b["head"] = heads.head_note(
            h.origin, h.size, h.root, datetime.now(timezone.utc), [Signer.generate(key.name)]
        )
    verdict = v.verify_bundle(b, [key])
    assert not verdict.ok
    assert any(found in p for p in verdict.problems), verdict.report()


def test_a_bundle_of_another_deployment_is_caught(
    recorded: dict[str, Any],
    second_dsn: str,
    tmp_path: Path,
    spool_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LGX_SIGNING_KEY_FILE", str(tmp_path / "other.key"))
    with External(
        dsn=second_dsn,
        workspace=tmp_path / "other-ws",
        sealing="thread",
        options=Options(spool_dir=spool_dir),
    ) as ext:
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("thread-a"))
    other_key = load_signer(tmp_path / "other.key", create=False).verifier
    with psycopg.connect(second_dsn, autocommit=True) as conn:
        theirs = _bundle(conn, "thread-a")
    ours = recorded["key"]
    assert v.verify_bundle(theirs, [other_key]).ok
    verdict = v.verify_bundle(theirs, [ours])
    assert any("not signed by a trusted key" in p for p in verdict.problems)
    # even a deployment that shares the signing key keeps its own log
    (origin,) = recorded["conn"].execute(f"select origin from {S}.log_state").fetchone()
    verdict = v.verify_bundle(theirs, [other_key], origin=origin)
    assert any("the head is of log" in p for p in verdict.problems), verdict.report()


# -- the ledger against its signed log ------------------------------------------------------
@pytest.mark.parametrize(
    ("edit", "found"),
    [
        (
            "delete from {S}.events where thread_id = 'thread-a' and seq > 5; "
            "update {S}.threads set last_seq = 5 where thread_id = 'thread-a'",
            "thread 'thread-a' was cut back",
        ),
        (
            "delete from {S}.events where thread_id = 'thread-a'; "
            "delete from {S}.threads where thread_id = 'thread-a'",
            "thread 'thread-a' is gone",
        ),
        (
            "update {S}.events set hash = repeat('0', 64) where thread_id = 'thread-a' "
            "and seq = (select max(seq) from {S}.events where thread_id = 'thread-a')",
            "thread 'thread-a' was replaced",
        ),
        (
            "update {S}.log_leaves set leaf_hash = sha256('x'::bytea) where idx = 0",
            "no longer hash to the signed root",
        ),
        ("delete from {S}.log_leaves where idx = 1", "leaves were deleted"),
    ],
)
def test_lgx_log_check_finds_a_thread_cut_back_deleted_or_replaced_and_a_rewritten_log(
    recorded: dict[str, Any], edit: str, found: str
) -> None:
    conn, key = recorded["conn"], recorded["key"]
    assert audit.check_log(conn, S, [key]).problems == []
    conn.execute(edit.format(S=S).encode())  # as the database's owner
    problems = audit.check_log(conn, S, [key]).problems
    assert any(found in p for p in problems), problems
    res = CliRunner(env={"LGX_DSN": None}).invoke(
        cli, ["--dsn", recorded["dsn"], "log", "check", "--trust", key.text]
    )
    assert res.exit_code == 1 and found in res.output


def test_a_log_rewritten_between_two_kept_heads_fails_the_consistency_proof(
    recorded: dict[str, Any],
) -> None:
    conn, key = recorded["conn"], recorded["key"]
    signer = load_signer(create=False)
    kept = audit.trusted_head(conn, S, [key])
    _advance(conn, "later", 1, None)
    later = heads.sign_head(conn, S, [signer])
    doc = audit.consistency_document(conn, S, kept.note, later)
    assert v.verify_consistency_file(doc, [key]).ok
    # whoever holds the database and the signing key rewrites the first leaf, makes the
    # log's right edge agree, and signs a new head: the kept head no longer fits it
    conn.execute(f"update {S}.log_leaves set leaf_hash = sha256('x'::bytea) where idx = 0")
    leaves = [bytes(r[5]) for r in _leaves(conn)]
    conn.execute(f"update {S}.log_state set frontier = %s", (frontier_of(leaves),))
    _advance(
        conn,
        "later",
        2,
        conn.execute(f"select last_hash from {S}.threads where thread_id = 'later'").fetchone()[0],
    )
    rewritten = heads.sign_head(conn, S, [signer])
    assert rewritten.head.root == tree_root([bytes(r[5]) for r in _leaves(conn)])
    doc = audit.consistency_document(conn, S, kept.note, rewritten)
    verdict = v.verify_consistency_file(doc, [key])
    assert any("the log was rewritten between the two heads" in p for p in verdict.problems)


def test_key_rotation_keeps_old_heads_verifiable_and_names_the_new_key(
    recorded: dict[str, Any],
    tmp_path: Path,
    spool_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn, old_key = recorded["conn"], recorded["key"]
    path = tmp_path / "rotating.key"
    path.write_text(load_signer(create=False).text + "\n")
    path.chmod(0o600)
    before = _bundle(conn, "thread-a")
    old, new, kept = rotate_signer(path)
    assert old.verifier == old_key and kept.exists() and load_signer(path) == new
    both = heads.sign_head(conn, S, [old, new])
    assert both.head.signed_by([old_key]) and both.head.signed_by([new.verifier])
    monkeypatch.setenv("LGX_SIGNING_KEY_FILE", str(path))  # sealers restarted with the new key
    with External(
        dsn=recorded["dsn"],
        workspace=tmp_path / "ws2",
        sealing="thread",
        options=Options(spool_dir=spool_dir),
    ) as ext:
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("after"))
    after = _bundle(conn, "after")
    assert v.parse_head(after["head"]).signed_by([new.verifier])
    assert v.verify_bundle(before, [old_key]).ok  # an old head, the old published key
    assert not v.verify_bundle(after, [old_key]).ok
    assert v.verify_bundle(after, [old_key, new.verifier]).ok
    # and the rotation head proves the new log extends what the old key signed
    doc = audit.consistency_document(conn, S, before["head"], audit.trusted_head(conn, S))
    assert v.verify_consistency_file(doc, [old_key, new.verifier]).ok


# -- the application's role -------------------------------------------------------------------
def test_the_app_role_cannot_write_the_log_but_its_sealer_grows_and_signs_it(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    role = "lgx_log_" + str(conninfo_to_dict(dsn)["dbname"])[-12:]
    with External(dsn=dsn, workspace=tmp_path / "owner-ws", options=Options(spool_dir=spool_dir)):
        pass
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"drop role if exists {role}")
        conn.execute(f"create role {role} login")
        apply_grants(conn, S, role)
    params = conninfo_to_dict(dsn)
    params["user"] = role
    app_dsn = make_conninfo(**params)
    with External(
        dsn=app_dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)
    ) as ext:
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("r"))
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        for stmt in (
            f"insert into {S}.log_leaves values (99, 'x', 1, 'h', now(), '\\x00')",
            f"update {S}.log_leaves set thread_id = 'x'",
            f"delete from {S}.log_leaves",
            f"update {S}.log_state set size = 0",
            f"delete from {S}.signed_heads",
            f"insert into {S}.signed_heads values ('k', 1, 1, '\\x00', now(), 'n')",
            f"select {S}.log_append('x', 1, 'h', now())",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt.encode())
        head = audit.trusted_head(conn, S, [load_signer(create=False).verifier])
        bundle = json.loads(json.dumps(audit.export_bundle(conn, S, "r", head=head)))
    assert v.verify_bundle(bundle, [load_signer(create=False).verifier]).ok


# -- the verifier on an auditor's machine ------------------------------------------------------
def _foreign_modules() -> list[Path]:
    """The files of the modules outside the standard library that Ed25519 needs."""
    code = (
        "import sys; from cryptography.hazmat.primitives.asymmetric import ed25519;"
        "from cryptography.exceptions import InvalidSignature;"
        "names = {m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names);"
        "files = (getattr(sys.modules[n], '__file__', None) for n in names - {'__main__'});"
        "print('\\n'.join(f for f in files if f and '_distutils_hack' not in f))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [Path(p) for p in out.stdout.split() if p]


def test_the_verifier_runs_with_only_the_standard_library_and_cryptography(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    deps = tmp_path / "auditor" / "deps"
    deps.mkdir(parents=True)
    for f in _foreign_modules():
        src = f.parent if f.name == "__init__.py" else f
        (deps / src.name).symlink_to(src)
    assert not (deps / "langgraph_external").exists() and not (deps / "psycopg").exists()
    tool = tmp_path / "auditor" / "verify.py"
    tool.write_bytes(VERIFIER.read_bytes())
    bundle_file = tmp_path / "auditor" / "bundle.json"
    bundle = _bundle(recorded["conn"], "thread-a", cipher=load_key(create=False), values=True)
    bundle_file.write_text(json.dumps(bundle))
    key = recorded["key"].text
    # -S: no site-packages, -E: no PYTHONPATH; only the standard library and deps/
    runner = (
        "import sys; sys.path.insert(0, sys.argv.pop(1)); import runpy;"
        "sys.argv = sys.argv[1:];"
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-S", "-E", "-c", runner, str(deps), str(tool), *args],
            capture_output=True,
            text=True,
            cwd=tmp_path / "auditor",
            env={"PATH": os.environ.get("PATH", "")},
        )

    ok = run(str(bundle_file), "--key", key)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("VERIFIED") and "is in the signed head's log" in ok.stdout
    bundle["events"][2] = bundle["events"][2].replace('"kind":"', '"kind":"x', 1)
    bundle_file.write_text(json.dumps(bundle))
    bad = run(str(bundle_file), "--key", key)
    assert bad.returncode == 1 and "FAILED" in bad.stdout and "was edited" in bad.stdout
    isolated = subprocess.run(
        [sys.executable, "-S", "-E", "-c", "import langgraph_external"],
        capture_output=True,
        text=True,
        cwd=tmp_path / "auditor",
    )
    assert isolated.returncode != 0  # nothing of ours was importable there


# -- settings ----------------------------------------------------------------------------------
def test_the_sign_interval_is_checked_and_off_signs_nothing(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LGX_SIGN_INTERVAL", "soon")
    with pytest.raises(ConfigurationError, match="LGX_SIGN_INTERVAL"):
        sign_interval_from_env()
    monkeypatch.setenv("LGX_SIGN_INTERVAL", "off")
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        sealing="thread",
        options=Options(spool_dir=spool_dir),
    ) as e:
        react_agent(e.checkpointer).invoke({"messages": [("user", "hi")]}, e.config("t"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute(f"select count(*) from {S}.signed_heads").fetchone() == (0,)
        assert conn.execute(f"select count(*) from {S}.log_leaves").fetchone()[0] > 0  # type: ignore[index]


def test_the_default_helper_process_signs_while_it_seals(
    dsn: str, tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LGX_SIGN_INTERVAL", "0.2")
    with External(dsn=dsn, workspace=tmp_path / "ws", options=Options(spool_dir=spool_dir)) as ext:
        react_agent(ext.checkpointer).invoke({"messages": [("user", "hi")]}, ext.config("t"))
        assert ext.flush()
        key = load_signer(create=False).verifier
        deadline = time.monotonic() + 30
        with psycopg.connect(dsn, autocommit=True) as conn:
            while True:  # the helper signs on its own, before the app closes
                try:
                    head = audit.trusted_head(conn, S, [key])
                except audit.ProofError:
                    head = None
                if head is not None and head.head.size >= 1:
                    break
                assert time.monotonic() < deadline, "no head was signed"
                time.sleep(0.1)
            bundle = json.loads(json.dumps(audit.export_bundle(conn, S, "t", head=head)))
    assert v.verify_bundle(bundle, [key]).ok


def test_a_signing_key_that_cannot_be_had_leaves_sealing_running_and_says_so(
    dsn: str,
    tmp_path: Path,
    spool_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    monkeypatch.setenv("LGX_SIGNING_KEY_FILE", str(locked / "sub" / "signing.key"))
    if os.access(locked, os.W_OK):  # root writes anywhere: a malformed key instead
        monkeypatch.setenv("LGX_SIGNING_KEY", "PRIVATE+KEY+not-a-key")
    with External(
        dsn=dsn,
        workspace=tmp_path / "ws",
        sealing="thread",
        options=Options(spool_dir=spool_dir),
    ) as e:
        react_agent(e.checkpointer).invoke({"messages": [("user", "hi")]}, e.config("t"))
        assert e.flush() and e.events("t")
    assert "heads are not signed" in caplog.text


def test_the_signing_key_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    key = Signer.generate("from-env")
    monkeypatch.setenv("LGX_SIGNING_KEY", key.text)
    assert load_signer() == key


def test_lgx_log_bundles_proves_and_verifies_from_the_command_line(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    runner = CliRunner(env={"LGX_DSN": None})
    dsn, key = recorded["dsn"], recorded["key"].text

    def lgx(*args: str) -> Any:
        return runner.invoke(cli, ["--dsn", dsn, "--workspace", str(tmp_path / "w"), *args])

    printed = lgx("log", "key")
    assert printed.exit_code == 0 and printed.output.strip() == key
    kept = lgx("log", "head", "-o", str(tmp_path / "kept.txt"))
    assert kept.exit_code == 0, kept.output
    bundle = lgx("log", "bundle", "thread-a", "-o", str(tmp_path / "b.json"), "--values")
    assert bundle.exit_code == 0, bundle.output
    ok = lgx("log", "verify", str(tmp_path / "b.json"), "--trust", key)
    assert ok.exit_code == 0 and "VERIFIED" in ok.output
    assert lgx("log", "sign").exit_code == 0
    proof = lgx("log", "prove", str(tmp_path / "kept.txt"), "-o", str(tmp_path / "c.json"))
    assert proof.exit_code == 0, proof.output
    assert lgx("log", "verify", str(tmp_path / "c.json"), "--trust", key).exit_code == 0
    other = Signer.generate("someone-else").verifier.text
    refused = lgx("log", "verify", str(tmp_path / "b.json"), "--trust", other)
    assert refused.exit_code == 1 and "not signed by a trusted key" in refused.output
    missing = lgx("log", "bundle", "no-such-thread")
    assert missing.exit_code == 2 and "not covered" in missing.output
