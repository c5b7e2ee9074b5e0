"""The built-in datasets as the app sees them: their names for the dropdown, and loading one as ParallelData.

The catalogue (names, titles, descriptions, languages, where the shipped files are) is playground.datasets.catalog,
re-exported here for the app; the generators behind it are imported only when a shipped file is missing.
"""

from __future__ import annotations

from playground.data.load import load_parallel
from playground.data.rows import DROP_REASONS, ParallelData
from playground.datasets.catalog import BUILTIN_DATASETS, DATASETS_DIR, BuiltinDataset
from playground.errors import DataError

__all__ = ["BUILTIN_DATASETS", "DATASETS_DIR", "BuiltinDataset", "builtin_dataset", "read_builtin"]


def builtin_dataset(name: str) -> BuiltinDataset:
    """The built-in dataset of this name, or a DataError listing the ones there are."""
    if name not in BUILTIN_DATASETS:
        raise DataError(f"There is no built-in dataset {name!r}; choose one of {', '.join(BUILTIN_DATASETS)}.")
    return BUILTIN_DATASETS[name]


def read_builtin(name: str, max_words: int = 256) -> ParallelData:
    """A built-in dataset's training pairs: its shipped TSV when present (fast), else generated on the spot."""
    dataset = builtin_dataset(name)
    path = DATASETS_DIR / name / "train.tsv"
    if path.is_file():
        return load_parallel(path, src_lang=dataset.src_lang, tgt_lang=dataset.tgt_lang, max_words=max_words)
    train, _ = dataset.generate(0)
    return ParallelData(list(train), dict.fromkeys(DROP_REASONS, 0), "generated", dataset.src_lang, dataset.tgt_lang,
                        len(train))
