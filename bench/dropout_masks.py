"""Dropout's masks in the project's own training step: `dropout.keep_mask` (16 random bits an element, four from each
64-bit draw of the run's generator) against `dropout.bernoulli_mask` (a number per element, what F.dropout draws),
in one process and in alternating windows (A B, B A, ...) of Trainer.run()'s steps, small preset on Multi30k, so that
the machine's load hits both alike: tokens/s.

    python bench/dropout_masks.py --data ../shared/data/multi30k
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import common  # first: the allocator is chosen before PyTorch loads
import torch
from train_throughput import measure

import playground.core.dropout as dropout_module


class MaskedRunner:
    """The project's training loop, its dropout masks drawn by `masks` (what dropout.Dropout calls) for each step."""

    def __init__(self, name: str, runner: common.ProjectRunner,
                 masks: Callable[[torch.Tensor, float, torch.Generator], torch.Tensor]):
        self.name, self.runner, self.masks = name, runner, masks

    def step(self) -> int:
        with mock.patch.object(dropout_module, "keep_mask", self.masks):
            return self.runner.step()


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=True)
    parser.add_argument("--windows", type=int, default=8, help="timed windows of each")
    parser.add_argument("--steps-per-window", type=int, default=4)
    parser.add_argument("--warmup-steps", type=int, default=3, help="untimed steps of each first")
    parser.add_argument("--max-pairs", type=int, default=None, help="only the first N training pairs (smoke runs)")
    args = parser.parse_args()
    machine = common.start(args)

    with tempfile.TemporaryDirectory(prefix="bench-") as out_dir:
        trainer = common.project_trainer(args.data, args.max_pairs, "auto", args.device, args.seed, Path(out_dir))
        project = common.ProjectRunner(trainer)
        mine, stock = (MaskedRunner("keep_mask (16-bit draws)", project, dropout_module.keep_mask),
                       MaskedRunner("bernoulli_mask (F.dropout's)", project, dropout_module.bernoulli_mask))
        windows = measure([mine, stock], trainer.device, args.warmup_steps, args.windows, args.steps_per_window)
        project.close()

    rates = {name: [w.tokens_per_s for w in ws] for name, ws in windows.items()}
    medians = {name: common.median(r) for name, r in rates.items()}
    speedup = medians[mine.name] / medians[stock.name]
    common.print_table(f"Dropout masks in the training step (small preset, dropout {trainer.cfg.model.dropout}, "
                       f"{trainer.precision}; {args.windows} windows x {args.steps_per_window} steps each)",
                       ["masks", "tokens/s (median)", "min", "max"],
                       [[name, medians[name], min(r), max(r)] for name, r in rates.items()])
    print(f"keep_mask / bernoulli_mask: {speedup:.2f}x the tokens/s")
    common.emit_json(args, {"benchmark": "dropout_masks", "machine": machine, "settings": vars(args),
                            "tokens_per_s": rates, "speedup": speedup})


if __name__ == "__main__":
    main()
