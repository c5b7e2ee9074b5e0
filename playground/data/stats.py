"""Corpus statistics shown before training, and the one rule that splits pairs into training and validation."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from playground.data.packed import Pair
from playground.errors import DataError

MAX_VALIDATION_PAIRS = 1000  # enough for a stable BLEU; more only slows every validation down


def split_sizes(n_pairs: int, val_fraction: float, max_val: int = MAX_VALIDATION_PAIRS) -> tuple[int, int]:
    """(train, validation) sizes of `n_pairs` split by split_pairs: ``val_fraction`` of the pairs are held out, at
    most ``max_val`` and at least 1, never all of them. Fewer than 2 pairs cannot be split: (n_pairs, 0)."""
    if n_pairs < 2:
        return n_pairs, 0
    n_val = min(max(1, round(n_pairs * val_fraction)), max(1, max_val), n_pairs - 1)
    return n_pairs - n_val, n_val


def split_pairs(
    pairs: Sequence[Pair], val_fraction: float = 0.05, seed: int = 0, max_val: int = MAX_VALIDATION_PAIRS
) -> tuple[list[Pair], list[Pair]]:
    """Split into (train, validation), deterministic for a given seed; both keep the original order.

    The validation set gets ``val_fraction`` of the pairs, at most ``max_val`` and at least 1, and never all of them.
    """
    if len(pairs) < 2:
        raise DataError(f"Need at least 2 sentence pairs to split into training and validation data, got {len(pairs)}.")
    if not 0 <= val_fraction < 1:
        raise DataError(f"val_fraction must be at least 0 and below 1, not {val_fraction}.")
    _, n_val = split_sizes(len(pairs), val_fraction, max_val)
    val_indices = set(random.Random(seed).sample(range(len(pairs)), n_val))
    train = [pair for i, pair in enumerate(pairs) if i not in val_indices]
    val = [pair for i, pair in enumerate(pairs) if i in val_indices]
    return train, val


@dataclass
class SideStats:
    """Lengths (in whitespace tokens) and vocabulary of one side, source or target."""

    tokens: int  # total whitespace tokens
    mean_len: float
    median_len: float
    longest_len: int
    p95_len: int  # 95th percentile, nearest rank
    lengths: list[int]  # one per pair, the data for a length histogram
    vocab_size: int  # distinct whitespace tokens
    chars: int


@dataclass
class PairStats:
    """Corpus statistics shown before training: how long the sentences are and how many words there are."""

    num_pairs: int
    src: SideStats
    tgt: SideStats

    def as_dict(self) -> dict:
        """Plain nested dict (JSON-serialisable)."""
        return asdict(self)


def pair_stats(pairs: Sequence[Pair]) -> PairStats:
    """Statistics of both sides; all zeros for no pairs."""
    return PairStats(len(pairs), _side_stats([src for src, _ in pairs]), _side_stats([tgt for _, tgt in pairs]))


def _side_stats(texts: list[str]) -> SideStats:
    vocabulary: set[str] = set()
    lengths = []
    for text in texts:
        words = text.split()
        vocabulary.update(words)
        lengths.append(len(words))
    if not lengths:
        return SideStats(0, 0.0, 0.0, 0, 0, [], 0, 0)
    ordered = sorted(lengths)
    return SideStats(
        tokens=sum(lengths),
        mean_len=sum(lengths) / len(lengths),
        median_len=float(statistics.median(ordered)),
        longest_len=ordered[-1],
        p95_len=ordered[math.ceil(0.95 * len(ordered)) - 1],
        lengths=lengths,
        vocab_size=len(vocabulary),
        chars=sum(map(len, texts)),
    )
