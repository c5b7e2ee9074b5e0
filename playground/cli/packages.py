"""`python -m playground info`, `average` and `compare`: what a package holds, checkpoint averaging, and the
settings and scores of runs side by side; and where a package named on the command line is."""

from __future__ import annotations

import argparse
import json
import math
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
    from playground.packages.store import check_package, package_info

    checked = check_package(args.model)
    info = package_info(args.model)
    if args.json:
        print(json.dumps(info, ensure_ascii=False))
        return 0
    c, m, t = info["config"], checked.model_config, info["training"]
    print(f"{info['name']}: {c['src_lang']} → {c['tgt_lang']}, {c['num_parameters']:,} parameters, "
          f"{info['size_bytes'] / 1e6:.1f} MB on disk")
    print(f"  d_model {m.d_model}, {m.n_heads} heads, {m.n_encoder_layers}+{m.n_decoder_layers} layers, "
          f"ff {m.d_ff}, {m.activation}, {m.positional_encoding} positions, {m.norm_placement}-LN, "
          f"{'tied' if m.tie_embeddings else 'untied'} embeddings, max length {m.max_len}")
    vocabulary = f"{m.src_vocab_size:,}" if c["tokenizer"]["joint"] else f"{m.src_vocab_size:,}/{m.tgt_vocab_size:,}"
    print(f"  tokenizer {c['tokenizer']['kind']} ({'joint' if c['tokenizer']['joint'] else 'separate'}), "
          f"vocabulary {vocabulary}")
    if t:
        data = t.get("data") or {}
        print(f"  trained {t.get('steps', '?')} steps ({t.get('epochs', 0):.2f} epochs) in {t.get('wall_s', 0):.0f} s "
              f"on {t.get('device', '?')} [{t.get('precision', '?')}], data: {data.get('description', '?')} "
              f"({data.get('train_pairs', 0):,} pairs)")
        for label in ("last", "best"):
            if t.get(label):
                r = {"step": "?", "val_loss": math.nan, "bleu": math.nan, "chrf": math.nan, "exact_match": math.nan,
                     **t[label]}
                print(f"  {label}: step {r['step']}, val loss {r['val_loss']:.3f}, BLEU {r['bleu']:.1f}, "
                      f"chrF {r['chrf']:.1f}, exact match {r['exact_match']:.1%}")
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from playground.training.averaging import average_packages
    from playground.packages.store import reserve_package

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
