"""docs/ARCHITECTURE.md stays true both ways: it names every module of the package, every module it names exists,
and every `file::symbol` it cites exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "playground").is_dir())
DOC = ROOT / "docs" / "ARCHITECTURE.md"
CITATION = re.compile(r"`(playground/[\w/]+\.py)::([\w.]+)`")
MODULE = re.compile(r"`(playground/[\w/]+\.py)")  # a module named on the page, cited alone or with a symbol


def test_every_module_is_on_the_page():
    text = DOC.read_text()
    missing = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "playground").rglob("*.py"))
               if p.name != "__init__.py" and f"`{p.relative_to(ROOT)}" not in text]
    assert not missing, f"docs/ARCHITECTURE.md does not say what these modules are for: {missing}"


def test_every_module_on_the_page_exists():
    named = sorted(set(MODULE.findall(DOC.read_text())))
    assert len(named) >= 100, "the page's module map names every module"
    gone = [name for name in named if not (ROOT / name).is_file()]
    assert not gone, f"docs/ARCHITECTURE.md describes modules that no longer exist: {gone}"


def defined_names(path: Path) -> set[str]:
    """Top-level names and Class.method names defined in a module."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names |= {f"{node.name}.{item.name}" for item in node.body
                          if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_every_citation_points_at_a_real_symbol():
    citations = CITATION.findall(DOC.read_text())
    assert len(citations) >= 20, "the page maps the paper's concepts to file::symbol"
    wrong = [f"{file}::{symbol}" for file, symbol in citations
             if not (ROOT / file).exists() or symbol not in defined_names(ROOT / file)]
    assert not wrong, f"docs/ARCHITECTURE.md cites symbols that do not exist: {wrong}"
