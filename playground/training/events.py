"""What a training run reports, one dataclass per kind of event: the CLI, TensorBoard and the Train tab dispatch on
the class. Plain data only (numbers, strings, StopReason a str among them, lists, dicts), so an event pickles across
a process boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class StopReason(StrEnum):
    """Why a run ended its call. A str: the Done event's reason pickles, prints and goes into JSON as the text."""

    STEPS = "step budget reached"
    EPOCHS = "epoch budget reached"
    TIME = "time budget reached"
    STOPPED = "stopped by the user"
    EARLY = "early stopping"
    PAUSED = "paused"  # a run that ended its call (pause_after_s) to go on in the next one: no Done
    OUT_OF_MEMORY = "out of memory"
    LOSS_NOT_FINITE = "loss not finite"

    def said(self, metric: str, patience: int | None) -> str:
        """The reason as the Done event says it: early stopping names its metric and patience."""
        if self is StopReason.EARLY:
            return f"early stopping: no {metric} improvement in {patience} validations"
        return self

    @property
    def failed(self) -> bool:
        """The run broke down: its last good package is kept, nothing is saved over it."""
        return self in (StopReason.OUT_OF_MEMORY, StopReason.LOSS_NOT_FINITE)


@dataclass
class Start:
    params: int
    device: str
    precision: str
    planned_steps: int | None
    steps_per_epoch: int
    train_pairs: int
    val_pairs: int
    step: int  # the step the run starts from (0, or the saved step when resuming)
    vocab_size: int
    world_size: int
    accumulate: int


@dataclass
class Step:
    step: int
    epoch: float
    loss: float  # the global batch's loss per target token
    lr: float
    grad_norm: float
    tokens_per_s: float
    elapsed: float  # seconds of training, earlier runs of a resumed one included
    eta: float | None
    planned_steps: int | None


@dataclass
class Eval:
    step: int
    val_loss: float
    val_ppl: float
    bleu: float
    chrf: float
    exact_match: float
    samples: list[dict] = field(default_factory=list)  # source, reference, hypothesis of a few sentences
    best: dict | None = None  # the best validation so far, by the early-stopping metric
    improved: bool = False  # this validation is the new best (never said of the last one)
    sentences: int | None = None  # validation sentences decoded for BLEU/chrF
    cut: str = ""  # what the run's time budget left out of this validation, said to the person


@dataclass
class Phase:
    """What a run does between two steps that takes a while: "validating" (the loss and the greedy translations),
    then "saving" (the package)."""

    what: str
    step: int


@dataclass
class Saved:
    path: str
    step: int


@dataclass
class Averaged:
    path: str
    steps: list[int]  # the validations whose weights were averaged


@dataclass
class Error:
    message: str  # what went wrong and what to change
    step: int | None = None


@dataclass
class Paused:
    """A run that ended its time-limited call (ZeroGPU) saved, to go on in the next call."""

    step: int


@dataclass
class Interrupted:
    """The platform refused or aborted a call of a chunked run (ZeroGPU quota): the run stopped, its package as
    saved at `step` (0: nothing was saved), to go on later."""

    message: str
    step: int


@dataclass
class Done:
    reason: str  # a StopReason (early stopping's with its metric and patience: StopReason.said)
    summary: dict  # Trainer.result: the run's facts, for the CLI's --json and the UI


Event = Start | Step | Phase | Eval | Saved | Averaged | Error | Paused | Interrupted | Done
