"""Training throughput: the project's trainer step versus the model a reader of PyTorch's nn.Transformer
translation tutorial would write, with the same size, data (Multi30k en→de, one joint 8k BPE) and device, in
two baselines: the tutorial's random 128-sentence batches, and the fair one, the same nn.Transformer fed the
project's own length-sorted token batches (what a competent user writes).

The systems run in turn in timed windows (A B C, C B A, ...), so a change in machine load hits all; the table
gives the median real (non-pad) source + target tokens per second of each, the ratios, and model FLOPs
utilisation against a matmul probe of the device.

    python bench/train_throughput.py --data ../shared/data/multi30k
"""

from __future__ import annotations

import itertools
import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import common  # first: the allocator is chosen before PyTorch loads
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

from playground.core.model import TransformerConfig
from playground.core.tokenizer import BOS_ID, EOS_ID, PAD_ID
from playground.data.batching import collate, make_batches, pad_multiple
from playground.runtime.device import matmul_flops
from playground.training.trainer import Trainer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Runner(Protocol):
    name: str
    precision: str

    def step(self) -> int: ...  # one optimizer step; returns the real (non-pad) source + target tokens

    def pad_share(self) -> float: ...  # padding share of the positions computed, over an epoch of batches


# ----------------------------------------------------------------------------------------------------------
# The baseline: PyTorch's translation tutorial (Seq2SeqTransformer), batch-first, fp32


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float, max_positions: int = 5000):
        super().__init__()
        inv_freq = torch.exp(-torch.arange(0, d_model, 2) * math.log(10000) / d_model)
        position = torch.arange(max_positions)[:, None]
        table = torch.zeros(max_positions, d_model)
        table[:, 0::2] = torch.sin(position * inv_freq)
        table[:, 1::2] = torch.cos(position * inv_freq)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("table", table[None])  # [1, max_positions, D]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.table[:, : x.size(1)])


