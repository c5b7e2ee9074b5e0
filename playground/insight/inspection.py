"""The data behind the "see inside" views: the figures of the seed articles, computed on the user's own model and
data. Positional encodings (§3.5), the padding and look-ahead masks of a real batch (§3.2.3), decoding step by step
(the next-token table of a translation, greedy versus sampling, and the beams of beam search, §6.1), the padding
that batching by length saves (§5.1), and a 2-D map of the token embeddings (§3.4). Pure functions of a model, its
tokenizer and sentence pairs: no Gradio, no plotting (see model_plots.py, decoding_plots.py and plots.py).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from playground.core.attention import causal_mask
from playground.core.decode import (
    DecodeOptions,
    Hypothesis,
    beam_search,
    filter_logits,
    sample_tokens,
    source_ids,
    translate,
)
from playground.core.model import Transformer, model_device
from playground.core.sequences import pad_batch, sentence_tokens
from playground.core.tokenizer import SPECIAL_TOKENS
from playground.data.batching import collate, encode_pairs, make_batches
from playground.errors import DataError, PlaygroundError
from playground.runtime.request_bounds import server_bounds

Pair = tuple[str, str]
SIDES = ("source", "target")
MAX_BATCHING_PAIRS = 20_000  # pairs encoded for the batching comparison: enough for stable averages, quick to encode
MAX_FREQUENCY_PAIRS = 5_000  # pairs encoded to rank tokens by frequency for the embedding map


def trained_sentence_tokens(model: Transformer) -> int:
    """The trainer's max_sentence_tokens for this model (core.sequences.sentence_tokens)."""
    return sentence_tokens(model.cfg.max_positions)


# ----------------------------------------------------------------------------------------------------------
# Positional encoding


def positional_encoding(model: Transformer, side: str = "source") -> np.ndarray:
    """What the model adds to the token embedding at each position, [max_positions, d_model]: its sinusoidal buffer, or
    for learned encodings the weights of its `positions` embedding (each side learns its own)."""
    if side not in SIDES:
        raise PlaygroundError(f"side must be one of {', '.join(SIDES)}, not {side!r}.")
    embed = model.src_embed if side == "source" else model.tgt_embed
    with torch.no_grad():
        return embed.position_encoding(0, model.cfg.max_positions).float().cpu().numpy()


def curve_dimensions(d_model: int) -> list[int]:
    """Sine dimensions 0, d/16, d/8, d/4 (even, distinct): wavelengths from 2π to a few dozen positions, the
    range a sentence spans; the dimensions after d/4 barely change over one sentence."""
    return sorted({2 * round(d_model * fraction / 2) for fraction in (0, 1 / 16, 1 / 8, 1 / 4)} & set(range(d_model)))


# ----------------------------------------------------------------------------------------------------------
# Masks


@dataclass
class MaskBatch:
    """A few of the user's pairs batched as the trainer batches them on the CPU, with the masks."""

    src_tokens: list[list[str]]  # [B][S] source tokens, "<eos>" and "<pad>" included
    tgt_tokens: list[list[str]]  # [B][T] decoder inputs: "<bos>" + target, padded
    padding_mask: np.ndarray  # [B, S] 1 = a real source token (attention may look at it), 0 = padding
    look_ahead_mask: np.ndarray  # [T, T] 1 where the query at position i may look at the key at position j (j <= i)

    def self_attention_mask(self, row: int) -> np.ndarray:
        """[S, S]: the padding mask of one pair as its encoder self-attention applies it (every query, one row)."""
        mask = self.padding_mask[row]
        return np.broadcast_to(mask, (mask.size, mask.size))


def mask_batch(model: Transformer, tokenizer, pairs: Sequence[Pair], n_pairs: int = 4, seed: int = 0) -> MaskBatch:
    """n_pairs pairs drawn at random (seeded), encoded and padded by the trainer's own code; the padding mask is
    the model's own (`src_key_mask`), the look-ahead mask the one its decoder self-attention applies."""
    if not pairs:
        raise DataError("Load data on the Data tab first: the masks are drawn for a batch of your pairs.")
    chosen = random.Random(seed).sample(pairs, min(max(int(n_pairs), 1), len(pairs)))
    encoded = encode_pairs(tokenizer, chosen, trained_sentence_tokens(model))
    batch = collate(encoded, list(range(len(encoded))), torch.device("cpu"))
    padding = model.src_key_mask(batch.src)[:, 0, 0, :]  # [B, S]
    T = batch.tgt_in.size(1)
    look_ahead = causal_mask(T, T).to(torch.int64)  # the mask the decoder's self-attention applies
    return MaskBatch([tokenizer.src_tokens(row) for row in batch.src.tolist()],
                     [tokenizer.tgt_tokens(row) for row in batch.tgt_in.tolist()],
                     padding.to(torch.int64).numpy(), look_ahead.numpy())


