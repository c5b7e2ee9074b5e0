"""A training run killed hard (SIGKILL) in the middle leaves a package that loads and resumes."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, TINY_MODEL_FLAGS

from playground.packages.store import list_packages, load_package
from playground.packages.sweep import sweep_leftovers


def write_pairs(path: Path, n: int = 60) -> Path:
    rng = random.Random(0)
    words = "a b c d e f g h".split()
    lines = ["src\ttgt"]
    for _ in range(n):
        seq = [rng.choice(words) for _ in range(rng.randint(2, 6))]
        lines.append(" ".join(seq) + "\t" + " ".join(reversed(seq)))
    path.write_text("\n".join(lines) + "\n")
    return path


def train_command(data: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "playground", "train", "--data", str(data), "--out", str(out), "--preset", "tiny",
            *TINY_MODEL_FLAGS, "--batch-tokens", "256", "--max-sentence-tokens", "16",
            "--eval-every", "1", "--eval-sentences", "2", "--precision", "fp32", "--device", "cpu", *extra]


@pytest.mark.slow
def test_training_killed_hard_leaves_a_package_that_loads_and_resumes(tmp_path):
    data = write_pairs(tmp_path / "pairs.tsv")
    out = tmp_path / "models" / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    rng = random.Random(1)
    for attempt in range(3):  # saving after every step: the kill lands mid-save some of the time
        extra = ["--resume", str(out)] if attempt else []
        proc = subprocess.Popen(train_command(data, out, "--max-steps", "100000", *extra), cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not (out / "config.json").exists() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(1.0 + rng.random())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # a kill between a save's two renames leaves .run.old: what the app's start and --resume do first puts it back
        sweep_leftovers(out.parent)
        packages = list_packages(out.parent)
        assert packages == [out], f"attempt {attempt}: {list(out.parent.iterdir())}"
        assert load_package(out).training["steps"] >= 1
    steps_before = load_package(out).training["steps"]
    # --max-steps on --resume: added to the steps done
    result = subprocess.run(train_command(data, out, "--max-steps", "3", "--resume", str(out), "--json"),
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["steps"] == steps_before + 3


@pytest.mark.slow
def test_a_resume_puts_back_a_package_killed_between_the_two_renames_of_its_save(tmp_path):
    data = write_pairs(tmp_path / "pairs.tsv")
    out = tmp_path / "models" / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    first = subprocess.run(train_command(data, out, "--max-steps", "2"), cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    os.replace(out, out.with_name(".run.old"))  # where a SIGKILL between the renames leaves it
    (out.parent / ".other.lock").mkdir()  # not this run's: a resume repairs its own package only
    assert list_packages(out.parent) == []
    result = subprocess.run(train_command(data, out, "--max-steps", "1", "--resume", str(out), "--json"),
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["steps"] == 3
    assert list_packages(out.parent) == [out] and not out.with_name(".run.old").exists()
    assert (out.parent / ".other.lock").is_dir()
