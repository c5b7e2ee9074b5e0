"""Scaling out: `train` under torchrun (2 CPU processes, gloo) against one process on the same global batches,
gradient accumulation against one batch of the combined size, and TensorBoard logging."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA, TINY_MODEL_FLAGS, free_port, reverse_pairs, tiny_cfg

from playground.cli.main import main
from playground.data.load import load_parallel
from playground.errors import TrainingError
from playground.training.events import Step
from playground.packages.store import load_package
from playground.training.config import TrainConfig
from playground.training.inputs import TrainData
from playground.training.trainer import Trainer

REPO = Path(__file__).resolve().parent.parent
# Adam's first steps move each weight by about ±lr wherever |gradient| >> eps, so a gradient that is zero in theory
# but rounding noise in practice (the key biases, which softmax ignores) could flip sign between two summation
# orders; eps = 1e-6 keeps such noise from moving weights and leaves every real gradient's update as it is.
TINY_FLAGS = [*TINY_MODEL_FLAGS, "--dropout", "0", "--max-len", "16", "--batch-tokens", "256",
              "--schedule", "inverse_sqrt", "--lr", "3e-3", "--warmup-steps", "10", "--eps", "1e-6",
              "--eval-every", "100", "--eval-sentences", "4", "--precision", "fp32", "--device", "cpu"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def data_files(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("data")
    for name, pairs in (("train.tsv", reverse_pairs(80)), ("val.tsv", reverse_pairs(10, seed=1))):
        (folder / name).write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return folder / "train.tsv", folder / "val.tsv"



def torchrun_train(*args: str) -> subprocess.CompletedProcess:
    """`python -m playground train ... --json` in 2 processes started by torchrun, on the CPU."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(free_port()), "-m", "playground", "train", *TINY_FLAGS, "--json", *args]
    done = subprocess.run(command, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def reference_weights(package_config: dict, data_files: tuple[Path, Path], steps: list[int], out: Path) -> dict:
    """One process, accumulate 2: the same global batches as 2 ranks x 1 batch. Weights after each of `steps`."""
    cfg = TrainConfig.from_dict({**package_config, "accumulate": 2, "max_steps": max(steps)})
    train, val = (load_parallel(path, max_len=cfg.max_len).pairs for path in data_files)  # as the CLI reads them
    trainer = Trainer(cfg, TrainData(train, val), out)
    weights = {}
    for event in trainer.run():
        if isinstance(event, Step) and event.step in steps:
            weights[event.step] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    return weights


def assert_same_weights(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(actual[name], tensor, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.slow
def test_torchrun_two_ranks_match_one_process_and_resume(tmp_path, data_files):
    train_tsv, val_tsv = data_files
    run = tmp_path / "run"
    first = torchrun_train("--data", str(train_tsv), "--val", str(val_tsv), "--out", str(run), "--max-steps", "3")

    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert len(first.stdout.strip().splitlines()) == 1  # rank 0 alone prints the result
    assert summary["steps"] == 3 and summary["world_size"] == 2 and summary["batches_per_step"] == 2
    assert "rank 1 of 2 finished: 3 steps" in first.stderr
    assert first.stderr.count("parameters on cpu") == 1  # the start line: rank 0 alone reports events
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # one package, no leftovers of a second writer

    package = load_package(run)
    expected = reference_weights(package.training["config"], data_files, [3, 5], tmp_path / "reference")
    assert_same_weights(package.model.state_dict(), expected[3])

    resumed = torchrun_train("--data", str(train_tsv), "--val", str(val_tsv), "--out", str(run), "--resume",
                             str(run), "--max-steps", "2")  # 2 more: budgets on resume add to what was done
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["steps"] == 5
    assert "rank 1 of 2 finished: 5 steps" in resumed.stderr
    package = load_package(run)
    assert package.training["history"]["steps"] == [1, 2, 3, 4, 5]
    assert_same_weights(package.model.state_dict(), expected[5])  # as if never interrupted


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
    assert {"train/lr", "train/grad_norm", "train/tokens_per_s", "val/bleu", "val/val_loss"} <= set(events.Tags()["scalars"])


def test_tensorboard_missing_says_how_to_install_it(tmp_path, data_files, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # what an absent package looks like
    train_tsv, _ = data_files
    assert main(["train", "--data", str(train_tsv), "--out", str(tmp_path / "run"), "--tensorboard",
                 str(tmp_path / "logs")]) == 2
    assert "pip install tensorboard" in capsys.readouterr().err
