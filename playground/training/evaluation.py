"""Validating a model in training: the loss on held-out pairs, BLEU/chrF of greedy translations, a few samples, the
cross-attention of one pair to watch alignment form, and early stopping's rule for what counts as better."""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import replace
from typing import Sequence

import torch

from playground.core.attention_maps import attention_maps
from playground.core.decode import DecodeOptions, translate
from playground.core.metrics import score
from playground.core.model import Transformer
from playground.core.tokenizer import BOS_ID, PAD_ID, PairTokenizer
from playground.data.batching import EncodedPair, EncodedPairs, collate, make_batches
from playground.limits import TimeLimit, time_limit
from playground.packages.scores import SCORE_KEYS
from playground.runtime.device import autocast, decoding_precision
from playground.runtime.request_bounds import server_bounds
from playground.training.loss import smoothed_loss_sum

SHOWN_SAMPLES = 5  # sample translations an "eval" event carries
DECODE_CHUNK = 16  # sentences a time-limited validation decodes first, between looks at the clock ...
DECODE_BATCH = DecodeOptions().batch_size  # ... and at most, once its time allows: on one CPU thread a chunk of 16
# decoded the small preset's validation sentences at half the speed of chunks of 64 (the search's batch)


@torch.inference_mode()
def validation_loss(model: Transformer, val_set: EncodedPairs, batch_tokens: int, device: torch.device,
                    precision: str, multiple: int = 1, until: float | None = None) -> float:
    """Plain NLL per target token (no label smoothing): comparable across runs with different smoothing. Batches
    padded as the run's (batching.pad_multiple: shapes whose kernels are compiled already). With `until` (a
    time.perf_counter() deadline), the batches after it are left out (the first one always counts)."""
    model.eval()
    total, count = torch.zeros((), device=device), 0
    for indices in make_batches(val_set, batch_tokens, 0, multiple):
        if count and until is not None and time.perf_counter() > until:
            break
        batch = collate(val_set, indices, device, multiple)
        with autocast(device, precision):
            logits = model(batch.src, batch.tgt_in)
        total += smoothed_loss_sum(logits, batch.tgt_out, 0.0, PAD_ID)
        count += batch.n_tokens
    return total.item() / max(count, 1)


def translation_scores(model: Transformer, tokenizer: PairTokenizer, pairs: list[tuple[str, str]],
                       device: torch.device, precision: str, seconds: float | None = None,
                       until: float | None = None) -> tuple[dict, list[dict]]:
    """BLEU, chrF and exact match of greedy translations of `pairs`, and the first few as samples; "sentences" says
    how many were decoded. With `seconds`, only the chunks (next_chunk) started within that time (at least one: an
    untrained model decodes every sentence to its length limit); with `until` (a time.perf_counter() deadline),
    decoding stops there, between two steps, maybe before the first sentence (the scores then read 0)."""
    began, hyps, start = time.perf_counter(), [], 0
    chunk = DECODE_CHUNK if seconds is not None or until is not None else max(len(pairs), 1)
    with autocast(device, decoding_precision(device, precision)):
        while start < len(pairs):
            if hyps and seconds is not None and time.perf_counter() - began >= seconds:
                break
            left = None if until is None else until - time.perf_counter()
            if left is not None and left <= 0:
                break
            sources = [s for s, _ in pairs[start : start + chunk]]
            try:
                with time_limit(left, "") if left is not None else contextlib.nullcontext():
                    hyps += [t.text for t in translate(model, tokenizer, sources, DecodeOptions("greedy"),
                                                       replace(server_bounds(), weight_copies=False))]
            except TimeLimit:
                break
            start += len(sources)
            chunk = next_chunk(chunk, len(hyps), time.perf_counter() - began, seconds, until)
    done = pairs[: len(hyps)]
    scores = score(hyps, [r for _, r in done]) if hyps else None
    samples = [{"source": s, "reference": r, "hypothesis": h} for (s, r), h in list(zip(done, hyps))[:SHOWN_SAMPLES]]
    return {"bleu": scores.bleu if scores else 0.0, "chrf": scores.chrf if scores else 0.0,
            "exact_match": scores.exact_match if scores else 0.0, "sentences": len(hyps)}, samples


