"""Helpers shared by the benchmark scripts: data loading, the project's trainer set-up, FLOP counting, tables
and the final JSON line.

The scripts run as `python bench/NAME.py` from the repository root, with the project installed in place
(`pip install -e .`, once), so that `playground` imports from the working tree.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
try:
    import playground  # noqa: F401
except ImportError:
    sys.exit("bench/ needs the playground installed: run `pip install -e .` in the repository root once.")

from playground.runtime.allocator import loaded_allocator, restart_with_fast_allocator  # noqa: E402

T = TypeVar("T")
restart_with_fast_allocator()  # measure what the app and the CLI run on (PLAYGROUND_ALLOCATOR=system: glibc's)

import torch  # noqa: E402

from playground.core.model import TransformerConfig  # noqa: E402
from playground.data.batching import collate, make_batches, pad_multiple  # noqa: E402
from playground.data.load import load_parallel  # noqa: E402
from playground.datasets.catalog import DATASETS_DIR  # noqa: E402
from playground.packages.settings import SETTINGS  # noqa: E402
from playground.runtime.device import sync  # noqa: E402
from playground.training import events  # noqa: E402
from playground.training.inputs import TrainData  # noqa: E402
from playground.training.presets import preset_config  # noqa: E402
from playground.training.trainer import Trainer  # noqa: E402

Pair = tuple[str, str]
Encoded = list[tuple[list[int], list[int]]]

SRC_LANG, TGT_LANG = "en", "de"
TEST_SPLIT = "test_2016_flickr"
TUTORIAL_BATCH_SIZE = 128  # sentences per batch in PyTorch's nn.Transformer translation tutorial
RESULTS_DIR = REPO_ROOT / "bench" / "results"  # git-ignored


# ----------------------------------------------------------------------------------------------------------
# Command line and output


def base_parser(description: str, data_required: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--data", required=data_required, default=None,
                        help=f"Multi30k folder with {{train,val,{TEST_SPLIT}}}.{{{SRC_LANG},{TGT_LANG}}}.gz")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="end with the results as one JSON line")
    return parser


def setting(text: str) -> tuple[str, object]:
    """--set KEY=VALUE: one setting over the preset's, parsed to its type."""
    key, _, value = text.partition("=")
    if key not in SETTINGS or SETTINGS[key].kind is tuple:
        raise argparse.ArgumentTypeError(f"{key!r} is not a settable training setting")
    kind = SETTINGS[key].kind
    return key, (value.lower() in ("1", "true", "yes")) if kind is bool else kind(value)


def machine_info() -> dict:
    """What the numbers were measured on, including the load average (other work on the machine skews them)."""
    cpu = platform.processor() or "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        lines = cpuinfo.read_text().splitlines()
        names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
        cpu = names[0] if names else cpu
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "allocator": loaded_allocator(),
            "load_average_1m": round(load[0], 2)}


def start(args: argparse.Namespace) -> dict:
    """Apply --threads, print what the numbers are measured on, and return it for the JSON line."""
    if args.threads:
        torch.set_num_threads(args.threads)
    info = machine_info()
    print(f"machine: {info['cpu']} ({info['logical_cpus']} logical CPUs, {info['torch_threads']} torch threads, "
          f"{info['cpu_capability']}), torch {info['torch']}, python {info['python']}, {info['allocator']}, "
          f"load average {info['load_average_1m']}")
    return info


def fmt(value) -> str:
    if isinstance(value, float):
        if value != value:  # nan
            return "-"
        magnitude = abs(value)
        if magnitude >= 100:
            return f"{value:,.0f}"
        if magnitude >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}" if magnitude >= 0.1 else f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [header] + [[fmt(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for n, row in enumerate(cells):
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))


