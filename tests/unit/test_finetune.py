"""Fine-tuning (playground.training.finetune): a run that starts from a package's weights keeps its tokenizer and
model, learns from the base's loss (not a new model's), names the base in its card and training record, and goes on
as any run does: resumed (in several calls: tests/app/test_finetune_app.py). The CLI's --init-from and its refusals."""

import json

import pytest
import torch
from helpers import DATA, reverse_pairs, tiny_cfg

from playground.cli.main import main
from playground.core.tokenizer import PAD_ID
from playground.errors import TrainingError
from playground.insight.compare import differing_settings, load_runs
from playground.packages.store import load_package
from playground.training.checkpoint import resume_config
from playground.training.config import TrainConfig
from playground.training.events import Done, Step
from playground.training.finetune import finetune_config
from playground.training.loss import smoothed_loss_sum
from playground.training.presets import FINE_TUNE, PRESETS
from playground.training.schedule import learning_rate
from playground.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")
RUN = dict(max_minutes=None, max_steps=3, eval_every=100, eval_sentences=2, max_sentence_tokens=16, precision="fp32",
           device="cpu")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A trained package to start from: its own tokenizer (words of the reversal data) and a model of 1+1 layers."""
    folder = tmp_path_factory.mktemp("models") / "base"
    events = list(Trainer(tiny_cfg(max_steps=4, eval_every=100, eval_sentences=2), DATA, folder).run())
    assert isinstance(events[-1], Done), events[-1]
    return folder


def fine_tune_cfg(**changes) -> TrainConfig:
    return TrainConfig.of(**{**PRESETS[FINE_TUNE].settings, **RUN, **changes})


def first_batch_loss(model, trainer: Trainer) -> float:
    batch = trainer.global_batch(0)
    with torch.no_grad():
        total = sum(smoothed_loss_sum(model(m.src, m.tgt_in), m.tgt_out, trainer.cfg.label_smoothing, PAD_ID)
                    for m in batch.mine)
    return float(total) / batch.n_tokens


def test_a_fine_tune_starts_from_the_bases_weights_and_keeps_its_tokenizer(base, tmp_path):
    known = load_package(base)
    trainer = Trainer(fine_tune_cfg(), DATA, tmp_path / "tuned", init_from=base)
    for name, tensor in known.model.state_dict().items():  # before the first step: the base's weights exactly
        assert torch.equal(trainer.model.state_dict()[name], tensor), name
    assert trainer.tokenizer.to_json_strings() == known.tokenizer.to_json_strings()
    expected = first_batch_loss(known.model.train(), trainer)
    fresh = Trainer(tiny_cfg(max_steps=1, eval_every=100, eval_sentences=2, lr=1e-4), DATA, tmp_path / "fresh")
    assert first_batch_loss(fresh.model.train(), trainer) != pytest.approx(expected, rel=1e-3)  # told apart

    events = list(trainer.run())
    steps = [e for e in events if isinstance(e, Step)]
    assert steps[0].loss == pytest.approx(expected, rel=1e-5)  # step 1 is measured on the base, before its update
    assert [e.lr for e in steps] == pytest.approx([learning_rate(trainer.cfg, s, 3) for s in (1, 2, 3)])
    assert isinstance(events[-1], Done)

    tuned = load_package(tmp_path / "tuned")
    assert tuned.tokenizer.to_json_strings() == known.tokenizer.to_json_strings()
    assert tuned.model.cfg == known.model.cfg
    assert any(not torch.equal(tuned.model.state_dict()[k], v) for k, v in known.model.state_dict().items())
    assert tuned.training["base"] == {"name": "base"}
    saved = tuned.training["config"]
    assert (saved["lr"], saved["schedule"], saved["warmup_steps"]) == (1e-4, "cosine", 100)
    assert (saved["d_model"], saved["tokenizer"], saved["vocab_size"]) == (32, "word", known.model.cfg.src_vocab_size)
    card = (tmp_path / "tuned" / "README.md").read_text(encoding="utf-8")
    assert "fine-tuned from **base**" in card
    assert differing_settings(load_runs([base, tmp_path / "tuned"]))["base"] == ["new weights", "base"]  # Compare


def test_the_fine_tune_preset_does_not_warm_up_for_thousands_of_steps():
    cfg = fine_tune_cfg()
    assert cfg.warmup_steps <= 100 and cfg.schedule in ("cosine", "constant", "inverse_sqrt")
    peak = max(learning_rate(cfg, s, 1000) for s in range(1, 1001))
    assert learning_rate(cfg, 100, 1000) == pytest.approx(peak) and peak <= 1e-4  # a low peak, reached at step 100
    assert learning_rate(cfg, 1000, 1000) < peak / 100  # and decayed by the end


def test_a_fine_tune_refuses_other_model_settings_and_positions_past_the_bases(base):
    with pytest.raises(TrainingError, match=r"d_model 32 \(asked: 64\).*keeps its base's model and tokenizer"):
        finetune_config(fine_tune_cfg(), base, {"d_model": 64, "n_heads": 2})
    assert finetune_config(fine_tune_cfg(), base, {"d_model": 32.0}).model.d_model == 32  # the same value is fine
    with pytest.raises(TrainingError, match="at most 16 to fine-tune 'base'.*18 positions"):
        finetune_config(fine_tune_cfg(max_sentence_tokens=64), base)


def test_a_fine_tune_resumes_and_keeps_its_base(base, tmp_path):
    trainer = Trainer(fine_tune_cfg(max_steps=6), DATA, tmp_path / "tuned", init_from=base)
    for event in trainer.run():
        if isinstance(event, Step) and event.step == 2:
            trainer.stop()
    events = list(Trainer(resume_config(tmp_path / "tuned", {}), DATA, tmp_path / "tuned",
                          resume_from=tmp_path / "tuned").run())
    assert isinstance(events[-1], Done) and events[-1].summary["steps"] == 6
    assert load_package(tmp_path / "tuned").training["base"] == {"name": "base"}


def test_the_cli_fine_tunes_with_init_from(base, tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in reverse_pairs(40)), encoding="utf-8")
    common = ["train", "--data", str(data), "--out", str(tmp_path / "tuned"), "--init-from", str(base),
              "--max-steps", "2", "--eval-sentences", "2", "--max-sentence-tokens", "16", "--device", "cpu"]
    assert main(common) == 0
    training = json.loads((tmp_path / "tuned" / "training.json").read_text(encoding="utf-8"))
    assert training["base"] == {"name": "base"} and training["config"]["lr"] == PRESETS[FINE_TUNE].settings["lr"]
    assert training["config"]["max_minutes"] is None and training["steps"] == 2  # the budget given replaced 5 minutes
    tokenizer = json.loads((base / "tokenizer.json").read_text(encoding="utf-8"))
    assert json.loads((tmp_path / "tuned" / "tokenizer.json").read_text(encoding="utf-8")) == tokenizer

    assert main([*common, "--overwrite", "--d-model", "64"]) == 2
    assert "d_model 32 (asked: 64)" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one or the other
        main([*common, "--overwrite", "--resume", str(tmp_path / "tuned")])
    assert "--resume: not allowed with argument --init-from" in capsys.readouterr().err


def test_an_imported_marian_model_fine_tunes_and_its_card_names_where_it_came_from(tmp_path):
    from marian_checkpoints import make_marian_checkpoint

    from playground.packages.marian import import_marian

    checkpoint = make_marian_checkpoint(tmp_path / "opus-mt-en-de")
    (checkpoint / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n", encoding="utf-8")
    base = import_marian(checkpoint, tmp_path / "models" / "opus-mt-en-de", origin="Helsinki-NLP/opus-mt-en-de")
    known = load_package(base)
    pairs = [("the small cat sees a house", "die kleine Katze sieht ein Haus"), ("a red car", "ein rotes Auto")] * 8
    data = type(DATA)(pairs, pairs[:2], "en", "de", "tiny en-de")
    trainer = Trainer(fine_tune_cfg(max_steps=2), data, tmp_path / "tuned", init_from=base)
    for name, tensor in known.model.state_dict().items():
        assert torch.equal(trainer.model.state_dict()[name], tensor), name
    expected = first_batch_loss(known.model.eval(), trainer)  # without dropout (Marian's 0.1 is on in the step)
    steps = [e for e in trainer.run() if isinstance(e, Step)]
    assert steps[0].loss == pytest.approx(expected, rel=0.1)  # finite: <bos>'s bias keeps the smoothed loss sane
    tuned = load_package(tmp_path / "tuned")
    assert tuned.model.cfg == known.model.cfg and tuned.model.cfg.activation == "swish"
    assert tuned.tokenizer.to_json_strings() == known.tokenizer.to_json_strings()
    assert tuned.training["base"] == {"name": "opus-mt-en-de", "origin": "Helsinki-NLP/opus-mt-en-de",
                                      "license": "cc-by-4.0"}
    card = (tmp_path / "tuned" / "README.md").read_text(encoding="utf-8")
    assert "fine-tuned from **opus-mt-en-de (from Helsinki-NLP/opus-mt-en-de; license: cc-by-4.0)**" in card
