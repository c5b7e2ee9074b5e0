"""Torch's thread pools in a fresh interpreter: they follow the CPU quota at start-up, unless the operator sets
OMP_NUM_THREADS."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import HOST_CPUS, REPO, v2_tree


@pytest.mark.parametrize("quota, expected", [("100000 100000", 1), ("max 100000", HOST_CPUS)])
def test_torch_pools_follow_the_quota_at_start_up(tmp_path, quota, expected):
    """In a fresh interpreter, as at the app's and the CLI's start: both of PyTorch's pools get the quota's count."""
    root, proc = v2_tree(tmp_path, {"": quota})
    code = ("import torch; from pathlib import Path; from playground.runtime.threads import configure_threads; "
            f"configure_threads(Path({str(root)!r}), Path({str(proc)!r})); "
            "print(torch.get_num_threads(), torch.get_num_interop_threads())")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         cwd=REPO, timeout=120).stdout.split()
    assert out == [str(expected), str(expected)]


def test_the_operators_omp_num_threads_wins(tmp_path):
    root, proc = v2_tree(tmp_path, {"": "max 100000"})  # the quota alone would give every CPU
    code = ("import torch; from pathlib import Path; from playground.runtime.threads import configure_threads; "
            f"print(configure_threads(Path({str(root)!r}), Path({str(proc)!r})), torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=REPO,
                         timeout=120).stdout.split()
    assert out == ["1", "1"]
