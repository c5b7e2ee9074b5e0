"""Model packages: a folder with config.json, model.safetensors, tokenizer.json (+ training.json, README.md).

No pickle anywhere: weights (and the optimizer state used to resume training) are safetensors, the rest JSON.
Saving writes a sibling folder and swaps it in, so a crash mid-save never leaves a half package that loads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_file, save_model

from playground.errors import PackageError
from playground.model import Transformer, TransformerConfig
from playground.tokenizer import PairTokenizer

FORMAT_VERSION = 1
CONFIG, WEIGHTS, TOKENIZER, TGT_TOKENIZER = "config.json", "model.safetensors", "tokenizer.json", "tokenizer.tgt.json"
TRAINING, CARD = "training.json", "README.md"
RESUME_TENSORS, RESUME_STATE = "resume.safetensors", "resume.json"  # optimizer moments and trainer state
REQUIRED = (CONFIG, WEIGHTS, TOKENIZER)
ALLOWED = {CONFIG, WEIGHTS, TOKENIZER, TGT_TOKENIZER, TRAINING, CARD, RESUME_TENSORS, RESUME_STATE}
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_ZIP_BYTES = 2 * 1024**3  # uncompressed total a package zip may expand to
MAX_ZIP_RATIO = 200  # uncompressed / compressed size; far above real weights (~1.1), far below zip bombs
SHIPPED_MODELS_DIR = Path(__file__).resolve().parent.parent / "models"  # models that come with the repo
SHIPPED_MODELS = ("demo-en-de",)


def is_shipped(folder: str | os.PathLike) -> bool:
    """A package that ships with the repo: read-only in every mode (never deleted, overwritten or resumed into)."""
    folder = Path(folder).resolve()
    return folder.name in SHIPPED_MODELS and folder.parent == SHIPPED_MODELS_DIR


@dataclass
class Package:
    path: Path
    model: Transformer
    tokenizer: PairTokenizer
    config: dict  # the whole config.json
    training: dict | None  # training.json, when the model was trained here

    @property
    def name(self) -> str:
        return self.path.name


# ----------------------------------------------------------------------------------------------------------
# Names and folders


def check_name(name: str) -> str:
    """A package name is one safe folder name: it can never climb out of models/ or hide as a dot-folder."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or ".." in name:
        raise PackageError(
            f"Invalid model name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."
        )
    return name


def package_path(models_dir: str | os.PathLike, name: str) -> Path:
    return Path(models_dir) / check_name(name)


