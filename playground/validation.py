"""Validation: the loss on held-out pairs, BLEU/chrF of greedy translations, a few samples, the cross-attention of
one pair to watch alignment form, and early stopping's rule for what counts as better."""

from __future__ import annotations

import math
import time

import torch

from playground.batching import EncodedPair, collate, make_batches, pad_multiple
from playground.decode import DecodeOptions, attention_maps, translate
from playground.device import autocast
from playground.loss import smoothed_loss_sum
from playground.metrics import score
from playground.model import Transformer
from playground.tokenizer import BOS_ID, PAD_ID, PairTokenizer

SHOWN_SAMPLES = 5  # sample translations an "eval" event carries
DECODE_CHUNK = 16  # sentences a time-limited validation decodes between looks at the clock


@torch.inference_mode()
def validation_loss(model: Transformer, val_set: list[EncodedPair], batch_tokens: int, device: torch.device,
                    precision: str) -> float:
    """Plain NLL per target token (no label smoothing): comparable across runs with different smoothing."""
    model.eval()
    total, count = torch.zeros((), device=device), 0
    for indices in make_batches(val_set, batch_tokens, 0, pad_multiple(device)):
        batch = collate(val_set, indices, device)
        with autocast(device, precision):
            logits = model(batch.src, batch.tgt_in)
        total += smoothed_loss_sum(logits, batch.tgt_out, 0.0, PAD_ID)
        count += batch.n_tokens
    return total.item() / max(count, 1)


def translation_scores(model: Transformer, tokenizer: PairTokenizer, pairs: list[tuple[str, str]],
                       device: torch.device, precision: str,
                       seconds: float | None = None) -> tuple[dict, list[dict], int]:
    """BLEU, chrF and exact match of greedy translations of `pairs`, the first few as samples, and how many pairs
    were decoded: all of them, or with `seconds` the chunks of DECODE_CHUNK that were started within that time (at
    least one; an untrained model decodes every sentence to its length limit)."""
    began, hyps = time.perf_counter(), []
    with autocast(device, precision):
        for start in range(0, len(pairs), DECODE_CHUNK if seconds is not None else max(len(pairs), 1)):
            if hyps and seconds is not None and time.perf_counter() - began >= seconds:
                break
            chunk = [s for s, _ in pairs[start : start + (DECODE_CHUNK if seconds is not None else len(pairs))]]
            hyps += [t.text for t in translate(model, tokenizer, chunk, DecodeOptions("greedy"))]
    decoded = pairs[: len(hyps)]
    scores = score(hyps, [r for _, r in decoded])
    samples = [{"source": s, "reference": r, "hypothesis": h} for (s, r), h in list(zip(decoded, hyps))[:SHOWN_SAMPLES]]
    return {"bleu": scores.bleu, "chrf": scores.chrf, "exact_match": scores.exact_match}, samples, len(hyps)


def probe_attention(model: Transformer, tokenizer: PairTokenizer, pair: EncodedPair) -> dict:
    """Cross-attention of one encoded pair, teacher-forced, to watch alignment form: "cross" is
    [layers, target-input positions, source positions], the mean over heads of every layer."""
    src_ids, tgt_ids = pair
    maps = attention_maps(model, tokenizer, src_ids, [BOS_ID] + tgt_ids)
    return {"cross": maps["cross"].mean(axis=1).round(4).tolist(), "src_tokens": maps["src_tokens"],
            "tgt_tokens": maps["tgt_tokens"]}


def perplexity(val_loss: float) -> float:
    return math.exp(min(val_loss, 50))


def is_better(record: dict, best: dict | None, metric: str) -> bool:
    """Early stopping's rule: higher `metric` is better (lower for val_loss); ties go to the lower validation loss
    (BLEU is 0 on one-word targets, for one)."""
    def rank(r: dict) -> tuple[float, float]:
        return (-r[metric] if metric == "val_loss" else r[metric], -r["val_loss"])

    return best is None or rank(record) > rank(best)
