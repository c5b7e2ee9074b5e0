"""Will a training run fit in the device's memory? A rough upper estimate, checked before anything is allocated,
so a run that cannot fit is refused with a message that says what to change instead of crashing mid-run. And the
allocator settings that bound what grows with every new batch shape of a CPU run."""

from __future__ import annotations

import ctypes
import functools
import os

import torch

from playground import limits
from playground.core.model import TransformerConfig
from playground.errors import PackageError, TrainingError
from playground.settings import GB

M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
ARENA_MAX = 2  # one per core of the 2-core machines the presets are sized for; threads share them beyond that
# oneDNN (bf16 matmuls on the CPU) keeps the kernels it compiles for each matrix shape, at most this many: about
# 15 a batch shape, ~230 KB each. A bf16 run pads its batches to at most batching.SHAPES_KEPT shapes an epoch, whose
# kernels this holds, so they are compiled once (2.6-8.9 ms each); 64, kept before, recompiled them every step.
# Not more: 1,024 kept took the 30-minute Multi30k run's peak from 1,444 to 1,778 MB while validations still decoded
# in bf16, in shapes of their own (they decode in float32 now: runtime.device.decoding_precision); at 512 the run
# peaked at 1,342 MB.
ONEDNN_KERNELS_KEPT = "512"

# 🤗 tokenizers' BPE trainer reserves tables for the vocabulary it is asked for, before it reads the text: asked for
# 10^9 tokens it allocated 70,866,960,400 bytes at once (WordPiece alike, Unigram 32), and a failed allocation aborts
# the whole process. Measured under `ulimit -v`; at most 72 bytes per asked token.
TOKENIZER_BYTES_PER_TOKEN = 72
BYTES = 4  # fp32 master weights, gradients, Adam moments and logits (the loss is computed in fp32)
LOSS_CHUNK_ROWS = 256  # logit rows the loss turns to float32 at a time on a CPU (8 MB at an 8k vocabulary)
# On a GPU memory is not what binds a small model's step: the host thread launching kernels is, and each chunk is a
# dozen launches. Chunks of 256 rows left the small preset's step at 0.92x the fair baseline's speed on an H200; whole
# (one chunk) it ran at 1.11-1.20x (docs/BENCHMARKS.md, section 10). A chunk there holds up to this many bytes.
GPU_LOSS_CHUNK_BYTES = 256 * 2**20
HEADROOM = 0.9  # leave a tenth of the free memory to the rest of the process


def training_memory_bytes(cfg: TransformerConfig, batch_tokens: int, precision: str = "fp32",
                          device_type: str = "cpu") -> int:
    """Weights + gradients + Adam's two moments, plus the activations kept for the backward pass of one batch
    (batch_tokens source + target tokens): per layer the sublayer inputs/outputs, the feed-forward hidden units and
    the attention weights (for sentences of up to 128 tokens, or max_positions when fewer), the logits over the
    target vocabulary with their softmax and gradient, and the chunk of them the loss holds in float32 on this
    device type (loss_chunk_rows: on a GPU the small preset's whole batch, 79 MB, which the estimate missed: its peak
    on an H200 was 713 MB against 663 estimated; docs/BENCHMARKS.md section 10)."""
    states = 4 * cfg.num_parameters() * BYTES
    half = batch_tokens // 2  # about half of a batch's tokens are on each side
    d, f, h, length = cfg.d_model, cfg.d_ff, cfg.n_heads, min(cfg.max_positions, 128)
    per_token = {"encoder": 8 * d + 2 * f + 2 * h * length, "decoder": 12 * d + 2 * f + 4 * h * length}
    activations = half * (cfg.n_encoder_layers * per_token["encoder"] + cfg.n_decoder_layers * per_token["decoder"])
    activation_bytes = 2 if precision in ("bf16", "fp16") else 4  # autocast keeps matmul outputs in 16 bits
    logits = 3 * half * cfg.tgt_vocab_size
    loss_chunk = min(half, loss_chunk_rows(cfg.tgt_vocab_size, device_type)) * cfg.tgt_vocab_size
    return states + activations * activation_bytes + (logits + loss_chunk + position_table(cfg)) * BYTES


