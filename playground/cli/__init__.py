"""Command line: python -m playground {train,translate,evaluate,info,average,compare,export} ..."""

from playground.cli.main import main

__all__ = ["main"]
