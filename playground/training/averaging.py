"""Checkpoint averaging: the element-wise mean of the weights of packages that share one model config and one
tokenizer. As in the paper (§6.1, "Machine Translation"): the base models average the last 5 checkpoints, written
at 10-minute intervals, the big models the last 20.

`SnapshotStore` keeps the last K validation snapshots of a training run on disk for `--average-last K`
(run_snapshots), and average_snapshots writes their mean at the end of the run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from playground.core.model import Transformer
from playground.core.tokenizer import PairTokenizer
from playground.errors import PackageError
from playground.packages.format import Package, is_package
from playground.packages.names import average_name, check_name, snapshots_folder
from playground.packages.store import load_package, save_package
from playground.training.events import Averaged


def average_packages(folders: Sequence[str | os.PathLike], out_folder: str | os.PathLike) -> Path:
    """Write a package at `out_folder` whose weights are the element-wise mean of those of `folders`.

    The packages are loaded one at a time, so memory holds two models however many are averaged. They must share
    the model config, the tokenizer and the languages (PackageError otherwise). The new package takes its metadata
    from the last folder; tied weights stay tied, because the mean is loaded into a model built tied."""
    if not folders:
        raise PackageError("Give at least one package to average.")
    first = load_package(folders[0])
    total = {name: tensor.clone() for name, tensor in first.model.state_dict().items()}
    last = first
    for folder in folders[1:]:
        last = load_package(folder)
        check_averageable(first, last)
        for name, tensor in last.model.state_dict().items():
            total[name] += tensor
    first.model.load_state_dict({name: tensor / len(folders) for name, tensor in total.items()})
    return save_package(out_folder, first.model, first.tokenizer, src_lang=first.config["src_lang"],
                        tgt_lang=first.config["tgt_lang"], training=averaged_training(last, folders))


def check_averageable(first: Package, other: Package) -> None:
    """Weights are only comparable, number for number, between models of one architecture and one vocabulary."""
    mine, theirs = first.config["model"], other.config["model"]
    differences = [f"{key} {mine.get(key)!r} vs {theirs.get(key)!r}"
                   for key in sorted(mine.keys() | theirs.keys()) if mine.get(key) != theirs.get(key)]
    if differences:
        raise PackageError(f"{other.name} cannot be averaged with {first.name}: their model configs differ "
                           f"({', '.join(differences)}).")
    if other.tokenizer.to_json_strings() != first.tokenizer.to_json_strings():
        raise PackageError(f"{other.name} cannot be averaged with {first.name}: their tokenizers differ, so the same "
                           "token id means different tokens.")
    languages = [(p.config["src_lang"], p.config["tgt_lang"]) for p in (first, other)]
    if languages[0] != languages[1]:
        raise PackageError(f"{other.name} cannot be averaged with {first.name}: it translates "
                           f"{'→'.join(languages[1])}, not {'→'.join(languages[0])}.")


def averaged_training(last: Package, folders: Sequence[str | os.PathLike]) -> dict | None:
    """The last package's training record, with what was averaged; its validation scores are dropped, because they
    were measured on one checkpoint, not on the average."""
    if last.training is None:
        return None
    return {**last.training, "last": None, "best": None, "averaged_from": [Path(f).name for f in folders]}


class SnapshotStore:
    """The last `keep` validation snapshots of a run, each a package (weights, tokenizer, training record; no
    optimizer state) in `folder`/step-NNNNNNNN.

    On disk rather than in memory: a stopped and resumed run still averages the snapshots taken before the stop,
    memory stays flat (20 snapshots of the 213M-parameter big model would hold 17 GB), and any K of them can be
    averaged again later with `python -m playground average`."""

    def __init__(self, folder: Path, keep: int):
        self.folder, self.keep = folder, keep

    @staticmethod
    def step_of(snapshot: Path) -> int:
        return int(snapshot.name.removeprefix("step-"))

    def snapshots(self) -> list[Path]:
        """The complete snapshots, oldest first."""
        found = self.folder.glob("step-*") if self.folder.is_dir() else []
        return sorted((p for p in found if is_package(p)), key=self.step_of)

    def discard_after(self, step: int) -> None:
        """Drop snapshots newer than `step`: they belong to an earlier run into the same folder, or to steps a
        resumed run does again."""
        for snapshot in self.snapshots():
            if self.step_of(snapshot) > step:
                shutil.rmtree(snapshot)

    def save(self, step: int, model: Transformer, tokenizer: PairTokenizer, **package_fields) -> Path:
        """Write the snapshot of `step` (package_fields go to save_package), then drop all but the last `keep`."""
        path = save_package(self.folder / f"step-{step:08d}", model, tokenizer, **package_fields)
        for old in self.snapshots()[: -self.keep]:
            shutil.rmtree(old)
        return path


def run_snapshots(out_dir: Path, keep: int, step: int) -> SnapshotStore | None:
    """With average_last (`keep`), the store of the run's validation snapshots, emptied of those after `step`; the
    average's name is checked now, not after hours of training."""
    if not keep:
        return None
    check_name(average_name(out_dir.name))
    store = SnapshotStore(snapshots_folder(out_dir), keep)
    store.discard_after(step)
    return store


def average_snapshots(store: SnapshotStore | None, out_dir: Path) -> Averaged | None:
    """<out>-avg, the mean of the kept validation snapshots, when there are some."""
    snapshots = store.snapshots() if store else []
    if not snapshots:
        return None
    path = average_packages(snapshots, out_dir.with_name(average_name(out_dir.name)))
    return Averaged(str(path), [SnapshotStore.step_of(s) for s in snapshots])
