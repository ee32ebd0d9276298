#!/usr/bin/env python
"""The package's structure as text: rooms, the imports between them, floors and circles.

A *room* is a folder of ``langgraph_external/`` or one of its top-level modules; an
*arrow* is a room whose modules import another room's (at run time: imports under
``if TYPE_CHECKING:`` are not counted, imports inside functions are); a room's *floor*
is one more than the highest floor it imports (a room that imports no other room is on
floor 1); a *circle* is a set of rooms that import each other, or of modules of one
room. docs/architecture.md shows its output before and after a change of layout.

    python scripts/structure.py                 # this checkout
    python scripts/structure.py path/to/langgraph_external
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = "langgraph_external"


def _imports(path: Path) -> set[str]:
    """The ``langgraph_external...`` modules ``path`` imports at run time."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            found.update(f"{base}.{a.name}" for a in node.names)
            found.add(base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


def _room(module: str, rooms: set[str]) -> str | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None
    return parts[1] if parts[1] in rooms else None


def structure(root: Path) -> dict[str, object]:
    """Rooms (with their lines), arrows, floors and circles of the package at ``root``."""
    files = sorted(root.rglob("*.py"))
    rooms: dict[str, int] = defaultdict(int)
    of_file: dict[Path, str] = {}
    for f in files:
        rel = f.relative_to(root)
        name = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if name == "__init__" or name.startswith("__"):
            name = "__init__"
        rooms[name] += len(f.read_text().splitlines())
        of_file[f] = name
    arrows: dict[str, set[str]] = defaultdict(set)
    modules: dict[str, set[str]] = defaultdict(set)  # module -> modules of its room it imports
    for f, room in of_file.items():
        dotted = ".".join((PACKAGE, *f.relative_to(root).with_suffix("").parts))
        for target in _imports(f):
            other = _room(target, set(rooms))
            if other is None:
                continue
            if other != room:
                arrows[room].add(other)
            elif (root / Path(*target.split(".")[1:])).with_suffix(".py").is_file():
                modules[dotted].add(target)
    return {
        "rooms": dict(rooms),
        "arrows": {k: sorted(v) for k, v in arrows.items()},
        "floors": _floors(rooms, arrows),
        "circles": _circles(arrows) + _circles(modules),
    }


def _floors(rooms: dict[str, int], arrows: dict[str, set[str]]) -> dict[str, int]:
    floor: dict[str, int] = {}

    def visit(room: str, path: tuple[str, ...]) -> int:
        if room in floor:
            return floor[room]
        below = [visit(o, (*path, room)) for o in arrows.get(room, ()) if o not in path]
        floor[room] = 1 + max(below, default=0)
        return floor[room]

    for room in rooms:
        visit(room, ())
    return floor


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in list(graph):
        if v not in index:
            strong(v)
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / PACKAGE
    s = structure(root)
    rooms: dict[str, int] = s["rooms"]  # type: ignore[assignment]
    floors: dict[str, int] = s["floors"]  # type: ignore[assignment]
    arrows: dict[str, list[str]] = s["arrows"]  # type: ignore[assignment]
    circles: list[list[str]] = s["circles"]  # type: ignore[assignment]
    print(
        f"{len(rooms)} rooms, {max(floors.values())} floors, "
        f"{sum(len(v) for v in arrows.values())} arrows, {len(circles)} circles, "
        f"{sum(rooms.values())} lines"
    )
    for level in sorted(set(floors.values()), reverse=True):
        here = sorted(r for r in rooms if floors[r] == level)
        print(f"floor {level:2d}  " + "  ".join(f"{r} {rooms[r]}" for r in here))
    for c in circles:
        print("circle: " + " <-> ".join(c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
