"""Named starting points for training, from a two-minute CPU run to the paper's base model, and fine-tuning a model."""

from __future__ import annotations

from dataclasses import dataclass

from playground.errors import TrainingError
from playground.packages.names import shown_name
from playground.training.config import TrainConfig

FINE_TUNE = "fine-tune"  # the preset of a run that starts from a model (playground.training.finetune)


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
             vocab_size=8000, max_sentence_tokens=128, batch_tokens=4096, schedule="cosine", lr=1.4e-3,
             warmup_steps=1000, label_smoothing=0.1, max_minutes=30.0, eval_sentences=300),
    ),
    "base": Preset(
        "base",
        "The paper's base model (65M parameters, 6+6 layers, d_model 512, 37k joint BPE): for a GPU.",
        dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1,
             vocab_size=37000, max_sentence_tokens=256, batch_tokens=25000, schedule="noam", lr=1.0, warmup_steps=4000,
             label_smoothing=0.1, max_steps=100_000, eval_every=2000, eval_sentences=500),
    ),
    FINE_TUNE: Preset(
        FINE_TUNE,
        "Continue a model's training on your data (choose it in Start from): its model and tokenizer stay as they "
        "are. A short warmup to a low learning rate that decays to zero, so it adapts without forgetting what it "
        "knew; five minutes.",
        dict(schedule="cosine", lr=1e-4, warmup_steps=100, label_smoothing=0.1, max_sentence_tokens=128,
             batch_tokens=2048, max_minutes=5.0, eval_sentences=100),
    ),
}


def preset_settings(name: str) -> dict:
    """The preset's settings; an unknown name is refused with the ones there are."""
    if name not in PRESETS:
        raise TrainingError(f"Unknown preset {shown_name(name)}: choose one of {', '.join(PRESETS)}.")
    return PRESETS[name].settings


def preset_config(name: str, **overrides) -> TrainConfig:
    """The preset's TrainConfig with `overrides` (None values are ignored) applied on top."""
    settings = {**preset_settings(name), **{k: v for k, v in overrides.items() if v is not None}}
    return TrainConfig.of(**settings)
