"""What the README tells a new user to run is there and does what it says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_says_how_to_run_one_test_file_after_the_demo() -> None:
    readme = (ROOT / "README.md").read_text()
    script = (ROOT / "scripts" / "test.sh").read_text()
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    # the command: scripts/test.sh with one test file, which exists
    found = re.search(r"^bash scripts/test\.sh (tests/test_\w+\.py)\b", readme, re.M)
    assert found, "README names no command that runs one test file"
    assert (ROOT / found.group(1)).is_file()
    # it works right after the demo: the demo's venv is the one test.sh installs the test
    # extras into, before it runs pytest with the arguments it was given
    assert ".venv" in demo and "[ ! -x .venv/bin/python ]" in script
    install = script.index("pip install -q -e '.[test,")  # the test extras (and Phoenix)
    run = script.index('-m pytest -q --basetemp="$PWD/.pytest_tmp" "$@"')
    assert install < run
    # and the faster form for later runs is there too
    assert ".venv/bin/python -m pytest -q " + found.group(1) in readme


def test_the_readme_says_the_embedded_server_stays_up_and_how_to_stop_it() -> None:
    readme = (ROOT / "README.md").read_text()
    quick_start = readme[readme.index("## Try it") : readme.index("## Add it to an existing app")]
    assert "the\nserver stays up after the demo" in quick_start
    assert "lgx db stop" in quick_start


def _fake_checkout(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A copy of scripts/test.sh in a checkout whose .venv tools only log their calls."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "test.sh").write_text((ROOT / "scripts" / "test.sh").read_text())
    (root / "pyproject.toml").write_text("")
    log = tmp_path / "calls.log"
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    tools = tmp_path / "tools"  # chromium on PATH: the script installs nothing with apt
    tools.mkdir()
    for name, where in [
        ("python", bin_dir),
        ("ruff", bin_dir),
        ("mypy", bin_dir),
        ("lint-imports", bin_dir),
        ("chromium", tools),
    ]:
        stub = where / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n')
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    return root, log, env


def _calls(root: Path, log: Path, env: dict[str, str], *args: str) -> list[str]:
    log.unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", str(root / "scripts" / "test.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [
        line.split()[0] + (" install" if " install " in line else "")
        for line in log.read_text().splitlines()
    ]


def test_one_test_file_runs_without_the_full_runs_lint_type_checks_and_reinstall(
    tmp_path: Path,
) -> None:
    """`scripts/test.sh tests/x.py` costs its tests, not the whole run's checks."""
    root, log, env = _fake_checkout(tmp_path)
    # first time (e.g. right after the demo): the test extras are installed, no lint
    assert _calls(root, log, env, "tests/test_x.py") == ["python install", "python"]
    # then only pytest, until pyproject.toml changes
    assert _calls(root, log, env, "tests/test_x.py") == ["python"]
    stamp = root / ".venv" / ".lgx-test-extras"
    os.utime(root / "pyproject.toml", (stamp.stat().st_mtime + 10,) * 2)
    assert _calls(root, log, env, "tests/test_x.py") == ["python install", "python"]
    # the full run (CI: .ci/run calls it with no arguments) installs and checks everything
    full = _calls(root, log, env)
    assert full == ["python install", "ruff", "ruff", "mypy", "lint-imports", "python"], full
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec bash scripts/test.sh")