# ----------------------------------------------------------------------------------------------------------
# Decoding step by step


@torch.inference_mode()
def next_token_logprobs(model: Transformer, src_ids: list[int], out_ids: list[int]) -> torch.Tensor:
    """[T, V] float32 log-probabilities on the CPU of the next token at each output position, teacher-forced on the
    output: the distributions the search saw."""
    model.eval()
    device = model_device(model)
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([[model.cfg.bos_id] + out_ids[:-1]], device=device)
    return model(src, tgt_in)[0].float().log_softmax(-1).cpu()


def top_candidates(probs: torch.Tensor, k: int) -> list[list[tuple[int, float]]]:
    """Per row of probs [T, V]: the k most likely token ids with their probabilities, best first."""
    top = probs.topk(min(int(k), probs.size(-1)), dim=-1)
    return [list(zip(ids, ps)) for ids, ps in zip(top.indices.tolist(), top.values.tolist())]


def next_token_table(model: Transformer, tokenizer, src_ids: list[int], out_ids: list[int], k: int = 5) -> list[dict]:
    """For each produced token: the model's top-k next tokens (teacher-forced on the output) with probabilities."""
    probs = next_token_logprobs(model, src_ids, out_ids).exp()
    token = tokenizer.tgt_tokens
    return [{"step": t + 1, "chosen": token([chosen])[0], "chosen_prob": probs[t, chosen].item(),
             "top": [(token([i])[0], p) for i, p in top]}
            for t, (chosen, top) in enumerate(zip(out_ids, top_candidates(probs, k)))]


@dataclass
class SamplingStep:
    """One output position: the model's top candidates, what greedy and sampling would choose, what was taken."""

    step: int  # 1 = the first output token
    candidates: list[tuple[str, float, float]]  # top k: token, p under the model, p under the sampling settings
    greedy: str  # the model's most likely token
    sampled: str  # a seeded draw under temperature / top-k / top-p
    sampled_p: float  # the drawn token's probability under the model
    taken: str  # the token the translation continued with


def check_source(source: str) -> str:
    source = (source or "").strip()
    if not source:
        raise PlaygroundError("Type a source sentence first.")
    return source


def sampling_steps(model: Transformer, tokenizer, source: str, opts: DecodeOptions,
                   k: int = 5) -> tuple[Hypothesis, list[SamplingStep]]:
    """Greedy versus sampling along the translation `opts` makes (greedy, or sampled with its seed): at each step the
    model's top-k next tokens with their probability before and after temperature / top-k / top-p, the greedy
    choice, and a sampled choice. When decoding by sampling, the sampled choice is the token the translation took;
    when decoding greedily, it is a seeded draw from the same settings (what sampling would pick here)."""
    opts = replace(opts, nbest=1)
    if opts.method not in ("greedy", "sample"):
        raise PlaygroundError("The step table follows a greedy or a sampled translation; beam search has beam_steps.")
    translation = translate(model, tokenizer, [check_source(source)], opts, server_bounds())[0]
    hypothesis, out_ids = translation.best, translation.best.ids
    logp = next_token_logprobs(model, translation.source_ids, out_ids)  # [T, V]
    sampling = filter_logits(logp, opts.temperature, opts.top_k, opts.top_p).softmax(-1)
    if opts.method == "sample":
        sampled = torch.tensor(out_ids)
    else:
        generator = torch.Generator().manual_seed(opts.seed if opts.seed is not None else 0)
        sampled = sample_tokens(sampling, generator)
    probs = logp.exp()
    token = tokenizer.tgt_tokens
    steps = []
    for t, (taken, top) in enumerate(zip(out_ids, top_candidates(probs, k))):
        candidates = [(token([i])[0], p, sampling[t, i].item()) for i, p in top]
        drawn = int(sampled[t])
        steps.append(SamplingStep(t + 1, candidates, token([int(probs[t].argmax())])[0], token([drawn])[0],
                                  probs[t, drawn].item(), token([taken])[0]))
    return hypothesis, steps


