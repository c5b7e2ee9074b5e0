"""PyTorch's thread count follows the container's CPU quota (playground/runtime/threads.py), read from fake cgroup files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from playground.runtime.threads import available_cpus, cpu_quota

HOST_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def v2_tree(tmp_path: Path, limits: dict[str, str], own: str = "/") -> tuple[Path, Path]:
    """A cgroup v2 hierarchy: {"": root's cpu.max, "a": a/cpu.max, …} and the /proc/self/cgroup naming `own`."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for folder, value in limits.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "cpu.max").write_text(value + "\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(f"0::{own}\n")
    return root, proc


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


@pytest.mark.parametrize("quota, expected", [("100000 100000", 1), ("max 100000", HOST_CPUS)])
def test_torch_pools_follow_the_quota_at_start_up(tmp_path, quota, expected):
    """In a fresh interpreter, as at the app's and the CLI's start: both of PyTorch's pools get the quota's count."""
    root, proc = v2_tree(tmp_path, {"": quota})
    code = ("import torch; from pathlib import Path; from playground.runtime.threads import configure_threads; "
            f"configure_threads(Path({str(root)!r}), Path({str(proc)!r})); "
            "print(torch.get_num_threads(), torch.get_num_interop_threads())")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         cwd=Path(__file__).resolve().parent.parent, timeout=120).stdout.split()
    assert out == [str(expected), str(expected)]


def test_the_operators_omp_num_threads_wins(tmp_path):
    root, proc = v2_tree(tmp_path, {"": "max 100000"})  # the quota alone would give every CPU
    code = ("import torch; from pathlib import Path; from playground.runtime.threads import configure_threads; "
            f"print(configure_threads(Path({str(root)!r}), Path({str(proc)!r})), torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=Path(__file__).resolve().parent.parent,
                         timeout=120).stdout.split()
    assert out == ["1", "1"]
