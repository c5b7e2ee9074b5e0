"""How many CPU threads PyTorch uses: as many as the container may run at once, not as many as the host has.

A container's CPU share is a cgroup quota (`cpu.max` in cgroup v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us` in v1):
a Space on "CPU basic" may run 2 CPUs' worth of time on a host whose `os.cpu_count()` says 16 or more. PyTorch sizes
its pools from the core count, so each op split its work over more threads than the quota lets run, and the kernel
throttled them all for the rest of each period. `configure_threads` (called once at start-up by the app and the CLI)
sets both of PyTorch's pools to the quota, floored (never below one); OMP_NUM_THREADS, when the operator sets it, wins.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from playground.settings import env_str

CGROUP_ROOT = Path("/sys/fs/cgroup")


def own_cgroup(proc_cgroup: Path = Path("/proc/self/cgroup")) -> str:
    """This process's cgroup v2 path ("0::/a/b" → "/a/b"); "/" where unknown (a container sees its own as "/")."""
    try:
        for line in proc_cgroup.read_text().splitlines():
            if line.startswith("0::"):
                return line[3:] or "/"
    except OSError:
        pass
    return "/"


def v2_quota(folder: Path) -> float | None:
    """CPUs allowed by one cgroup v2 folder's cpu.max ("QUOTA PERIOD", or "max PERIOD": no limit)."""
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def v1_quota(root: Path) -> float | None:
    """CPUs allowed by cgroup v1's CFS quota (-1: no limit); the controller is mounted as cpu or cpu,cpuacct."""
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        try:
            quota = int((root / name / "cpu.cfs_quota_us").read_text())
            period = int((root / name / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return quota / period if quota > 0 and period > 0 else None
    return None


def cpu_quota(root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPUs this process's cgroup may use (e.g. 2.0), the tightest of its own and its parents' limits; None when
    nothing limits it."""
    if (root / "cgroup.controllers").exists():  # cgroup v2
        limits = []
        folder = root / own_cgroup(proc_cgroup).lstrip("/")
        while True:
            limit = v2_quota(folder)
            if limit is not None:
                limits.append(limit)
            if folder == root or root not in folder.parents:
                break
            folder = folder.parent
        return min(limits) if limits else None
    return v1_quota(root)


def available_cpus(root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")) -> int:
    """The CPUs this process may keep busy: the CPUs it may run on, capped by its cgroup quota (floored, at least 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = cpu_quota(root, proc_cgroup)
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota)))
    return max(1, cpus)


def configure_threads(root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")) -> int:
    """Size PyTorch's intra-op and inter-op pools to the CPUs the container may use; returns the intra-op count.
    Call it once, at start-up, before any parallel work (PyTorch refuses to resize its inter-op pool after that)."""
    import torch

    if env_str("OMP_NUM_THREADS"):  # the operator's choice, which PyTorch already follows
        return torch.get_num_threads()
    threads = available_cpus(root, proc_cgroup)
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:  # already started (a second call, or work done before this one): keep what it has
        pass
    return threads