@dataclass
class BeamNode:
    """A beam at one step of beam search (or the root, step 0), or a hypothesis that ended there."""

    step: int  # 0 = the root (<bos>), 1 = the first output token
    rank: int  # among the open beams of this step (0 = best); for a finished one, its order of finishing
    parent: int  # the rank of the beam it extends, at the previous step
    token: str
    text: str  # the hypothesis so far, decoded
    logp: float  # summed log-probability of its tokens
    finished: bool = False  # ended here, with <eos> or at the length limit
    score: float | None = None  # a finished hypothesis' score: logp / length ** length_penalty


def beam_steps(model: Transformer, tokenizer, source: str, opts: DecodeOptions) -> tuple[list[Hypothesis],
                                                                                         list[BeamNode]]:
    """Beam search on one sentence with its trace: the n-best hypotheses, and every beam at every step as a tree
    (open beams that are never extended, at the search's last step, are left out)."""
    opts = replace(opts, method="beam")
    opts.check()
    model.eval()
    bounds = server_bounds()
    ids = source_ids(tokenizer, [check_source(source)], model.cfg, bounds)
    trace: list[dict] = []
    result = beam_search(model, pad_batch(ids, pad_id=model.cfg.pad_id).to(model_device(model)), opts, trace,
                         bounds.stop_check)
    token = tokenizer.tgt_tokens
    nodes = [BeamNode(0, 0, 0, "<bos>", "", 0.0)]
    previous: list[list[int]] = [[]]  # token ids of each open beam at the previous step, by rank
    n_finished = 0
    for step, record in enumerate(trace, start=1):
        for end in record["finished"]:
            hyp = end["hypothesis"]
            nodes.append(BeamNode(step, n_finished, end["parent"], token(hyp.ids[-1:])[0],
                                  tokenizer.decode_tgt(hyp.ids), sum(hyp.token_logprobs), True, hyp.score))
            n_finished += 1
        parents, tokens, scores = record["parents"][0], record["tokens"][0], record["scores"][0]
        current = [previous[parent] + [tok] for parent, tok in zip(parents, tokens)]
        if step < len(trace):
            nodes.extend(BeamNode(step, rank, parent, token([tok])[0], tokenizer.decode_tgt(ids_), score)
                         for rank, (parent, tok, score, ids_) in enumerate(zip(parents, tokens, scores, current))
                         if math.isfinite(score))
        previous = current
    hypotheses = result.hypotheses[0]
    for h in hypotheses:
        h.text = tokenizer.decode_tgt(h.ids)
    return hypotheses, nodes


# ----------------------------------------------------------------------------------------------------------
# Batching


@dataclass
class BatchingStats:
    """Padding of one way of cutting the pairs into batches (each side padded to the batch's longest sentence)."""

    name: str
    batches: int
    src_padding: float  # mean padding tokens per source sentence
    tgt_padding: float  # mean padding tokens per target sentence (decoder input: <bos> + target)
    real_tokens: list[int]  # per batch: source + target tokens
    padded_tokens: list[int]  # per batch: sentences x (longest source + longest target)

    @property
    def padding_per_sequence(self) -> float:
        return (self.src_padding + self.tgt_padding) / 2

    @property
    def padding_share(self) -> float:
        return 1 - sum(self.real_tokens) / max(sum(self.padded_tokens), 1)


def batch_padding(encoded: Sequence[tuple[list[int], list[int]]], batches: Sequence[Sequence[int]],
                  name: str) -> BatchingStats:
    src_pad = tgt_pad = sentences = 0
    real, padded = [], []
    for batch in batches:
        src = [len(encoded[i][0]) for i in batch]
        tgt = [len(encoded[i][1]) + 1 for i in batch]  # + <bos> (decoder input) or <eos> (its output)
        src_pad += len(src) * max(src) - sum(src)
        tgt_pad += len(tgt) * max(tgt) - sum(tgt)
        sentences += len(batch)
        real.append(sum(src) + sum(tgt))
        padded.append(len(batch) * (max(src) + max(tgt)))
    n = max(sentences, 1)
    return BatchingStats(name, len(batches), src_pad / n, tgt_pad / n, real, padded)


