"""Fine-tuning: a run that starts from a package's weights (its base) instead of new ones. It keeps the base's
model and tokenizer, so their settings are the base's (read from its config.json, nothing loaded); the run's own
settings (the schedule, budgets, validation, the machine) are the person's, usually the "fine-tune" preset's
(playground.training.presets). The Trainer loads the weights (Trainer(init_from=...)); the package it saves records
the base (`base_record`), which its card names and a resumed run keeps."""

from __future__ import annotations

from pathlib import Path

from playground.core.sequences import model_positions, sentence_tokens
from playground.errors import TrainingError
from playground.packages.format import read_config, read_training
from playground.packages.info import MODEL_DEFAULTS
from playground.packages.names import shown_name
from playground.training.checkpoint import refuse_fixed_changes
from playground.training.config import MODEL_SETTINGS, TrainConfig

# What a fine-tuned run takes from its base: the model's settings and its tokenizer's
BASE_SETTINGS = (*MODEL_SETTINGS, "tokenizer", "vocab_size", "joint_vocab")
KEPT_FROM_BASE = "A fine-tuned model keeps its base's model and tokenizer settings"


def base_settings(folder: Path) -> dict:
    """The settings a run fine-tuning the package in `folder` takes from it (BASE_SETTINGS), from its config.json."""
    config = read_config(folder)
    model = {**MODEL_DEFAULTS, **config["model"]}
    return {**{name: model[name] for name in MODEL_SETTINGS}, "tokenizer": config["tokenizer"]["kind"],
            "vocab_size": model["src_vocab_size"], "joint_vocab": config["tokenizer"]["joint"]}


def longest_sentence(folder: Path) -> int:
    """The most tokens a sentence may have for the base's positions (a fine-tune's max_sentence_tokens at most)."""
    return sentence_tokens({**MODEL_DEFAULTS, **read_config(folder)["model"]}["max_positions"])


def finetune_config(cfg: TrainConfig, base: Path, asked: dict | None = None) -> TrainConfig:
    """`cfg` as a run fine-tuning the package in `base`: its model and tokenizer settings the base's. `asked` are
    settings a person gave explicitly (the CLI's flags, the form's fields): one of BASE_SETTINGS that differs from
    the base is refused, as is a maximum length past the base's positions."""
    kept = base_settings(base)
    refuse_fixed_changes(kept, {k: v for k, v in (asked or {}).items() if k in kept and v is not None},
                         shown_name(base.name), KEPT_FROM_BASE, "start from scratch")
    longest = longest_sentence(base)
    if asked is not None and "max_sentence_tokens" not in asked:  # the preset's length, not asked: fitted to the base
        cfg = TrainConfig.of(**{**cfg.settings(), "max_sentence_tokens": min(cfg.max_sentence_tokens, longest)})
    if cfg.max_sentence_tokens > longest:
        raise TrainingError(f"Max tokens per sentence must be at most {longest:,} to fine-tune "
                            f"{shown_name(base.name)} (its model has {model_positions(longest):,} positions), not "
                            f"{cfg.max_sentence_tokens:,}: lower it.")
    try:
        return TrainConfig.of(**{**cfg.settings(), **kept})
    except TrainingError as err:
        raise TrainingError(f"{shown_name(base.name)} cannot be fine-tuned here: {err}") from None


def base_record(folder: Path) -> dict:
    """What the fine-tuned package's training record says of its base (training.json's "base"): the base's name and,
    where the base came from elsewhere (an import) or was itself fine-tuned from such a model, that origin and its
    license (which the fine-tuned weights keep)."""
    config = read_config(folder)
    earlier = (read_training(folder) or {}).get("base") or {}
    imported = config.get("imported") or {}
    kept = {key: imported.get(key) or earlier.get(key) for key in ("origin", "license")}
    return {"name": folder.name, **{key: value for key, value in kept.items() if value}}
