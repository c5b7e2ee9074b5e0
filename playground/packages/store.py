"""Model packages: a folder with config.json, model.safetensors, tokenizer.json (+ training.json, README.md).

Saving, loading (with every check load_package makes), listing and deleting. No pickle anywhere: weights (and the
optimizer state used to resume training) are safetensors, the rest JSON. Saving writes a sibling folder and swaps it
in, so a crash mid-save never leaves a half package that loads.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_file, save_model

from playground import limits
from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, PairTokenizer
from playground.errors import PackageError
from playground.packages.card import model_card
from playground.packages.format import (
    ALLOWED,
    CARD,
    CONFIG,
    FORMAT_VERSION,
    RESUME_STATE,
    RESUME_TENSORS,
    TGT_TOKENIZER,
    TOKENIZER,
    TRAINING,
    WEIGHTS,
    Package,
    check_weights,
    is_package,
    read_config,
    read_json,
    read_training,
    safetensors_shapes,
    saved_history,
    write_json,
)
from playground.packages.names import check_name, snapshots_folder
from playground.packages.tokenizer_checks import check_pipeline, check_tokenizer_cost
from playground.runtime.memory import check_model_loads


def list_packages(models_dir: str | os.PathLike) -> list[Path]:
    """Complete packages in models_dir, newest first (an interrupted save waits for the sweep to repair it: a listing
    never touches a save in progress)."""
    models_dir = Path(models_dir)
    if not models_dir.is_dir():
        return []
    found = [p for p in models_dir.iterdir() if p.is_dir() and is_package(p)]

    def newest(p: Path) -> float:
        try:
            return (p / WEIGHTS).stat().st_mtime
        except OSError:  # deleted while listing
            return 0.0

    return sorted(found, key=newest, reverse=True)


def folder_bytes(folder: Path) -> int:
    try:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    except OSError:  # deleted while counting
        return 0


def disk_bytes(folder: Path) -> int:
    """What a package takes on disk: its files and the snapshots its run keeps (the quotas count both)."""
    return folder_bytes(folder) + folder_bytes(snapshots_folder(folder))


def library_versions() -> dict:
    import safetensors
    import tokenizers

    from playground import __version__

    return {"playground": __version__, "torch": torch.__version__, "tokenizers": tokenizers.__version__,
            "safetensors": safetensors.__version__}


def save_package(
    folder: str | os.PathLike,
    model: Transformer,
    tokenizer: PairTokenizer,
    *,
    src_lang: str = "src",
    tgt_lang: str = "tgt",
    training: dict | None = None,
    resume: tuple[dict[str, torch.Tensor], dict] | None = None,
    imported: dict | None = None,
) -> Path:
    """Write the package atomically. `resume` = (optimizer tensors, trainer state JSON) to continue training;
    `imported`: where a model made elsewhere came from (origin, architecture, license, citations)."""
    folder = Path(folder)
    check_name(folder.name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        config = {
            "format_version": FORMAT_VERSION,
            "name": folder.name,
            "src_lang": src_lang,
            "tgt_lang": tgt_lang,
            "model": model.cfg.to_dict(),
            "tokenizer": {"kind": tokenizer.kind, "joint": tokenizer.joint},
            "special_tokens": {"pad": model.cfg.pad_id, "unk": model.cfg.unk_id, "bos": model.cfg.bos_id,
                               "eos": model.cfg.eos_id},
            "num_parameters": model.num_parameters(),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "versions": library_versions(),
        }
        if imported is not None:
            config["imported"] = imported
        # save_model stores tied weights once; load_model restores them tied
        save_model(model, str(tmp / WEIGHTS), metadata={"format": "pt"})
        os.chmod(tmp / WEIGHTS, 0o644)  # safetensors writes 0600; the package's other files are world-readable
        tokenizer.save(tmp)
        if training is not None:
            history = training.get("history")
            write_json(tmp / TRAINING, {**training, "history": saved_history(history)} if history else training)
        if resume is not None:
            tensors, state = resume
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp / RESUME_TENSORS))
            write_json(tmp / RESUME_STATE, state)
        (tmp / CARD).write_text(model_card(config, training), encoding="utf-8")
        write_json(tmp / CONFIG, config)  # last: a folder without config.json is never taken for a package
        swap_in(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def swap_in(tmp: Path, folder: Path) -> None:
    old = folder.parent / f".{folder.name}.old"
    if old.exists():
        shutil.rmtree(old)
    if folder.exists():
        os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def model_config(values: dict) -> TransformerConfig:
    """config.json's "model" as a TransformerConfig; PackageError when it has settings this version does not know
    or values the model refuses."""
    unknown = sorted(set(values) - {f.name for f in fields(TransformerConfig)})
    if unknown:
        raise PackageError(f"config.json has unknown model settings {unknown}; was it written by a newer version?")
    try:
        return TransformerConfig(**values)
    except (TypeError, ValueError) as err:
        raise PackageError(f"config.json has an invalid model config: {err}") from err


@dataclass
class CheckedPackage:
    """Everything load_package checks, found without building the model: what `info` reports."""

    config: dict
    model_config: TransformerConfig
    tokenizer: PairTokenizer
    training: dict | None


def check_package(folder: str | os.PathLike) -> CheckedPackage:
    """Check a package as load_package does (every file's size and schema, the model's size against the limits and
    the free memory, the tokenizer, the weights' header against the config) without allocating the model."""
    folder = Path(folder)
    config = read_config(folder)
    cfg = model_config(config["model"])
    check_model_loads(cfg)
    for name in ALLOWED:  # weights are checked from their header below
        path = folder / name
        if name != WEIGHTS and path.is_file() and path.stat().st_size > limits.max_file_bytes(name):
            raise PackageError(f"{name} in {folder.name} is larger than the {limits.max_file_bytes(name):,} bytes "
                               f"allowed for it (the operator sets {limits.env_name(name)}).")
    separate = (folder / TGT_TOKENIZER).is_file()
    check_tokenizer_cost(folder / TOKENIZER, cfg.src_vocab_size if separate else max(cfg.src_vocab_size,
                                                                                     cfg.tgt_vocab_size))
    if separate:
        check_tokenizer_cost(folder / TGT_TOKENIZER, cfg.tgt_vocab_size)
    tokenizer = PairTokenizer.load(folder)
    check_pipeline(tokenizer)
    specials = {"pad_id": (cfg.pad_id, PAD_ID), "unk_id": (cfg.unk_id, UNK_ID), "bos_id": (cfg.bos_id, BOS_ID),
                "eos_id": (cfg.eos_id, EOS_ID)}
    wrong = [f"{name} {said} (the tokenizer's is {theirs})" for name, (said, theirs) in specials.items()
             if said != theirs]
    if wrong:
        raise PackageError(f"config.json of {folder.name} gives special token ids its tokenizer does not have: "
                           f"{', '.join(wrong)}. Export the model package again.")
    if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (cfg.src_vocab_size, cfg.tgt_vocab_size):
        raise PackageError(
            f"The tokenizer of {folder.name} has {tokenizer.src_vocab_size}/{tokenizer.tgt_vocab_size} tokens but "
            f"config.json says {cfg.src_vocab_size}/{cfg.tgt_vocab_size}."
        )
    with torch.device("meta"):
        check_weights(folder / WEIGHTS, Transformer(cfg))
    training = read_training(folder)
    if (folder / RESUME_STATE).is_file():
        read_json(folder / RESUME_STATE)
    return CheckedPackage(config, cfg, tokenizer, training)


def load_package(folder: str | os.PathLike, device: str | torch.device = "cpu") -> Package:
    """Load and check a package; every problem raises PackageError with a message that says what is wrong. Nothing
    is allocated before the sizes in the JSON files and the weights' header have passed the limits."""
    folder = Path(folder)
    checked = check_package(folder)
    model = Transformer(checked.model_config)
    try:
        load_model(model, str(folder / WEIGHTS), strict=True)
    except (SafetensorError, RuntimeError, OSError) as err:
        raise PackageError(f"Could not load the weights of {folder.name}: {err}") from err
    return Package(folder, model.to(device).eval(), checked.tokenizer, checked.config, checked.training)


def load_resume_state(folder: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict]:
    folder = Path(folder)
    if not ((folder / RESUME_TENSORS).is_file() and (folder / RESUME_STATE).is_file()):
        raise PackageError(f"{folder.name} holds no training state to resume from (it was not saved by a training "
                           "run).")
    from safetensors.torch import load_file

    safetensors_shapes(folder / RESUME_TENSORS)  # its size and header, before a byte of it is loaded
    try:
        tensors = load_file(str(folder / RESUME_TENSORS))
    except (SafetensorError, OSError) as err:
        raise PackageError(f"The training state of {folder.name} is corrupt ({err}).") from err
    return tensors, read_json(folder / RESUME_STATE)


def package_info(folder: str | os.PathLike) -> dict:
    """config.json + training.json (both schema-checked) + file sizes, without loading the weights (for listings).
    size_bytes counts the run's snapshots too (.NAME.snapshots): they take disk space for this package."""
    folder = Path(folder)
    config = read_config(folder)
    training = read_training(folder)
    sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    snapshots = snapshots_folder(folder)
    snapshot_bytes = folder_bytes(snapshots) if snapshots.is_dir() else 0
    return {"name": folder.name, "path": str(folder), "config": config, "training": training, "files": sizes,
            "snapshot_bytes": snapshot_bytes, "size_bytes": sum(sizes.values()) + snapshot_bytes}


def remove_package(folder: Path) -> None:
    """Delete a package folder and the snapshots its run kept for averaging, whatever is left of either."""
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(snapshots_folder(folder), ignore_errors=True)
