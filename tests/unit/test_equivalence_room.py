"""Issue 39: the equivalence check lives in one room (src/winml_perf/equivalence/) with one reporting
path. Read from the source with ast, nothing imported to check: only report.py prints, and the
verdict cache's key covers the source of every module of the room that the check runs."""

from __future__ import annotations

import ast
from pathlib import Path

from winml_perf.equivalence.verdict_cache import CODE

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "winml_perf"
ROOM = PACKAGE / "equivalence"
REPORTING = ROOM / "report.py"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _prints(tree: ast.AST) -> list[int]:
    """Lines that write for a person: print(), support.text_table.say(), sys.stdout / sys.stderr."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("print", "say"):
            found.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr"):
            found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "winml_perf.support.text_table":
            found += [node.lineno for a in node.names if a.name == "say"]
    return found


def test_only_the_reporting_module_of_the_room_prints():
    printing = {
        f"{path.relative_to(ROOM)}:{line}"
        for path in sorted(ROOM.rglob("*.py"))
        if path != REPORTING
        for line in _prints(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert printing == set()
    assert _prints(ast.parse(REPORTING.read_text(encoding="utf-8")))  # and it does print


def _room_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The room's modules that the file imports anywhere in it (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n for n in names if n in modules}
    return found


def test_the_verdict_cache_key_covers_every_module_of_the_room_the_check_runs():
    modules = {_module(p): p for p in ROOM.rglob("*.py") if p.name != "__init__.py"}
    reached, todo = set(), ["winml_perf.equivalence.check"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += sorted(_room_imports(modules[name], modules))
    assert {"winml_perf.equivalence.bands", "winml_perf.equivalence.layers"} <= reached  # the walk follows imports
    assert reached - set(CODE) == set()
    # the math and the types a verdict is made of, and the variants of the reference it is judged on
    assert {
        "winml_perf.model.equivalence",
        "winml_perf.stats.equivalence",
        "winml_perf.stats.layer_equivalence",
        "winml_perf.bundle.variants",
    } <= set(CODE)
    assert all((PACKAGE.parent / (name.replace(".", "/") + ".py")).is_file() for name in CODE)
