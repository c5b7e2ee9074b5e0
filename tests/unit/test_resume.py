"""One resume policy (playground.training.checkpoint.resume_config) for the CLI and the web app: a resumed run takes its
package's saved settings, the budgets given are added to what it did, and the model's settings cannot change."""

import json

import pytest
from helpers import DATA, TINY_MODEL_FLAGS, reverse_pairs, tiny_cfg

from playground.cli.main import main
from playground.errors import TrainingError
from playground.training.checkpoint import resume_config
from playground.training.config import TrainConfig
from playground.training.events import Step
from playground.training.presets import PRESETS, preset_config
from playground.training.schedule import learning_rate
from playground.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")
RUN_FLAGS = ["--eval-every", "100", "--eval-sentences", "2", "--precision", "fp32", "--device", "cpu"]


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in reverse_pairs(60)), encoding="utf-8")
    return path


def training_record(folder) -> tuple[dict, dict]:
    return (json.loads((folder / "training.json").read_text(encoding="utf-8")),
            json.loads((folder / "config.json").read_text(encoding="utf-8"))["model"])


def test_cli_resume_keeps_the_packages_settings_not_the_default_preset(tmp_path, data_file, capsys):
    out = tmp_path / "run"
    common = ["train", "--data", str(data_file), "--out", str(out)]
    # small's settings (batch 6144, max length 128, warmup 1000) with a tiny model, so that it trains in a second
    assert main([*common, "--preset", "small", "--lr", "0.0007", *TINY_MODEL_FLAGS, *RUN_FLAGS,
                 "--max-steps", "2"]) == 0
    assert main([*common, "--resume", str(out), "--max-steps", "2", "--json"]) == 0  # no settings given

    training, model = training_record(out)
    saved, small = training["config"], PRESETS["small"].settings
    assert saved["lr"] == 0.0007 and saved["warmup_steps"] == small["warmup_steps"] == 1000
    assert saved["batch_tokens"] == small["batch_tokens"]
    assert saved["max_sentence_tokens"] == small["max_sentence_tokens"]
    # training.json describes the model the package holds
    assert (saved["d_model"], saved["n_encoder_layers"], saved["norm_placement"]) == (
        model["d_model"], model["n_encoder_layers"], model["norm_placement"]) == (32, 1, "post")
    assert model["max_positions"] == small["max_sentence_tokens"] + 2
    assert training["steps"] == 4 and training["history"]["steps"] == [1, 2, 3, 4]  # 2 steps added to the 2 done
    resumed_cfg = preset_config("small", lr=0.0007, max_steps=4)
    assert training["history"]["lr"][2:] == pytest.approx([learning_rate(resumed_cfg, s) for s in (3, 4)])


def test_cli_resume_without_any_flag_finishes_a_stopped_run(tmp_path, data_file):
    cfg = preset_config("small", lr=0.0007, max_steps=4, eval_every=100, eval_sentences=2, precision="fp32",
                        device="cpu", d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64,
                        tokenizer="word", vocab_size=50, early_stop_metric="bleu")  # as saved (not "auto")
    trainer = Trainer(cfg, DATA, tmp_path / "run")
    for event in trainer.run():
        if isinstance(event, Step) and event.step == 2:
            trainer.stop()
    assert main(["train", "--data", str(data_file), "--out", str(tmp_path / "run"), "--resume",
                 str(tmp_path / "run")]) == 0
    training, _ = training_record(tmp_path / "run")
    assert training["steps"] == 4 and TrainConfig.from_dict(training["config"]) == cfg  # on to the saved budget


def test_a_finished_run_resumed_without_a_budget_says_to_give_one(tmp_path, data_file, capsys):
    list(Trainer(tiny_cfg(max_steps=2), DATA, tmp_path / "run").run())
    with pytest.raises(TrainingError, match="already reached its budget"):
        resume_config(tmp_path / "run", {})
    assert main(["train", "--data", str(data_file), "--out", str(tmp_path / "run"), "--resume",
                 str(tmp_path / "run")]) == 2
    assert "give a budget to add" in capsys.readouterr().err


def test_changing_the_model_on_resume_is_refused_naming_the_settings(tmp_path, data_file, capsys):
    list(Trainer(tiny_cfg(max_steps=2), DATA, tmp_path / "run").run())
    assert main(["train", "--data", str(data_file), "--out", str(tmp_path / "run"), "--resume", str(tmp_path / "run"),
                 "--d-model", "64", "--vocab-size", "50", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "d_model 32 (asked: 64)" in err and "vocab_size" not in err  # an unchanged setting is no conflict
    with pytest.raises(TrainingError, match="n_heads"):  # the Trainer holds to it too, whoever builds the settings
        Trainer(tiny_cfg(n_heads=4), DATA, tmp_path / "other", resume_from=tmp_path / "run")


