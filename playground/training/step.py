"""One optimisation step on a global batch: the forward pass, the label-smoothed loss (training.loss), the
backward pass (accumulated over micro-batches, all-reduced across ranks), gradient clipping, the learning rate
of the schedule (training.schedule) and the optimizer's update. The Trainer's step, and the one the duration
estimate (training.estimate) times."""

from __future__ import annotations

import contextlib
import math
import time

import torch

from playground.core.model import Transformer
from playground.core.tokenizer import PAD_ID
from playground.data.batching import GlobalBatch
from playground.runtime.device import autocast, one_thread_on_cpu, sync, tf32_matmuls
from playground.training.config import TrainConfig
from playground.training.distributed import SINGLE, Ranks, sum_over_ranks, wrap_model
from playground.training.loss import smoothed_loss_sum
from playground.training.schedule import learning_rate

QUIET_CPU_SHARE = 0.8  # a timed pass that got this share of a core: the machine has room for more threads


class Optimization:
    """The model in training, its optimizer and its loss scaler: one optimizer step on a global batch. The
    Trainer's step, and the one the duration estimate (playground.training.estimate) times."""

    def __init__(self, cfg: TrainConfig, model: Transformer, device: torch.device, precision: str,
                 ranks: Ranks = SINGLE):
        self.cfg, self.model, self.device, self.precision, self.ranks = cfg, model, device, precision, ranks
        self.train_model = wrap_model(model, device, ranks)
        kind = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
        fused = {"fused": True} if device.type in ("cuda", "cpu") else {}  # one kernel, not a loop per tensor
        self.optimizer = kind(model.parameters(), lr=0.0, betas=cfg.betas, eps=cfg.eps,
                              weight_decay=cfg.weight_decay, **fused)
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")

    def gradient_sync(self, last: bool):
        """DDP all-reduces the gradients in every backward: accumulate them locally, all-reduce after the last."""
        if last or self.train_model is self.model:
            return contextlib.nullcontext()
        return self.train_model.no_sync()

    def step(self, batch: GlobalBatch, position: float, planned: int | None,
             warmup: int | None = None) -> tuple[float, float, float]:
        """One optimizer step at the learning-rate schedule's `position` (the step, 1-based, unless a minutes budget
        fitted the schedule: schedule.advance): (the global batch's loss per target token, the learning rate, the
        gradient norm). `planned` and `warmup`: the run's schedule (budget.MinutesPlan)."""
        lr = learning_rate(self.cfg, position, planned, warmup)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = self.forward_backward(batch)
        self.scaler.unscale_(self.optimizer)
        max_norm = self.cfg.clip_norm if self.cfg.clip_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        # summed over the ranks, the loss is the same number everywhere: all ranks skip a non-finite step together
        loss = sum_over_ranks(loss_sum, self.ranks) / batch.n_tokens
        loss_value, norm_value = torch.stack([loss, grad_norm.float()]).tolist()  # one wait for the device, not two
        if math.isfinite(loss_value):
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss_value, lr, norm_value

    def time_step(self, batch: GlobalBatch) -> float:
        """Seconds of a step's forward and backward passes on `batch`; the gradients are dropped, nothing learns."""
        self.optimizer.zero_grad(set_to_none=True)
        sync(self.device)
        start = time.perf_counter()
        self.forward_backward(batch)
        sync(self.device)
        seconds = time.perf_counter() - start
        self.optimizer.zero_grad(set_to_none=True)
        return seconds

    def forward_backward(self, batch: GlobalBatch) -> torch.Tensor:
        """The gradients of the global batch's loss (summed over its target tokens, which it returns)."""
        self.train_model.train()
        loss_sum = torch.zeros((), device=self.device)
        with tf32_matmuls(self.device):
            for index, micro in enumerate(batch.mine):
                with self.gradient_sync(last=index == len(batch.mine) - 1):
                    with autocast(self.device, self.precision):
                        logits = self.train_model(micro.src, micro.tgt_in)
                    micro_loss = smoothed_loss_sum(logits, micro.tgt_out, self.cfg.label_smoothing, PAD_ID)
                    # DDP averages the gradients over the ranks; the world size undoes that average, so the gradient is
                    # that of (sum of every micro-batch's loss) / (the global batch's target tokens)
                    self.scaler.scale(micro_loss * self.ranks.world_size / batch.n_tokens).backward()
                loss_sum += micro_loss.detach()
        return loss_sum


def time_one_step(optimization: Optimization, batch: GlobalBatch, device: torch.device) -> tuple[float, bool]:
    """Seconds of one step here, and whether the run should train on one thread. The forward and backward passes on
    `batch` are timed on one thread after an untimed warm-up pass. On a CPU with several threads, and a core of its
    own for that pass (its CPU time near its wall time: a quiet machine), they are timed on all of them too, and the
    run trains on the quicker; on a busy one it trains on one thread: a tiny-preset step took 2.1 s on one thread
    and 9.5 s on two on a 2-core machine at load 10."""
    with one_thread_on_cpu(device):
        optimization.time_step(batch)
        cpu_began = time.thread_time()
        seconds = optimization.time_step(batch)
        cpu_share = (time.thread_time() - cpu_began) / max(seconds, 1e-9)
    if device.type != "cpu" or torch.get_num_threads() <= 1:
        return seconds, False
    threaded = optimization.time_step(batch) if cpu_share >= QUIET_CPU_SHARE else math.inf
    return min(seconds, threaded), seconds <= threaded


def faster_precision(optimization: Optimization, batch: GlobalBatch, candidates: tuple[str, ...]) -> dict[str, float]:
    """Time a step's forward and backward passes on `batch` in each precision (after an untimed pass each), leave
    `optimization` in the faster and return the seconds of each. On a GPU, bf16 halves a matmul's time, but a small
    model's step is bound by kernel launches, which autocast's casts add to: the small preset stepped 2.5x faster in
    fp32 than in bf16 on an H200 (bench/gpu_check.py)."""
    seconds = {}
    for precision in candidates:
        optimization.precision = precision
        optimization.time_step(batch)
        seconds[precision] = min(optimization.time_step(batch) for _ in range(2))
    optimization.precision = min(seconds, key=seconds.get)
    return seconds