def emit_json(args: argparse.Namespace, result: dict) -> None:
    if args.json:
        print(json.dumps(result, default=str))


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (ru_maxrss: kilobytes on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def call_times(call: Callable[[], T], calls: int, after: Callable[[T], object] | None = None) -> list[float]:
    """Wall seconds of each of `calls` calls; `after` gets each result, outside the timing (a check, a pause)."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
        if after is not None:
            after(result)
    return times


@dataclass
class Elapsed:
    wall: float = 0.0
    cpu: float = 0.0  # this process's CPU time, all threads: less skewed than wall time when others share the CPUs


@contextlib.contextmanager
def stopwatch(device: torch.device) -> Iterator[Elapsed]:
    """Wall and CPU seconds of the block, with the device synchronised at both ends."""
    elapsed = Elapsed()
    sync(device)
    wall, cpu = time.perf_counter(), time.process_time()
    yield elapsed
    sync(device)
    elapsed.wall, elapsed.cpu = time.perf_counter() - wall, time.process_time() - cpu


# ----------------------------------------------------------------------------------------------------------
# Data


def split_files(data_dir: str | Path, split: str) -> tuple[Path, Path]:
    folder = Path(data_dir)
    return folder / f"{split}.{SRC_LANG}.gz", folder / f"{split}.{TGT_LANG}.gz"


def load_split(data_dir: str | Path, split: str, max_words: int = 256) -> list[Pair]:
    """Training pairs are read as `python -m playground train` reads them (deduplicated, longer than max_words
    words dropped); evaluation splits keep every line so that scores are on the standard test set."""
    src, tgt = split_files(data_dir, split)
    if split == "train":
        return load_parallel(src, tgt, src_lang=SRC_LANG, tgt_lang=TGT_LANG, max_words=max_words).pairs
    return load_parallel(src, tgt, src_lang=SRC_LANG, tgt_lang=TGT_LANG, max_words=100_000, dedupe=False).pairs


def load_pairs(data_dir: str | Path | None, split: str, max_words: int = 256) -> list[Pair]:
    """A Multi30k split (load_split), or without a folder the project's built-in English→German toy data as a
    stand-in: its train.tsv for "train", its test.tsv for any other split."""
    if data_dir:
        return load_split(data_dir, split, max_words)
    return load_parallel(DATASETS_DIR / "mini-translation" / ("train.tsv" if split == "train" else "test.tsv")).pairs


def pair_lengths(encoded: Encoded) -> list[tuple[int, int]]:
    """Real tokens per pair as the model sees them: (source + <eos>, target + <eos>)."""
    return [(len(s), len(t) + 1) for s, t in encoded]


# ----------------------------------------------------------------------------------------------------------
# The project's trainer


def project_trainer(data_dir: str | None, max_pairs: int | None, precision: str, device: str, seed: int,
                    out_dir: Path, batch_tokens: int | None = None) -> Trainer:
    """A Trainer with the `small` preset on Multi30k (without a folder the built-in toy data; it trains its joint
    8k BPE, once), validation off. Its batches hold about the real tokens of the tutorial's 128-sentence batches
    unless `batch_tokens` is given."""
    cfg = preset_config("small", precision=precision, device=device, seed=seed)
    cfg = dataclasses.replace(cfg, max_minutes=None, max_steps=10**9, eval_every=10**9)
    train = load_pairs(data_dir, "train", cfg.max_sentence_tokens)[:max_pairs]
    val = load_pairs(data_dir, "val")[:200]
    data = TrainData(train, val, SRC_LANG, TGT_LANG, "multi30k" if data_dir else "mini-translation")
    trainer = Trainer(cfg, data, out_dir)
    tokens = batch_tokens or matched_batch_tokens(trainer.train_set, TUTORIAL_BATCH_SIZE, seed,
                                                  trainer.pad_multiple)
    # the Trainer chose its padding and cut epoch 0 into batches in __init__: both again, for this budget
    trainer.cfg = dataclasses.replace(trainer.cfg, batch_tokens=tokens)
    trainer.pad_multiple = pad_multiple(trainer.device, trainer.precision, trainer.train_set, tokens)
    trainer.batches = trainer.epoch_batches(trainer.epoch)
    return trainer


class ProjectRunner:
    """The project's own training loop, Trainer.run(), advanced one step at a time: whatever the loop does per
    step (collate, train_step, bookkeeping) is what gets timed."""

    name = "project"

    def __init__(self, trainer: Trainer):
        self.trainer, self.precision = trainer, trainer.precision
        self.events = trainer.run()
        next(self.events)  # Start

    def step(self) -> int:
        """One optimizer step; returns the real source + target tokens it trained on."""
        before = self.trainer.tokens_seen
        event = next(self.events)
        if not isinstance(event, events.Step):
            raise RuntimeError(f"the Trainer stopped: {event}")
        return self.trainer.tokens_seen - before

    def pad_share(self) -> float:
        t = self.trainer
        return collated_pad_share(t.train_set, t.batches, t.device, t.pad_multiple)

    def close(self) -> None:
        self.events.close()  # the Trainer saves a package to its out_dir when its loop is closed


def collated_pad_share(encoded: Encoded, batch_list: list[list[int]], device: torch.device, multiple: int) -> float:
    """Padding share of the positions computed, over an epoch's batches collated as the Trainer collates them."""
    batches = [collate(encoded, indices, device, multiple) for indices in batch_list]
    real = sum(b.n_tokens + b.n_src_tokens for b in batches)
    return 1 - real / sum(b.src.numel() + b.tgt_in.numel() for b in batches)


def target_share(encoded: Encoded) -> float:
    """Target tokens as a share of source + target tokens in the data."""
    lengths = pair_lengths(encoded)
    return sum(t for _, t in lengths) / sum(s + t for s, t in lengths)


def mean_real_tokens(lengths: list[tuple[int, int]], batches: list[list[int]]) -> float:
    return sum(sum(lengths[i]) for batch in batches for i in batch) / len(batches)


def matched_batch_tokens(encoded: Encoded, sentences_per_batch: int, seed: int, multiple: int = 1) -> int:
    """The token budget (padded tokens, as make_batches counts them with the Trainer's pad `multiple`) whose
    batches average the real tokens of random `sentences_per_batch`-sentence batches."""
    lengths = pair_lengths(encoded)
    target = sum(s + t for s, t in lengths) / len(lengths) * min(sentences_per_batch, len(lengths))
    budget = int(target)
    for _ in range(4):  # make_batches is monotone in the budget: a few proportional corrections converge
        budget = int(budget * target / mean_real_tokens(lengths, make_batches(encoded, budget, seed, multiple)))
    return budget


# ----------------------------------------------------------------------------------------------------------
# Model FLOPs


FLOPS_FORMULA = ("per pair with s source and t target tokens (each + <eos>/<bos>): "
                 "6*(s*N_src + t*N_tgt) + 12*d*(L_enc*s^2 + L_dec*(t^2 + t*s)); N_src = matmul weights applied to "
                 "source positions (encoder + cross-attention K,V), N_tgt = those applied to target positions "
                 "(decoder self-attention, cross-attention Q and out, feed-forward, output projection); "
                 "embeddings, biases, norms and softmax not counted; padding not counted")


def matmul_weights(cfg: TransformerConfig) -> tuple[int, int]:
    """(N_src, N_tgt): matmul parameters applied once per source / per target position."""
    d, f = cfg.d_model, cfg.d_ff
    encoder_layer = 4 * d * d + 2 * d * f  # QKV + out, up + down
    n_src = cfg.n_encoder_layers * encoder_layer + cfg.n_decoder_layers * 2 * d * d  # + cross-attention K, V
    decoder_layer = 4 * d * d + 2 * d * d + 2 * d * f  # self QKV + out, cross Q + out, up + down
    n_tgt = cfg.n_decoder_layers * decoder_layer + d * cfg.tgt_vocab_size
    return n_src, n_tgt


def flops_per_token(cfg: TransformerConfig, lengths: list[tuple[int, int]]) -> float:
    """Training (forward + backward) model FLOPs per real token, averaged over pairs: see FLOPS_FORMULA."""
    n_src, n_tgt = matmul_weights(cfg)
    d, enc, dec = cfg.d_model, cfg.n_encoder_layers, cfg.n_decoder_layers
    total = sum(6 * (s * n_src + t * n_tgt) + 12 * d * (enc * s * s + dec * (t * t + t * s)) for s, t in lengths)
    return total / sum(s + t for s, t in lengths)
