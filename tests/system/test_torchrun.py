"""Scaling out: `train` under torchrun (2 CPU processes, gloo) against one process accumulating the same global
batches."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import REPO, TINY_FLAGS, free_port

from playground.data.load import load_parallel
from playground.packages.store import load_package
from playground.training.config import TrainConfig
from playground.training.events import Step
from playground.training.inputs import TrainData
from playground.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


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
    # read as the CLI reads them
    train, val = (load_parallel(path, max_words=cfg.max_sentence_tokens).pairs for path in data_files)
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


