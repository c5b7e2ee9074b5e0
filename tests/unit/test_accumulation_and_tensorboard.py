"""Gradient accumulation equals one batch of the combined size, a global batch larger than the epoch is refused,
and TensorBoard logs the event stream (or says how to install it)."""

import dataclasses
import sys

import pytest
import torch
from helpers import DATA, TINY_FLAGS, tiny_cfg

from playground.cli.main import main
from playground.errors import TrainingError
from playground.training.events import Step
from playground.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


def test_accumulating_4_batches_equals_one_batch_of_4_times_the_size(tmp_path):
    cfg = tiny_cfg(max_steps=1, eps=1e-6)  # eps: see TINY_FLAGS
    accumulated = Trainer(dataclasses.replace(cfg, accumulate=4), DATA, tmp_path / "accumulated")
    combined = Trainer(cfg, DATA, tmp_path / "combined")
    # the same pairs in one batch: batch_tokens only shapes make_batches, so a hand-made batch may exceed it
    combined.batches = [[pair for batch in accumulated.batches[:4] for pair in batch]]
    steps = [[e for e in trainer.run() if isinstance(e, Step)] for trainer in (accumulated, combined)]

    assert [e.step for e in steps[0]] == [1]  # events count optimizer steps
    assert steps[0][0].loss == pytest.approx(steps[1][0].loss, rel=1e-5)
    for (name, p), q in zip(accumulated.model.named_parameters(), combined.model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-7, msg=name)  # the last step's gradient
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_a_global_batch_larger_than_the_epoch_is_refused(tmp_path):
    with pytest.raises(TrainingError, match="accumulate 1000"):
        Trainer(tiny_cfg(accumulate=1000), DATA, tmp_path / "run")


def test_tensorboard_logs_the_event_stream(tmp_path, data_files):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train_tsv, val_tsv = data_files
    logs = tmp_path / "logs"
    assert main(["train", *TINY_FLAGS, "--data", str(train_tsv), "--val", str(val_tsv), "--out",
                 str(tmp_path / "run"), "--max-steps", "2", "--tensorboard", str(logs), "--json"]) == 0
    events = EventAccumulator(str(logs))
    events.Reload()
    assert [s.step for s in events.Scalars("train/loss")] == [1, 2]
    scalars = set(events.Tags()["scalars"])
    assert {"train/lr", "train/grad_norm", "train/tokens_per_s", "val/bleu", "val/val_loss"} <= scalars


def test_tensorboard_missing_says_how_to_install_it(tmp_path, data_files, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # what an absent package looks like
    train_tsv, _ = data_files
    assert main(["train", "--data", str(train_tsv), "--out", str(tmp_path / "run"), "--tensorboard",
                 str(tmp_path / "logs")]) == 2
    assert "pip install tensorboard" in capsys.readouterr().err