def unique_name(models_dir: str | os.PathLike, base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... so a new package never overwrites another one."""
    check_name(base)
    name, n = base, 1
    while (Path(models_dir) / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def is_package(folder: str | os.PathLike) -> bool:
    folder = Path(folder)
    return not folder.name.startswith(".") and all((folder / f).is_file() for f in REQUIRED)


def list_packages(models_dir: str | os.PathLike) -> list[Path]:
    """Complete packages in models_dir, newest first (interrupted saves are repaired or skipped)."""
    models_dir = Path(models_dir)
    if not models_dir.is_dir():
        return []
    for old in models_dir.glob(".*.old"):
        recover_interrupted_save(old)
    found = [p for p in models_dir.iterdir() if p.is_dir() and is_package(p)]
    return sorted(found, key=lambda p: (p / WEIGHTS).stat().st_mtime, reverse=True)


def recover_interrupted_save(old: Path) -> None:
    """A crash between the two renames of a save leaves only `.NAME.old`: put it back."""
    target = old.parent / old.name[1:-4]
    if not target.exists():
        os.replace(old, target)
    else:
        shutil.rmtree(old, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------
# Saving


def library_versions() -> dict:
    import safetensors
    import tokenizers

    from playground import __version__

    return {"playground": __version__, "torch": torch.__version__, "tokenizers": tokenizers.__version__,
            "safetensors": safetensors.__version__}


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def save_package(
    folder: str | os.PathLike,
    model: Transformer,
    tokenizer: PairTokenizer,
    *,
    src_lang: str = "src",
    tgt_lang: str = "tgt",
    training: dict | None = None,
    resume: tuple[dict[str, torch.Tensor], dict] | None = None,
) -> Path:
    """Write the package atomically. `resume` = (optimizer tensors, trainer state JSON) to continue training."""
    folder = Path(folder)
    check_name(folder.name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}"
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
        # save_model stores tied weights once; load_model restores them tied
        save_model(model, str(tmp / WEIGHTS), metadata={"format": "pt"})
        os.chmod(tmp / WEIGHTS, 0o644)  # safetensors writes 0600; the package's other files are world-readable
        tokenizer.save(tmp)
        if training is not None:
            write_json(tmp / TRAINING, training)
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


def model_card(config: dict, training: dict | None) -> str:
    m = config["model"]
    lines = [
        f"# {config['name']}",
        "",
        f"A Transformer encoder-decoder translating **{config['src_lang']} → {config['tgt_lang']}**, "
        "made with Transformer Playground.",
        "",
        "## Model",
        f"- {config['num_parameters']:,} parameters; d_model {m['d_model']}, {m['n_heads']} heads, "
        f"{m['n_encoder_layers']}+{m['n_decoder_layers']} layers, feed-forward {m['d_ff']}, {m['activation']}",
        f"- {m['positional_encoding']} positions, {m['norm_placement']}-LN, tied embeddings: {m['tie_embeddings']}",
        f"- tokenizer: {config['tokenizer']['kind']}, {'joint' if config['tokenizer']['joint'] else 'separate'} "
        f"vocabulary of {m['src_vocab_size']:,}" + ("" if m["joint_vocab"] else f" / {m['tgt_vocab_size']:,}"),
    ]
    if training:
        data = training.get("data", {})
        best = training.get("best", {}) or {}
        lines += ["", "## Training",
                  f"- data: {data.get('description', 'user data')}, {data.get('train_pairs', '?')} training pairs, "
                  f"{data.get('val_pairs', '?')} validation pairs",
                  f"- {training.get('steps', '?')} steps, {training.get('epochs', 0):.2f} epochs, "
                  f"{training.get('wall_s', 0):.0f} s on {training.get('device', '?')}"]
        if best:
            lines.append("- best validation: " + ", ".join(f"{k} {v:.4g}" for k, v in best.items() if isinstance(v, (int, float))))
    lines += ["", "## Use it", "", "```python", "from playground.package import load_package",
              "from playground.decode import translate", f'pkg = load_package("models/{config["name"]}")',
              'print(translate(pkg.model, pkg.tokenizer, ["your sentence"])[0].text)', "```", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------
# Loading


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PackageError(f"{path.name} in {path.parent.name} is not valid JSON ({err}).") from err
    if not isinstance(data, dict):
        raise PackageError(f"{path.name} in {path.parent.name} must hold a JSON object.")
    return data


def read_config(folder: str | os.PathLike) -> dict:
    folder = Path(folder)
    if not folder.is_dir():
        raise PackageError(f"No model package at {folder}: the folder does not exist.")
    missing = [f for f in REQUIRED if not (folder / f).is_file()]
    if missing:
        raise PackageError(f"{folder.name} is not a complete model package: missing {', '.join(missing)}.")
    config = read_json(folder / CONFIG)
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise PackageError(
            f"{folder.name} has package format version {version!r}; this playground reads version {FORMAT_VERSION}."
        )
    if not isinstance(config.get("model"), dict):
        raise PackageError(f"config.json in {folder.name} has no 'model' section.")
    return config


def check_weights(path: Path, model: Transformer) -> None:
    """Compare the safetensors header with the model built from config.json, before loading anything."""
    state = model.state_dict()
    expected = {k: tuple(v.shape) for k, v in state.items()}
    try:
        with safe_open(str(path), framework="pt") as f:
            stored = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as err:
        raise PackageError(f"model.safetensors in {path.parent.name} is corrupt or truncated ({err}).") from err
    unexpected = sorted(set(stored) - set(expected))
    wrong = [f"{k}: file {stored[k]} vs config {expected[k]}" for k in stored if k in expected and stored[k] != expected[k]]
    aliases = {}  # tied weights are stored under one of their names only
    for name, tensor in state.items():
        aliases.setdefault(tensor.data_ptr(), []).append(name)
    missing = [names[0] for names in aliases.values() if not any(n in stored for n in names)]
    if unexpected or wrong or missing:

        def listed(label: str, items: list[str]) -> str:
            return f"{label} {', '.join(items[:3])}{' ...' if len(items) > 3 else ''}" if items else ""

        details = "; ".join(filter(None, [listed("shapes differ:", wrong), listed("missing", missing),
                                          listed("unexpected", unexpected)]))
        raise PackageError(f"The weights in {path.parent.name} do not fit its config.json: {details}.")


def load_package(folder: str | os.PathLike, device: str | torch.device = "cpu") -> Package:
    """Load and check a package; every problem raises PackageError with a message that says what is wrong."""
    folder = Path(folder)
    config = read_config(folder)
    cfg = TransformerConfig.from_dict(config["model"])
    tokenizer = PairTokenizer.load(folder)
    if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (cfg.src_vocab_size, cfg.tgt_vocab_size):
        raise PackageError(
            f"The tokenizer of {folder.name} has {tokenizer.src_vocab_size}/{tokenizer.tgt_vocab_size} tokens but "
            f"config.json says {cfg.src_vocab_size}/{cfg.tgt_vocab_size}."
        )
    model = Transformer(cfg)
    check_weights(folder / WEIGHTS, model)
    try:
        load_model(model, str(folder / WEIGHTS), strict=True)
    except (SafetensorError, RuntimeError, OSError) as err:
        raise PackageError(f"Could not load the weights of {folder.name}: {err}") from err
    training = read_json(folder / TRAINING) if (folder / TRAINING).is_file() else None
    return Package(folder, model.to(device).eval(), tokenizer, config, training)


def load_resume_state(folder: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict]:
    folder = Path(folder)
    if not ((folder / RESUME_TENSORS).is_file() and (folder / RESUME_STATE).is_file()):
        raise PackageError(f"{folder.name} holds no training state to resume from (it was not saved by a training run).")
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(folder / RESUME_TENSORS))
    except (SafetensorError, OSError) as err:
        raise PackageError(f"The training state of {folder.name} is corrupt ({err}).") from err
    return tensors, read_json(folder / RESUME_STATE)


def package_info(folder: str | os.PathLike) -> dict:
    """config.json + training.json + file sizes, without loading the weights (for listings and `info`)."""
    folder = Path(folder)
    config = read_config(folder)
    training = read_json(folder / TRAINING) if (folder / TRAINING).is_file() else None
    sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    return {"name": folder.name, "path": str(folder), "config": config, "training": training, "files": sizes,
            "size_bytes": sum(sizes.values())}


def delete_package(models_dir: str | os.PathLike, name: str) -> None:
    folder = package_path(models_dir, name)
    if not is_package(folder):
        raise PackageError(f"There is no model package named {name!r} to delete.")
    if is_shipped(folder):
        raise PackageError(f"{name} ships with the app and is read-only.")
    shutil.rmtree(folder)


# ----------------------------------------------------------------------------------------------------------
# Zip export and import


def export_zip(folder: str | os.PathLike, dest_dir: str | os.PathLike | None = None) -> Path:
    """Zip the package files (not the resume state, which only matters on the machine that trains)."""
    folder = Path(folder)
    read_config(folder)
    dest = Path(dest_dir or tempfile.mkdtemp(prefix="playground-zip-")) / f"{folder.name}.zip"
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(ALLOWED - {RESUME_TENSORS, RESUME_STATE}):
            if (folder / name).is_file():
                zf.write(folder / name, f"{folder.name}/{name}")
    return dest


def zip_members(zf: zipfile.ZipFile, zip_size: int) -> dict[str, zipfile.ZipInfo]:
    """Check every member before extracting anything; return {file name: info} of a flat package."""
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in zf.infolist():
        name = info.filename
        if not name or name.endswith("/"):
            continue
        if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in Path(name).parts or "\\" in name:
            raise PackageError(f"The zip holds an unsafe path {name!r} (absolute or climbing out); it was refused.")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise PackageError(f"The zip holds a link {name!r}; packages contain plain files only.")
        parts = Path(name).parts
        if len(parts) > 2:
            raise PackageError(f"The zip holds a nested path {name!r}; a package is one flat folder.")
        base = parts[-1]
        if base not in ALLOWED:
            kind = " (pickled PyTorch files are never loaded)" if base.endswith((".pt", ".pth", ".bin", ".pkl", ".ckpt")) else ""
            raise PackageError(f"The zip holds {name!r}, which is not part of a model package{kind}. "
                               f"Allowed files: {', '.join(sorted(ALLOWED))}.")
        if base in members:
            raise PackageError(f"The zip holds {base} twice.")
        total += info.file_size
        members[base] = info
    if total > MAX_ZIP_BYTES:
        raise PackageError(f"The zip expands to {total / 1e9:.1f} GB; the limit is {MAX_ZIP_BYTES / 1e9:.0f} GB.")
    if zip_size and total / zip_size > MAX_ZIP_RATIO:
        raise PackageError("The zip expands more than 200-fold, like a zip bomb; it was refused.")
    missing = [f for f in REQUIRED if f not in members]
    if missing:
        raise PackageError(f"The zip is not a model package: it lacks {', '.join(missing)}.")
    return members


def import_zip(zip_path: str | os.PathLike, models_dir: str | os.PathLike, name: str | None = None) -> Path:
    """Validate a package zip, extract it beside models/, load it once as a check, then move it in."""
    zip_path, models_dir = Path(zip_path), Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".import-", dir=models_dir))
    try:
        try:
            folder_name = extract_zip(zip_path, tmp)
        except PackageError:
            raise
        except Exception as err:  # zipfile is not hardened: hostile archives raise many kinds of errors
            raise PackageError(f"{zip_path.name} is not a readable zip file ({type(err).__name__}: {err}).") from err
        load_package(tmp)  # refuse anything that does not load
        target = models_dir / unique_name(models_dir, check_name(name) if name else safe_stem(folder_name))
        config = read_json(tmp / CONFIG)
        config["name"] = target.name
        write_json(tmp / CONFIG, config)
        os.replace(tmp, target)
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def extract_zip(zip_path: Path, dest: Path) -> str:
    """Check every member, then extract the flat package into dest; returns the folder name inside the zip."""
    with zipfile.ZipFile(zip_path) as zf:
        members = zip_members(zf, zip_path.stat().st_size)
        for base, info in members.items():
            with zf.open(info) as src, open(dest / base, "wb") as dst:
                if copy_limited(src, dst, info.file_size) != info.file_size:
                    raise PackageError(f"{base} in the zip is truncated or lies about its size.")
        first = Path(next(iter(members.values())).filename).parts
        return first[0] if len(first) == 2 else zip_path.stem


def copy_limited(src, dst, limit: int) -> int:
    """Copy at most limit+1 bytes: a member that expands beyond what its header says is caught, not written."""
    copied = 0
    while chunk := src.read(min(1 << 20, limit + 1 - copied)):
        dst.write(chunk)
        copied += len(chunk)
        if copied > limit:
            break
    return copied


def safe_stem(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-_")[:64]
    return cleaned or "uploaded-model"
