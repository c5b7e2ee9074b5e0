"""What a run trains on, step by step: the sentence pairs (TrainData), their ids for an epoch (BPE-dropout segments
them afresh each epoch), the epoch's batch list, and the global batch one optimizer step consumes across ranks and
micro-batches. Every rank, and a resumed run, computes the same ones from the run's seed and the epoch."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import torch

from playground.core.tokenizer import PairBpeDropout, PairTokenizer, train_tokenizer
from playground.data.batching import GlobalBatch, collate, encode_pairs, make_batches, token_counts
from playground.data.languages import check_language
from playground.errors import TrainingError
from playground.training.config import TrainConfig
from playground.training.distributed import Ranks, agree

Pair = tuple[str, str]


@dataclass
class TrainData:
    train: list[Pair]
    val: list[Pair]
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    description: str = "user data"

    def __post_init__(self) -> None:
        check_language(self.src_lang, "source language")
        check_language(self.tgt_lang, "target language")


def run_fingerprint(cfg: TrainConfig, data: TrainData) -> str:
    """A hash of the settings and the sentence pairs, to check that every rank trains on the same ones."""
    digest = hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode())
    for part in (data.train, data.val):
        digest.update(f"\0{len(part)}\0".encode())
        for source, target in part:
            digest.update(f"{source}\t{target}\n".encode())
    return digest.hexdigest()


def shared_tokenizer(data: TrainData, cfg: TrainConfig, ranks: Ranks) -> PairTokenizer:
    """The run's tokenizer, trained on the training pairs by rank 0 and sent to the others as JSON: every rank must
    map text to the very same ids, whatever the library versions on other machines do."""
    trained = None
    if ranks.is_main:
        trained = train_tokenizer(data.train, kind=cfg.tokenizer, vocab_size=cfg.vocab_size, joint=cfg.joint_vocab)
    if not ranks.distributed:
        return trained
    return PairTokenizer.from_json_strings(*agree(trained.to_json_strings() if trained else None, ranks))


def encode_epoch(tokenizer: PairTokenizer, segmenter: PairBpeDropout | None, pairs: list[Pair], cfg: TrainConfig,
                 epoch: int) -> list[tuple[list[int], list[int]]]:
    """The training pairs as ids: segmented once, or with BPE-dropout afresh each epoch, seeded by the run's seed
    and the epoch (every rank, and a resumed run, segments an epoch alike)."""
    if segmenter is None:
        return encode_pairs(tokenizer, pairs, cfg.max_sentence_tokens)
    return encode_pairs(segmenter.reseeded(f"{cfg.seed}/{epoch}"), pairs, cfg.max_sentence_tokens)


def epoch_batch_list(train_set, cfg: TrainConfig, epoch: int, multiple: int, ranks: Ranks) -> list[list[int]]:
    """The epoch's batch list, the same on every rank (seeded by the run's seed and the epoch); each side padded to
    a multiple of `multiple` (batching.pad_multiple)."""
    batches = make_batches(train_set, cfg.batch_tokens, cfg.seed + epoch, multiple)
    per_step = ranks.world_size * cfg.accumulate
    if len(batches) < per_step:
        raise TrainingError(
            f"One optimizer step takes {per_step} batches ({ranks.world_size} processes x "
            f"accumulate {cfg.accumulate}) but the training data makes only {len(batches)} batches of "
            f"{cfg.batch_tokens} tokens; lower batch tokens, accumulate or the number of processes.")
    return batches


def global_batch(batches: list[list[int]], train_set, start: int, accumulate: int, ranks: Ranks,
                 device: torch.device, multiple: int) -> GlobalBatch:
    """This rank's share of the optimizer step whose batches begin at `start` of the epoch's batch list.

    Every rank holds the same seeded batch list for the epoch. One optimizer step consumes the next
    G = world size x accumulate batches of it, the *global batch*; rank r trains on its positions r, r+W, r+2W,
    ..., one micro-batch at a time. Optimization.step sums the loss over all G batches and divides by their
    total target tokens, so the gradient is that of one batch of the combined size however the G batches are
    split: 2 ranks with accumulate 1 compute what 1 process with accumulate 2 computes on the same global
    batches (up to the order of floating-point sums). The token counts come from the shared batch list, so no
    rank has to ask the others for them."""
    step_batches = batches[start : start + ranks.world_size * accumulate]
    counts = [token_counts(train_set, indices) for indices in step_batches]
    mine = [collate(train_set, indices, device, multiple) for indices in step_batches[ranks.rank :: ranks.world_size]]
    return GlobalBatch(mine, n_tokens=sum(tgt for tgt, _ in counts), n_all_tokens=sum(tgt + src for tgt, src in counts))
