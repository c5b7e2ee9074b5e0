"""Named starting points for training, from a two-minute CPU run to the paper's base model."""

from __future__ import annotations

from dataclasses import dataclass

from playground.errors import TrainingError
from playground.training.config import TrainConfig


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    settings: dict


PRESETS = {
    "tiny": Preset(
        "tiny",
        "About 1M parameters: learns a built-in dataset in under two minutes on a laptop CPU. Pre-LN, which "
        "tolerates the high learning rate that makes it this quick; no dropout, which would slow it down.",
        dict(d_model=128, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=512, dropout=0.0,
             norm_placement="pre", vocab_size=3000, max_sentence_tokens=64, batch_tokens=3072, schedule="cosine",
             lr=5e-3, warmup_steps=150, label_smoothing=0.1, max_minutes=1.5, eval_sentences=200),
    ),
    "small": Preset(
        "small",
        "About 10M parameters (3+3 layers, d_model 256, 8k BPE): right for Multi30k-sized data (~30k pairs). "
        "Dropout 0.3 for data this small, and a learning rate that decays to zero at the end of its minutes.",
        dict(d_model=256, n_heads=8, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, dropout=0.3,
             vocab_size=8000, max_sentence_tokens=128, batch_tokens=4096, schedule="cosine", lr=1e-3,
             warmup_steps=1000, label_smoothing=0.1, max_minutes=30.0, eval_sentences=300),
    ),
    "base": Preset(
        "base",
        "The paper's base model (65M parameters, 6+6 layers, d_model 512, 37k joint BPE): for a GPU.",
        dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1,
             vocab_size=37000, max_sentence_tokens=256, batch_tokens=25000, schedule="noam", lr=1.0, warmup_steps=4000,
             label_smoothing=0.1, max_steps=100_000, eval_every=2000, eval_sentences=500),
    ),
}


def preset_config(name: str, **overrides) -> TrainConfig:
    """The preset's TrainConfig with `overrides` (None values are ignored) applied on top."""
    if name not in PRESETS:
        raise TrainingError(f"Unknown preset {name!r}: choose one of {', '.join(PRESETS)}.")
    settings = {**PRESETS[name].settings, **{k: v for k, v in overrides.items() if v is not None}}
    return TrainConfig.of(**settings)
