"""Export a package to other runtimes: 🤗 transformers (export.transformers) and CTranslate2 (export.ctranslate2).

Those libraries are optional (requirements-export.txt): each exporter imports them only when it runs, through
`require`, so the rest of the playground works without them."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from types import ModuleType

from playground.errors import PlaygroundError

FORMATS = ("transformers", "ctranslate2")
QUANTIZATIONS = ("float32", "int8", "int8_float32", "float16")  # CTranslate2 weight types
INSTALL_HINT = "pip install -r requirements-export.txt"


def require(module: str) -> ModuleType:
    """Import an optional library, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise PlaygroundError(f"Exporting needs the `{module.split('.')[0]}` package, which is not installed: "
                              f"run `{INSTALL_HINT}` and try again ({err}).") from err


def export_package(package_folder: str, fmt: str, out: str, quantization: str = "float32") -> Path:
    """Write the package in `fmt` (one of FORMATS) to the folder `out`."""
    if fmt == "transformers":
        from playground.export.transformers import export_transformers

        return export_transformers(package_folder, out)
    if fmt == "ctranslate2":
        from playground.export.ctranslate2 import export_ctranslate2

        return export_ctranslate2(package_folder, out, quantization)
    raise PlaygroundError(f"Unknown export format {fmt!r}: choose one of {', '.join(FORMATS)}.")


def add_export_command(sub: argparse._SubParsersAction) -> None:
    """`python -m playground export`, registered by playground.cli.main."""
    ex = sub.add_parser("export", help="write a package for 🤗 transformers or CTranslate2",
                        description="Export a package: --format transformers writes a folder that "
                                    "AutoModelForSeq2SeqLM and AutoTokenizer load; --format ctranslate2 one that "
                                    f"ctranslate2.Translator loads. Needs `{INSTALL_HINT}`.")
    ex.add_argument("--model", required=True, help="package folder")
    ex.add_argument("--format", required=True, choices=FORMATS, help="target runtime")
    ex.add_argument("--out", required=True, help="folder to write (must be new or empty)")
    ex.add_argument("--quantization", default="float32", choices=QUANTIZATIONS,
                    help="CTranslate2 weight type (default float32)")
    ex.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    if args.format != "ctranslate2" and args.quantization != "float32":
        raise PlaygroundError("--quantization applies to --format ctranslate2 only.")
    out = export_package(args.model, args.format, args.out, args.quantization)
    print(f"wrote {out}")
    return 0
