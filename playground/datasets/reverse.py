"""The "reverse" dataset: random symbol sequences paired with the same sequence reversed."""

from __future__ import annotations

import random

from playground.datasets.split import TEST_SIZE, Pair, Split, draw_split

REVERSE_SYMBOLS = tuple("abcdefghijklmnopqrstuvwxyz0123456789")
REVERSE_MIN_LENGTH = 4
REVERSE_MAX_LENGTH = 12


def generate_reverse(seed: int = 0) -> Split:
    """Random space-separated symbol sequences (length 4-12) paired with their reversal."""
    rng = random.Random(seed)

    def draw_pair() -> Pair:
        length = rng.randint(REVERSE_MIN_LENGTH, REVERSE_MAX_LENGTH)
        symbols = [rng.choice(REVERSE_SYMBOLS) for _ in range(length)]
        return " ".join(symbols), " ".join(reversed(symbols))

    return draw_split(draw_pair, train_size=10_000, test_size=TEST_SIZE)
