"""Every file that the docs or the code's own text names by path exists.

What is read: docs/*.md, README.md, and every .py and .md file under src/winml_perf/ (docstrings,
comments and strings alike). What counts as a path: a name ending in .py, .md or .sh with at least one
folder in front (``measure/orchestrate.py``, ``docs/tune.md``, ``scripts/real-model.sh``); a bare
``cache.py`` is not checked. A path glued to something before it is part of a larger token and is
skipped: a URL (``…/x/y.py``), a glob (``*/y.py``), a placeholder (``<dir>/y.py``, ``${D}/y.sh``).

The rule: a path names a real file when it exists relative to src/winml_perf/ (the rooms, as the
docstrings write them: ``bundle/cache.py``) or relative to the folder of the text that names it, or any
folder above that one (so the repo root serves docs/ and README.md: ``tests/unit/test_layering.py``).

Run it by hand to list what is stale: ``python tests/unit/test_named_files.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "winml_perf"
NAMED_PATH = re.compile(r"(?<![\w./*{<$-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|sh))(?![\w/])")


def _texts() -> list[Path]:
    docs = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    return docs + sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".md"))


def _exists(named: str, text: Path) -> bool:
    folders = [PACKAGE, text.parent, *(f for f in text.parent.parents if f == ROOT or ROOT in f.parents)]
    return any((folder / named).is_file() for folder in folders)


def named_paths(line: str) -> list[str]:
    return NAMED_PATH.findall(line)


def stale_paths() -> list[str]:
    """Every path named that names no file, as 'file:line: path'."""
    stale = []
    for text in _texts():
        for number, line in enumerate(text.read_text(encoding="utf-8").splitlines(), 1):
            stale += [f"{text.relative_to(ROOT)}:{number}: {p}" for p in named_paths(line) if not _exists(p, text)]
    return stale


def test_every_named_file_exists():
    assert stale_paths() == []


def test_the_check_reads_paths_and_skips_larger_tokens():
    line = "built by bench/orchestrate.py (see https://example.org/a/b.py, exporters/*.py, <dir>/c.py, ${D}/d.sh)"
    assert named_paths(line) == ["bench/orchestrate.py"]
    assert named_paths("docs/tune.md, `scripts/real-model.sh`; cache.py") == ["docs/tune.md", "scripts/real-model.sh"]


def test_the_rule_resolves_from_the_rooms_and_from_above_the_text():
    onnx_prepare = PACKAGE / "bundle" / "onnx_prepare.py"
    assert _exists("bundle/cache.py", ROOT / "docs" / "architecture.md")  # from src/winml_perf/
    assert _exists("epcontext/travel.py", onnx_prepare)  # from the text's own folder
    assert _exists("tests/unit/test_layering.py", onnx_prepare)  # from a folder above it (the root)
    assert not _exists("bench/orchestrate.py", onnx_prepare)


if __name__ == "__main__":
    found = stale_paths()
    print("\n".join(found) or "every named file exists")
    raise SystemExit(1 if found else 0)
