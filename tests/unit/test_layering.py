"""The rooms of src/winml_perf import in one direction only: a room may import rooms on lower floors,
never a room on its own floor or above (docs/architecture.md).

Read from the source with ast (imports inside functions count too), so nothing is imported to check.
Run it by hand to list what runs upward: ``python tests/unit/test_layering.py``.
"""

from __future__ import annotations

import ast
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
    ("explain", "convert"),  # profiles of a route; GGUF files into bundles (synth's pipeline split)
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


def test_every_room_has_a_floor():
    rooms = {_room(p) for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert rooms <= set(FLOOR), f"give these rooms a floor in FLOORS: {sorted(rooms - set(FLOOR))}"


def test_no_room_imports_a_room_on_its_floor_or_above():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import():
    tree = ast.parse("def f():\n    from winml_perf.commands.perf import perf\n")
    ((_, target),) = _imported_rooms(tree)
    assert FLOOR[target] > FLOOR["stats"]


if __name__ == "__main__":
    found = upward_imports()
    print("\n".join(found) or "no import runs upward")
    raise SystemExit(1 if found else 0)
