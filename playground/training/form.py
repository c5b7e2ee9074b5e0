"""The Train tab's form as settings: a preset's values for every field (betas as two numbers, "not set" as 0), and a
TrainConfig from the values a person (or an API caller) sent, each refusal naming its field and range. Gradio-free:
the tab (playground.ui.tabs.train) shows what these say."""

from __future__ import annotations

import math
from dataclasses import fields

from playground.errors import TrainingError
from playground.training.config import BUDGETS, TrainConfig, optional_settings, setting_types
from playground.training.presets import PRESETS


def preset_values(name: str) -> dict:
    """Every form value for a preset: TrainConfig defaults, the preset's settings on top, budgets it lacks off."""
    if name not in PRESETS:
        raise TrainingError(f"Unknown preset {name!r}: choose one of {', '.join(PRESETS)}.")
    values = {f.name: f.default for f in fields(TrainConfig)}
    values.update({k: None for k in BUDGETS})
    values.update(PRESETS[name].settings)
    beta1, beta2 = values.pop("betas")
    values.update(beta1=beta1, beta2=beta2)
    optional = optional_settings()  # None ("not set") is 0 on the form
    return {k: (0 if k in optional and v is None else v) for k, v in values.items()}


def build_config(values: dict) -> TrainConfig:
    """A TrainConfig from the form (0 = no budget / no patience); bad settings raise TrainingError."""
    v = dict(values)
    missing = [k for k, x in v.items() if x is None or x == ""]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise TrainingError(f"Fill in every setting: {', '.join(missing)} {verb} empty.")
    problems = [f"{label_of(k)} {problem}" for k, x in v.items() if (problem := field_problem(k, x))]
    if problems:
        raise TrainingError("; ".join(problems) + ". Change it above, then start again.")
    v["betas"] = (as_number("beta1", v.pop("beta1"), float), as_number("beta2", v.pop("beta2"), float))
    for name, kind in setting_types().items():
        if name not in v or kind is tuple:
            continue
        if kind in (int, float):
            v[name] = as_number(name, v[name], kind)
        elif kind is bool and not isinstance(v[name], bool):
            raise TrainingError(f"{name} must be true or false, not {v[name]!r}.")
        elif kind is str and not isinstance(v[name], str):
            raise TrainingError(f"{name} must be text, not {v[name]!r}.")
    for k in optional_settings() & set(v):
        v[k] = v[k] if v[k] and v[k] > 0 else None
    cfg = TrainConfig(**v)
    cfg.model_config(cfg.vocab_size, cfg.vocab_size, True)  # d_model / heads and friends, checked now
    return cfg


# The range of each numeric field: (lowest, highest or None, whether the highest is allowed). Said beside the field
# as soon as a value leaves it, and again when Start or Estimate refuses the form; never clamped.
FIELD_RANGES = {
    "n_encoder_layers": (1, 12, True), "n_decoder_layers": (1, 12, True), "d_model": (4, None, True),
    "d_ff": (1, None, True), "dropout": (0, 1, False), "attention_dropout": (0, 1, False), "max_len": (4, None, True),
    "vocab_size": (8, None, True), "bpe_dropout": (0, 1, False), "weight_decay": (0, None, True),
    "warmup_steps": (0, None, True), "label_smoothing": (0, 1, False), "clip_norm": (0, None, True),
    "batch_tokens": (16, None, True), "max_steps": (0, None, True), "max_epochs": (0, None, True),
    "max_minutes": (0, None, True), "eval_every": (0, None, True), "eval_sentences": (1, None, True),
    "patience": (0, None, True), "accumulate": (1, None, True), "average_last": (0, 20, True),
}


LABELS = {"d_model": "d_model", "n_encoder_layers": "Encoder layers", "n_decoder_layers": "Decoder layers",
          "d_ff": "Feed-forward size", "max_len": "Max tokens per sentence", "eval_every": "Validate every",
          "bpe_dropout": "BPE-dropout",
          "eval_sentences": "Sentences decoded per validation", "average_last": "Average last"}


def label_of(name: str) -> str:
    return LABELS.get(name, name.replace("_", " ").capitalize())


def range_text(name: str) -> str:
    low, high, high_allowed = FIELD_RANGES[name]
    if high is None:
        return f"at least {low:g}"
    return f"from {low:g} to {high:g}" if high_allowed else f"from {low:g} to below {high:g}"


def field_problem(name: str, value: object) -> str:
    """What is wrong with one field's value ("" when nothing): not a number, or outside its FIELD_RANGES range."""
    if name not in FIELD_RANGES or value is None or value == "":
        return ""
    try:
        number = float(value)
        if not math.isfinite(number) or isinstance(value, bool):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        return f"must be a number, not {value!r}"
    low, high, high_allowed = FIELD_RANGES[name]
    if number < low or (high is not None and (number > high or (number == high and not high_allowed))):
        return f"must be {range_text(name)}, not {value:g}"
    return ""


def as_number(name: str, value: object, kind: type) -> int | float:
    """A form (or API) value as a finite int or float; TrainingError naming the field otherwise."""
    try:
        number = float(value)
        if not math.isfinite(number) or isinstance(value, bool):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise TrainingError(f"{name} must be a number, not {value!r}.") from None
    return int(round(number)) if kind is int else number
