"""What the README tells a new user to run is there and does what it says."""

from __future__ import annotations

import re
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