def compare_batching(tokenizer, pairs: Sequence[Pair], batch_tokens: int, max_sentence_tokens: int,
                     seed: int = 0) -> tuple[BatchingStats, BatchingStats]:
    """(random, grouped by length): the trainer's length-grouped batches (playground.data.batching.make_batches) against
    the same pairs shuffled at random into batches of the same sizes, so both hold the same sentences per batch."""
    if not pairs:
        raise DataError("Load data on the Data tab first: batching is measured on your pairs.")
    if len(pairs) > MAX_BATCHING_PAIRS:
        pairs = random.Random(seed).sample(pairs, MAX_BATCHING_PAIRS)
    encoded = encode_pairs(tokenizer, pairs, max_sentence_tokens)
    grouped = make_batches(encoded, int(batch_tokens), seed)
    order = list(range(len(encoded)))
    random.Random(seed).shuffle(order)
    shuffled, start = [], 0
    for batch in grouped:
        shuffled.append(order[start : start + len(batch)])
        start += len(batch)
    return batch_padding(encoded, shuffled, "random batches"), batch_padding(encoded, grouped, "grouped by length")


# ----------------------------------------------------------------------------------------------------------
# Embeddings


@dataclass
class EmbeddingMap:
    """Token embeddings projected on their first two principal components."""

    coords: np.ndarray  # [N, 2]
    labels: list[str]
    groups: list[str]  # where the token occurs in the data: "source only", "target only", "both"; or its side
    explained: tuple[float, float]  # share of the variance along each axis


def pca_2d(vectors: torch.Tensor) -> tuple[np.ndarray, tuple[float, float]]:
    """Rows projected on the first two principal components (exact SVD: N and d are small), and the share of the
    variance each explains."""
    x = vectors.detach().float().cpu()
    x = x - x.mean(0, keepdim=True)
    _, s, vh = torch.linalg.svd(x, full_matrices=False)
    coords = torch.zeros(x.size(0), 2)
    n = min(2, vh.size(0))
    coords[:, :n] = x @ vh[:n].T
    variance = s**2
    share = (variance / variance.sum().clamp_min(1e-12)).tolist() + [0.0, 0.0]
    return coords.numpy(), (share[0], share[1])


def token_counts(tokenizer, pairs: Sequence[Pair]) -> tuple[Counter, Counter]:
    """How often each token id occurs on the source and on the target side of (up to 5,000 of) the pairs."""
    pairs = pairs[:MAX_FREQUENCY_PAIRS]
    src = Counter(i for ids in tokenizer.encode_src_batch([s for s, _ in pairs]) for i in ids)
    tgt = Counter(i for ids in tokenizer.encode_tgt_batch([t for _, t in pairs]) for i in ids)
    return src, tgt


def top_ids(counts: Counter, vocab_size: int, n: int) -> list[int]:
    """The n most frequent non-special ids; without counts, the first n ids of the vocabulary."""
    first = len(SPECIAL_TOKENS)
    if counts:
        return [i for i, _ in counts.most_common() if i >= first][:n]
    return list(range(first, min(first + n, vocab_size)))


def embedding_map(model: Transformer, tokenizer, pairs: Sequence[Pair] = (), n_tokens: int = 200) -> EmbeddingMap:
    """The n most frequent tokens of the pairs (the first n of the vocabulary without data), projected together.
    A joint vocabulary has one table (tied embeddings share it with the output layer): its tokens are grouped by
    the side of the data they occur on. Separate vocabularies: the most frequent tokens of each side's table."""
    n_tokens = max(int(n_tokens), 2)
    src_counts, tgt_counts = token_counts(tokenizer, pairs) if pairs else (Counter(), Counter())
    if model.src_embed.tokens is model.tgt_embed.tokens:
        ids = top_ids(src_counts + tgt_counts, model.cfg.src_vocab_size, n_tokens)
        vectors = model.src_embed.tokens.weight[ids]
        labels = tokenizer.src_tokens(ids)
        if pairs:
            groups = ["both" if src_counts[i] and tgt_counts[i] else "source only" if src_counts[i] else "target only"
                      for i in ids]
        else:
            groups = ["vocabulary"] * len(ids)
    else:
        src_ids = top_ids(src_counts, model.cfg.src_vocab_size, n_tokens // 2)
        tgt_ids = top_ids(tgt_counts, model.cfg.tgt_vocab_size, n_tokens - n_tokens // 2)
        vectors = torch.cat([model.src_embed.tokens.weight[src_ids], model.tgt_embed.tokens.weight[tgt_ids]])
        labels = tokenizer.src_tokens(src_ids) + tokenizer.tgt_tokens(tgt_ids)
        groups = ["source"] * len(src_ids) + ["target"] * len(tgt_ids)
    if len(labels) < 2:
        raise DataError("Too few tokens to project: the data uses fewer than two of the model's tokens.")
    coords, explained = pca_2d(vectors)
    return EmbeddingMap(coords, labels, groups, explained)
