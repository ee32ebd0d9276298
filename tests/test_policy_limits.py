"""Hostile policy files are refused quickly with a typed, short error, never a crash.

A policy file comes from outside the program. Loading it is bounded before the cost is
paid (size, nesting depth, YAML aliases and what they expand to, number length), and
every bad shape is a ``PolicyError`` whose message stays short whatever the file holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from langgraph_external.cli import app
from langgraph_external.guards import (
    DEFAULT_LIMITS,
    PolicyError,
    PolicyLimitError,
    PolicyLimits,
    TransitionPolicy,
    _policy,
)

GOOD = "states: [a, b]\ntransitions: {START: [a], a: [b, END], b: [END]}\n"
MAX_MESSAGE = 9_000  # 20 problems, path and message each at most 200 characters


def billion_laughs() -> str:
    """The classic alias bomb: 9 levels of 9 aliases, 9**9 "lol"s when expanded.

    It sits where validation would render it (``name`` must be a string), which is what
    used to take 3 GB and a minute before failing with ``MemoryError``.
    """
    lines = ["description:", '  - &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"  - &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    lines.append("name: [" + ",".join(["*i"] * 9) + "]")
    return "\n".join(lines) + "\n" + GOOD


def write(tmp_path: Path, text: str | bytes, name: str = "policy.yaml") -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


def refused(source: str | Path, **kwargs: Any) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        TransitionPolicy.from_file(source, **kwargs)
    message = str(info.value)
    assert len(message) < MAX_MESSAGE + len(str(source))
    return info.value


# -- aliases ------------------------------------------------------------------------------
def test_billion_laughs_is_refused_without_expanding(tmp_path: Path) -> None:
    f = write(tmp_path, billion_laughs())
    assert len(f.read_bytes()) < 1000
    err = refused(f)
    assert type(err) is PolicyLimitError
    assert str(err) == (
        f"invalid policy {f}: line 6, column 9: YAML aliases expand to more than 10000 "
        "values (PolicyLimits.max_alias_values)"
    )
    assert "lol" not in str(err)


def test_many_aliases_are_refused_even_when_they_expand_little() -> None:
    text = GOOD + "description: &d x\ntools: {" + ", ".join(f"t{i}: *d" for i in range(51)) + "}"
    with pytest.raises(PolicyLimitError, match=r"more than 50 YAML aliases"):
        TransitionPolicy.from_yaml(text)


def test_a_few_aliases_for_shared_rules_are_fine() -> None:
    shared = GOOD + "nodes:\n  a: &rule {max_visits: 2, tier: none}\n  b: *rule\n"
    written = GOOD + "nodes:\n  a: {max_visits: 2, tier: none}\n  b: {max_visits: 2, tier: none}\n"
    assert TransitionPolicy.from_yaml(shared).hash == TransitionPolicy.from_yaml(written).hash


def test_aliases_can_be_refused_entirely() -> None:
    shared = GOOD + "nodes:\n  a: &rule {max_visits: 2}\n  b: *rule\n"
    with pytest.raises(PolicyLimitError, match="more than 0 YAML aliases"):
        TransitionPolicy.from_yaml(shared, limits=PolicyLimits(max_aliases=0))


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    with pytest.raises(PolicyLimitError, match=r"alias \*s refers to a node it is in"):
        TransitionPolicy.from_yaml("states: &s [a, *s]\ntransitions: {START: [a]}\n")


def test_an_alias_cannot_nest_past_the_depth_limit() -> None:
    deep = "[" * 15 + "x" + "]" * 15
    text = f"description: &d {deep}\nname: [[[[[[[[*d]]]]]]]]\n" + GOOD
    with pytest.raises(PolicyLimitError, match="nested more than 20 levels"):
        TransitionPolicy.from_yaml(text)


# -- size ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["huge.yaml", "huge.json"])
def test_a_100_mb_file_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    f = tmp_path / name
    line = b'  - "state_with_a_rather_long_name_0123456789"\n'
    with f.open("wb") as out:
        out.write(b"states:\n")
        chunk = line * (1 << 14)
        while out.tell() < 100 * 1024 * 1024:
            out.write(chunk)
    size = f.stat().st_size

    def never(*_: Any) -> Any:
        raise AssertionError("a file over the size limit must not be parsed")

    monkeypatch.setattr(_policy, "parse_yaml", never)
    monkeypatch.setattr(_policy, "parse_json", never)
    err = refused(f)
    assert type(err) is PolicyLimitError
    assert str(err) == (
        f"invalid policy {f}: the file is {size} bytes, more than the limit of 262144 bytes "
        "(PolicyLimits.max_bytes)"
    )


def test_the_size_limit_is_configurable(tmp_path: Path) -> None:
    f = write(tmp_path, GOOD)
    assert DEFAULT_LIMITS.max_bytes == 256 * 1024
    with pytest.raises(PolicyLimitError, match="more than the limit of 20 "):
        TransitionPolicy.from_file(f, limits=PolicyLimits(max_bytes=20))
    big_but_allowed = GOOD + "description: " + "x" * 300_000 + "\n"
    with pytest.raises(PolicyLimitError):
        TransitionPolicy.from_yaml(big_but_allowed)
    policy = TransitionPolicy.from_yaml(big_but_allowed, limits=PolicyLimits(max_bytes=1 << 20))
    assert policy.description is not None and len(policy.description) == 300_000


def test_text_is_measured_in_utf8_bytes() -> None:
    text = GOOD + "description: " + "é" * 10 + "\n"  # 10 characters, 20 bytes
    limit = len(text.encode()) - 1
    with pytest.raises(PolicyLimitError, match=f"is {limit + 1} bytes"):
        TransitionPolicy.from_yaml(text, limits=PolicyLimits(max_bytes=limit))


def test_limits_must_be_non_negative_ints() -> None:
    with pytest.raises(ValueError, match="max_depth"):
        PolicyLimits(max_depth=-1)


# -- depth, numbers -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("p.yaml", "states: " + "[" * 5000 + "]" * 5000 + "\n"),
        ("p.yaml", "states:\n" + "".join(f"{' ' * i}- \n" for i in range(2, 60, 2))),
        ("p.json", '{"states": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        ("p.json", '{"states": ' + "[" * 25 + "]" * 25 + "}"),
    ],
)
def test_deep_nesting_is_refused(tmp_path: Path, name: str, text: str) -> None:
    err = refused(write(tmp_path, text, name))
    assert type(err) is PolicyLimitError
    assert "nested more than 20 levels deep (PolicyLimits.max_depth)" in str(err)


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("p.yaml", GOOD + "default_max_visits: " + "9" * 5000, "a number of 5000 characters"),
        ("p.yaml", GOOD + "name: " + ":".join(["59"] * 3000), "a number of 8999 characters"),
        ("p.yaml", GOOD + "name: 1." + "0" * 200, "a number of 202 characters"),
        ("p.json", '{"default_max_visits": ' + "9" * 5000 + "}", "a number of 5000 digits"),
        ("p.json", '{"name": 1.' + "0" * 200 + "}", "a number of 202 characters"),
    ],
)
def test_huge_numbers_are_refused_before_they_are_built(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    err = refused(write(tmp_path, text, name))
    assert type(err) is PolicyLimitError
    assert problem in str(err)


def test_a_huge_int_built_in_code_is_shown_by_its_size() -> None:
    with pytest.raises(PolicyError, match=r"\(got <int of 5000 digits>\)"):
        TransitionPolicy.from_dict(
            {"states": ["a"], "transitions": {"START": ["a"]}, "default_max_visits": 10**4999}
        )


# -- shapes -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        (
            "p.yaml",
            GOOD + "? [x, y]\n: 1\n",
            "line 3, column 3: a key must be a scalar, not a list",
        ),
        ("p.yaml", GOOD + "? {x: 1}\n: 1\n", "a key must be a scalar, not a dict"),
        ("p.yaml", GOOD + "name: 2024-13-45\n", "invalid value: month must be in 1..12"),
        ("p.yaml", "states: !!set {a, b}\ntransitions: {}\n", "'set' values have no place"),
        ("p.yaml", "states: !!binary aGVsbG8=\ntransitions: {}\n", "'binary' values have no"),
        ("p.yaml", "states: !!python/object:os.system [ls]\n", "could not determine a constructor"),
        (
            "p.yaml",
            "states: [a]\n---\nstates: [b]\n",
            "line 2, column 1: but found another document",
        ),
        ("p.yaml", "states: [*nowhere]\n", "found undefined alias 'nowhere'"),
        ("p.yaml", GOOD + "name: .nan\n", "name: Input should be a valid string (got nan)"),
        ("p.yaml", 'states: ["\\ud800"]\ntransitions: {START: ["\\ud800"]}\n', "not valid Unicode"),
        ("p.yaml", b"states: [\xff]\n", "not UTF-8 text (invalid start byte at byte 9)"),
        ("p.yaml", "", "expected a mapping at the top level, found an empty document"),
        ("p.yaml", "42\n", "expected a mapping at the top level, found int"),
        ("p.json", '{"states": ["a"], "states": ["b"]}', "duplicate key 'states'"),
        ("p.json", '{"default_max_visits": NaN}', "NaN is not a JSON value"),
        ("p.json", '{"default_max_visits": -Infinity}', "-Infinity is not a JSON value"),
        ("p.json", '["a"]', "expected a mapping at the top level, found list"),
        ("p.json", '{"states": [1e999]}', "states[0]: Input should be a valid string (got inf)"),
    ],
)
def test_every_bad_shape_is_a_policy_error(
    tmp_path: Path, name: str, text: str | bytes, problem: str
) -> None:
    err = refused(write(tmp_path, text, name))
    assert problem in str(err)


@pytest.mark.parametrize("name", ["p.yaml", "p.json"])
def test_a_byte_order_mark_is_accepted(tmp_path: Path, name: str) -> None:
    text = json.dumps({"states": ["a"], "transitions": {"START": ["a"]}})
    f = write(tmp_path, "\ufeff" + text, name)
    assert TransitionPolicy.from_file(f).states == ["__start__", "a", "__end__"]


def test_a_directory_is_a_policy_error(tmp_path: Path) -> None:
    assert "cannot read the file" in str(refused(tmp_path))


def test_messages_stay_short_whatever_the_file_holds() -> None:
    names = [f"s{i}-" + "x" * 2_000 for i in range(100)]
    text = json.dumps({"states": ["a"], "transitions": {"START": names}})
    with pytest.raises(PolicyError) as info:
        TransitionPolicy.from_yaml(text)
    message = str(info.value)
    assert len(message) < MAX_MESSAGE
    assert message.count("\n  - ") == 21 and message.endswith("… and 80 more problems")
    assert len(info.value.problems) == 100  # all kept, each clipped
    assert all(len(msg) <= 201 for _, msg in info.value.problems)


def test_control_characters_in_names_are_escaped() -> None:
    with pytest.raises(PolicyError) as info:
        TransitionPolicy.from_yaml('states: [a]\ntransitions: {START: ["\\e[2J\\nb"]}\n')
    assert "\x1b" not in str(info.value) and "\n" not in str(info.value)
    assert "\\x1b[2J" in str(info.value)


# -- lgx ----------------------------------------------------------------------------------
runner = CliRunner()
HOSTILE = {
    "laughs.yaml": billion_laughs(),
    "deep.yaml": "states: " + "[" * 5000 + "]" * 5000,
    "deep.json": '{"states": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "bigint.yaml": GOOD + "default_max_visits: " + "9" * 5000,
    "bigint.json": '{"default_max_visits": ' + "9" * 5000 + "}",
    "unhashable.yaml": GOOD + "? [x, y]\n: 1\n",
    "date.yaml": GOOD + "name: 2024-13-45\n",
    "binary.yaml": b"\xff\xfe\x00garbage",
    "empty.yaml": "",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["check", "mermaid"])
def test_lgx_reports_a_bad_policy_in_one_message_with_exit_1(
    tmp_path: Path, name: str, command: str
) -> None:
    f = write(tmp_path, HOSTILE[name], name)
    res = runner.invoke(app, ["policy", command, str(f)])
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.output.startswith(f"error: invalid policy {f}")
    assert "Traceback" not in res.output and len(res.output) < MAX_MESSAGE


def test_lgx_max_bytes_option_and_environment(tmp_path: Path) -> None:
    f = write(tmp_path, GOOD)
    res = runner.invoke(app, ["policy", "check", str(f), "--max-bytes", "10"])
    assert res.exit_code == 1 and "more than the limit of 10 " in res.output
    res = runner.invoke(app, ["policy", "check", str(f)], env={"LGX_POLICY_MAX_BYTES": "10"})
    assert res.exit_code == 1 and "more than the limit of 10 " in res.output
    assert runner.invoke(app, ["policy", "check", str(f)]).exit_code == 0


def test_lgx_reports_a_graph_that_cannot_load_with_exit_2(tmp_path: Path) -> None:
    f = write(tmp_path, GOOD)
    (tmp_path / "broken_graph_mod.py").write_text("raise RuntimeError('boom at import')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        res = runner.invoke(app, ["policy", "check", str(f), "--graph", "broken_graph_mod:g"])
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("broken_graph_mod", None)
    assert res.exit_code == 2, res.output
    assert "cannot load the graph 'broken_graph_mod:g': RuntimeError: boom at import" in res.output


@pytest.mark.slow  # seconds: a subprocess or a 30 s wait
def test_the_real_lgx_prints_no_traceback_for_an_alias_bomb(tmp_path: Path) -> None:
    f = write(tmp_path, billion_laughs())
    proc = subprocess.run(
        [sys.executable, "-m", "langgraph_external.cli", "policy", "check", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: invalid policy") and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