def loss_chunk_rows(vocab_size: int, device_type: str) -> int:
    """Rows of logits the loss (training/loss.py) turns to float32 at a time on a device of this type: LOSS_CHUNK_ROWS
    on a CPU, up to GPU_LOSS_CHUNK_BYTES of them on a GPU."""
    if device_type == "cpu":
        return LOSS_CHUNK_ROWS
    return max(LOSS_CHUNK_ROWS, GPU_LOSS_CHUNK_BYTES // (4 * vocab_size))


def position_table(cfg: TransformerConfig) -> int:
    """Floats of the sinusoidal position table (a buffer, not a parameter), one per encoder and decoder side."""
    return 2 * cfg.max_positions * cfg.d_model if cfg.positional_encoding == "sinusoidal" else 0


def tokenizer_training_bytes(vocab_size: int) -> int:
    """What training a tokenizer of `vocab_size` tokens reserves at once, at most (TOKENIZER_BYTES_PER_TOKEN)."""
    return vocab_size * TOKENIZER_BYTES_PER_TOKEN


def check_tokenizer_fits(vocab_size: int) -> None:
    """Refuse a vocabulary whose tokenizer training would not fit in this process's memory: the trainer's failed
    allocation would end the process, not raise."""
    free, need = limits.available_memory_bytes(), tokenizer_training_bytes(vocab_size)
    if free is not None and need > HEADROOM * free:
        raise TrainingError(f"Training a tokenizer of {vocab_size:,} tokens needs about {need / GB:,.1f} GB, but this "
                            f"server has {free / GB:.1f} GB free: lower the vocabulary size.")


def free_memory_bytes(device: torch.device) -> int | None:
    """Free memory on the device (for the CPU: what this process's cgroup or rlimit leaves, at most the host's
    MemAvailable), or None where it cannot be read."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type == "cpu":
        return limits.available_memory_bytes()
    return None


def check_parameter_limit(params: int, error: type[Exception] = TrainingError) -> None:
    """Refuse a model beyond the operator's limit, before it is built."""
    limit = limits.max_parameters()
    if params > limit:
        raise error(f"This model has {params:,} parameters; this server allows at most {limit:,}. Make it smaller: "
                    "d_model, d_ff, layers or the vocabulary.")


def check_shape_limits(cfg: TransformerConfig, error: type[Exception] = TrainingError) -> None:
    """Refuse heads, layers or positions beyond what this server serves: each request's attention maps, decoding
    caches and tables grow with them (playground.limits), so a model past them could only be refused call by call."""
    # the operator sets each limit (PLAYGROUND_MAX_HEADS, _LAYERS, _POSITIONS); a visitor is told the number only
    shape = {"heads": (cfg.n_heads, limits.max_heads()),
             "encoder layers": (cfg.n_encoder_layers, limits.max_layers()),
             "decoder layers": (cfg.n_decoder_layers, limits.max_layers()),
             "positions (max_positions)": (cfg.max_positions, limits.max_positions())}
    over = [f"{value:,} {name} (at most {allowed:,})" for name, (value, allowed) in shape.items() if value > allowed]
    if over:
        raise error(f"This model has {'; '.join(over)}: more than this server serves.")


def check_model_loads(cfg: TransformerConfig) -> None:
    """A package's model (fp32 weights and position tables, plus the file's bytes while they are copied in) must fit
    in memory, and its shape within what the server serves."""
    params = cfg.num_parameters()
    check_parameter_limit(params, PackageError)
    check_shape_limits(cfg, PackageError)
    free = limits.available_memory_bytes()
    need = (2 * params + position_table(cfg)) * BYTES
    if free is not None and need > HEADROOM * free:
        raise PackageError(f"This model has {params:,} parameters and needs about {need / GB:.1f} GB to load, but "
                           f"this server has {free / GB:.1f} GB free; it was not loaded.")


def check_training_fits(cfg: TransformerConfig, batch_tokens: int, device: torch.device, precision: str) -> None:
    """Refuse a run beyond the parameter limit, the served shapes or the memory free to this process, before anything
    is allocated."""
    check_parameter_limit(cfg.num_parameters())
    check_shape_limits(cfg)
    free = free_memory_bytes(device)
    need = training_memory_bytes(cfg, batch_tokens, precision, device.type)
    if free is not None and need > HEADROOM * free:
        raise TrainingError(
            f"This run needs about {need / GB:.1f} GB but {device.type} has {free / GB:.1f} GB free: lower batch "
            f"tokens (now {batch_tokens}), the positions ({cfg.max_positions}), d_model ({cfg.d_model}), the number of "
            f"layers or the vocabulary size ({cfg.tgt_vocab_size}).")


@functools.cache
def keep_allocator_compact() -> bool:
    """Bound what grows with every new batch shape: oneDNN's kernel cache (it reads its setting when it first runs,
    so this is called before the first matmul) and glibc's number of heaps. True when glibc took its setting (False
    off glibc: macOS, musl).

    What glibc's malloc still does (its heap's holes grow with every new batch shape) only another allocator
    fixes: the entry points preload tcmalloc where it is installed (playground/runtime/allocator.py)."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_KERNELS_KEPT)
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, ARENA_MAX))
