"""Model packages: a folder with config.json, model.safetensors, tokenizer.json (+ training.json, README.md).

No pickle anywhere: weights (and the optimizer state used to resume training) are safetensors, the rest JSON.
Saving writes a sibling folder and swaps it in, so a crash mid-save never leaves a half package that loads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_file, save_model

from playground import limits

from playground.packages import schema
from playground.errors import PackageError
from playground.runtime.memory import check_model_loads
from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, PairTokenizer

FORMAT_VERSION = 1
CONFIG, WEIGHTS, TOKENIZER, TGT_TOKENIZER = "config.json", "model.safetensors", "tokenizer.json", "tokenizer.tgt.json"
TRAINING, CARD = "training.json", "README.md"
RESUME_TENSORS, RESUME_STATE = "resume.safetensors", "resume.json"  # optimizer moments and trainer state
REQUIRED = (CONFIG, WEIGHTS, TOKENIZER)
ALLOWED = {CONFIG, WEIGHTS, TOKENIZER, TGT_TOKENIZER, TRAINING, CARD, RESUME_TENSORS, RESUME_STATE}
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_ZIP_BYTES = 2 * 1024**3  # uncompressed total a package zip may expand to
MAX_ZIP_RATIO = 200  # uncompressed / compressed size; far above real weights (~1.1), far below zip bombs
SCHEMAS = {CONFIG: schema.CONFIG, TRAINING: schema.TRAINING, RESUME_STATE: schema.RESUME}
STALE_AFTER_S = 24 * 3600  # a temporary folder this old belongs to no live operation, whatever its pid says
EXPORT_TTL_S = 600  # a downloaded zip has been copied to Gradio's cache long before this
STARTED = time.time()  # this process's leftovers are the ones made after it started

SHIPPED_MODELS_DIR = Path(__file__).resolve().parents[2] / "models"  # models that come with the repo
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


# A name is reserved in this process's memory, not on disk. The models folder may be a Storage Bucket mounted into a
# Space, an object store: there os.mkdir is no lock (nothing is exclusive across processes or mounts), files show
# to other readers seconds late, and an empty folder does not outlive a restart. One server process serves the
# models folder (Gradio runs every handler in its threads); ZeroGPU's worker, forked from it, writes the package the
# server reserved and takes no reservation itself. So the reservations are a set under a lock in this process, and
# a fork starts with a fresh lock (a thread of the parent may have held it at the fork).


def pid_alive(pid: int, made_at: float) -> bool:
    """Is the process that made a leftover at `made_at` still running? Our own pid counts only for what this process
    made (a restarted container often gets the same pid as the one that crashed)."""
    if pid == os.getpid():
        return made_at >= STARTED - 1
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


RESERVED: set[str] = set()  # the folders (as absolute paths) an operation of this process is writing
RESERVING = threading.Lock()


def fresh_reservation_lock() -> None:
    global RESERVING
    RESERVING = threading.Lock()


os.register_at_fork(after_in_child=fresh_reservation_lock)


def reservation_key(folder: Path) -> str:
    return os.path.abspath(folder)


def reserved(folder: Path) -> bool:
    """An operation of this process is writing this package."""
    return reservation_key(folder) in RESERVED


def try_lock(folder: Path) -> bool:
    """Take the reservation of folder's name; False when an operation holds it."""
    key = reservation_key(folder)
    with RESERVING:
        if key in RESERVED:
            return False
        RESERVED.add(key)
        return True


def unlock(folder: Path) -> None:
    with RESERVING:
        RESERVED.discard(reservation_key(folder))


