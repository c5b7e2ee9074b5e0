"""Drawing a built-in dataset's held-out test set and its training pairs so that the two never overlap."""

from __future__ import annotations

from collections.abc import Callable

Pair = tuple[str, str]
Split = tuple[list[Pair], list[Pair]]

TEST_SIZE = 500


def draw_split(draw_pair: Callable[[], Pair], train_size: int, test_size: int) -> Split:
    """Draw a held-out test set first, then training pairs that share no source or target with it.

    Sources are deduplicated across both sets. Targets are checked too, because two
    different sources can have the same translation ("does not see a dog" and
    "sees no dog" both give "sieht keinen Hund").
    """
    seen_sources: set[str] = set()
    test_targets: set[str] = set()
    test: list[Pair] = []
    train: list[Pair] = []
    attempts_left = 100 * (train_size + test_size)  # fail loudly if a grammar is too small
    while len(test) < test_size or len(train) < train_size:
        attempts_left -= 1
        if attempts_left < 0:
            raise RuntimeError("the generator repeats itself too often to fill the requested sizes")
        source, target = draw_pair()
        if source in seen_sources:
            continue
        if len(test) < test_size:
            seen_sources.add(source)
            test_targets.add(target)
            test.append((source, target))
        elif target not in test_targets:
            seen_sources.add(source)
            train.append((source, target))
    return train, test
