"""`python -m playground export`: a package for 🤗 transformers or CTranslate2 (playground.export)."""

from __future__ import annotations

import argparse

from playground.errors import PlaygroundError
from playground.export import export_package
from playground.export.optional import FORMATS, INSTALL_HINT, QUANTIZATIONS


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