@contextlib.contextmanager
def reserve_name(models_dir: str | os.PathLike, base: str, *, exact: bool = False) -> Iterator[Path]:
    """Hold a package name for the whole of an operation that writes it (train, import, average, resume), so nothing
    else writes that name meanwhile. exact=False: `base` or the first free `base-N` that is no package yet;
    exact=True: `base` itself (it may be a package: resuming, overwriting), PackageError if another operation holds
    it. Yields the package folder."""
    models_dir = Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    check_name(base)
    name, n = base, 1
    while True:
        folder = models_dir / name
        if exact:
            if not try_lock(folder):
                raise PackageError(f"{name} is being written by another run or upload right now; try again when it "
                                   "has finished, or choose another name.")
            break
        if not folder.exists() and try_lock(folder):
            if not folder.exists():  # an operation that held the name just before us may have finished it
                break
            unlock(folder)
        n += 1
        name = f"{base}-{n}"
    try:
        yield folder
    finally:
        unlock(folder)


@contextlib.contextmanager
def reserve_package(folder: str | os.PathLike, *, overwrite: bool = False,
                    resume: str | os.PathLike | None = None) -> Iterator[Path]:
    """Reserve the exact package `folder` for a command that writes it: an existing package is refused unless
    `overwrite` (or it is the package being resumed), and a shipped one always."""
    folder = Path(folder)
    check_name(folder.name)
    if is_shipped(folder):
        raise PackageError(f"{folder.name} ships with the playground and is never overwritten; choose another --out.")
    resuming = resume is not None and Path(resume).resolve() == folder.resolve()
    if folder.exists() and not (overwrite or resuming):
        raise PackageError(f"{folder} exists already; choose another --out, or pass --overwrite to replace it.")
    with reserve_name(folder.parent, folder.name, exact=True) as reserved_folder:
        yield reserved_folder


def is_package(folder: str | os.PathLike) -> bool:
    folder = Path(folder)
    return not folder.name.startswith(".") and all((folder / f).is_file() for f in REQUIRED)


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


def snapshots_folder(folder: Path) -> Path:
    """Where a run with --average-last keeps its validation snapshots (playground.training.averaging.SnapshotStore): a
    dot-folder, so no package name (a visitor's "x-snapshots" included) ever collides with it."""
    return folder.with_name(f".{folder.name}.snapshots")


def average_name(name: str) -> str:
    """The package a run with --average-last writes at the end: the mean of its last validation snapshots."""
    return f"{name}-avg"


def folder_bytes(folder: Path) -> int:
    try:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    except OSError:  # deleted while counting
        return 0


def disk_bytes(folder: Path) -> int:
    """What a package takes on disk: its files and the snapshots its run keeps (the quotas count both)."""
    return folder_bytes(folder) + folder_bytes(snapshots_folder(folder))


def sweep_leftovers(models_dir: str | os.PathLike, tmp_dir: str | os.PathLike | None = None) -> list[Path]:
    """Remove what belongs to no live operation: `.import-*` and `.NAME.tmp-*` folders of crashed imports and saves,
    `.NAME.old` of a save that crashed between its two renames (put back when NAME is gone), `.NAME.lock` folders
    (older versions' on-disk reservations), `.NAME.snapshots` whose package is gone, and `package-*` export folders
    in tmp_dir (the system's temporary folder by default). Returns what was removed. Safe to run at any time."""
    models_dir, now, removed = Path(models_dir), time.time(), []

    def made_by_dead(path: Path, pid_part: str, ttl: float = STALE_AFTER_S) -> bool:
        try:
            made_at = path.stat().st_mtime
        except OSError:
            return False
        if now - made_at > ttl:
            return True
        return pid_part.isdigit() and not pid_alive(int(pid_part), made_at)

    candidates: list[Path] = []
    if models_dir.is_dir():
        for path in models_dir.iterdir():
            name = path.name
            if name.startswith(".") and name.endswith(".snapshots") and path.is_dir():
                owner = path.with_name(name[1:-len(".snapshots")])
                candidates += [] if is_package(owner) or reserved(owner) else [path]
            elif name.startswith(".") and name.endswith(".lock"):  # an on-disk reservation of an older version
                candidates.append(path)
            elif name.startswith(".") and name.endswith(".old") and path.is_dir():
                if not reserved(path.with_name(name[1:-4])):  # a live save's second rename is due any instant
                    removed += [] if recover_interrupted_save(path) else [path]
            elif name.startswith(".import-"):  # .import-PID-random
                candidates += [path] if made_by_dead(path, name.split("-")[1]) else []
            elif name.startswith(".") and ".tmp-" in name:  # .NAME.tmp-PID-random
                candidates += [path] if made_by_dead(path, name.rsplit(".tmp-", 1)[1].split("-")[0]) else []
    tmp_dir = Path(tmp_dir or tempfile.gettempdir())
    for path in tmp_dir.glob("package-*"):  # package-PID-random, from the Models tab's downloads
        if path.is_dir() and made_by_dead(path, path.name.split("-")[1], EXPORT_TTL_S):
            candidates.append(path)
    for path in candidates:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def temp_prefix(kind: str) -> str:
    """Prefix of a temporary folder that the sweep can attribute to this process."""
    return f"{kind}-{os.getpid()}-"


