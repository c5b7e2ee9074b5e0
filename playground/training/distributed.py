"""One training run across several processes, as started by torchrun: which rank this process is, the process
group, the DDP wrapper and the few collectives the trainer needs.

Outside torchrun (or with a single process) every helper is a no-op, so the trainer has one code path.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from playground.errors import TrainingError
from playground.runtime.device import resolve_device

# Rank 0 validates and saves while the other ranks wait in the next collective; a long validation must not
# trip the process group's timeout (10 minutes by default for NCCL).
COLLECTIVE_TIMEOUT = timedelta(minutes=60)


@dataclass(frozen=True)
class Ranks:
    """Where this process stands in the run: rank 0 of 1 when it runs alone."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0  # the rank among the processes of this machine: which GPU it drives

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


SINGLE = Ranks()


def torchrun_ranks(environ: dict[str, str] | None = None) -> Ranks:
    """The ranks torchrun gave this process (it sets RANK, WORLD_SIZE and LOCAL_RANK), or SINGLE without torchrun."""
    env = os.environ if environ is None else environ
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return SINGLE
    return Ranks(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)))


def rank_device(device: torch.device, ranks: Ranks) -> torch.device:
    """One GPU per process: local rank r drives cuda:r. Other devices are used as they are."""
    if device.type != "cuda" or not ranks.distributed:
        return device
    if ranks.local_rank >= torch.cuda.device_count():
        raise TrainingError(f"torchrun started more processes on this machine than it has GPUs "
                            f"({torch.cuda.device_count()}); set --nproc_per_node to the number of GPUs.")
    return torch.device("cuda", ranks.local_rank)


@contextlib.contextmanager
def process_group(device_choice: str) -> Iterator[Ranks]:
    """Join torchrun's process group for the length of a run: NCCL on CUDA, gloo on the CPU. Yields SINGLE, and
    joins nothing, when this process runs alone. A caller whose run failed on this rank leaves the block by raising
    (the CLI raises SystemExit with its exit code), which skips the ranks' joint teardown."""
    ranks = torchrun_ranks()
    if not ranks.distributed:
        yield ranks
        return
    device = rank_device(resolve_device(device_choice), ranks)
    if device.type == "mps":
        raise TrainingError("Training across processes needs CUDA GPUs or the CPU; Apple MPS has no backend for it.")
    if device.type == "cuda":
        torch.cuda.set_device(device)  # NCCL and broadcast_object_list use the current device
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=COLLECTIVE_TIMEOUT)
    yield ranks
    # Tear down together: rank 0 still validates and saves when the others finish, and a rank that shut its backend
    # down meanwhile (or whose DDP reducer, kept alive by a reference cycle, outlived the group) was seen to abort at
    # exit under gloo, failing the whole torchrun job. After an error the group is left alone: shutting it down while
    # other ranks sit in a collective can hang, and torchrun ends the other ranks anyway.
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def wrap_model(model: torch.nn.Module, device: torch.device, ranks: Ranks) -> torch.nn.Module:
    """The module the training forward goes through: DistributedDataParallel around the model, or the model."""
    if not ranks.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    # the only buffers are fixed sinusoidal tables: no need to send them from rank 0 before every forward
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                   forward_sync_buffers=False)


def agree(value: Any, ranks: Ranks) -> Any:
    """Rank 0's value, on every rank. Decisions such as stopping must be taken together: a rank that goes on
    alone waits forever in the next collective."""
    if not ranks.distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def sum_over_ranks(tensor: torch.Tensor, ranks: Ranks) -> torch.Tensor:
    """The tensor summed over all ranks (in place)."""
    if ranks.distributed:
        dist.all_reduce(tensor)
    return tensor


def check_same_on_all_ranks(fingerprint: str, what: str, ranks: Ranks) -> None:
    """Raise TrainingError, on every rank alike, when some rank's fingerprint differs from rank 0's."""
    if not ranks.distributed:
        return
    fingerprints: list[Any] = [None] * ranks.world_size
    dist.all_gather_object(fingerprints, fingerprint)
    differing = [rank for rank, other in enumerate(fingerprints) if other != fingerprints[0]]
    if differing:
        raise TrainingError(f"Rank(s) {', '.join(map(str, differing))} read different {what} than rank 0: every "
                            "machine of a torchrun job needs the same files and settings.")


def seed_rank(generator: torch.Generator, seed: int, ranks: Ranks, step: int) -> None:
    """Give each rank but 0 a dropout stream of its own, so that dropout masks differ between ranks. Rank 0 keeps
    the run's stream (so it matches a single process, and resumes from the saved state); the others are seeded
    from (seed, rank, step), so that a resumed run is reproducible too."""
    if ranks.rank > 0:
        generator.manual_seed(hash((seed, ranks.rank, step)) % 2**63)
