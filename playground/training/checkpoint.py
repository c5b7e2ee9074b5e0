"""Saving a run so it can go on, and the one resume policy the CLI and the web app share.

A run saves a package (the model, its tokenizer, training.json) plus where the run stands (RunState, resume.json)
and the optimizer's moments (resume.safetensors): JSON and safetensors, no pickle."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch

from playground.core.model import Transformer
from playground.core.tokenizer import PairTokenizer
from playground.errors import PackageError, TrainingError
from playground.packages.format import Package, saved_config
from playground.packages.store import load_package, load_resume_state, package_info, save_package
from playground.training.config import BUDGETS, FIXED_ON_RESUME, TrainConfig


@dataclass
class History:
    """What the charts draw and training.json keeps."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)  # playground.packages.scores.EVAL_KEYS of each validation
    probe: list[dict] = field(default_factory=list)  # attention of a fixed validation pair at each validation
    elapsed: list[float] = field(default_factory=list)  # seconds into the run at each step (runs compared by time)

    def record_step(self, step: int, loss: float, lr: float, elapsed: float) -> None:
        """One optimizer step, rounded as training.json keeps it (the Trainer and a chunked run record alike)."""
        self.steps.append(step)
        self.loss.append(round(loss, 5))
        self.lr.append(lr)
        self.elapsed.append(round(elapsed, 3))

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class RunState:
    """Where a run stands, saved as resume.json next to the package."""

    rng_state: list[int] = field(default_factory=list)  # the run's dropout generator
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    tokens_seen: int = 0
    elapsed_s: float = 0.0
    best: dict | None = None  # the best validation so far (training.evaluation.is_better)
    bad_evals: int = 0  # validations since the best one
    planned_steps: int | None = None  # the schedule's steps, re-planned from the speed under a minutes budget
    warmup_steps: int | None = None  # the schedule's warmup (fitted to a minutes budget; else the configured one)
    schedule_steps: int | None = None  # a schedule fitted to a minutes budget: its length and where it stands
    schedule_position: float = 0.0  # (playground.training.schedule.advance)
    optimizer: dict = field(default_factory=dict)  # param groups and scalar state; the tensors are safetensors

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> "RunState":
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


def optimizer_to_safetensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    state = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, values in state["state"].items():
        for key, value in values.items():
            if torch.is_tensor(value):
                tensors[f"{index}.{key}"] = value
            else:
                scalars[f"{index}.{key}"] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def optimizer_from_safetensors(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    state: dict[int, dict] = {}
    for name, value in list(tensors.items()) + list(meta["scalars"].items()):
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def save_run(folder: Path, model: Transformer, tokenizer: PairTokenizer, optimizer: torch.optim.Optimizer,
             state: RunState, *, src_lang: str, tgt_lang: str, training: dict) -> Path:
    """The package, with the state to resume from; the history is in the training record only."""
    tensors, optimizer_meta = optimizer_to_safetensors(optimizer)
    return save_package(folder, model, tokenizer, src_lang=src_lang, tgt_lang=tgt_lang, training=training,
                        resume=(tensors, replace(state, optimizer=optimizer_meta).to_json()))


def load_run(folder: Path, device: torch.device) -> tuple[Package, RunState, dict[str, torch.Tensor]]:
    """The package, where its run stood, and the optimizer's saved tensors (optimizer_from_safetensors)."""
    package = load_package(folder, device)
    tensors, state = load_resume_state(folder)
    return package, RunState.from_json(state), tensors


# ----------------------------------------------------------------------------------------------------------
# The resume policy


RESUMED_KEEPS = "A resumed run keeps its package's model, tokenizer and optimizer settings"


def refuse_fixed_changes(saved: dict, wanted: dict, name: str, keeps: str = RESUMED_KEEPS,
                         instead: str = "start a new run") -> None:
    """A run that continues a package (resumed, or fine-tuned from it) holds settings of the package's (those of
    `saved` among FIXED_ON_RESUME): asking for others is an error, worded with what such a run `keeps` and what to
    do `instead`."""
    def same(a, b) -> bool:
        return (tuple(a) == tuple(b)) if isinstance(a, (list, tuple)) else a == b

    changed = [k for k in FIXED_ON_RESUME if k in saved and k in wanted and not same(saved[k], wanted[k])]
    if changed:
        was = ", ".join(f"{k} {saved[k]!r} (asked: {wanted[k]!r})" for k in changed)
        raise TrainingError(f"{name} was trained with {was}. {keeps}: leave these out, or {instead} to change them.")


def resume_config(folder: str | Path, changes: dict) -> TrainConfig:
    """The settings to continue the run saved in `folder` with: the package's saved settings, then `changes` (None =
    keep the saved value). Budgets given are added to what the package has done; without one, the run goes on to
    its saved budgets. The model, tokenizer and optimizer settings (FIXED_ON_RESUME) cannot change."""
    folder = Path(folder)
    training = package_info(folder)["training"] or {}
    saved = saved_config(training)
    if not saved:
        raise PackageError(f"{folder.name} has no training config to resume with (it was not trained here).")
    given = {k: v for k, v in changes.items() if v is not None}
    refuse_fixed_changes(saved, given, folder.name)
    added = {k: given.pop(k) for k in BUDGETS if k in given}
    settings = {**saved, **given}
    done = {"max_steps": int(training.get("steps", 0)), "max_epochs": float(training.get("epochs", 0)),
            "max_minutes": float(training.get("wall_s", 0)) / 60}
    if added:
        settings.update({k: done[k] + added[k] if k in added else None for k in BUDGETS})
    elif any(settings.get(k) and done[k] >= settings[k] for k in BUDGETS):
        raise TrainingError(f"{folder.name} already reached its budget ({done['max_steps']} steps); give a budget to "
                            "add: max steps, max epochs or max minutes.")
    return TrainConfig.from_dict(settings)