def export_dir(*key: str) -> Path:
    """An empty temporary folder for one kind of download, e.g. (visitor, package, format): the same key gets the same
    folder, emptied, so repeated downloads replace each other instead of piling up until the sweep (EXPORT_TTL_S)."""
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"{temp_prefix('package')}{digest}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(exist_ok=True)
    return folder


def recover_interrupted_save(old: Path) -> bool:
    """A crash between the two renames of a save leaves only `.NAME.old`: put it back (True); when NAME exists, the
    old copy is deleted (False)."""
    target = old.parent / old.name[1:-4]
    if not target.exists():
        os.replace(old, target)
        return True
    shutil.rmtree(old, ignore_errors=True)
    return False


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
        last = training.get("last") or {}
        if last:
            lines.append("- final validation (the one these weights are from): " + scores_text(last))
        if best:
            metric = (training.get("config") or {}).get("early_stop_metric", "bleu")
            lines.append(f"- best validation (by {SCORE_WORDS.get(metric, metric)}): " + scores_text(best))
    lines += ["", "## Use it", "", "```python", "from playground.package import load_package",
              "from playground.decode import translate", f'pkg = load_package("models/{config["name"]}")',
              'print(translate(pkg.model, pkg.tokenizer, ["your sentence"])[0].text)', "```", ""]
    return "\n".join(lines)


SCORE_WORDS = {"val_loss": "validation loss", "bleu": "BLEU", "chrf": "chrF", "exact_match": "exact match"}


def scores_text(record: dict) -> str:
    """A validation record in words: "step 40: validation loss 2.31 (NLL per token), BLEU 12.3, chrF 40.1, exact
    match 2.0%"."""
    parts = []
    if isinstance(record.get("val_loss"), (int, float)):
        parts.append(f"validation loss {record['val_loss']:.3f} (NLL per token)")
    parts += [f"{SCORE_WORDS[k]} {record[k]:.1f}" for k in ("bleu", "chrf") if isinstance(record.get(k), (int, float))]
    if isinstance(record.get("exact_match"), (int, float)):
        parts.append(f"exact match {record['exact_match']:.1%}")
    return f"step {record.get('step', '?')}: " + ", ".join(parts)


# ----------------------------------------------------------------------------------------------------------
# Loading


def read_limited(path: Path) -> bytes:
    """A package file's bytes, refused past its kind's limit without reading more than that (a card is kilobytes,
    training.json megabytes: see playground.limits)."""
    limit = limits.max_file_bytes(path.name)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as err:
        raise PackageError(f"{path.name} in {path.parent.name} cannot be read ({err.strerror}).") from err
    if len(data) > limit:
        raise PackageError(f"{path.name} in {path.parent.name} is larger than the {limit:,} bytes allowed for it "
                           f"(the operator sets {limits.env_name(path.name)}).")
    return data


