"""The web UI is an optional extra (``pip install 'langgraph-external[ui]'``): without
Starlette, uvicorn and Jinja2 the package, ``lgx`` and every command but ``lgx ui`` and
``lgx timeline`` work, and those two say in one line what to install.

Each check runs in a fresh interpreter whose import system refuses the extra's packages
as if they were not installed. (That ``lgx`` does not even load them when they are
installed: ``tests/test_cli_startup.py``.)"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

import langgraph_external
from langgraph_external import External
from langgraph_external.cli.console import EXIT_ERROR
from langgraph_external.errors import ExternalError, MissingExtraError
from langgraph_external.ui._extra import MODULES

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

BLOCK = textwrap.dedent(
    f"""
    import sys

    class _NotInstalled:
        # the ui extra's packages are missing: importing one fails as it would then
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {MODULES!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, _NotInstalled())
    """
)

LGX = BLOCK + textwrap.dedent(
    """
    import runpy
    sys.argv[0] = "lgx"
    runpy.run_module("langgraph_external.cli", run_name="__main__", alter_sys=True)
    """
)


class State(TypedDict):
    n: int


def _graph() -> StateGraph[State]:
    builder = StateGraph(State)
    builder.add_node("double", lambda state: {"n": state["n"] * 2})
    builder.add_edge(START, "double")
    builder.add_edge("double", END)
    return builder


def run(code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )


def lgx(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run(LGX, *args, cwd=cwd)


def test_lgx_and_its_help_work_without_the_ui_extra() -> None:
    done = lgx("--help")
    assert done.returncode == 0, done.stderr
    for name in ("threads", "verify", "ui", "timeline"):
        assert name in done.stdout


def test_commands_work_without_the_ui_extra(dsn: str, tmp_path: Path, spool_dir: Path) -> None:
    ws = tmp_path / "ws"
    with External(dsn=dsn, workspace=ws, spool_dir=spool_dir) as ext:
        graph = _graph().compile(checkpointer=ext.checkpointer)
        graph.invoke({"n": 1}, ext.config("thread-1"))
    common = ("--dsn", dsn, "--workspace", str(ws))
    threads = lgx(*common, "threads")
    assert threads.returncode == 0, threads.stderr
    assert "thread-1" in threads.stdout
    verify = lgx(*common, "verify", "thread-1")
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.parametrize("command", [["ui"], ["timeline", "thread-1"]])
def test_lgx_ui_without_the_extra_says_what_to_install(command: list[str], tmp_path: Path) -> None:
    # no database is needed to be told: the check comes before any connection
    done = lgx("--dsn", "postgresql://nobody@127.0.0.1:1/x", *command, cwd=tmp_path)
    assert done.returncode == EXIT_ERROR
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    assert "pip install 'langgraph-external[ui]'" in lines[0]
    assert "Traceback" not in done.stderr


def test_every_module_outside_the_ui_imports_without_the_extra() -> None:
    done = run(
        BLOCK
        + textwrap.dedent(
            """
            import importlib, pkgutil, warnings
            import langgraph_external
            warnings.simplefilter("ignore")  # the deprecated import paths warn
            failed = []
            for info in pkgutil.walk_packages(langgraph_external.__path__, "langgraph_external."):
                name = info.name
                if name.startswith("langgraph_external.ui") or name.endswith(".__main__"):
                    continue
                try:
                    importlib.import_module(name)
                except ImportError as exc:
                    failed.append(f"{name}: {exc}")
            print("\\n".join(failed))
            """
        )
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout


def test_importing_the_ui_without_the_extra_raises_a_typed_import_error() -> None:
    done = run(
        BLOCK
        + textwrap.dedent(
            """
            from langgraph_external.errors import MissingExtraError
            try:
                import langgraph_external.ui
            except MissingExtraError as exc:
                print(isinstance(exc, ImportError), exc.name, exc)
            """
        )
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True jinja2 ")
    assert "no module jinja2, markupsafe, starlette, uvicorn" in done.stdout
    assert issubclass(MissingExtraError, ExternalError)


def test_the_ui_extra_declares_what_the_ui_imports() -> None:
    root = Path(langgraph_external.__file__).parent
    extra = tomllib.loads((root.parent / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["ui"]
    assert {re.split(r"[<>=!~;\[ ]", req)[0].lower() for req in extra} == set(MODULES)
    imported = set()
    for path in (root / "ui").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.partition(".")[0])
    assert imported & set(MODULES) == set(MODULES)
