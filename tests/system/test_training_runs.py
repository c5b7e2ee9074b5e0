"""Whole training runs that take seconds each: a stop honoured within one step and a resume that continues exactly,
random streams of a run's own, BPE dropout re-segmenting each epoch, and a minutes budget that binds."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch
from helpers import DATA, events_of, tiny_cfg

from playground.data.batching import encode_pairs
from playground.packages.store import load_package
from playground.training import events as ev
from playground.training.estimate import estimate_training
from playground.training.events import Step
from playground.training.inputs import TrainData
from playground.training.presets import preset_config
from playground.training.schedule import VALIDATIONS_PER_RUN
from playground.training.trainer import Trainer


@pytest.mark.slow
def test_stop_is_honoured_within_one_step_and_resume_continues_exactly(tmp_path):
    cfg = tiny_cfg(dropout=0.1, attention_dropout=0.1)  # the resumed run must also continue the dropout stream
    straight = events_of(Trainer(cfg, DATA, tmp_path / "straight"))
    straight_steps = [e for e in straight if isinstance(e, Step)]

    stopped = events_of(Trainer(cfg, DATA, tmp_path / "run"), stop_after=4)
    assert [e.step for e in stopped if isinstance(e, Step)][-1] == 4
    assert stopped[-1].reason == "stopped by the user"
    assert load_package(tmp_path / "run").training["steps"] == 4

    resumed = events_of(Trainer(cfg, DATA, tmp_path / "run", resume_from=tmp_path / "run"))
    resumed_steps = [e for e in resumed if isinstance(e, Step)]
    assert resumed_steps[0].step == 5
    assert resumed_steps[0].lr == pytest.approx(straight_steps[4].lr)
    # same batches, same optimizer moments: the resumed run continues the uninterrupted one
    assert [e.loss for e in resumed_steps] == pytest.approx([e.loss for e in straight_steps[4:]], rel=1e-4)


@pytest.mark.slow
def test_a_run_draws_only_from_its_own_random_streams(tmp_path):
    """The rest of the process (the web app's other sessions) seeds and draws from torch's global RNG whenever it
    likes: a run's initial weights and dropout masks (embeddings, sublayers, attention weights) must not change."""
    cfg = tiny_cfg(max_steps=6, dropout=0.3, attention_dropout=0.3)

    def losses(name: str, seed: int = cfg.seed, disturb: bool = False) -> list[float]:
        torch.manual_seed(len(name))  # whatever state the global RNG is in when the run starts
        curve = []
        for event in Trainer(dataclasses.replace(cfg, seed=seed), DATA, tmp_path / name).run():
            if isinstance(event, Step):
                curve.append(event.loss)
                if disturb:  # a neighbour between two steps
                    torch.manual_seed(event.step)
                    torch.rand(1000)
        return curve

    quiet = losses("quiet")
    assert losses("disturbed", disturb=True) == quiet
    assert losses("other-seed", seed=cfg.seed + 1) != quiet  # the seed, and nothing else, decides


@pytest.mark.slow
def test_bpe_dropout_resegments_each_epoch_reproducibly_and_leaves_validation_plain(tmp_path):
    words = [(" ".join(w * 2 for w in src.split()), " ".join(w * 3 for w in tgt.split())) for src, tgt in DATA.train]
    data = TrainData(words, words[:8], "seq", "rev", "doubled words")
    cfg = tiny_cfg(tokenizer="bpe", vocab_size=60, bpe_dropout=0.3, max_steps=30, eval_every=15)
    trainer = Trainer(cfg, data, tmp_path / "run")
    plain = list(encode_pairs(trainer.tokenizer, data.train, cfg.max_sentence_tokens))
    epoch0 = list(trainer.train_set)
    assert epoch0 != plain and sum(len(s) for s, _ in epoch0) > sum(len(s) for s, _ in plain)
    assert list(trainer.val_set) == list(encode_pairs(trainer.tokenizer, data.val, cfg.max_sentence_tokens))
    assert list(trainer.encode_train(0)) == epoch0 and list(trainer.encode_train(1)) != epoch0  # seeded by epoch

    straight = [e for e in events_of(trainer) if isinstance(e, Step)]
    assert straight[-1].epoch > 1  # the run crossed epochs, so it re-segmented
    again = [e for e in events_of(Trainer(cfg, data, tmp_path / "again")) if isinstance(e, Step)]
    assert [e.loss for e in again] == [e.loss for e in straight]  # same seed, same segmentations, same run

    stopped = events_of(Trainer(cfg, data, tmp_path / "resumed"), stop_after=20)
    assert stopped[-1].reason == "stopped by the user"
    resumed = [e for e in events_of(Trainer(cfg, data, tmp_path / "resumed", resume_from=tmp_path / "resumed"))
               if isinstance(e, Step)]
    assert [e.loss for e in resumed] == pytest.approx([e.loss for e in straight[20:]], rel=1e-4)


SYLLABLES = "ka lo mi ne tu ra se vi do pa ge li mo fa nu be ri so ta ve".split()


def multi30k_like(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Pairs shaped like Multi30k's (8 to 18 words a side, a vocabulary of a few thousand words, Zipf-like use)."""
    rng = random.Random(seed)
    vocab = [["".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(4000)] for _ in range(2)]
    weights = [1 / (rank + 1) for rank in range(4000)]

    def sentence(side: int) -> str:
        return " ".join(rng.choices(vocab[side], weights, k=rng.randint(8, 18)))

    return [(sentence(0), sentence(1)) for _ in range(n)]


@pytest.mark.usefixtures("one_thread")
def test_a_short_minutes_budget_leaves_warmup_and_validates_along_the_way(tmp_path):
    pairs = multi30k_like(3000)
    data = TrainData(pairs[:2850], pairs[2850:], "en", "fr")
    cfg = preset_config("tiny", device="cpu", precision="fp32")
    assert cfg.warmup_steps == 150 and cfg.eval_every is None  # the preset validates "auto"
    timing = estimate_training(cfg, seq_len=15)
    # a budget that fits about 150 steps here, validations included
    cfg.max_minutes = (150 * timing.seconds_per_step + VALIDATIONS_PER_RUN * timing.eval_seconds) / 60
    trainer = Trainer(cfg, data, tmp_path / "run")
    events = list(trainer.run())

    done = events[-1]
    assert isinstance(done, ev.Done) and done.reason == "time budget reached", done
    steps = done.summary["steps"]
    evals = [e.step for e in events if isinstance(e, ev.Eval)]
    lrs = trainer.history.lr
    assert lrs.index(max(lrs)) < 0.4 * steps, (lrs.index(max(lrs)), steps)  # a warmup fitted to the run, not 150
    assert max(lrs) == pytest.approx(cfg.lr, rel=0.15), max(lrs)  # the peak was reached: warmup ended ...
    assert lrs[-1] < max(lrs)  # ... and the rate decays after it
    assert len([s for s in evals if s < steps]) >= 3, (evals, steps)  # validations during the run, not only at the end
    assert done.summary["first_plan"] and steps > 20
