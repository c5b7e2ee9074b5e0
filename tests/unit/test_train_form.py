"""The Train tab's form read into a TrainConfig: wrong values refused by field with their range, "auto" for a
zero, and what a resume may change."""

from __future__ import annotations

import pytest
from helpers import DATA, tiny_cfg

from playground.errors import TrainingError
from playground.training.checkpoint import resume_config
from playground.training.config import RESUME_SETTINGS
from playground.training.presets import preset_config
from playground.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


def test_adam_betas_outside_0_1_are_refused_with_their_range():
    with pytest.raises(TrainingError, match=r"Adam β1, β2 must be from 0 to below 1, not 5"):
        tiny_cfg(betas=(5, 0.98))
    from playground.training.form import build_config, preset_values

    with pytest.raises(TrainingError, match=r"Adam β1 must be from 0 to below 1, not 5"):
        build_config({**preset_values("tiny"), "beta1": 5.0, "beta2": 0.98})


@pytest.mark.parametrize("field, value, message", [
    ("d_model", "wide", "d_model must be a number, not 'wide'"),
    ("lr", [1e-3], "Learning rate must be a number"),
    ("tie_embeddings", "yes", "Tie embeddings and output layer must be true or false"),
    ("activation", 3, "Activation must be text"),
    ("seed", 2**70, "Seed must be from 0 to 9,223,372,036,854,775,807, not 1,180,591,620,717,411,303,424"),
])
def test_wrong_typed_form_values_name_their_field(field, value, message):
    from playground.training.form import build_config, preset_values

    with pytest.raises(TrainingError, match=message):
        build_config({**preset_values("tiny"), field: value})


def test_the_form_says_auto_with_a_zero():
    from playground.training.form import build_config, preset_values

    values = preset_values("tiny")
    assert values["eval_every"] == 0  # the field reads "Validate every (steps, 0 = auto)"
    assert build_config(values).eval_every is None and build_config({**values, "eval_every": 50}).eval_every == 50


def test_the_web_forms_resume_settings_change_only_budgets_validation_and_the_machine(tmp_path):
    list(Trainer(tiny_cfg(max_steps=2, lr=7e-4), DATA, tmp_path / "run").run())
    form = {**preset_config("tiny").to_dict(), "max_steps": 3, "max_minutes": None, "eval_every": 1}
    cfg = resume_config(tmp_path / "run", {k: form[k] for k in RESUME_SETTINGS})
    assert (cfg.lr, cfg.warmup_steps, cfg.batch_tokens, cfg.model.d_model) == (7e-4, 10, 256, 32)  # not tiny's
    assert cfg.max_steps == 5 and cfg.eval_every == 1


@pytest.mark.parametrize("field, value", [("dropout", 1.5), ("dropout", -0.1), ("attention_dropout", 1.0)])
def test_a_dropout_outside_0_1_is_refused_before_training(field, value, capsys):
    """A probability outside [0, 1) would train on zeroed or rescaled activations (dropout.keep_mask does no check)."""
    from playground.cli.main import main
    from playground.training.form import build_config, preset_values

    label = field.replace("_", " ").capitalize()  # the form names the field and its range
    with pytest.raises(TrainingError, match=rf"{label} must be from 0 to below 1, not {value:g}"):
        build_config({**preset_values("tiny"), field: value})
    flag = "--" + field.replace("_", "-")
    with pytest.raises(SystemExit) as refused:  # argparse refuses the flag, in the words the form says
        main(["train", "--data", "builtin:reverse", "--out", "never-made", "--preset", "tiny", "--max-steps", "1",
              flag, str(value)])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert f"{label} must be from 0 to below 1, not {value:g}" in err and "Traceback" not in err
