"""Where a run's steps happen: its device, its precision ('auto' on a GPU: bf16 or fp32, whichever steps faster
here on a real batch) and its CPU threads (one, when a step timed so is faster on a busy machine)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from playground.core.model import TransformerConfig
from playground.data.batching import GlobalBatch
from playground.errors import TrainingError
from playground.runtime.device import describe, one_thread_on_cpu, resolve_device, resolve_precision
from playground.runtime.memory import check_training_fits
from playground.training.distributed import Ranks, rank_device
from playground.training.step import Optimization, faster_precision, time_one_step


class RunMachine:
    """The device and precision a run resolved from its settings (its rank's GPU under torchrun), and what timing
    here chose: the CPU threads and, for 'auto' on a GPU, the precision."""

    def __init__(self, device: str, precision: str, ranks: Ranks):
        self.device = rank_device(resolve_device(device), ranks)
        self.asked_precision, self.distributed = precision, ranks.distributed
        self.precision = resolve_precision(precision, self.device)
        self.one_thread = False  # train on one CPU thread: faster here when measured (time_step)
        self.precision_seconds: dict[str, float] = {}  # what choose_precision timed, by precision

    def time_step(self, optimization: Optimization, batch: GlobalBatch) -> float:
        """Seconds of one step here, on the threads the run then trains on (step.time_one_step)."""
        seconds, self.one_thread = time_one_step(optimization, batch, self.device)
        return seconds

    def times_precision(self, model: TransformerConfig, batch_tokens: int) -> bool:
        """Whether choose_precision has a choice to time: 'auto' on one GPU, with fp32 fitting in its memory (several
        ranks would each choose)."""
        if self.asked_precision != "auto" or self.device.type != "cuda" or self.distributed \
                or self.precision == "fp32":
            return False
        try:
            check_training_fits(model, batch_tokens, self.device, "fp32")
        except TrainingError:
            return False
        return True

    def choose_precision(self, optimization: Optimization, batch: GlobalBatch) -> None:
        """The faster of the resolved precision and fp32 on this batch (step.faster_precision), for the rest of
        the run."""
        self.precision_seconds = faster_precision(optimization, batch, (self.precision, "fp32"))
        self.precision = optimization.precision

    def describe(self) -> str:
        return "cpu (1 thread: the machine is busy)" if self.one_thread else describe(self.device)

    def threads(self) -> contextlib.AbstractContextManager:
        return one_thread_on_cpu(self.device) if self.one_thread else contextlib.nullcontext()


@contextlib.contextmanager
def kept_state(generator: torch.Generator) -> Iterator[None]:
    """The generator's state put back afterwards: what is timed inside changes nothing the run draws."""
    state = generator.get_state()
    try:
        yield
    finally:
        generator.set_state(state)
