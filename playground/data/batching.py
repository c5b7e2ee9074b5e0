"""Batches as the paper makes them: pairs grouped by length into batches of about `batch_tokens` tokens (fairseq's
max-tokens), each side padded to its batch's longest sentence."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from playground.core.sequences import pad_batch
from playground.core.tokenizer import BOS_ID, EOS_ID, PairTokenizer

EncodedPair = tuple[list[int], list[int]]
ENCODE_CHUNK = 2048  # pairs tokenised at a time: the tokenizer's per-sentence objects exist for this many only


@dataclass
class Batch:
    src: torch.Tensor  # [B,S] source tokens + <eos>, padded
    tgt_in: torch.Tensor  # [B,T] <bos> + target tokens
    tgt_out: torch.Tensor  # [B,T] target tokens + <eos>
    n_tokens: int  # real target tokens (what the loss is averaged over)
    n_src_tokens: int


@dataclass
class GlobalBatch:
    """What one optimizer step consumes, on all ranks together (see Trainer.next_global_batch)."""

    mine: list[Batch]  # this rank's micro-batches
    n_tokens: int  # real target tokens of every rank's micro-batches: what the step's loss is averaged over
    n_all_tokens: int  # source + target tokens of every rank's micro-batches


def round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


class TokenRows:
    """Rows of token ids end to end in one int32 array, with where each row starts: 4 bytes a token, where a list
    of Python ints costs about 36 (an int object and a pointer to it)."""

    def __init__(self, lengths: np.ndarray, ids: np.ndarray):
        self.lengths, self.ids = lengths, ids
        self.starts = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(lengths)])

    @classmethod
    def from_lists(cls, rows: list[list[int]]) -> "TokenRows":
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        return cls(lengths, np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(lengths.sum())))

    @classmethod
    def concatenate(cls, parts: list["TokenRows"]) -> "TokenRows":
        return cls(np.concatenate([p.lengths for p in parts]), np.concatenate([p.ids for p in parts]))

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> list[int]:
        return self.ids[self.starts[i] : self.starts[i + 1]].tolist()


class EncodedPairs(Sequence):
    """A corpus encoded once, up front, held compactly (TokenRows): item i is (source + <eos>, target without
    specials) as lists, like a list of EncodedPair. Multi30k's 29k pairs take 3.5 MB here against ~40 MB of lists,
    and the lengths that batching sorts by are at hand without touching the tokens."""

    def __init__(self, src: TokenRows, tgt: TokenRows):
        self.src, self.tgt = src, tgt

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> EncodedPair:
        if not -len(self) <= i < len(self):
            raise IndexError(f"pair {i} of {len(self)}")
        i %= len(self)
        return self.src[i], self.tgt[i]

    def __iter__(self) -> Iterator[EncodedPair]:
        return (self[i] for i in range(len(self)))


def encode_pairs(tokenizer: PairTokenizer, pairs: list[tuple[str, str]], max_sentence_tokens: int) -> EncodedPairs:
    """Tokenise once, up front: source + <eos>, target without specials; pairs too long for the model are cut.
    In chunks, so the tokenizer's output for the whole corpus never exists at once."""
    src_parts, tgt_parts = [TokenRows.from_lists([])], [TokenRows.from_lists([])]  # so that no pairs make no rows
    for start in range(0, len(pairs), ENCODE_CHUNK):
        chunk = pairs[start : start + ENCODE_CHUNK]
        src = tokenizer.encode_src_batch([s for s, _ in chunk])
        tgt = tokenizer.encode_tgt_batch([t for _, t in chunk])
        src_parts.append(TokenRows.from_lists([s[:max_sentence_tokens] + [EOS_ID] for s in src]))
        tgt_parts.append(TokenRows.from_lists([t[:max_sentence_tokens] for t in tgt]))
    return EncodedPairs(TokenRows.concatenate(src_parts), TokenRows.concatenate(tgt_parts))


def make_batches(encoded: EncodedPairs, batch_tokens: int, seed: int, multiple: int = 1) -> list[list[int]]:
    """Indices of pairs grouped by length into batches of at most `batch_tokens` padded tokens (fairseq's
    max-tokens): sort with a little seeded noise, cut greedily, shuffle the batch order."""
    rng = random.Random(seed)
    batches = list(cut_batches(encoded, length_order(encoded, rng), batch_tokens, multiple))
    rng.shuffle(batches)
    return batches


