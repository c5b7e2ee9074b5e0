"""Transformer Playground: train, decode and inspect a small encoder-decoder Transformer."""

from playground.errors import DataError, PackageError, PlaygroundError, TrainingError

__all__ = ["DataError", "PackageError", "PlaygroundError", "TrainingError"]
__version__ = "0.1.0"
