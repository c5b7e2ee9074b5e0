"""Dropout's masks in the project's own training step: `model.keep_mask` (16 random bits an element, four from each
64-bit draw of the run's generator) against `bernoulli_` masks (a number per element, what F.dropout draws), in
one process and in alternating windows (A B, B A, ...) of Trainer.run()'s steps, small preset on Multi30k, so that
the machine's load hits both alike: tokens/s.

    python bench/dropout_masks.py --data ../shared/data/multi30k
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

import common  # first: puts the repository on sys.path
import torch

import playground.model as model_module


def bernoulli_mask(x: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    """The mask as F.dropout draws it: one Bernoulli draw per element."""
    return torch.empty_like(x).bernoulli_(1 - p, generator=generator).div_(1 - p)


@contextlib.contextmanager
def bernoulli_masks():
    mine = model_module.keep_mask
    model_module.keep_mask = bernoulli_mask  # what model.Dropout calls
    try:
        yield
    finally:
        model_module.keep_mask = mine


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=True)
    parser.add_argument("--windows", type=int, default=8, help="timed windows of each")
    parser.add_argument("--steps-per-window", type=int, default=4)
    parser.add_argument("--warmup-steps", type=int, default=3, help="untimed steps first")
    parser.add_argument("--max-pairs", type=int, default=None, help="only the first N training pairs (smoke runs)")
    args = parser.parse_args()
    machine = common.start(args)

    variants = {"keep_mask (16-bit draws)": contextlib.nullcontext, "bernoulli_ (F.dropout's)": bernoulli_masks}
    rates: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="bench-") as out_dir:
        trainer = common.project_trainer(args.data, args.max_pairs, "auto", args.device, args.seed, Path(out_dir))
        runner = common.ProjectRunner(trainer)
        for _ in range(args.warmup_steps):
            runner.step()
        for w in range(args.windows):
            for name in list(variants) if w % 2 == 0 else list(variants)[::-1]:
                with variants[name](), common.stopwatch(trainer.device) as elapsed:
                    tokens = sum(runner.step() for _ in range(args.steps_per_window))
                rates[name].append(tokens / elapsed.wall)
        runner.close()

    medians = {name: common.median(r) for name, r in rates.items()}
    speedup = medians["keep_mask (16-bit draws)"] / medians["bernoulli_ (F.dropout's)"]
    common.print_table(f"Dropout masks in the training step (small preset, dropout {trainer.cfg.dropout}, "
                       f"{trainer.precision}; {args.windows} windows x {args.steps_per_window} steps each)",
                       ["masks", "tokens/s (median)", "min", "max"],
                       [[name, medians[name], min(r), max(r)] for name, r in rates.items()])
    print(f"keep_mask / bernoulli_: {speedup:.2f}x the tokens/s")
    common.emit_json(args, {"benchmark": "dropout_masks", "machine": machine, "settings": vars(args),
                            "tokens_per_s": rates, "speedup": speedup})


if __name__ == "__main__":
    main()