def length_order(encoded: EncodedPairs, rng: random.Random) -> list[int]:
    """The pairs' indices sorted by source, then target length, ties in a seeded random order."""
    src_lengths, tgt_lengths = encoded.src.lengths.tolist(), encoded.tgt.lengths.tolist()
    return sorted(range(len(encoded)), key=lambda i: (src_lengths[i], tgt_lengths[i], rng.random()))


def cut_batches(encoded: EncodedPairs, order: list[int], batch_tokens: int, multiple: int) -> Iterator[list[int]]:
    """`order` cut greedily into batches of at most `batch_tokens` tokens, each side padded to a `multiple`; one
    at a time, so that a caller may stop early (pad_multiple)."""
    src_lengths, tgt_lengths = encoded.src.lengths.tolist(), encoded.tgt.lengths.tolist()
    current, longest = [], 0
    for i in order:
        pair_len = round_up(src_lengths[i], multiple) + round_up(tgt_lengths[i] + 1, multiple)
        if current and (len(current) + 1) * max(longest, pair_len) > batch_tokens:
            yield current
            current, longest = [], 0
        current.append(i)
        longest = max(longest, pair_len)
    if current:
        yield current


SHAPES_KEPT = 32  # an epoch's batch shapes whose bf16 kernels oneDNN keeps (about 15 each; memory.ONEDNN_KERNELS_KEPT)


def pad_multiple(device: torch.device, precision: str, encoded: EncodedPairs, batch_tokens: int) -> int:
    """Each side of a batch is padded to a multiple of this. 8 on a GPU, for its tensor cores. 1 on a CPU in float32,
    where every pad token is waste.

    On a CPU in bf16, the smallest of 1, 2, 4 and 8 that leaves an epoch at most SHAPES_KEPT batch shapes. oneDNN,
    which runs bf16 products there, compiles kernels for each new matrix shape (2.6 to 8.9 ms each, measured). An
    epoch brings the same shapes each time, so kernels that stay cached are compiled once. With exact lengths, an
    epoch of Multi30k at 4,096 tokens has 166 shapes, too many to keep, so a step kept compiling. Padded to 8 it has 23:
    1.3x the real tokens a second, though padding rises from 5% to 22% (docs/BENCHMARKS.md, section 1). Of the
    built-in datasets, reverse and numbers have 10 and 9 shapes unpadded and keep them; mini-translation has 39, and
    24 padded to 2."""
    if device.type == "cuda":
        return 8
    if precision != "bf16":
        return 1
    # ties between pairs of the same lengths cannot change a shape, so a plain (fast) sort does: no seeded noise
    order = np.lexsort((encoded.tgt.lengths, encoded.src.lengths)).tolist()
    for multiple in (1, 2, 4):
        shapes = set()
        for batch in cut_batches(encoded, order, batch_tokens, multiple):
            shapes.add(batch_shape(encoded, batch, multiple))
            if len(shapes) > SHAPES_KEPT:  # too many already: the rest of a big dataset need not be cut
                break
        else:
            return multiple
    return 8


def batch_shape(encoded: EncodedPairs, indices: list[int], multiple: int) -> tuple[int, int, int]:
    """(sentences, source length, target length) of the batch `collate` makes of `indices`."""
    return (len(indices), round_up(int(encoded.src.lengths[indices].max()), multiple),
            round_up(int(encoded.tgt.lengths[indices].max()) + 1, multiple))


def token_counts(encoded: EncodedPairs, indices: list[int]) -> tuple[int, int]:
    """(real target tokens, source tokens) of a batch, without building it."""
    return int(encoded.tgt.lengths[indices].sum()) + len(indices), int(encoded.src.lengths[indices].sum())


def collate(encoded: EncodedPairs, indices: list[int], device: torch.device, multiple: int = 1) -> Batch:
    """Pad (each side to a multiple of `multiple`: pad_multiple) and move to the device in one copy."""
    pairs = [encoded[i] for i in indices]
    _, S, T = batch_shape(encoded, indices, multiple)
    src = pad_batch([s for s, _ in pairs], S)
    tgt_in = pad_batch([[BOS_ID] + t for _, t in pairs], T)
    tgt_out = pad_batch([t + [EOS_ID] for _, t in pairs], T)
    n_tokens, n_src = token_counts(encoded, indices)
    non_blocking = device.type == "cuda"
    return Batch(src.to(device, non_blocking=non_blocking), tgt_in.to(device, non_blocking=non_blocking),
                 tgt_out.to(device, non_blocking=non_blocking), n_tokens, n_src)
