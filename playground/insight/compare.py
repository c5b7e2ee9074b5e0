"""Runs side by side: the settings that differ between packages, their final scores, and their curves.

Reads only the packages' JSON (config.json and training.json), never the weights; the web app's Compare tab and
`python -m playground compare` both build on `load_runs`.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from pathlib import Path

from playground.errors import PackageError
from playground.packages.scores import SCORE_KEYS
from playground.packages.store import package_info

MAX_RUNS = 8  # more overlaid curves than this are unreadable
SCORES = ("steps", "wall_s", "params", *SCORE_KEYS)
SCORE_LABELS = {"steps": "steps", "wall_s": "wall time (s)", "params": "parameters", "val_loss": "val loss",
                "bleu": "BLEU", "chrf": "chrF", "exact_match": "exact match"}

# the settings in words (the key, as the CLI's flags and config.json spell it, follows in brackets)
SETTING_LABELS = {
    "d_model": "model width", "n_heads": "attention heads", "n_encoder_layers": "encoder layers",
    "n_decoder_layers": "decoder layers", "d_ff": "feed-forward size", "activation": "activation",
    "dropout": "dropout", "attention_dropout": "attention dropout", "positional_encoding": "positional encoding",
    "norm_placement": "LayerNorm placement", "tie_embeddings": "tied embeddings",
    "max_sentence_tokens": "max tokens per sentence", "tokenizer": "tokenizer kind", "vocab_size": "vocabulary size",
    "joint_vocab": "joint vocabulary",
    "bpe_dropout": "BPE-dropout", "optimizer": "optimizer", "lr": "learning rate", "betas": "Adam β1, β2",
    "eps": "Adam ε", "weight_decay": "weight decay", "schedule": "LR schedule", "warmup_steps": "warmup steps",
    "label_smoothing": "label smoothing", "clip_norm": "gradient clip norm", "batch_tokens": "batch tokens",
    "accumulate": "gradient accumulation", "max_steps": "max steps", "max_epochs": "max epochs",
    "max_minutes": "max minutes in all (a resume adds to what was done)", "eval_every": "validate every (steps)",
    "eval_sentences": "sentences per validation", "early_stop_metric": "early-stopping metric",
    "patience": "patience", "average_last": "average last K", "device": "device", "precision": "precision",
    "seed": "seed", "src_lang": "source language", "tgt_lang": "target language", "data": "data",
    "train_pairs": "training pairs", "base": "started from",
}


def setting_label(key: str) -> str:
    return f"{SETTING_LABELS[key]} ({key})" if key in SETTING_LABELS and SETTING_LABELS[key] != key else key


@dataclass
class Run:
    """One package's training record, as far as a comparison needs it."""

    name: str
    settings: dict  # every setting that describes the run: training config, data and languages
    scores: dict  # SCORES of the last validation (None where the package has no record)
    steps: list[int]
    loss: list[float]
    lr: list[float]
    evals: list[dict]
    elapsed: list[float]  # seconds into the run at each step, recorded or spread evenly over the run's wall time
    elapsed_recorded: bool

    @classmethod
    def from_info(cls, info: dict) -> "Run":
        config, training = info["config"], info["training"] or {}
        history = training.get("history") or {}
        data = training.get("data") or {}
        settings = {**(training.get("config") or config["model"]), "src_lang": config.get("src_lang"),
                    "tgt_lang": config.get("tgt_lang"), "data": data.get("description"),
                    "train_pairs": data.get("train_pairs"),
                    "base": (training.get("base") or {}).get("name", "new weights" if training else None)}
        last = training.get("last") or {}
        scores = {"steps": training.get("steps"), "wall_s": training.get("wall_s"),
                  "params": config.get("num_parameters"),
                  **{key: last.get(key) for key in SCORE_KEYS}}
        steps = list(history.get("steps") or [])
        recorded = list(history.get("elapsed") or [])
        elapsed_recorded = len(recorded) == len(steps) and bool(steps)
        if not elapsed_recorded:  # older packages: spread the run's wall time evenly over its steps
            total_steps, wall = max(steps[-1] if steps else 1, 1), training.get("wall_s") or 0.0
            recorded = [wall * step / total_steps for step in steps]
        return cls(info["name"], settings, scores, steps, list(history.get("loss") or []),
                   list(history.get("lr") or []), list(history.get("evals") or []), recorded, elapsed_recorded)

    def seconds_at(self, step: int) -> float:
        """Seconds into the run when `step` ended (the nearest recorded step at or before it)."""
        if not self.steps:
            return 0.0
        index = max(0, bisect.bisect_right(self.steps, step) - 1)  # a long history is thinned as it is read
        return self.elapsed[min(index, len(self.elapsed) - 1)]


def check_choice(names: list[str]) -> None:
    """Two to MAX_RUNS models, each once: what a comparison (curves or translations) takes."""
    if len(names) < 2:
        raise PackageError(f"Pick at least two models to compare (got {len(names)}).")
    if len(names) > MAX_RUNS:
        raise PackageError(f"Compare at most {MAX_RUNS} models at once (got {len(names)}).")
    if len(set(names)) != len(names):
        raise PackageError("Each model can be compared once; the list names one twice.")


def load_runs(folders: list[str | os.PathLike]) -> list[Run]:
    """Runs of two or more packages; PackageError names the one that cannot be read."""
    check_choice([Path(folder).name for folder in folders])
    return [Run.from_info(package_info(folder)) for folder in folders]


def differing_settings(runs: list[Run]) -> dict[str, list]:
    """setting -> its value in each run, for the settings that are not the same everywhere (None where absent)."""
    keys = sorted({key for run in runs for key in run.settings})
    table = {key: [run.settings.get(key) for run in runs] for key in keys}
    return {key: values for key, values in table.items() if any(v != values[0] for v in values)}


def comparison(runs: list[Run]) -> dict:
    """What `compare --json` prints: the runs' names, the differing settings and the scores."""
    return {"runs": [run.name for run in runs], "differing_settings": differing_settings(runs),
            "scores": {run.name: run.scores for run in runs}}


def format_value(key: str, value) -> str:
    if value is None:
        return "—"
    if key == "exact_match":
        return f"{value:.1%}"
    if key in ("params", "steps", "train_pairs") and isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return {"wall_s": f"{value:.0f}", "bleu": f"{value:.1f}", "chrf": f"{value:.1f}", "val_loss": f"{value:.3f}",
                "max_minutes": f"{value:.2f}"}.get(key, f"{value:.4g}")
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


def comparison_rows(runs: list[Run]) -> tuple[list[list[str]], list[list[str]]]:
    """(settings rows, score rows) as text: [name, value per run], for tables in the CLI and the web app."""
    settings = [[setting_label(key), *(format_value(key, v) for v in values)]
                for key, values in differing_settings(runs).items()]
    scores = [[SCORE_LABELS[key], *(format_value(key, run.scores[key]) for run in runs)] for key in SCORES]
    return settings, scores


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table with columns padded to their widest cell."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header, *rows])
