"""Translation quality for a time budget: train the small preset on Multi30k en→de with the project's Trainer,
then score test_2016_flickr with sacreBLEU (BLEU and chrF, cased, 13a) using greedy search and beam search.

    python bench/quality.py --data ../shared/data/multi30k --minutes 30
    python bench/quality.py --data ../shared/data/multi30k --minutes 30 --seeds 3   # and the spread over seeds
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import common  # first: the allocator is chosen before PyTorch loads

from playground.core.decode import DecodeOptions, translate
from playground.core.metrics import score
from playground.packages.format import Package
from playground.packages.store import load_package
from playground.runtime.device import resolve_device
from playground.training import events
from playground.training.config import TrainConfig
from playground.training.inputs import TrainData
from playground.training.presets import preset_config
from playground.training.trainer import run_training

PROGRESS_EVERY_S = 60.0


def train(cfg: TrainConfig, data: TrainData, out: str | Path, preset: str) -> dict:
    """Run the Trainer to its time budget (it saves the package to `out`) and return its summary."""
    last_progress = 0.0
    for event in run_training(cfg, data, out):
        match event:
            case events.Start():
                print(f"training {preset}: {event.params:,} parameters on {event.device} "
                      f"({event.precision}), {event.train_pairs:,} pairs, "
                      f"{event.steps_per_epoch} steps per epoch, {cfg.max_minutes} min", flush=True)
            case events.Step() if event.elapsed - last_progress >= PROGRESS_EVERY_S:
                last_progress = event.elapsed
                print(f"  {event.elapsed:.0f} s: step {event.step}, epoch {event.epoch:.2f}, "
                      f"loss {event.loss:.3f}, {event.tokens_per_s:,.0f} tokens/s", flush=True)
            case events.Eval():
                print(f"  step {event.step}: val loss {event.val_loss:.3f}, val BLEU {event.bleu:.1f} "
                      f"(greedy, {cfg.eval_sentences} sentences)", flush=True)
            case events.Error():
                raise SystemExit(f"training failed: {event.message}")
            case events.Done():
                return {**event.summary, "reason": event.reason, "peak_rss_mb": common.peak_rss_mb()}
    raise SystemExit("training ended without a summary")


def evaluate(package: Package, pairs: list[tuple[str, str]], method: str, beam_size: int, batch_size: int,
             length_penalty: float = 1.0) -> dict:
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    start = time.perf_counter()
    opts = DecodeOptions(method, beam_size=beam_size, batch_size=batch_size, length_penalty=length_penalty)
    found = translate(package.model, package.tokenizer, sources, opts)
    seconds = time.perf_counter() - start
    scores = score([t.text for t in found], references)
    label = f"beam {beam_size}, α {length_penalty:g}" if method == "beam" else method
    return {"search": label, "length_penalty": length_penalty, "seconds": seconds, **scores.as_dict()}


def score_package(folder: str | Path, device: str, val: list[tuple[str, str]], test: list[tuple[str, str]],
                  weights: str, beam_size: int, batch_size: int, length_penalties: list[float]) -> list[dict]:
    """Greedy and beam search on the test pairs, the beam's length penalty chosen on the validation pairs (never on a
    test set)."""
    package = load_package(folder, resolve_device(device))
    on_val = [evaluate(package, val, "beam", beam_size, batch_size, alpha) for alpha in length_penalties]
    alpha = max(on_val, key=lambda r: r["bleu"])["length_penalty"]
    print(f"{weights} weights, val BLEU by length penalty: "
          + ", ".join(f"α {r['length_penalty']:g}: {r['bleu']:.2f}" for r in on_val) + f" → α {alpha:g}")
    return [{"weights": weights, **evaluate(package, test, method, beam_size, batch_size, alpha),
             "val_bleu_by_length_penalty": {r["length_penalty"]: r["bleu"] for r in on_val}}
            for method in ("greedy", "beam")]


def one_run(args: argparse.Namespace, cfg: TrainConfig, data: TrainData, out: str,
            val: list[tuple[str, str]], test: list[tuple[str, str]]) -> dict:
    """Train one seed to its minutes, score its package (and the averaged one, when made) and print its tables."""
    summary = train(cfg, data, out, args.preset)
    folders = {"last": out, **({"averaged": summary["averaged"]} if summary.get("averaged") else {})}
    results = [row for weights, folder in folders.items()
               for row in score_package(folder, args.device, val, test, weights, args.beam_size, args.batch_size,
                                        args.length_penalties)]
    columns = ["wall_s", "steps", "epochs", "tokens_per_s", "peak_rss_mb", "device", "precision", "params"]
    common.print_table(f"Training, seed {cfg.seed} ({summary['reason']})", columns, [[summary[c] for c in columns]])
    print("tokens_per_s: real source + target tokens over the whole run, validation pauses included; peak_rss_mb: "
          "the process's peak resident memory up to the end of training")
    common.print_table(f"{common.TEST_SPLIT} ({len(test)} sentences, {common.SRC_LANG}→{common.TGT_LANG}, fp32)",
                       ["weights", "search", "BLEU", "chrF", "decode s"],
                       [[r["weights"], r["search"], r["bleu"], r["chrf"], r["seconds"]] for r in results])
    return {"seed": cfg.seed, "package": out, "training": summary, "test": results}


def headline(run: dict) -> dict:
    """One run's row of the seeds table: its steps, last validation loss and the last weights' test BLEU."""
    bleu = {r["search"].split()[0]: r["bleu"] for r in run["test"] if r["weights"] == "last"}
    return {"seed": run["seed"], "steps": run["training"]["steps"],
            "val_loss": (run["training"].get("final") or {}).get("val_loss"), "greedy": bleu["greedy"],
            "beam": bleu["beam"]}


HEADLINE = ("steps", "val_loss", "greedy", "beam")  # the seeds table's columns after the seed


def spread(rows: list[dict], keys: tuple[str, ...] = HEADLINE) -> dict:
    """Mean, min, max and spread (max - min) of each key over the runs."""
    stats = {}
    for key in keys:
        values = [row[key] for row in rows if row[key] is not None]
        if values:
            stats[key] = {"mean": statistics.fmean(values), "min": min(values), "max": max(values),
                          "spread": max(values) - min(values)}
    return stats


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=True)
    parser.add_argument("--minutes", type=float, default=30.0, help="training time budget (validations included)")
    parser.add_argument("--preset", default="small", choices=["tiny", "small", "base"])
    parser.add_argument("--precision", default="auto", help="auto, fp32, bf16 or fp16")
    parser.add_argument("--out", default=str(common.RESULTS_DIR / "quality-small"),
                        help="package folder to save (with --seeds above 1: one folder per seed, OUT-seedN)")
    parser.add_argument("--seeds", type=int, default=1,
                        help="runs one after another (seeds --seed, --seed + 1, ...): each reported, then the spread")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="sentences decoded together")
    parser.add_argument("--eval-sentences", type=int, default=None,
                        help="validation sentences decoded at each validation (default: the preset's)")
    parser.add_argument("--bpe-dropout", type=float, default=None,
                        help="BPE-dropout on the training data (default: the preset's, off)")
    parser.add_argument("--set", action="append", type=common.setting, default=[], metavar="KEY=VALUE",
                        help="a training setting over the preset's, e.g. --set schedule=cosine (repeatable)")
    parser.add_argument("--length-penalties", type=lambda text: [float(a) for a in text.split(",")],
                        default=[0.6, 1.0, 1.4], help="beam length penalties to choose from on val (comma-separated)")
    parser.add_argument("--test-sentences", type=int, default=None, help="score only the first N test pairs (smoke)")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")

    machine = common.start(args)
    cfg = preset_config(args.preset, device=args.device, precision=args.precision, seed=args.seed,
                        eval_sentences=args.eval_sentences, bpe_dropout=args.bpe_dropout, **dict(args.set))
    cfg = dataclasses.replace(cfg, max_minutes=args.minutes, max_steps=None, max_epochs=None)
    val = common.load_split(args.data, "val")
    data = TrainData(common.load_split(args.data, "train", cfg.max_sentence_tokens), val, common.SRC_LANG,
                     common.TGT_LANG, "Multi30k")
    test = common.load_split(args.data, common.TEST_SPLIT)[: args.test_sentences]
    runs = []
    for seed in range(args.seed, args.seed + args.seeds):
        out = args.out if args.seeds == 1 else f"{args.out}-seed{seed}"
        runs.append(one_run(args, dataclasses.replace(cfg, seed=seed), data, out, val, test))

    rows = [headline(run) for run in runs]
    stats, keys = spread(rows), HEADLINE
    common.print_table(f"Seeds ({len(runs)} runs of {args.minutes:g} min; test BLEU of the last weights)",
                       ["seed", *keys], [[row["seed"], *(row[k] for k in keys)] for row in rows]
                       + [[name, *(stats[k][name] if k in stats else None for k in keys)]
                          for name in ("mean", "min", "max", "spread")])
    first = runs[0]["test"][0]
    print(f"BLEU signature: {first['bleu_signature']}\nchrF signature: {first['chrf_signature']}")
    print(f"peak resident memory including the test decoding: {common.peak_rss_mb():,.0f} MB (target <= 1,500)")
    print(f"packages: {', '.join(run['package'] for run in runs)}; target: BLEU >= 37 with beam {args.beam_size} "
          "after <= 30 min of CPU training, on every seed")
    common.emit_json(args, {"benchmark": "quality", "machine": machine, "settings": vars(args), "runs": runs,
                            "seeds": rows, "spread": stats, "peak_rss_mb": common.peak_rss_mb()})


if __name__ == "__main__":
    main()
