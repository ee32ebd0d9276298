"""Every package the code imports is declared in ``pyproject.toml``: as a dependency, or in
the extra of the feature that needs it — never only present because another package
happened to bring it."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from functools import cache
from pathlib import Path

import langgraph_external

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(langgraph_external.__file__).parent
OPTIONAL_INTEGRATIONS = {
    # the official SQLite saver: used (restore, exact bytes) only when the app wraps one,
    # so it is installed wherever it is needed
    "langgraph-checkpoint-sqlite",
}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~;\[ ]", requirement)[0]).lower()


def declared() -> set[str]:
    project = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in project["dependencies"]}
    for extra, requirements in project["optional-dependencies"].items():
        if extra not in ("test", "phoenix"):  # what the tests and CI need, not the code
            names |= {_name(r) for r in requirements}
    return names


def imported_modules() -> dict[str, set[str]]:
    """Every absolute import of another package in the code, function-level ones too:
    module name -> the files importing it."""
    found: dict[str, set[str]] = {}
    stdlib = set(sys.stdlib_module_names)
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in stdlib and top != "langgraph_external":
                    found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


@cache
def _top_level() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distribution(module: str) -> str | None:
    """The installed distribution whose files hold ``module`` (a namespace package such as
    ``langgraph`` is shared by several), or ``None`` when it is not installed."""
    candidates = list(dict.fromkeys(_top_level().get(module.partition(".")[0], [])))
    if len(candidates) <= 1:
        return _name(candidates[0]) if candidates else None
    where = module.replace(".", "/")
    for name in candidates:
        paths = (f.as_posix() for f in importlib.metadata.distribution(name).files or ())
        if any(p == f"{where}.py" or p.startswith(f"{where}/") for p in paths):
            return _name(name)
    return None


def test_every_imported_package_is_declared() -> None:
    wanted = declared() | OPTIONAL_INTEGRATIONS
    undeclared = {}
    for module, files in sorted(imported_modules().items()):
        # not installed here: declared for other Pythons only (tomli before 3.11)
        dist = distribution(module) or _name(module.partition(".")[0])
        if dist not in wanted:
            undeclared[module] = (dist, sorted(files))
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
