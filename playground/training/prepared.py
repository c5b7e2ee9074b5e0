"""A run's data made ready once, for a run of many time-limited calls (playground.training.chunked, ZeroGPU): the
tokenizer trained (or, resuming, the package's own), the pairs encoded, and both written to a folder that every call
reads.
So no call spends its GPU seconds retraining the tokenizer or re-encoding the corpus, and no call is handed the
corpus by pickle: a call gets the folder's path. JSON and safetensors, no pickle."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from playground.core.tokenizer import PairTokenizer, train_tokenizer
from playground.data.batching import EncodedPairs, TokenRows, encode_pairs
from playground.packages.format import TGT_TOKENIZER, TOKENIZER
from playground.training.config import TrainConfig
from playground.training.inputs import TrainData

DATA, ENCODED = "data.json", "encoded.safetensors"


@dataclass
class Prepared:
    """What a Trainer would otherwise make itself before its first step (Trainer(prepared=...))."""

    tokenizer: PairTokenizer
    train_set: EncodedPairs  # the plain segmentation (a run with BPE-dropout segments each epoch afresh)
    val_set: EncodedPairs
    init_from: str | None = None  # a fine-tuned run's base package, whose tokenizer this is (Trainer(init_from=...))


def package_tokenizer(folder: Path) -> PairTokenizer:
    """The tokenizer a saved package was trained with (what its resumed run must keep)."""
    tgt = folder / TGT_TOKENIZER
    return PairTokenizer.from_json_strings((folder / TOKENIZER).read_text(encoding="utf-8"),
                                           tgt.read_text(encoding="utf-8") if tgt.is_file() else None)


def prepare(cfg: TrainConfig, data: TrainData, folder: str | Path, resume_from: str | Path | None = None,
            init_from: str | Path | None = None) -> Path:
    """Train the tokenizer (or take the package's when resuming, the base's when fine-tuning: `init_from`), encode
    the pairs, write both to `folder`."""
    folder = Path(folder)
    kept = resume_from if resume_from is not None else init_from
    tokenizer = (package_tokenizer(Path(kept)) if kept is not None else
                 train_tokenizer(data.train, kind=cfg.tokenizer, vocab_size=cfg.vocab_size, joint=cfg.joint_vocab))
    train_set = encode_pairs(tokenizer, data.train, cfg.max_sentence_tokens)
    val_set = encode_pairs(tokenizer, data.val, cfg.max_sentence_tokens)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for part, encoded in (("train", train_set), ("val", val_set)):
        for side, rows in (("src", encoded.src), ("tgt", encoded.tgt)):
            tensors[f"{part}.{side}.lengths"], tensors[f"{part}.{side}.ids"] = rows.lengths, rows.ids
    save_file(tensors, str(folder / ENCODED))
    src_json, tgt_json = tokenizer.to_json_strings()
    base = None if init_from is None else str(init_from)
    (folder / DATA).write_text(json.dumps({"data": asdict(data), "tokenizer": [src_json, tgt_json],
                                           "init_from": base}), encoding="utf-8")
    return folder


def load_prepared(folder: str | Path) -> tuple[TrainData, Prepared]:
    """The data and the Prepared that `prepare` wrote."""
    folder = Path(folder)
    saved = json.loads((folder / DATA).read_text(encoding="utf-8"))
    data = train_data(saved["data"])
    tensors = load_file(str(folder / ENCODED))

    def rows(name: str) -> TokenRows:
        return TokenRows(tensors[f"{name}.lengths"].astype(np.int64), tensors[f"{name}.ids"])

    sets = {part: EncodedPairs(rows(f"{part}.src"), rows(f"{part}.tgt")) for part in ("train", "val")}
    return data, Prepared(PairTokenizer.from_json_strings(*saved["tokenizer"]), sets["train"], sets["val"],
                          saved.get("init_from"))


def train_data(fields: dict) -> TrainData:
    """A TrainData from its fields as JSON holds them (its pairs as lists)."""
    return TrainData(**{**fields, "train": [tuple(p) for p in fields["train"]],
                        "val": [tuple(p) for p in fields["val"]]})
