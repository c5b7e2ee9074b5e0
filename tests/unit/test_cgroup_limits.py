"""The container's limits, read from fake cgroup files: PyTorch's thread count follows the CPU quota
(playground/runtime/threads.py), and the memory limit comes from the cgroup, then the host."""

from __future__ import annotations

import time

import pytest
import torch
from helpers import HOST_CPUS, v2_tree

from playground import limits
from playground.errors import TrainingError
from playground.runtime.threads import available_cpus, cpu_quota


def test_cgroup_v2_quota(tmp_path):
    root, proc = v2_tree(tmp_path, {"": "150000 100000"})
    assert cpu_quota(root, proc) == 1.5
    assert available_cpus(root, proc) == min(HOST_CPUS, 1)  # floored: 1.5 CPUs' time keeps one thread busy


def test_cgroup_v2_no_limit_is_the_host(tmp_path):
    root, proc = v2_tree(tmp_path, {"": "max 100000"})
    assert cpu_quota(root, proc) is None and available_cpus(root, proc) == HOST_CPUS


def test_cgroup_v2_tightest_of_the_process_and_its_parents(tmp_path):
    root, proc = v2_tree(tmp_path, {"": "max 100000", "space": "100000 100000", "space/app": "max 100000"},
                         own="/space/app")
    assert cpu_quota(root, proc) == 1.0


def test_cgroup_v1_cfs_quota(tmp_path):
    root = tmp_path / "cgroup"
    (root / "cpu,cpuacct").mkdir(parents=True)
    (root / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("100000\n")
    (root / "cpu,cpuacct" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_quota(root) == 1.0 and available_cpus(root) == 1
    (root / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(root) is None


def test_no_cgroup_files_means_no_limit(tmp_path):
    assert cpu_quota(tmp_path) is None and available_cpus(tmp_path) == HOST_CPUS


def test_the_memory_limit_comes_from_the_cgroup_then_the_host(monkeypatch):
    files = {"/sys/fs/cgroup/memory.max": 6 * 1024**3, "/sys/fs/cgroup/memory.current": 1024**3}
    monkeypatch.setattr(limits, "_read_number", files.get)
    monkeypatch.setattr(limits, "_host_available", lambda: 20 * 1024**3)
    assert limits.memory_limits()["cgroup"] == (6 * 1024**3, 1024**3)
    assert limits.available_memory_bytes() <= 5 * 1024**3 and limits.memory_limit_bytes() <= 6 * 1024**3
    v1 = {"/sys/fs/cgroup/memory/memory.limit_in_bytes": 4 * 1024**3,
          "/sys/fs/cgroup/memory/memory.usage_in_bytes": 3 * 1024**3}
    monkeypatch.setattr(limits, "_read_number", v1.get)
    assert limits.available_memory_bytes() <= 1024**3  # cgroup v1 (what this machine has)
    monkeypatch.setattr(limits, "_read_number", {"/sys/fs/cgroup/memory/memory.limit_in_bytes": 2**63 - 4096}.get)
    assert "cgroup" not in limits.memory_limits()  # v1's "unlimited" is the host's memory
    monkeypatch.setattr(limits, "_read_number", files.get)

    # /train and /estimate: the run the issue saw accepted (11.8 GB under a 6 GB limit) is refused, with the numbers
    from playground.runtime.memory import check_training_fits
    from playground.training.config import TrainConfig
    from playground.training.estimate import estimate_training

    cfg = TrainConfig.of(d_model=1536, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, vocab_size=8000,
                         max_steps=10, device="cpu", precision="fp32")
    with pytest.raises(TrainingError, match=r"needs about \d+\.\d GB but cpu has 5\.0 GB free"):
        check_training_fits(cfg.model_config(8000, 8000, True), cfg.batch_tokens, torch.device("cpu"), "fp32")
    start = time.perf_counter()
    with pytest.raises(TrainingError, match="GB free"):
        estimate_training(cfg)  # refused before the model is built, let alone stepped
    assert time.perf_counter() - start < 3
    with pytest.raises(TrainingError, match="this server allows at most 300,000,000"):
        estimate_training(TrainConfig.of(d_model=65536, n_heads=8, max_steps=10, device="cpu"))
