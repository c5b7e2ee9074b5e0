"""What a run will cost, checked before any work: the memory its tokenizer's training reserves, its parameters, the
shapes this server serves and, once the device is known, the memory of training. The Train tab checks it as the
settings are typed and when a run starts; the Trainer checks it again before it trains the tokenizer, for the CLI and
the API alike. The model is counted with the vocabulary asked for, which the trained tokenizer's rarely exceeds."""

from __future__ import annotations

import torch

from playground.runtime.memory import (
    check_parameter_limit,
    check_shape_limits,
    check_tokenizer_fits,
    check_training_fits,
)
from playground.training.config import TrainConfig


def check_run_cost(cfg: TrainConfig, device: torch.device | None = None, precision: str = "fp32") -> None:
    """Refuse a run whose tokenizer, model or (on `device`) training would not fit; TrainingError says what to
    lower. Without a device only what every device shares is checked (a ZeroGPU run's GPU is not this process's)."""
    check_tokenizer_fits(cfg.vocab_size)
    if device is None:
        check_parameter_limit(cfg.model.num_parameters())
        check_shape_limits(cfg.model)
    else:
        check_training_fits(cfg.model, cfg.batch_tokens, device, precision)


def cost_words(params: int) -> str:
    """A model's size in words, for a refusal that says what a value would cost."""
    return f"that is a model of {params:,} parameters"
