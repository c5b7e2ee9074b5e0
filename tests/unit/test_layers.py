"""The import layers of docs/ARCHITECTURE.md, enforced: a module imports only from its own layer or the ones below,
wherever the import is written (module top, inside a function, under `if TYPE_CHECKING:`, or by
`importlib.import_module("playground....")`), and only the web UI imports Gradio."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = next(p for p in Path(__file__).resolve().parents if (p / "playground").is_dir()) / "playground"

# Bottom to top. A module of layer i may import modules of layers 0..i; names are module prefixes.
LAYERS: list[tuple[str, ...]] = [
    ("playground", "playground.errors", "playground.settings", "playground.limits"),
    ("playground.core",),
    ("playground.datasets",),
    ("playground.data",),
    ("playground.runtime",),
    ("playground.packages",),
    ("playground.training",),
    ("playground.insight",),
    ("playground.export",),
    ("playground.serving",),
    ("playground.cli", "playground.__main__"),
    ("playground.ui",),
]
# What model cards and the README import; nothing inside the package may lean on them.
FACADES = ("playground.package", "playground.decode")
UI_ONLY = ("gradio", "gradio_client", "spaces")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The layer of a module: its longest matching prefix wins (so playground.core beats playground)."""
    best, best_len = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (module.startswith(prefix + ".") and prefix != "playground")
            if matches and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to docs/ARCHITECTURE.md)")
    return best


def submodule(base: str, name: str) -> str:
    """`base.name` where that is a module or package of the project, else `base` (the name is an attribute)."""
    path = PACKAGE.parent.joinpath(*base.split("."), name)
    return f"{base}.{name}" if path.with_suffix(".py").exists() or (path / "__init__.py").exists() else base


def imported_modules(source: str, importer: str) -> list[tuple[int, str]]:
    """(line, module) of every import in the source, wherever it is written."""
    package = importer if importer.count(".") == 0 else importer.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from playground.training import events` imports the module playground.training.events
            found += [(node.lineno, submodule(base, alias.name)) for alias in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.lineno, node.args[0].value))
    return found


def violations(source: str, importer: str) -> list[str]:
    """What the source imports against the layers, as 'importer:line imports module (why)'."""
    found = []
    own = layer_of(importer)
    for line, module in imported_modules(source, importer):
        top = module.split(".")[0]
        if top in UI_ONLY and not importer.startswith("playground.ui"):
            found.append(f"{importer}:{line} imports {module} (Gradio and spaces belong in playground.ui only)")
        if top != "playground" or module == "playground":
            continue
        if module in FACADES or module.startswith(tuple(f + "." for f in FACADES)):
            found.append(f"{importer}:{line} imports the facade {module} (import the module it re-exports)")
        elif layer_of(module) > own:
            found.append(f"{importer}:{line} imports {module}, a layer above it ({LAYERS[layer_of(module)][0]})")
    return found


def package_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", package_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_only_from_its_layer_and_below(path: Path):
    name = module_name(path)
    if name in FACADES:  # they sit above everything, re-exporting for outside code
        return
    found = violations(path.read_text(), name)
    assert not found, "\n".join(found)


# core/ is the paper alone: besides itself it may import only the error family (not settings, not limits), so
# decoding takes its bounds as arguments and the server's quotas live in the layers that own them
CORE_MAY_IMPORT = ("playground.core", "playground.errors")


def core_violations(source: str, importer: str) -> list[str]:
    """What a core/ module imports of the project besides core/ and the error family."""
    return [f"{importer}:{line} imports {module} (core/ imports only core/ and playground.errors)"
            for line, module in imported_modules(source, importer)
            if module.split(".")[0] == "playground"
            and not any(module == allowed or module.startswith(allowed + ".") for allowed in CORE_MAY_IMPORT)]


@pytest.mark.parametrize("path", sorted((PACKAGE / "core").rglob("*.py")), ids=lambda p: p.name)
def test_core_imports_only_core_and_the_errors(path: Path):
    found = core_violations(path.read_text(), module_name(path))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("source, allowed", [
    ("from playground.limits import max_decode_tokens\n", False),
    ("def f():\n    from playground.settings import MB\n", False),
    ("from playground.errors import PackageError\n", True),
    ("from playground.core.model import Transformer\n", True),
])
def test_the_core_check_refuses_the_base_layer_but_the_errors(source, allowed):
    assert (core_violations(source, "playground.core.decode") == []) is allowed


def test_every_subpackage_has_a_layer():
    for folder in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        layer_of(module_name(folder / "__init__.py"))


@pytest.mark.parametrize("source, expected", [
    ("def f():\n    from playground.ui import app\n", "a layer above it"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from playground.training.config import TrainConfig\n",
     "a layer above it"),
    ("import importlib\nimportlib.import_module('playground.serving.hub')\n", "a layer above it"),
    ("from playground import package\n", "facade"),
    ("def f():\n    import gradio as gr\n", "playground.ui only"),
    ("from . import trainer\n", None),  # relative, same subpackage: allowed
])
def test_the_checker_sees_every_kind_of_import(source, expected):
    found = violations(source, "playground.core.model" if expected != "facade" else "playground.training.trainer")
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0], found
