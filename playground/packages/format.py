"""The package format: its file names and version, the Package a load returns, and the checked reads of its files.

Every read is size-limited and schema-checked (playground.packages.schema) before anything is parsed or allocated, so
a hostile or broken file is refused with a message that names it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from safetensors import SafetensorError, safe_open

from playground import limits
from playground.core.model import Transformer
from playground.core.tokenizer import PairTokenizer
from playground.errors import PackageError
from playground.packages import schema

FORMAT_VERSION = 1
CONFIG, WEIGHTS, TOKENIZER, TGT_TOKENIZER = "config.json", "model.safetensors", "tokenizer.json", "tokenizer.tgt.json"
TRAINING, CARD = "training.json", "README.md"
RESUME_TENSORS, RESUME_STATE = "resume.safetensors", "resume.json"  # optimizer moments and trainer state
REQUIRED = (CONFIG, WEIGHTS, TOKENIZER)
ALLOWED = {CONFIG, WEIGHTS, TOKENIZER, TGT_TOKENIZER, TRAINING, CARD, RESUME_TENSORS, RESUME_STATE}
SCHEMAS = {CONFIG: schema.CONFIG, TRAINING: schema.TRAINING, RESUME_STATE: schema.RESUME}
# Keys renamed since packages were first saved, {file: (section, {old: new})}: "max_len" meant positions in
# config.json and tokens per sentence in training.json; each now has its own name, and an old file still loads.
RENAMED_KEYS = {CONFIG: ("model", {"max_len": "max_positions"}),
                TRAINING: ("config", {"max_len": "max_sentence_tokens"})}


@dataclass
class Package:
    """A loaded package (playground.packages.store.load_package): the model, its tokenizer and its JSON files."""

    path: Path
    model: Transformer
    tokenizer: PairTokenizer
    config: dict  # the whole config.json
    training: dict | None  # training.json, when the model was trained here

    @property
    def name(self) -> str:
        return self.path.name


def is_package(folder: str | os.PathLike) -> bool:
    folder = Path(folder)
    return not folder.name.startswith(".") and all((folder / f).is_file() for f in REQUIRED)


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
    """Refuse JSON with more objects and lists, or more values, than a package file has, before it is parsed:
    parsed, a container costs ~70 bytes of memory whatever its 2 bytes in the file, a number ~35 (counted from the
    brackets and the commas: upper bounds, since those inside strings count too)."""
    containers = data.count(b"{") + data.count(b"[")
    if containers > limits.MAX_JSON_CONTAINERS:
        raise PackageError(f"{what} holds {containers:,} objects and lists; a package file has at most "
                           f"{limits.MAX_JSON_CONTAINERS:,}. It is not a file this playground wrote.")
    values = data.count(b",") + 1
    if values > limits.MAX_JSON_VALUES:
        raise PackageError(f"{what} holds about {values:,} values; a package file has at most "
                           f"{limits.MAX_JSON_VALUES:,}. It is not a file this playground wrote.")


def read_json(path: Path, check: bool = True) -> dict:
    """A package's JSON file, size-limited, parsed and (check=True) checked against its schema
    (playground.packages.schema)."""
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
    rename_old_keys(value, path.name)
    if check and path.name in SCHEMAS:
        schema.validate(value, SCHEMAS[path.name], f"{path.name} in {path.parent.name}")
    return value


def rename_old_keys(value: dict, file_name: str) -> None:
    """Rename, in place, the keys of a package file saved under an older name (RENAMED_KEYS); a new name given too
    wins."""
    section, renames = RENAMED_KEYS.get(file_name, ("", {}))
    fields = value.get(section)
    if isinstance(fields, dict):
        for old, new in renames.items():
            if old in fields:
                fields.setdefault(new, fields.pop(old))


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


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
    """training.json, or None; a history longer than limits.max_history_points() is thinned as it is read
    (thinned_history), so a run of a million steps, or a file made to look like one, costs every reader (charts,
    Compare, a resumed run) what that many points cost."""
    if not (folder / TRAINING).is_file():
        return None
    training = read_json(folder / TRAINING)
    if training.get("history"):
        training["history"] = thinned_history(training["history"], limits.max_history_points())
    return training


def thinned_history(history: dict, max_points: int) -> dict:
    """Each of a history's lists (steps, loss, lr, elapsed, validations, probes) cut to about max_points (every_kth).
    Lists of one length keep the same points, so steps and their losses stay paired."""
    return {key: every_kth(values, max_points) if isinstance(values, list) else values
            for key, values in history.items()}


def every_kth(values: list, max_points: int) -> list:
    """Every k-th value and the last, at most about max_points of them (all when there are no more)."""
    if len(values) <= max(max_points, 1):
        return values
    stride = -(-len(values) // max(max_points, 1))
    return values[::stride] + ([] if (len(values) - 1) % stride == 0 else values[-1:])


PROBE_CELLS_SAVED = 250_000  # the probes of a saved record together: ~5 MB as written, within training.json's 16 MB


def saved_history(history: dict) -> dict:
    """A history as a package keeps it: thinned as it is read (thinned_history), and its probes to evenly spaced
    validations (the last kept) holding at most PROBE_CELLS_SAVED attention weights together, so that the record
    of a long run (a probe every validation) stays within its file's limits and loads again."""
    history = thinned_history(history, limits.max_history_points())
    probes = history.get("probe") or []
    cells = sum(len(p["cross"]) * len(p["cross"][0]) * len(p["cross"][0][0]) for p in probes
                if p.get("cross") and p["cross"][0])
    if cells > PROBE_CELLS_SAVED:
        history["probe"] = every_kth(probes, len(probes) * PROBE_CELLS_SAVED // cells)
    return history


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
        if len(head) < 8:
            raise PackageError(f"{path.name} in {path.parent.name} has {size:,} bytes, too few for a safetensors "
                               "file: it is truncated.")
        length = int.from_bytes(head, "little")
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
    wrong = [f"{k}: file {stored[k]} vs config {expected[k]}" for k in stored
             if k in expected and stored[k] != expected[k]]
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


def saved_config(training: dict | None) -> dict:
    """The TrainConfig settings in a package's training record (training.json); {} for a package not trained here."""
    return dict((training or {}).get("config") or {})
