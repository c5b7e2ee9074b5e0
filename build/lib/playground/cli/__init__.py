"""Command line: python -m playground {train,translate,evaluate,info,average,export} ..."""

from playground.cli.main import main

__all__ = ["main"]