def check_containers(data: bytes, what: str) -> None:
    """Refuse JSON with more objects and lists than a package file has, before it is parsed: parsed, each costs
    ~70 bytes of memory whatever its 2 bytes in the file (counted from the brackets: an upper bound, since brackets
    inside strings count too)."""
    containers = data.count(b"{") + data.count(b"[")
    if containers > limits.MAX_JSON_CONTAINERS:
        raise PackageError(f"{what} holds {containers:,} objects and lists; a package file has at most "
                           f"{limits.MAX_JSON_CONTAINERS:,}. It is not a file this playground wrote.")


def read_json(path: Path, check: bool = True) -> dict:
    """A package's JSON file, size-limited, parsed and (check=True) checked against its schema (playground.packages.schema)."""
    data = read_limited(path)
    check_containers(data, f"{path.name} in {path.parent.name}")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PackageError(f"{path.name} in {path.parent.name} is not valid JSON ({err}).") from err
    except RecursionError:
        raise PackageError(f"{path.name} in {path.parent.name} nests too deeply to be a package file.") from None
    if not isinstance(value, dict):
        raise PackageError(f"{path.name} in {path.parent.name} must hold a JSON object.")
    if check and path.name in SCHEMAS:
        schema.validate(value, SCHEMAS[path.name], f"{path.name} in {path.parent.name}")
    return value


def read_config(folder: str | os.PathLike) -> dict:
    folder = Path(folder)
    if not folder.is_dir():
        raise PackageError(f"No model package {folder.name!r}: the folder does not exist.")
    missing = [f for f in REQUIRED if not (folder / f).is_file()]
    if missing:
        raise PackageError(f"{folder.name} is not a complete model package: missing {', '.join(missing)}.")
    config = read_json(folder / CONFIG, check=False)
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise PackageError(
            f"{folder.name} has package format version {version!r}; this playground reads version {FORMAT_VERSION}."
        )
    schema.validate(config, schema.CONFIG, f"config.json in {folder.name}")
    return config


def read_training(folder: Path) -> dict | None:
    return read_json(folder / TRAINING) if (folder / TRAINING).is_file() else None


def safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} from a safetensors header alone: its 8-byte length is checked before the header is read,
    and no tensor data is touched."""
    size = path.stat().st_size
    limit = limits.max_file_bytes(path.name)
    if size > limit:
        raise PackageError(f"{path.name} in {path.parent.name} has {size:,} bytes; at most {limit:,} are allowed "
                           "(the operator sets PLAYGROUND_MAX_PARAMETERS).")
    with open(path, "rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < length <= min(limits.HEADER_BYTES, size - 8):
            raise PackageError(f"{path.name} in {path.parent.name} is corrupt or truncated (its header claims "
                               f"{length:,} bytes).")
        raw = f.read(length)
        check_containers(raw, f"The header of {path.name} in {path.parent.name}")
        try:
            header = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise PackageError(f"{path.name} in {path.parent.name} has a corrupt header ({err}).") from None
    if not isinstance(header, dict):
        raise PackageError(f"{path.name} in {path.parent.name} has a corrupt header.")
    shapes = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                  for n in shape):
            raise PackageError(f"{path.name} in {path.parent.name} has a corrupt header entry for {name!r}.")
        shapes[name] = tuple(shape)
    return shapes


def check_weights(path: Path, model: Transformer) -> None:
    """Compare the safetensors header with the model built from config.json (on the meta device: shapes only),
    before loading anything."""
    state = model.state_dict()
    expected = {k: tuple(v.shape) for k, v in state.items()}
    stored = safetensors_shapes(path)
    try:  # the header must also be one safetensors accepts (offsets inside the file, known dtypes)
        with safe_open(str(path), framework="pt"):
            pass
    except (SafetensorError, OSError, ValueError) as err:
        raise PackageError(f"model.safetensors in {path.parent.name} is corrupt or truncated ({err}).") from err
    unexpected = sorted(set(stored) - set(expected))
    wrong = [f"{k}: file {stored[k]} vs config {expected[k]}" for k in stored if k in expected and stored[k] != expected[k]]
    parameters = dict(model.named_parameters(remove_duplicate=False))
    aliases = {}  # tied weights are one parameter under several names, stored under one of them only
    for name in state:
        aliases.setdefault(id(parameters.get(name, name)), []).append(name)
    missing = [names[0] for names in aliases.values() if not any(n in stored for n in names)]
    if unexpected or wrong or missing:

        def listed(label: str, items: list[str]) -> str:
            return f"{label} {', '.join(items[:3])}{' ...' if len(items) > 3 else ''}" if items else ""

        details = "; ".join(filter(None, [listed("shapes differ:", wrong), listed("missing", missing),
                                          listed("unexpected", unexpected)]))
        raise PackageError(f"The weights in {path.parent.name} do not fit its config.json: {details}.")


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
    cfg = TransformerConfig.from_dict(config["model"])
    check_model_loads(cfg)
    for name in ALLOWED:  # weights are checked from their header below
        path = folder / name
        if name != WEIGHTS and path.is_file() and path.stat().st_size > limits.max_file_bytes(name):
            raise PackageError(f"{name} in {folder.name} is larger than the {limits.max_file_bytes(name):,} bytes "
                               f"allowed for it (the operator sets {limits.env_name(name)}).")
    tokenizer = PairTokenizer.load(folder)
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
        raise PackageError(f"{folder.name} holds no training state to resume from (it was not saved by a training run).")
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


def delete_package(models_dir: str | os.PathLike, name: str) -> None:
    """Delete a package and the snapshots its run kept."""
    folder = package_path(models_dir, name)
    if not is_package(folder):
        raise PackageError(f"There is no model package named {name!r} to delete.")
    if is_shipped(folder):
        raise PackageError(f"{name} ships with the app and is read-only.")
    shutil.rmtree(folder)
    shutil.rmtree(snapshots_folder(folder), ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------
# Zip export and import


def export_zip(folder: str | os.PathLike, dest_dir: str | os.PathLike | None = None, with_state: bool = False) -> Path:
    """Zip the package files; the training state (resume.*, about twice the weights) only `with_state`, for a model
    that is to be trained further on another machine."""
    folder = Path(folder)
    read_config(folder)
    dest = Path(dest_dir or tempfile.mkdtemp(prefix="playground-zip-")) / f"{folder.name}.zip"
    left_out = set() if with_state else {RESUME_TENSORS, RESUME_STATE}
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(ALLOWED - left_out):
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
        limit = limits.max_file_bytes(base)
        if info.file_size > limit:
            raise PackageError(f"{base} in the zip expands to {info.file_size:,} bytes; at most {limit:,} are allowed "
                               f"for it (the operator sets {limits.env_name(base)}). It was refused.")
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
    """Validate a package zip, extract it beside models/, load it once as a check, then move it in: models/ gets
    the whole package or nothing."""
    zip_path, models_dir = Path(zip_path), Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(".import"), dir=models_dir))
    try:
        try:
            folder_name = extract_zip(zip_path, tmp)
        except PackageError:
            raise
        except Exception as err:  # zipfile is not hardened: hostile archives raise many kinds of errors
            raise PackageError(f"{zip_path.name} is not a readable zip file ({type(err).__name__}: {err}).") from err
        try:
            load_package(tmp)  # refuse anything that does not load (every file's size and schema included)
        except PackageError as err:  # named as the visitor knows it, not by the internal folder it was checked in
            raise PackageError(str(err).replace(tmp.name, folder_name)) from err
        # a given name was reserved for this import by its caller (Library.add): that name, or an error, never another
        with reserve_name(models_dir, check_name(name) if name else safe_stem(folder_name), exact=bool(name)) as target:
            if target.exists():
                raise PackageError(f"A model named {target.name} exists already; upload the zip under another name.")
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
