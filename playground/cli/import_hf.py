"""`python -m playground import-hf PATH --name NAME`: a 🤗 transformers Marian checkpoint (OPUS-MT) as a package
(playground.packages.marian)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from playground.cli.packages import out_folder


def add_import_command(sub: argparse._SubParsersAction) -> None:
    """`python -m playground import-hf`, registered by playground.cli.main."""
    im = sub.add_parser("import-hf", help="import a 🤗 transformers Marian (OPUS-MT) checkpoint as a package",
                        description="Convert the folder of a 🤗 transformers Marian checkpoint (config.json, "
                                    "model.safetensors, source.spm, target.spm, vocab.json, tokenizer_config.json; "
                                    "e.g. a download of Helsinki-NLP/opus-mt-en-de) into a package that translate, "
                                    "the app and export use like any other.")
    im.add_argument("path", metavar="PATH", help="the checkpoint's folder")
    im.add_argument("--name", help="package name; a bare name goes under models/ (default: the folder's name)")
    im.add_argument("--overwrite", action="store_true", help="replace the package at --name if it exists")
    im.add_argument("--json", action="store_true", help="print the result as one JSON object")
    im.set_defaults(func=cmd_import_hf)


def cmd_import_hf(args: argparse.Namespace) -> int:
    from playground.packages.info import summarize
    from playground.packages.marian import import_marian
    from playground.packages.names import reserve_package, safe_stem
    from playground.packages.store import read_config

    source = Path(args.path)
    with reserve_package(out_folder(args.name or safe_stem(source.resolve().name)),
                         overwrite=args.overwrite) as folder:
        out = import_marian(source, folder, origin=str(args.path))
    summary = summarize(read_config(out), None)
    if args.json:
        print(json.dumps({"package": str(out), "src_lang": summary.src_lang, "tgt_lang": summary.tgt_lang,
                          "parameters": summary.params, "imported": summary.imported}, ensure_ascii=False))
    else:
        print(f"imported {args.path} into {out}: {summary.direction}, {summary.params:,} parameters "
              f"({summary.imported['architecture']}, license {summary.imported['license']})")
    return 0
