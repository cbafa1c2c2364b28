"""The rooms of src/winml_perf import in one direction only: a room may import rooms on lower floors,
never a room on its own floor or above (docs/architecture.md). Inside every folder, at every depth, no
import cycle either: the folder's modules and its sub-folders (each taken as one) import one another
in one direction, so no module reaches back to itself, nor a module through a sub-folder it imports.

Read from the source with ast (imports inside functions count too), so nothing is imported to check.
Run it by hand to list what runs upward or round: ``python tests/unit/test_layering.py``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "winml_perf"

#: Floors, bottom up. A room imports only rooms on floors below its own.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("support",),  # JSON input, stdio, child processes, errors
    ("model",),  # the typed spine: routes, metrics, samples, specs, the record, Defaults
    ("stats", "onnxfile"),  # pure math; .onnx readers
    ("ep", "power"),  # the EP table, devices, plugins; energy meters and the power state
    ("session",),  # sessions over onnxruntime / onnxruntime-genai
    ("bundle", "synth"),  # genai config, routing, derived bundles, compile; synthetic bundles
    # profiles of a route; GGUF files into bundles (synth's pipeline split); is a route the same model?
    # (equivalence opens sessions and reads, or builds variants of, bundles; measure/ and tune/ ask it)
    ("explain", "convert", "equivalence"),
    ("record",),  # building a cell record
    ("results",),  # the store
    ("measure",),  # orchestrate, sweep, the cell driver and its schedules
    ("compare",),  # routes, runs, the gate
    ("publish", "tune"),  # text tables, exports, the dashboard; `winml tune` (search, prune, race)
    ("commands",),  # Typer apps
    ("cli",),  # mounts the apps
    ("__main__",),  # python -m winml_perf
)
FLOOR = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}


def _room(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_rooms(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, room) of each winml_perf room the module imports; the package root itself is no room."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "winml_perf":
                names = [f"winml_perf.{a.name}" for a in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "winml_perf" and len(parts) > 1 and parts[1] in FLOOR:
                found.append((node.lineno, parts[1]))
    return found


def upward_imports() -> list[str]:
    """Every import of a room on the importer's own floor or above, as 'file:line: a -> b'."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        room = _room(path)
        if room == "__init__":
            continue  # the package root: its version only
        for line, target in _imported_rooms(ast.parse(path.read_text(encoding="utf-8"))):
            if target != room and FLOOR[target] >= FLOOR[room]:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {room} -> {target}")
    return bad


def _module(path: Path, package: Path) -> str:
    """'winml_perf.bundle.cache'; a package's own file keeps its name: 'winml_perf.bundle.__init__'."""
    return ".".join(path.relative_to(package.parent).with_suffix("").parts)


def _imported_modules(path: Path, package: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that the file imports anywhere in it (a package import: its __init__)."""

    def known(name: str) -> str | None:
        return name if name in modules else f"{name}.__init__" if f"{name}.__init__" in modules else None

    here = _module(path, package)
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {known(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here.split(".")[: -node.level]) if node.level else ""
            origin = ".".join(part for part in (base, node.module) if part)
            found |= {known(f"{origin}.{a.name}") or known(origin) for a in node.names}
    return {m for m in found if m is not None and m != here}


def _cycles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for after in sorted(arrows.get(node, ())):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            ring = []
            while not ring or ring[-1] != node:
                ring.append(stack.pop())
            if len(ring) > 1:
                found.append(sorted(ring))

    for node in sorted(arrows):
        if node not in index:
            visit(node)
    return found


def _siblings(module: str, target: str) -> tuple[str, str, str]:
    """The innermost folder holding both, and the entry of it (a module 'x.py' or a sub-folder 'x/')
    that holds each: 'winml_perf.bundle.onnx_prepare' -> '...bundle.epcontext.provenance' is
    ('winml_perf/bundle', 'onnx_prepare.py', 'epcontext/')."""
    a, b = module.split("."), target.split(".")
    common = 0
    while common < min(len(a), len(b)) - 1 and a[common] == b[common]:
        common += 1

    def entry(parts: list[str]) -> str:
        return parts[common] + (".py" if len(parts) == common + 1 else "/")

    return "/".join(a[:common]), entry(a), entry(b)


def import_cycles(package: Path = PACKAGE) -> list[str]:
    """Every cycle inside a folder of ``package``, as 'folder/: a.py, sub/ (a.py:12 -> sub/, ...)'."""
    files = {_module(p, package): p for p in sorted(package.rglob("*.py"))}
    by_folder: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    lines: dict[tuple[str, str, str], str] = {}
    for module, path in files.items():
        for target in sorted(_imported_modules(path, package, set(files))):
            folder, a, b = _siblings(module, target)
            by_folder[folder][a].add(b)
            lines.setdefault((folder, a, b), f"{path.relative_to(package.parent)} -> {target}")
    out = []
    for folder, arrows in sorted(by_folder.items()):
        for ring in _cycles(arrows):
            ties = [lines[(folder, a, b)] for a in ring for b in sorted(arrows[a]) if b in ring]
            out.append(f"{folder}/: {', '.join(ring)} ({'; '.join(ties)})")
    return out


def test_every_room_has_a_floor():
    rooms = {_room(p) for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert rooms <= set(FLOOR), f"give these rooms a floor in FLOORS: {sorted(rooms - set(FLOOR))}"


def test_no_room_imports_a_room_on_its_floor_or_above():
    assert upward_imports() == []


def test_no_import_cycle_in_any_folder():
    assert import_cycles() == []


def test_the_check_sees_a_cycle_through_imports_inside_functions(tmp_path):
    """A module and a sibling folder that import each other only inside functions: still a cycle."""
    package = tmp_path / "winml_perf"
    (package / "room" / "wing").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "room/__init__.py": "",
        "room/prepare.py": "def f():\n    from winml_perf.room.wing import export\n",
        "room/wing/__init__.py": "",
        "room/wing/export.py": "def g():\n    from winml_perf.room.prepare import f\n",
        "room/wing/plain.py": "from winml_perf.room import prepare\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    assert import_cycles(package) == [
        "winml_perf/room/: prepare.py, wing/ (winml_perf/room/prepare.py -> winml_perf.room.wing.export; "
        "winml_perf/room/wing/export.py -> winml_perf.room.prepare)"
    ]
    (package / "room/wing/export.py").write_text("")
    (package / "room/wing/plain.py").write_text("")
    assert import_cycles(package) == []


def test_the_check_sees_an_upward_import():
    tree = ast.parse("def f():\n    from winml_perf.commands.perf import perf\n")
    ((_, target),) = _imported_rooms(tree)
    assert FLOOR[target] > FLOOR["stats"]


if __name__ == "__main__":
    found = upward_imports() + import_cycles()
    print("\n".join(found) or "no import runs upward or round")
    raise SystemExit(1 if found else 0)
