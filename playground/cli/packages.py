"""`python -m playground info`, `average` and `compare`: what a package holds, checkpoint averaging, and the
settings and scores of runs side by side; and where a package named on the command line is."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

MODELS_DIR = Path("models")


def add_package_commands(sub: argparse._SubParsersAction) -> None:
    """`info`, `average` and `compare`."""
    info = sub.add_parser("info", help="a package's config, size and metrics")
    info.add_argument("--model", required=True, help="package folder")
    info.add_argument("--json", action="store_true", help="print everything as JSON")
    info.set_defaults(func=cmd_info)

    av = sub.add_parser("average", help="average the weights of packages (checkpoint averaging)",
                        description="Write a package whose weights are the element-wise mean of those of the given "
                                    "packages, as the paper does with its last 5 or 20 checkpoints. They must share "
                                    "the model config and the tokenizer (checkpoints of one run do).")
    av.add_argument("--out", required=True, help="package folder to write; a bare name goes under models/")
    av.add_argument("packages", nargs="+", metavar="PKG", help="package folders to average")
    av.add_argument("--overwrite", action="store_true", help="replace the package at --out if it exists")
    av.add_argument("--json", action="store_true", help="print the result as one JSON object")
    av.set_defaults(func=cmd_average)

    co = sub.add_parser("compare", help="the settings that differ between runs, and their scores",
                        description="Compare two or more packages: the training settings that differ and the scores "
                                    "of their last validation (the web app's Compare tab also overlays the curves).")
    co.add_argument("models", nargs="+", metavar="MODEL", help="package folders (or names under models/)")
    co.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    co.set_defaults(func=cmd_compare)


def out_folder(out: str) -> Path:
    """A bare name goes under models/; a path is used as given."""
    path = Path(out)
    return MODELS_DIR / path if len(path.parts) == 1 else path


def package_arg(model: str) -> Path:
    """A package given as a folder, or by its bare name under models/."""
    folder = Path(model)
    return folder if folder.exists() else out_folder(model)


def cmd_info(args: argparse.Namespace) -> int:
    """What load_package checks (every file's size and schema, tokenizer, weights' header), without the weights."""
    from playground.packages.info import info_lines, summary_of
    from playground.packages.store import check_package, package_info

    check_package(args.model)
    info = package_info(args.model)
    if args.json:
        print(json.dumps(info, ensure_ascii=False))
        return 0
    print("\n".join(info_lines(summary_of(info))))
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from playground.packages.names import reserve_package
    from playground.training.averaging import average_packages

    with reserve_package(out_folder(args.out), overwrite=args.overwrite) as folder:
        out = average_packages(args.packages, folder)
    if args.json:
        print(json.dumps({"package": str(out), "averaged_from": args.packages}))
    else:
        print(f"averaged the weights of {len(args.packages)} packages into {out}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from playground.insight.compare import comparison, comparison_rows, format_table, load_runs

    runs = load_runs([package_arg(model) for model in args.models])
    if args.json:
        print(json.dumps(comparison(runs), ensure_ascii=False))
        return 0
    settings, scores = comparison_rows(runs)
    names = [run.name for run in runs]
    print(format_table(["setting", *names], settings) if settings else "No setting differs between these runs.")
    print()
    print(format_table(["score (last validation)", *names], scores))
    return 0