class TutorialSeq2Seq(nn.Module):
    """Separate source/target embeddings scaled by sqrt(d), sinusoidal positions, nn.Transformer, a generator."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        d = cfg.d_model
        self.scale = math.sqrt(d)
        self.src_tokens = nn.Embedding(cfg.src_vocab_size, d)
        self.tgt_tokens = nn.Embedding(cfg.tgt_vocab_size, d)
        self.positions = PositionalEncoding(d, cfg.dropout)
        self.transformer = nn.Transformer(d, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.d_ff,
                                          cfg.dropout, batch_first=True)
        self.generator = nn.Linear(d, cfg.tgt_vocab_size)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        T = tgt_in.size(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).triu(1)
        src_pad, tgt_pad = src == PAD_ID, tgt_in == PAD_ID
        out = self.transformer(self.positions(self.src_tokens(src) * self.scale),
                               self.positions(self.tgt_tokens(tgt_in) * self.scale), tgt_mask=causal,
                               src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                               memory_key_padding_mask=src_pad)
        return self.generator(out)


def pad_collate(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    src, tgt = zip(*pairs)
    return (pad_sequence(list(src), batch_first=True, padding_value=PAD_ID),
            pad_sequence(list(tgt), batch_first=True, padding_value=PAD_ID))


class BaselineRunner:
    """Random 128-sentence batches from a DataLoader, CrossEntropyLoss with label smoothing, Adam (lr 1e-4)."""

    name, precision = "baseline, tutorial", "fp32"

    def __init__(self, trainer: Trainer, seed: int):
        self.device = trainer.device
        self.model = TutorialSeq2Seq(trainer.model.cfg).to(self.device)
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=PAD_ID, label_smoothing=trainer.cfg.label_smoothing)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        # the same encoded pairs as the project: source + <eos>; target <bos> ... <eos> (split into in/out)
        pairs = [(torch.tensor(s), torch.tensor([BOS_ID] + t + [EOS_ID])) for s, t in trainer.train_set]
        self.loader = DataLoader(pairs, batch_size=common.TUTORIAL_BATCH_SIZE, shuffle=True, collate_fn=pad_collate,
                                 generator=torch.Generator().manual_seed(seed))
        self.batches: Iterator = itertools.chain.from_iterable(itertools.repeat(self.loader))  # reshuffled each epoch

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        src, tgt = (x.to(self.device) for x in next(self.batches))
        return src, tgt[:, :-1], tgt[:, 1:]

    def step(self) -> int:
        src, tgt_in, tgt_out = self.next_batch()
        self.model.train()
        logits = self.model(src, tgt_in)
        self.optimizer.zero_grad()
        loss = self.loss_fn(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
        loss.backward()
        self.optimizer.step()
        loss.item()
        return int((src != PAD_ID).sum() + (tgt_out != PAD_ID).sum())

    def pad_share(self) -> float:
        real = padded = 0
        for src, tgt in self.loader:
            real += int((src != PAD_ID).sum() + (tgt[:, 1:] != PAD_ID).sum())
            padded += src.numel() + tgt[:, 1:].numel()
        return 1 - real / padded


class SortedBatchRunner(BaselineRunner):
    """The fair baseline: the same model, loss and optimizer, fed the project's own length-sorted token batches
    (make_batches with the Trainer's budget and seeds, collated as the Trainer collates them), padded as an fp32 run
    pads them: not at all (batching.pad_multiple pads only bf16 on a CPU and GPU batches)."""

    name = "baseline, sorted batches"

    def __init__(self, trainer: Trainer, seed: int):
        super().__init__(trainer, seed)
        self.train_set, self.batch_tokens, self.seed = trainer.train_set, trainer.cfg.batch_tokens, trainer.cfg.seed
        self.multiple = pad_multiple(self.device, self.precision, self.train_set, self.batch_tokens)
        self.sorted_batches = (indices for epoch in itertools.count() for indices in self.epoch_batches(epoch))

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return make_batches(self.train_set, self.batch_tokens, self.seed + epoch, self.multiple)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch = collate(self.train_set, next(self.sorted_batches), self.device, self.multiple)
        return batch.src, batch.tgt_in, batch.tgt_out

    def pad_share(self) -> float:
        return common.collated_pad_share(self.train_set, self.epoch_batches(0), self.device, self.multiple)


# ----------------------------------------------------------------------------------------------------------
# Timing


@dataclass
class Window:
    elapsed: common.Elapsed
    tokens: list[int]  # real tokens of each step

    @property
    def tokens_per_s(self) -> float:
        return sum(self.tokens) / self.elapsed.wall

    @property
    def tokens_per_cpu_s(self) -> float:
        return sum(self.tokens) / self.elapsed.cpu


def time_window(runner: Runner, steps: int, device: torch.device) -> Window:
    with common.stopwatch(device) as elapsed:
        tokens = [runner.step() for _ in range(steps)]
    return Window(elapsed, tokens)


def measure(runners: list[Runner], device: torch.device, warmup: int, windows: int,
            steps: int) -> dict[str, list[Window]]:
    for runner in runners:
        for _ in range(warmup):
            runner.step()
    results: dict[str, list[Window]] = {r.name: [] for r in runners}
    for w in range(windows):
        for runner in runners if w % 2 == 0 else runners[::-1]:  # A B C, C B A, ...: none always goes first
            results[runner.name].append(time_window(runner, steps, device))
            print(f"  window {w + 1}/{windows} {runner.name}: {results[runner.name][-1].tokens_per_s:,.0f} tokens/s",
                  flush=True)
    return results


def summarise(runner: Runner, windows: list[Window], flops_per_token: float, target_share: float,
              device: torch.device) -> dict:
    rates = [w.tokens_per_s for w in windows]
    median_rate = common.median(rates)
    achieved = median_rate * flops_per_token
    peak = matmul_flops(device.type, DTYPES[runner.precision])
    return {
        "precision": runner.precision,
        "tokens_per_s": median_rate,
        "tokens_per_s_min": min(rates),
        "tokens_per_s_max": max(rates),
        "target_tokens_per_s": median_rate * target_share,
        "tokens_per_cpu_s": common.median([w.tokens_per_cpu_s for w in windows]),
        "step_ms": 1000 * common.median([w.elapsed.wall / len(w.tokens) for w in windows]),
        "real_tokens_per_step": sum(sum(w.tokens) for w in windows) / sum(len(w.tokens) for w in windows),
        "pad_share": runner.pad_share(),
        "model_tflops": achieved / 1e12,
        "peak_tflops": peak / 1e12,
        "mfu": achieved / peak,
    }


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=True)
    parser.add_argument("--warmup-steps", type=int, default=3, help="untimed steps of each system first")
    parser.add_argument("--windows", type=int, default=8, help="timed windows per system")
    parser.add_argument("--steps-per-window", type=int, default=5)
    parser.add_argument("--precision", default="auto", help="the project's precision: auto, fp32, bf16 or fp16")
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="the project's token budget (default: matched to the baseline's real tokens per batch)")
    parser.add_argument("--max-pairs", type=int, default=None, help="use only the first N training pairs (smoke runs)")
    args = parser.parse_args()

    machine = common.start(args)
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-") as out_dir:
        trainer = common.project_trainer(args.data, args.max_pairs, args.precision, args.device, args.seed,
                                         Path(out_dir), args.batch_tokens)
        cfg = trainer.model.cfg
        project = common.ProjectRunner(trainer)
        runners: list[Runner] = [project, SortedBatchRunner(trainer, args.seed), BaselineRunner(trainer, args.seed)]
        print(f"model: d_model {cfg.d_model}, {cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers, "
              f"{cfg.n_heads} heads, ff {cfg.d_ff}, vocab {cfg.tgt_vocab_size}; {len(trainer.train_set):,} pairs; "
              f"project batch_tokens {trainer.cfg.batch_tokens} ({trainer.precision}), "
              f"baselines (fp32): the project's batches, and {common.TUTORIAL_BATCH_SIZE} random sentences")
        # in bf16 on a CPU, oneDNN compiles kernels for each new batch shape (a few ms each): the project first trains
        # an epoch untimed, so that no timed step meets a shape for the first time (the fp32 baselines compile none)
        epoch_steps = len(trainer.batches)
        print(f"warm-up: an epoch of the project ({epoch_steps} steps), then {args.warmup_steps} steps of each system",
              flush=True)
        for _ in range(epoch_steps):
            project.step()
        results = measure(runners, trainer.device, args.warmup_steps, args.windows, args.steps_per_window)
        project.close()
    per_token = common.flops_per_token(cfg, common.pair_lengths(trainer.train_set))
    share = common.target_share(trainer.train_set)
    systems = {r.name: summarise(r, results[r.name], per_token, share, trainer.device) for r in runners}
    speedups = {name: systems["project"]["tokens_per_s"] / s["tokens_per_s"] for name, s in systems.items()
                if name != "project"}

    header = ["system", "precision", "real tok/step", "pad share", "step ms", "tok/s (median)", "min", "max",
              "tok/CPU-s", "target tok/s", "model TFLOP/s", "peak TFLOP/s", "MFU"]
    rows = [[name, s["precision"], round(s["real_tokens_per_step"]), f"{s['pad_share']:.1%}", s["step_ms"],
             s["tokens_per_s"], s["tokens_per_s_min"], s["tokens_per_s_max"], s["tokens_per_cpu_s"],
             s["target_tokens_per_s"], s["model_tflops"], s["peak_tflops"], f"{s['mfu']:.1%}"]
            for name, s in systems.items()]
    common.print_table(f"Training throughput ({args.windows} windows x {args.steps_per_window} steps each, "
                       "real source + target tokens)", header, rows)
    print(f"\nspeedup project / baseline with sorted batches: {speedups[SortedBatchRunner.name]:.2f}x (target >= 3x); "
          f"project / tutorial baseline: {speedups[BaselineRunner.name]:.2f}x; project MFU "
          f"{systems['project']['mfu']:.1%} (target >= 50%)")
    print("tok/CPU-s: tokens per second of this process's CPU time, a cross-check when other work shares the CPUs")
    print(f"model FLOPs per real token: {per_token / 1e6:.1f} M ({common.FLOPS_FORMULA})")
    common.emit_json(args, {
        "benchmark": "train_throughput", "machine": machine, "settings": vars(args),
        "project_batch_tokens": trainer.cfg.batch_tokens, "baseline_batch_sentences": common.TUTORIAL_BATCH_SIZE,
        "flops_per_token": per_token, "flops_formula": common.FLOPS_FORMULA, "systems": systems,
        "speedups": speedups,
        "windows": {name: [{"wall_s": w.elapsed.wall, "cpu_s": w.elapsed.cpu, "steps": len(w.tokens),
                            "tokens_per_s": w.tokens_per_s} for w in ws]
                    for name, ws in results.items()},
    })


if __name__ == "__main__":
    main()
