"""Properties over generated input: policy documents and thread ids.

Whatever a policy document holds (any YAML/JSON-like structure, random text or bytes, deep
nesting, huge integers, NaN and infinities), loading it either succeeds or raises a
``PolicyError``: never another exception, never a long message. Whatever a thread id is,
the workspace name it gets is one safe path component that decodes back to it, and the
checkpointer either records it or refuses it with ``InvalidThreadIdError``.

Example counts are kept small so the whole module runs in a few seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_external import (
    ExternalCheckpointer,
    InvalidThreadIdError,
    Pipeline,
    Workspace,
    decode_thread_id,
    encode_thread_id,
)
from langgraph_external.guards import PolicyError, TransitionPolicy
from langgraph_external.ledger.memory import InMemoryLedger
from langgraph_external.record.locations import legacy_thread_folder
from langgraph_external.workspace.projection import WorkspaceProjection

FAST = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MAX_MESSAGE = 9_000

# -- policy documents ---------------------------------------------------------------------
WORDS = [
    *("version", "name", "description", "states", "transitions", "nodes", "tools"),
    *("default_tier", "unlisted_tool_tier", "default_max_visits", "on_violation"),
    *("max_visits", "tier", "writes", "action", "fallback"),
    *("START", "END", "__start__", "__end__", "a", "b", "c"),
    *("raise", "route", "interrupt", "read_only", "local_write", "remote_write", "none"),
]
huge_ints = st.integers(300, 4_000).map(lambda n: 10**n - 1)  # json/yaml can still write it
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    huge_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(WORDS), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=24,
)
names = st.lists(st.sampled_from(["START", "END", "a", "b", "c", "__end__"]), max_size=5)
rules = st.fixed_dictionaries(
    {},
    optional={
        "max_visits": st.one_of(st.integers(-2, 5), huge_ints, scalars),
        "tier": st.sampled_from(["none", "read_only", "remote_write", "root"]),
        "tools": st.lists(st.sampled_from(["t1", "t2"]), max_size=2),
        "writes": st.one_of(st.none(), st.lists(st.sampled_from(["x", "y"]), max_size=2)),
        "on_violation": st.fixed_dictionaries(
            {"action": st.sampled_from(["raise", "route", "interrupt", "explode"])},
            optional={"fallback": st.sampled_from(["a", "b", "START", "zz"])},
        ),
        "junk": values,
    },
)
policy_like = st.fixed_dictionaries(
    {"states": names, "transitions": st.dictionaries(st.sampled_from(WORDS[17:24]), names)},
    optional={
        "nodes": st.dictionaries(st.sampled_from(["a", "b", "c", "END", "zz"]), rules, max_size=3),
        "tools": st.dictionaries(
            st.sampled_from(["t1", "t2"]), st.sampled_from(["read_only", "local_write", "bad"])
        ),
        "default_max_visits": st.one_of(st.integers(-1, 3), huge_ints, scalars),
        "on_violation": values,
        "version": st.one_of(st.just(1), scalars),
        "name": scalars,
    },
)
documents = st.one_of(policy_like, st.dictionaries(keys, values, max_size=6), values)
yamlish_text = st.text(alphabet="[]{}:,-&*!|>'\"#\n\t ?%@`~.\\ab01eE+", max_size=160)


def loads_or_policy_error(load: Callable[[], Any]) -> None:
    """The property: success, or a ``PolicyError`` with a bounded message."""
    try:
        load()
    except PolicyError as exc:
        assert len(str(exc)) < MAX_MESSAGE


@FAST
@given(documents)
def test_any_structure_loads_or_is_a_policy_error(doc: Any) -> None:
    loads_or_policy_error(lambda: TransitionPolicy.from_dict(doc))


@FAST
@given(documents)
def test_any_structure_written_as_yaml_loads_or_is_a_policy_error(doc: Any) -> None:
    text = yaml.safe_dump(doc, allow_unicode=False)
    loads_or_policy_error(lambda: TransitionPolicy.from_yaml(text))


@FAST
@given(documents)
def test_any_structure_written_as_json_loads_or_is_a_policy_error(doc: Any) -> None:
    text = json.dumps(doc)  # NaN/Infinity come out as the non-standard literals
    loads_or_policy_error(lambda: TransitionPolicy.from_json(text))


@FAST
@given(st.one_of(yamlish_text, st.text(max_size=200)))
def test_any_text_loads_or_is_a_policy_error(text: str) -> None:
    loads_or_policy_error(lambda: TransitionPolicy.from_yaml(text))
    loads_or_policy_error(lambda: TransitionPolicy.from_json(text))


@FAST
@given(st.binary(max_size=300), st.sampled_from(["p.yaml", "p.yml", "p.json"]))
def test_any_file_loads_or_is_a_policy_error(tmp_path: Path, data: bytes, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    loads_or_policy_error(lambda: TransitionPolicy.from_file(path))


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 3_000),
    st.sampled_from(["[", "{a: ", "- ", '{"a": ']),
    st.sampled_from(["states", "name", "nodes"]),
)
def test_any_nesting_loads_or_is_a_policy_error(depth: int, opener: str, key: str) -> None:
    if opener == "- ":  # block sequences nest by indentation
        body = "".join(f"\n{'  ' * (i + 1)}- " for i in range(depth)) + "x"
    else:
        closer = {"[": "]", "{a: ": "}", '{"a": ': "}"}[opener]
        body = opener * depth + "1" + closer * depth
    loads_or_policy_error(lambda: TransitionPolicy.from_yaml(f"{key}: {body}\n"))
    if opener != "{a: " and opener != "- ":
        loads_or_policy_error(lambda: TransitionPolicy.from_json(f'{{"{key}": {body}}}'))


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 5_000))
def test_deep_structures_built_in_code_load_or_are_a_policy_error(depth: int) -> None:
    nested: Any = "a"
    for _ in range(depth):
        nested = [nested]
    loads_or_policy_error(lambda: TransitionPolicy.from_dict({"states": nested}))
    loads_or_policy_error(
        lambda: TransitionPolicy.from_dict({"states": ["a"], "transitions": {}, "x": nested})
    )


# -- thread ids ---------------------------------------------------------------------------
thread_ids = st.one_of(
    st.text(min_size=1, max_size=40),
    st.text(alphabet="./\\~-_ \x00aA0é\n", min_size=1, max_size=12),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.text(min_size=150, max_size=400),
    st.sampled_from([".", "..", "~", "~~", "-", "CON", "a" * 200]),
)


@FAST
@given(thread_ids)
def test_a_thread_id_becomes_one_safe_name_that_decodes_back(tid: str) -> None:
    name = encode_thread_id(tid)
    assert name and "/" not in name and "\\" not in name and "\x00" not in name
    assert name not in (".", "..") and not name.startswith("-")
    assert name == name.lower()
    assert len(name.encode("utf-8", "surrogatepass")) <= 255
    root = "/ws/threads"
    assert posixpath.dirname(posixpath.normpath(posixpath.join(root, name))) == root
    decoded = decode_thread_id(name)
    if "~" in name:  # the rule escapes ``~``: here it marks a hashed name
        assert decoded is None  # hashed: the id is kept in thread.json
        digest = hashlib.sha256(tid.encode("utf-8", "surrogatepass")).hexdigest()
        assert len(name) <= 200 and name.endswith("~" + digest)
    else:
        assert decoded == tid
    assert not name.startswith("~")  # the mark of the old rule's names


@FAST
@given(thread_ids)
def test_a_folder_name_of_the_old_rule_still_decodes_back(tid: str) -> None:
    name = legacy_thread_folder(tid)
    assert name == name.lower() and "/" not in name
    decoded = decode_thread_id(name)
    if name.startswith("~~"):
        assert decoded is None
    else:
        assert decoded == tid
    # a name of the old rule is never the current name of another id: it starts with
    # ``~`` (never written first by the current rule) or reads as this id by either rule
    assert name.startswith("~") or decode_thread_id(name) == tid


@FAST
@given(thread_ids, thread_ids)
def test_distinct_thread_ids_get_distinct_names(a: str, b: str) -> None:
    assert (encode_thread_id(a) == encode_thread_id(b)) == (a == b)
    assert (encode_thread_id(a).casefold() == encode_thread_id(b).casefold()) == (a == b)


@FAST
@given(thread_ids)
def test_a_thread_directory_stays_under_the_workspace_root(tmp_path: Path, tid: str) -> None:
    ws = Workspace(tmp_path)
    threads = os.path.join(os.path.realpath(tmp_path), "threads")
    assert os.path.dirname(os.path.realpath(ws.thread_dir(tid))) == threads


@FAST
@given(st.one_of(st.just(""), st.none(), st.integers(), st.binary(max_size=4), st.floats()))
def test_a_thread_id_that_is_not_text_is_refused_by_the_workspace(bad: Any) -> None:
    if isinstance(bad, str) and bad:
        return
    with pytest.raises(InvalidThreadIdError):
        encode_thread_id(bad)


any_thread_id = st.one_of(
    thread_ids,
    st.just(""),
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.uuids(),
)


@pytest.fixture
def recording_saver(tmp_path: Path) -> Any:
    pipeline = Pipeline(
        InMemoryLedger(),
        projections=[WorkspaceProjection(Workspace(tmp_path / "ws"))],
        spool_dir=tmp_path / "spool",
    )
    yield ExternalCheckpointer(InMemorySaver(), pipeline=pipeline)
    pipeline.close()
    assert pipeline.failures == []


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(any_thread_id)
def test_the_checkpointer_records_a_thread_id_or_refuses_it(
    recording_saver: ExternalCheckpointer, tmp_path: Path, tid: Any
) -> None:
    config: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    try:
        recording_saver.get_tuple(config)
        recording_saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    except InvalidThreadIdError:
        text = tid if isinstance(tid, str) else None
        assert text is None or text == "" or "\x00" in text or not _is_unicode(text)
        return
    assert isinstance(tid, str) or (tid is not None and not isinstance(tid, bytes))
    recording_saver.pipeline.flush()
    root = os.path.realpath(tmp_path / "ws")
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            assert os.path.realpath(os.path.join(dirpath, f)).startswith(root + os.sep)


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_a_container_thread_id_is_refused(recording_saver: ExternalCheckpointer) -> None:
    with pytest.raises(InvalidThreadIdError):
        recording_saver.get_tuple({"configurable": {"thread_id": ["a"], "checkpoint_ns": ""}})


# -- hostile workspace files ---------------------------------------------------------------
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
log_line = st.one_of(
    st.binary(max_size=64),  # not UTF-8, not JSON, torn
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"record": st.sampled_from(["checkpoint", "write", "writer", "x"])},
        optional={
            "checkpoint_id": json_values,
            "seq": json_values,
            "channels": json_values,
            "checkpoint": json_values,
            "blobs": json_values,
            "sha256": json_values,
            "task_id": json_values,
            "idx": json_values,
            "channel": json_values,
            "type": json_values,
            "b64": json_values,
            "inline": json_values,
            "in": json_values,
            "enc": json_values,
        },
    ).map(lambda d: json.dumps(d).encode()),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(log_line, max_size=4), st.lists(log_line, max_size=3))
def test_hostile_workspace_files_are_refused_with_a_typed_error(
    log: list[bytes], events: list[bytes]
) -> None:
    """Restore of a workspace holding anything: a count, or a RestoreError, nothing else."""
    from langgraph_external.errors import RestoreError
    from langgraph_external.ops.restore import restore_thread

    ws = Workspace(f"memory://lgx-prop-{os.urandom(6).hex()}")
    ws.write_atomic(ws.checkpoint_log_path("t", ""), b"\n".join(log))
    ws.write_atomic(f"{ws.thread_dir('t')}/events.jsonl", b"\n".join(events))
    target = InMemorySaver()
    try:
        restore_thread(ws, "t", target)
    except RestoreError:
        assert list(target.list(None)) == []  # nothing half-written
