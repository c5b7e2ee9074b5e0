"""The optional libraries the exporters need (requirements-export.txt), imported only when an export runs, and what
the two formats accept."""

from __future__ import annotations

import importlib
from types import ModuleType

from playground.errors import PlaygroundError

FORMATS = ("transformers", "ctranslate2")
QUANTIZATIONS = ("float32", "int8", "int8_float32", "float16")  # CTranslate2 weight types
INSTALL_HINT = "pip install -r requirements-export.txt"


def check_quantization(quantization: str) -> None:
    """Refuse a CTranslate2 weight type it does not write, before any work for it."""
    if quantization not in QUANTIZATIONS:
        raise PlaygroundError(f"Unknown quantization {quantization!r}: choose one of {', '.join(QUANTIZATIONS)}.")


def require(module: str) -> ModuleType:
    """Import an optional library, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise PlaygroundError(f"Exporting needs the `{module.split('.')[0]}` package, which is not installed: "
                              f"run `{INSTALL_HINT}` and try again ({err}).") from err
