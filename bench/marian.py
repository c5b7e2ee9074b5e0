"""A real translation model's size inside (issue 35): an opus-mt-en-de-shaped Marian checkpoint (d_model 512, 6+6
layers, 8 heads, FFN 2048, vocabulary 58,101, swish; made here with transformers, random weights and SentencePiece
models trained here: real OPUS-MT weights cannot be downloaded on this machine, so the speeds and memory are real
and the translations are not) imported, translating one sentence, and fine-tuned.

    python bench/marian.py [--minutes 1] [--pairs 3000] [--repeats 5] [--threads 2] [--json]

1. import: `import_marian` in a fresh Python process (wall time, its peak RSS: the target is 1.5 GB), and again as the
   app does it, in a worker of the pool under its default limits (PLAYGROUND_WORKER_MB), to show that it fits there;
2. one sentence translated, greedy and beam 4, its output cut at OUTPUT_TOKENS (random weights never end it): median
   ms of --repeats calls after one untimed;
3. fine-tuning (`Trainer(init_from=...)`, the fine-tune preset) for --minutes (the issue's figure: 5) on --pairs pairs
   of Multi30k (--data) or of the built-in English-German toy data: steps/s and the peak RSS of its process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common  # noqa: F401 - first: the allocator is chosen before PyTorch loads

sys.path.insert(0, str(common.REPO_ROOT / "tests"))  # the checkpoint maker the exactness tests use

OPUS_MT_EN_DE = dict(d_model=512, layers=6, heads=8, ffn=2048, vocab_size=58101, positions=512)
SENTENCE = "the old friend sees a small red car and a big green tree in the city"
# Random weights never choose </s>: every translation is cut at this many tokens, about what OPUS-MT writes for the
# sentence (its 15 words); without a cut, each would run to twice its length plus ten
OUTPUT_TOKENS = 20


def child_import(checkpoint: str, destination: str) -> dict:
    """In a fresh process: import the checkpoint; its wall time and peak RSS."""
    from playground.packages.marian import import_marian

    began = time.perf_counter()
    import_marian(Path(checkpoint), Path(destination), origin="Helsinki-NLP/opus-mt-en-de (shape only)")
    return {"import_s": round(time.perf_counter() - began, 1), "import_peak_rss_mb": round(common.peak_rss_mb())}


def child_finetune(package: str, out: str, minutes: float, pairs: int, data: str | None) -> dict:
    """In a fresh process: fine-tune the package for `minutes` on `pairs` pairs; steps/s and peak RSS."""
    from playground.data.stats import split_pairs
    from playground.training.config import TrainConfig
    from playground.training.events import Done, Error
    from playground.training.inputs import TrainData
    from playground.training.presets import FINE_TUNE, PRESETS
    from playground.training.trainer import Trainer

    train, val = split_pairs(common.load_pairs(data, "train")[:pairs + 50], 50 / (pairs + 50), seed=0)
    cfg = TrainConfig.of(**{**PRESETS[FINE_TUNE].settings, "max_minutes": minutes, "eval_every": 10**6,
                            "eval_sentences": 8, "device": "cpu", "precision": "fp32"})
    done = None
    for event in Trainer(cfg, TrainData(train, val, "en", "de", "bench"), out, init_from=package).run():
        if isinstance(event, Error):
            raise SystemExit(event.message)
        if isinstance(event, Done):
            done = event.summary
    return {"finetune_steps": done["steps"], "finetune_wall_s": round(done["wall_s"], 1),
            "finetune_steps_per_s": round(done["steps"] / done["wall_s"], 3),
            "finetune_tokens_per_s": round(done["tokens_per_s"]), "finetune_pairs": len(train),
            "finetune_peak_rss_mb": round(common.peak_rss_mb())}


def in_child(*arguments: str) -> dict:
    """This script's `--child` mode in a fresh Python (its own peak RSS), niced; its JSON answer."""
    done = subprocess.run(["nice", "-n", "10", sys.executable, __file__, "--child", *arguments], check=True,
                          stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def import_in_worker(checkpoint: Path, destination: Path) -> dict:
    """The import as the app runs it: in a worker of the pool, under the default limits (serving/work.py)."""
    from playground import limits
    from playground.serving import work

    began = time.perf_counter()
    work.pool().call(work.import_checkpoint, str(checkpoint), str(destination), "worker", seconds=work.IMPORT_S,
                     advice="", gone=None, owner="")
    return {"worker_import_s": round(time.perf_counter() - began, 1),
            "worker_limit_mb": round(limits.worker_memory_bytes() / 2**20)}


def translate_ms(package: Path, repeats: int) -> dict:
    from playground.core.decode import DecodeOptions, translate
    from playground.packages.store import load_package

    pkg = load_package(package)
    out = {}
    for method, opts in (("greedy", DecodeOptions("greedy", max_output_tokens=OUTPUT_TOKENS)),
                         ("beam4", DecodeOptions("beam", beam_size=4, max_output_tokens=OUTPUT_TOKENS))):
        translate(pkg.model, pkg.tokenizer, [SENTENCE], opts)  # untimed: the first call's allocations
        wall, cpu = [], []  # CPU seconds too (all threads): on a shared machine the wall clock measures the others
        for _ in range(repeats):
            began, began_cpu = time.perf_counter(), time.process_time()
            result = translate(pkg.model, pkg.tokenizer, [SENTENCE], opts)[0].best
            wall.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
        out[f"{method}_ms"] = round(1000 * common.median(wall), 1)
        out[f"{method}_cpu_ms"] = round(1000 * common.median(cpu), 1)
        out[f"{method}_tokens"] = len(result.ids)
    out["source_tokens"] = len(pkg.tokenizer.encode_src(SENTENCE))
    out["parameters"] = pkg.model.num_parameters()
    return out


def main() -> None:
    parser = common.base_parser(__doc__.split("\n\n")[0], data_required=False)
    parser.add_argument("--minutes", type=float, default=1.0, help="fine-tuning time (the issue's figure: 5)")
    parser.add_argument("--pairs", type=int, default=3000, help="fine-tuning pairs")
    parser.add_argument("--repeats", type=int, default=3, help="timed translations of each kind")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)  # this script's own fresh processes
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        print(json.dumps(child_import(*rest) if kind == "import" else
                         child_finetune(rest[0], rest[1], float(rest[2]), int(rest[3]), rest[4] or None)))
        return
    info = common.start(args)
    from marian_checkpoints import make_marian_checkpoint

    with tempfile.TemporaryDirectory(prefix="bench-marian-") as tmp:
        tmp = Path(tmp)
        began = time.perf_counter()
        checkpoint = make_marian_checkpoint(tmp / "opus-mt-en-de", **OPUS_MT_EN_DE)
        print(f"checkpoint made with transformers (random weights) in {time.perf_counter() - began:.0f} s")
        result = {"machine": info, "real_weights": False, **in_child("import", str(checkpoint), str(tmp / "imported"))}
        result.update(import_in_worker(checkpoint, tmp / "worker-imported"))
        result.update(translate_ms(tmp / "imported", args.repeats))
        result.update(in_child("finetune", str(tmp / "imported"), str(tmp / "tuned"), str(args.minutes),
                               str(args.pairs), args.data or ""))
    common.print_table("opus-mt-en-de-shaped model (random weights: no real OPUS-MT weights here)",
                       ["what", "value"], [[k, v] for k, v in result.items() if k != "machine"])
    common.emit_json(args, result)


if __name__ == "__main__":
    main()
