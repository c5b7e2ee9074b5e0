"""Command line: python -m playground {train,translate,evaluate,info,average,compare,export,import-hf} ... (see
--help of each).

`train` runs unchanged under torchrun: every process trains, rank 0 alone prints, logs and saves. One module per
command group (playground.cli.train, .translate, .packages; playground.cli.export); this one
assembles the parser and runs the command."""

from __future__ import annotations

import argparse
import sys

from playground.cli.export import add_export_command
from playground.cli.import_hf import add_import_command
from playground.cli.packages import add_package_commands
from playground.cli.train import add_train_command
from playground.cli.translate import add_translate_commands
from playground.errors import PlaygroundError, is_rust_panic


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_train_command(sub)
    add_translate_commands(sub)
    add_package_commands(sub)
    add_export_command(sub)
    add_import_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except PlaygroundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BaseException as err:
        if not is_rust_panic(err):
            raise
        print(f"error: a library failed on this input ({err}); change the input or the model package", file=sys.stderr)
        return 2
