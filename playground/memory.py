"""Will a training run fit in the device's memory? A rough upper estimate, checked before anything is allocated,
so a run that cannot fit is refused with a message that says what to change instead of crashing mid-run. And the
C allocator's settings that keep a long CPU run's memory from growing."""

from __future__ import annotations

import ctypes
import functools
import os

import torch

from playground.errors import TrainingError
from playground.model import TransformerConfig

M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value, held fixed
ARENA_MAX = 2  # one per core of the 2-core machines the presets are sized for; threads share them beyond that
# oneDNN (bf16 matmuls on the CPU) keeps a compiled kernel per matrix shape, 1,024 by default: every batch brings
# new shapes, and the cache grew by ~7 MB a step (measured over the first 35 steps). 64 holds one step's shapes.
ONEDNN_KERNELS_KEPT = "64"

BYTES = 4  # fp32 master weights, gradients, Adam moments and logits (the loss is computed in fp32)
HEADROOM = 0.9  # leave a tenth of the free memory to the rest of the process


def training_memory_bytes(cfg: TransformerConfig, batch_tokens: int, precision: str = "fp32") -> int:
    """Weights + gradients + Adam's two moments, plus the activations kept for the backward pass of one batch
    (batch_tokens source + target tokens): per layer the sublayer inputs/outputs, the feed-forward hidden units and
    the attention weights (for sentences of up to 128 tokens, or max_len when shorter), and the logits over the
    target vocabulary with their softmax and gradient."""
    states = 4 * cfg.num_parameters() * BYTES
    half = batch_tokens // 2  # about half of a batch's tokens are on each side
    d, f, h, length = cfg.d_model, cfg.d_ff, cfg.n_heads, min(cfg.max_len, 128)
    per_token = {"encoder": 8 * d + 2 * f + 2 * h * length, "decoder": 12 * d + 2 * f + 4 * h * length}
    activations = half * (cfg.n_encoder_layers * per_token["encoder"] + cfg.n_decoder_layers * per_token["decoder"])
    activation_bytes = 2 if precision in ("bf16", "fp16") else 4  # autocast keeps matmul outputs in 16 bits
    logits = 3 * half * cfg.tgt_vocab_size
    return states + activations * activation_bytes + logits * BYTES


def free_memory_bytes(device: torch.device) -> int | None:
    """Free memory on the device (MemAvailable for the CPU), or None where it cannot be read."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type == "cpu":
        try:
            with open("/proc/meminfo") as meminfo:
                for line in meminfo:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
    return None


def check_training_fits(cfg: TransformerConfig, batch_tokens: int, device: torch.device, precision: str) -> None:
    free = free_memory_bytes(device)
    need = training_memory_bytes(cfg, batch_tokens, precision)
    if free is not None and need > HEADROOM * free:
        raise TrainingError(
            f"This run needs about {need / 1e9:.1f} GB but {device.type} has {free / 1e9:.1f} GB free: lower batch "
            f"tokens (now {batch_tokens}), the maximum length ({cfg.max_len}), d_model ({cfg.d_model}), the number "
            f"of layers or the vocabulary size ({cfg.tgt_vocab_size}).")


@functools.cache
def keep_allocator_compact() -> bool:
    """Bound what grows with every new batch shape; True when glibc's settings took (False off glibc: macOS, musl).

    glibc raises its mmap threshold to the size of each large block freed (up to 32 MB), so after the first steps
    the activations are carved out of the heap; batches of ever-different shapes then leave holes that later steps
    do not quite fit, and the heap keeps the pages. Measured on the small preset with Multi30k: resident memory grew
    ~40 MB a step (1.1 GB after 5 steps, 1.5 GB after 15, 5.3 GB after 30 minutes), and returning the free pages
    every 10 steps (malloc_trim) did not hold it. With the threshold held at 128 KB every large tensor gets a mapping
    of its own, handed back when it is freed: 0.98 GB peak after 20 steps against 1.42 GB. The price is page faults
    (a step's system CPU time rose from ~0.1 to ~0.8 s; its wall time moved within noise on 2 threads, see
    docs/BENCHMARKS.md, Memory). oneDNN's kernel cache is bounded too; it reads its setting when it first runs, so
    this is called before the first matmul."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_KERNELS_KEPT)
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_ARENA_MAX, ARENA_MAX))