def next_chunk(chunk: int, decoded: int, spent: float, seconds: float | None, until: float | None) -> int:
    """The sentences a time-limited validation decodes next, `decoded` in `spent` seconds so far: as many as its time
    left holds at that pace, from DECODE_CHUNK up to DECODE_BATCH (a trained model's short outputs fill whole
    batches; an untrained model's long ones stay in small chunks, so the clock is looked at often)."""
    if seconds is None and until is None:
        return chunk
    left = min(math.inf if seconds is None else seconds - spent,
               math.inf if until is None else until - time.perf_counter())
    fits = left * decoded / max(spent, 1e-9)
    return int(min(DECODE_BATCH, max(DECODE_CHUNK, fits)))


def probe_attention(model: Transformer, tokenizer: PairTokenizer, pair: EncodedPair) -> dict:
    """Cross-attention of one encoded pair, teacher-forced, to watch alignment form: "cross" is
    [layers, target-input positions, source positions], the mean over heads of every layer."""
    src_ids, tgt_ids = pair
    maps = attention_maps(model, tokenizer, src_ids, [BOS_ID] + tgt_ids, server_bounds().attention_cells)
    return {"cross": maps["cross"].mean(axis=1).round(4).tolist(), "src_tokens": maps["src_tokens"],
            "tgt_tokens": maps["tgt_tokens"]}


def perplexity(val_loss: float) -> float:
    return math.exp(min(val_loss, 50))


BLEU_WORDS = 4  # BLEU's longest n-gram: on references shorter than this it reads 0 whatever the model does


def judging_metric(metric: str, pairs: Sequence[tuple[str, str]]) -> str:
    """The early-stopping metric a run uses: "auto" is BLEU, or chrF where most validation references are shorter
    than BLEU's four words (the numbers dataset's single words: BLEU 0.0 beside 73% exact match)."""
    if metric != "auto":
        return metric
    lengths = sorted(len(tgt.split()) for _, tgt in pairs) or [BLEU_WORDS]
    return "bleu" if lengths[len(lengths) // 2] >= BLEU_WORDS else "chrf"


def time_cut_note(step: int, decoded: int, asked: int, until: float | None) -> str:
    """What the run's time cap (`until`) cut from the validation at `step`, in words; "" when it cut nothing."""
    if until is None or decoded >= asked or time.perf_counter() < until:
        return ""
    return (f"The run's time budget ended during the validation at step {step:,}: its BLEU and chrF are of the first "
            f"{decoded:,} of {asked:,} sentences{' (none: they read 0)' if not decoded else ''}.")


def is_better(record: dict, best: dict | None, metric: str) -> bool:
    """Early stopping's rule: higher `metric` is better (lower for val_loss); ties go to the lower validation loss
    (BLEU is 0 on one-word targets, for one)."""
    def rank(r: dict) -> tuple[float, float]:
        return (-r[metric] if metric == "val_loss" else r[metric], -r["val_loss"])

    return best is None or rank(record) > rank(best)


class EarlyStopping:
    """The best validation so far by the run's metric (is_better), and the validations since that were no better:
    `patience` of them in a row end the run."""

    def __init__(self, metric: str, patience: int | None, best: dict | None = None, bad_evals: int = 0):
        self.metric, self.patience, self.best, self.bad_evals = metric, patience, best, bad_evals

    def judge(self, record: dict) -> bool:
        """Whether `record` is the best so far: then it is kept as the best, else it counts against the patience."""
        better = is_better(record, self.best, self.metric)
        if better:
            self.best, self.bad_evals = {k: record[k] for k in ("step", *SCORE_KEYS)}, 0
        else:
            self.bad_evals += 1
        return better

    @property
    def out_of_patience(self) -> bool:
        return self.patience is not None and self.bad_evals >= self.patience
