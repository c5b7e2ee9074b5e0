"""The Train tab's form as settings, made from their declaration (playground.packages.settings): one field per
setting (Adam's betas as two), a preset's values for every field ("not set" as 0), each field's refusal as it is
typed (its range, and what an out-of-range size would cost), and a TrainConfig from the values a person (or an API
caller) sent. Gradio-free: the tab (playground.ui.tabs.train) shows what these say."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from playground.core.model import TransformerConfig
from playground.core.sequences import model_positions
from playground.errors import TrainingError
from playground.packages.settings import SETTINGS, Setting
from playground.training.config import BUDGETS, MODEL_SETTINGS, TrainConfig
from playground.training.cost import check_run_cost, cost_words
from playground.training.finetune import base_settings, finetune_config, longest_sentence
from playground.training.presets import preset_settings


def form_fields() -> dict[str, Setting]:
    """Every setting as a form field, in the declaration's order; Adam's two betas as two fields."""
    out = {}
    for name, s in SETTINGS.items():
        if s.kind is tuple:
            for i in (1, 2):
                out[f"beta{i}"] = replace(s, name=f"beta{i}", kind=float, default=s.default[i - 1],
                                          label=f"Adam β{i}", step=0.01 if i == 1 else 0.001)
        else:
            out[name] = s
    return out


FIELDS = form_fields()
# The fields whose value sizes the model or its tokenizer: out of range, their refusal says what they would cost;
# within range, they are where a form refused for its cost says so.
COUNTED_FIELDS = (*(k for k in MODEL_SETTINGS if SETTINGS[k].kind is int), "vocab_size")
SIZE_FIELDS = (*COUNTED_FIELDS, "max_sentence_tokens", "batch_tokens")


def preset_values(name: str) -> dict:
    """Every form value for a preset: the declared defaults, the preset's settings on top, budgets it lacks off."""
    preset = preset_settings(name)
    values = {name: s.default for name, s in SETTINGS.items()}
    values.update({k: None for k in BUDGETS})
    values.update(preset)
    values["beta1"], values["beta2"] = values.pop("betas")
    return {k: (0 if FIELDS[k].optional and v is None else v) for k, v in values.items()}


def as_settings(values: dict) -> dict:
    """Form values as settings: the two betas joined."""
    v = dict(values)
    if "beta1" in v or "beta2" in v:
        v["betas"] = (v.pop("beta1", SETTINGS["betas"].default[0]), v.pop("beta2", SETTINGS["betas"].default[1]))
    return v


def field_problems(values: dict) -> list[str]:
    return [f"{FIELDS[k].label} {found}" for k, v in values.items() if k in FIELDS and (found := FIELDS[k].problem(v))]


def build_config(values: dict) -> TrainConfig:
    """A TrainConfig from the form (0 = not set); bad settings raise TrainingError naming each field."""
    problems = field_problems(values)
    if problems:
        raise TrainingError("; ".join(problems) + ". Change it above, then start again.")
    return TrainConfig.of(**as_settings(values))


def checked_config(values: dict, base: Path | None = None) -> TrainConfig:
    """build_config (fine-tuning `base`: with the base's model and tokenizer settings, whatever the form says), and
    the run's cost checked before any work (playground.training.cost)."""
    cfg = build_config(values)
    if base is not None:
        cfg = finetune_config(cfg, base)
    check_run_cost(cfg)
    return cfg


def base_values(values: dict, base: Path) -> dict:
    """The form's `values` for a run fine-tuning `base`: its model and tokenizer settings (the form shows them
    locked), the maximum length within its positions."""
    longest = min(values["max_sentence_tokens"], longest_sentence(base))
    return {**values, **base_settings(base), "max_sentence_tokens": longest}


def field_note(name: str, values: dict) -> str:
    """What the field `name` says beside it for the form's `values` ("" when nothing): its own problem, with what
    an out-of-range size would cost; or, for a size within range, the cost the whole form is refused for."""
    found = FIELDS[name].problem(values.get(name))
    if found:
        cost = would_cost(values) if name in COUNTED_FIELDS else ""
        return f"{FIELDS[name].label} {found}" + (f"; {cost}" if cost else "")
    if name not in SIZE_FIELDS or field_problems(values):
        return ""
    try:
        checked_config(values)
    except TrainingError as err:
        return str(err).removeprefix("Invalid training settings: ").rstrip(".")
    return ""


def would_cost(values: dict) -> str:
    """The parameters (and tokenizer memory) of the form's model with its values as typed, ranges ignored; "" when
    the values do not make a model at all."""
    try:
        shape = {k: int(values[k]) if SETTINGS[k].kind is int else values[k] for k in MODEL_SETTINGS}
        vocab = int(values["vocab_size"])
        model = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, joint_vocab=bool(values["joint_vocab"]),
                                  max_positions=model_positions(int(values["max_sentence_tokens"])), **shape)
        return cost_words(model.num_parameters())
    except (KeyError, TypeError, ValueError, OverflowError, ZeroDivisionError):
        return ""

