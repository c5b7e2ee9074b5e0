"""Every training setting is declared once (playground.packages.settings.SETTINGS) and everything else is made from
it: TrainConfig and its nested TransformerConfig, the form's fields and checks, the CLI's flags, the training
record's schema and the resume rules. Each test below fails when a setting is added (or removed) in one place only."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import typing
from pathlib import Path

import pytest

from playground.core.model import TransformerConfig
from playground.errors import TrainingError
from playground.packages.schema import TRAIN_SETTINGS
from playground.packages.settings import ADDED, FIXED, FORM, KEPT, SETTINGS, Setting
from playground.training.checkpoint import resume_config
from playground.training.config import FIXED_ON_RESUME, MODEL_SETTINGS, RESUME_SETTINGS, TrainConfig
from playground.training.form import FIELDS, build_config, field_note, preset_values
from playground.training.presets import PRESETS

# TransformerConfig's fields that are not settings a person types: they come from the tokenizer and
# max_sentence_tokens, or from an imported Marian checkpoint (a run here trains the paper's network)
NOT_TYPED = {"src_vocab_size", "tgt_vocab_size", "joint_vocab", "max_positions", "pad_id", "unk_id", "bos_id", "eos_id",
             "scale_embedding", "final_logits_bias", "never_generate_pad"}
# the train command's options that are not settings of the run
NOT_SETTINGS = {"help", "data", "data_tgt", "val", "val_tgt", "val_fraction", "src_lang", "tgt_lang", "out",
                "overwrite", "preset", "resume", "init_from", "json", "tensorboard"}


def train_options() -> dict[str, argparse.Action]:
    from playground.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in sub.choices["train"]._actions}


def test_the_model_s_settings_are_the_nested_transformer_config_s_and_the_rest_train_config_s():
    model_fields = {f.name: f for f in dataclasses.fields(TransformerConfig)}
    assert set(MODEL_SETTINGS) == set(model_fields) - NOT_TYPED  # a new model field must be declared
    run_fields = [f.name for f in dataclasses.fields(TrainConfig)]
    assert run_fields == ["model", *(name for name in SETTINGS if name not in MODEL_SETTINGS)]
    hints = {**typing.get_type_hints(TransformerConfig), **typing.get_type_hints(TrainConfig)}
    for name, s in SETTINGS.items():
        hint = hints[name]
        optional = type(None) in typing.get_args(hint)
        base = next((a for a in typing.get_args(hint) if a is not type(None)), hint) if optional else hint
        assert (typing.get_origin(base) or base, optional) == (s.kind, s.optional), name
    cfg = TrainConfig(max_steps=1)
    assert list(cfg.settings()) == list(SETTINGS) and cfg.model.d_model == SETTINGS["d_model"].default
    assert not hasattr(cfg, "d_model")  # one place for the model's width: cfg.model


def test_the_schema_the_form_the_cli_and_the_resume_rules_are_made_from_the_declaration():
    assert list(TRAIN_SETTINGS) == list(SETTINGS)
    assert [n for n in FIELDS if n not in ("beta1", "beta2")] == [n for n in SETTINGS if n != "betas"]
    assert set(preset_values("tiny")) == set(FIELDS)
    options = train_options()
    assert set(options) - NOT_SETTINGS == set(SETTINGS)  # no hand-written hyperparameter flag, none missing
    for name, s in SETTINGS.items():
        assert s.flag in options[name].option_strings
        assert tuple(options[name].choices or ()) == s.choices, name
    by_rule = {rule: {n for n, s in SETTINGS.items() if s.resume == rule} for rule in (FIXED, ADDED, FORM, KEPT)}
    assert set(FIXED_ON_RESUME) == by_rule[FIXED] and set(RESUME_SETTINGS) == by_rule[ADDED] | by_rule[FORM]
    assert set(MODEL_SETTINGS) <= set(FIXED_ON_RESUME)  # a resumed run's model is its package's
    assert all(set(p.settings) <= set(SETTINGS) for p in PRESETS.values())


@pytest.mark.parametrize("name", [n for n, s in SETTINGS.items() if s.kind in (int, float)])
def test_each_number_is_refused_outside_its_range_in_the_same_words_everywhere(name):
    s: Setting = SETTINGS[name]
    assert s.problem(s.default) == ""
    below = -1 if s.optional else s.low - 1  # an optional setting's 0 means "not set"
    words = re.escape(f"{s.label} must be")
    with pytest.raises(TrainingError, match=f"^Invalid training settings: {words}"):
        TrainConfig.of(**{"max_steps": 1, name: below})
    form = {**preset_values("tiny"), name: below}
    assert re.match(words, field_note(name, form))
    with pytest.raises(TrainingError, match=f"^{words}"):
        build_config(form)
    parse = train_options()[name].type
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{words}"):
        parse(str(below))


@pytest.mark.parametrize("name, value, words", [
    ("lr", -1, "Learning rate must be above 0, not -1"),
    ("eps", 0, "Adam ε must be above 0, not 0"),
    ("max_sentence_tokens", 999999, "Max tokens per sentence must be from 1 to 4,094, not 999,999"),
    ("seed", -1, "Seed must be from 0 to 9,223,372,036,854,775,807, not -1"),
    ("vocab_size", 10**9, "Vocabulary size must be from 8 to 1,000,000, not 1,000,000,000: training its tokenizer "
                          "alone would reserve about 67.1 GB; that is a model of 128,000,926,208 parameters"),
    ("max_steps", -5, "Max steps must be 0 (not set) or at least 1, not -5"),
])
def test_the_issue_s_values_are_refused_beside_their_field_with_their_cost(name, value, words):
    assert field_note(name, {**preset_values("tiny"), name: value}) == words


def test_a_size_within_range_but_too_costly_together_is_said_beside_the_sizes():
    form = {**preset_values("tiny"), "vocab_size": 1_000_000, "d_model": 4096, "n_heads": 8}
    assert "parameters; this server allows at most" in field_note("vocab_size", form)
    assert field_note("lr", form) == ""  # not a size: said in the parameter line only


def test_a_record_in_the_old_flat_layout_loads_and_resumes(tmp_path):
    """A package saved by 725aca2 (the shipped demo's record lacks settings added since) gives its settings back."""
    demo = Path(__file__).resolve().parents[2] / "models" / "demo-en-de"
    saved = json.loads((demo / "training.json").read_text())["config"]
    cfg = TrainConfig.from_dict(saved)
    assert cfg.model.d_model == saved["d_model"] and cfg.settings()["lr"] == saved["lr"]
    assert cfg.accumulate == SETTINGS["accumulate"].default  # added after the demo was trained
    resumed = resume_config(demo, {"max_steps": 10})
    assert resumed.max_steps == json.loads((demo / "training.json").read_text())["steps"] + 10
    assert resumed.model == cfg.model


def test_early_stopping_auto_picks_a_metric_that_can_judge_the_data():
    from playground.training.evaluation import judging_metric

    numbers = [("twenty-one", "einundzwanzig"), ("seven", "sieben"), ("forty", "vierzig")]
    sentences = [("a b c d e", "e d c b a")] * 3
    assert SETTINGS["early_stop_metric"].default == "auto"
    assert judging_metric("auto", numbers) == "chrf" and judging_metric("auto", sentences) == "bleu"
    assert judging_metric("bleu", numbers) == "bleu"  # a metric chosen is kept
