"""`python -m playground train`: train a model on parallel text and save a package, or resume one (--resume).

Runs unchanged under torchrun: every process trains, rank 0 alone prints, logs and saves."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from playground.cli.packages import out_folder, package_arg
from playground.errors import TrainingError

if TYPE_CHECKING:  # the command imports what it needs when it runs, to keep `--help` fast
    from playground.training import events
    from playground.training.config import TrainConfig
    from playground.training.distributed import Ranks

BUILTIN_PREFIX = "builtin:"
DEFAULT_PRESET = "tiny"
FINE_TUNE_PRESET = "fine-tune"  # playground.training.presets.FINE_TUNE (not imported here: --help stays fast)


def add_train_command(sub: argparse._SubParsersAction) -> None:
    """`train`: the data and the package, then one flag per setting (add_config_flags)."""
    t = sub.add_parser("train", help="train a model on parallel text and save a package",
                       description="Train an encoder-decoder Transformer on sentence pairs. DATA is a TSV/CSV/JSONL "
                                   "file (optionally .gz), or two aligned files (--data + --data-tgt), or "
                                   "builtin:NAME (reverse, numbers, mini-translation).")
    t.add_argument("--data", required=True, help="training data file, or builtin:NAME")
    t.add_argument("--data-tgt", help="target side when --data is the source side of two aligned files")
    t.add_argument("--val", help="validation data file (default: a split of --data)")
    t.add_argument("--val-tgt", help="target side of an aligned validation file pair")
    t.add_argument("--val-fraction", type=float, default=0.05, help="share of --data held out when no --val is given")
    t.add_argument("--src-lang", help="source language code (taken from the file's header when present)")
    t.add_argument("--tgt-lang", help="target language code")
    t.add_argument("--out", required=True, help="package folder; a bare name goes under models/")
    t.add_argument("--overwrite", action="store_true", help="replace the package at --out if it exists")
    t.add_argument("--preset",
                   help=f"starting hyperparameters of a new run: tiny, small, base or {FINE_TUNE_PRESET} (default "
                        f"{DEFAULT_PRESET}, with --init-from {FINE_TUNE_PRESET}); with --resume, the package's own "
                        "settings are the start and a preset's settings count as changes")
    start = t.add_mutually_exclusive_group()
    start.add_argument("--resume", help="continue training this package from its saved step, with its saved "
                                        "settings; budgets given are added to what it has done")
    start.add_argument("--init-from", metavar="MODEL",
                       help="fine-tune: start from this package's weights (a folder, or a name under models/), "
                            "keeping its tokenizer and model settings; a new run with its own schedule")
    t.add_argument("--json", action="store_true", help="print the result as one JSON object on the last line")
    t.add_argument("--tensorboard", metavar="DIR",
                   help="also log loss, learning rate, gradient norm, tokens/s and validation scores for TensorBoard "
                        "into DIR (needs: pip install tensorboard)")
    add_config_flags(t)
    t.set_defaults(func=cmd_train)


def load_data(path: str, tgt_path: str | None, src_lang: str | None, tgt_lang: str | None, max_words: int):
    from playground.data.load import load_parallel

    if path.startswith(BUILTIN_PREFIX):
        from playground.data.builtin import DATASETS_DIR, builtin_dataset

        name = path[len(BUILTIN_PREFIX):]
        builtin_dataset(name)  # an unknown name is refused with the ones there are
        path = str(DATASETS_DIR / name / "train.tsv")  # the shipped file: --src-lang/--tgt-lang may pick a direction
    return load_parallel(path, tgt_path, src_lang=src_lang, tgt_lang=tgt_lang, max_words=max_words)


def add_config_flags(p: argparse.ArgumentParser) -> None:
    """One flag per setting (playground.packages.settings), checked as it is parsed with the words the Train tab
    says beside its field; the preset gives the defaults, a resumed run its package."""
    from playground.packages.settings import GROUPS, SETTINGS

    for group in GROUPS:
        g = p.add_argument_group(f"{group} settings (defaults come from the preset; a resumed run's from its package)")
        for s in (s for s in SETTINGS.values() if s.group == group):
            words = s.help or s.label
            if s.kind is bool:
                g.add_argument(s.flag, action=argparse.BooleanOptionalAction, default=None, help=words)
            elif s.kind is tuple:  # betas
                g.add_argument(s.flag, type=flag_type(s, float), nargs=2, default=None, metavar=("B1", "B2"),
                               help=words)
            else:
                g.add_argument(s.flag, type=flag_type(s, s.kind), default=None, choices=s.choices or None,
                               help=words + ("" if not s.optional or "0 =" in words else " (0 = not set)"))


def flag_type(setting, kind: type):
    """The flag's parser: text to the setting's type (0 = None where it may be unset), or argparse's error in the
    setting's own words."""
    def parse(text: str):
        try:
            value = kind(text) if kind is not int or text.lstrip("-").isdigit() else float(text)
        except ValueError:
            value = text  # refused below, in the setting's words
        found = setting.number_problem(value, float) if setting.kind is tuple else setting.problem(value)
        if found:
            raise argparse.ArgumentTypeError(f"{setting.label} {found}")
        return None if setting.optional and value == 0 else int(value) if kind is int else value
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The run's settings: a new run's come from the preset and the flags; a resumed run's from its package, with
    the flags given as changes (playground.training.checkpoint.resume_config: budgets added, the model's settings
    kept)."""
    from playground.training.checkpoint import resume_config
    from playground.training.config import BUDGETS, SETTING_NAMES
    from playground.training.finetune import BASE_SETTINGS, finetune_config
    from playground.training.presets import preset_config, preset_settings

    flags = {name: getattr(args, name, None) for name in SETTING_NAMES}
    budgets = {k: flags.pop(k) for k in BUDGETS}
    if args.resume:
        preset = preset_settings(args.preset) if args.preset else {}
        return resume_config(args.resume, {**{k: v for k, v in preset.items() if k not in BUDGETS}, **flags, **budgets})
    base = package_arg(args.init_from) if args.init_from else None
    preset = args.preset or (FINE_TUNE_PRESET if base else DEFAULT_PRESET)
    asked = {k: v for k, v in flags.items() if v is not None}
    cfg = preset_config(preset, **({k: v for k, v in asked.items() if k not in BASE_SETTINGS} if base else asked))
    if any(v is not None for v in budgets.values()):  # an explicit budget replaces the preset's budgets
        cfg = dataclasses.replace(cfg, **budgets)
    return finetune_config(cfg, base, asked) if base else cfg


def cmd_train(args: argparse.Namespace) -> int:
    from playground.packages.names import average_name, reserve_package
    from playground.packages.sweep import recover_interrupted_save
    from playground.training.distributed import process_group, torchrun_ranks

    if args.resume:  # a run killed between a save's two renames left its package as .NAME.old: put back first
        interrupted = Path(args.resume).with_name(f".{Path(args.resume).name}.old")
        if interrupted.is_dir():
            recover_interrupted_save(interrupted)
    cfg = train_config(args)
    main = torchrun_ranks().is_main
    board = TensorBoardLog(args.tensorboard) if args.tensorboard and main else None
    # rank 0 writes the package (and with --average-last <out>-avg): it holds the names from now on, so nothing else
    # writes them meanwhile; an existing one is replaced only with --overwrite (or by a resumed run of its own)
    out = out_folder(args.out)
    try:
        with contextlib.ExitStack() as reservations:
            if main:
                reservations.enter_context(reserve_package(out, overwrite=args.overwrite, resume=args.resume))
            if main and cfg.average_last:
                resuming = args.resume is not None and Path(args.resume).resolve() == out.resolve()
                reservations.enter_context(reserve_package(out.with_name(average_name(out.name)),
                                                           overwrite=args.overwrite or resuming))
            with process_group(cfg.device) as ranks:  # joins nothing unless torchrun started this process
                code = train_on_this_rank(args, cfg, ranks, board)
                if code and ranks.distributed:  # leave without the joint teardown: other ranks may sit in a collective
                    raise SystemExit(code)
                return code
    finally:
        if board:
            board.close()


def train_on_this_rank(args: argparse.Namespace, cfg: TrainConfig, ranks: Ranks, board: TensorBoardLog | None) -> int:
    """This process's part of the run: every rank reads the data and trains; rank 0 alone reports the events
    (errors excepted: only the rank that hits one may know of it)."""
    from playground.data.stats import split_pairs
    from playground.training import events
    from playground.training.inputs import TrainData
    from playground.training.trainer import run_training

    data = load_data(args.data, args.data_tgt, args.src_lang, args.tgt_lang, cfg.max_sentence_tokens)
    if ranks.is_main:
        say(args, data.summary())
    if args.val:
        val = load_data(args.val, args.val_tgt, args.src_lang, args.tgt_lang, cfg.max_sentence_tokens).pairs
        train = data.pairs
    else:
        train, val = split_pairs(data.pairs, args.val_fraction, seed=cfg.seed)
    src_lang = args.src_lang or data.src_lang or "src"
    tgt_lang = args.tgt_lang or data.tgt_lang or "tgt"
    out = out_folder(args.out)
    train_data = TrainData(train, val, src_lang, tgt_lang, description=Path(args.data).name)
    summary, failed, progress = None, False, ProgressLine(args)
    base = package_arg(args.init_from) if args.init_from else None
    for event in run_training(cfg, train_data, out, args.resume, ranks, init_from=base):
        if board:
            board.log(event)
        if ranks.is_main:
            report(args, event, out, progress)
        elif isinstance(event, events.Error):  # it may be this rank's alone (out of memory)
            say(args, f"error on rank {ranks.rank} of {ranks.world_size}: {event.message}", err=True)
        failed = failed or isinstance(event, events.Error)
        if isinstance(event, events.Done):
            summary = event.summary
    if not ranks.is_main and summary:
        say(args, f"rank {ranks.rank} of {ranks.world_size} finished: {summary['steps']} steps", err=True)
    elif args.json and summary:
        print(json.dumps(summary))
    return 1 if failed else 0


def report(args: argparse.Namespace, event: events.Event, out: Path, progress: ProgressLine) -> None:
    """One training event, for people."""
    from playground.training import events
    match event:
        case events.Start(world_size=world_size, accumulate=accumulate):
            factors = [f"{n} {what}" for n, what in ((world_size, "processes"), (accumulate, "accumulated")) if n > 1]
            step_size = f" of {world_size * accumulate} batches ({' x '.join(factors)})" if factors else ""
            say(args, f"{event.params:,} parameters on {event.device} in {event.precision}; "
                      f"{event.train_pairs:,} training / {event.val_pairs:,} validation pairs, "
                      f"{event.steps_per_epoch} steps per epoch{step_size}; saving to {out}")
        case events.Step():
            progress.show(event)
        case events.Eval():
            say(args, f"\nstep {event.step}: val loss {event.val_loss:.3f}, BLEU {event.bleu:.1f}, "
                      f"chrF {event.chrf:.1f}, exact {event.exact_match:.1%}")
            for s in event.samples[:2]:
                say(args, f"  {s['source']}\n  → {s['hypothesis'] or '(empty)'}\n  (ref {s['reference']})")
            if event.cut:
                say(args, f"  note: {event.cut}")
        case events.Averaged():
            say(args, f"averaged the weights of steps {', '.join(map(str, event.steps))} into {event.path}")
        case events.Error():
            say(args, f"\nerror: {event.message}", err=True)
        case events.Done(summary=summary):
            say(args, f"\ndone ({event.reason}): {summary['steps']} steps in {summary['wall_s']:.0f} s, "
                      f"{summary['tokens_per_s']:.0f} tokens/s; package {out}")


class TensorBoardLog:
    """The numbers of the training events as TensorBoard scalars. TensorBoard is optional, so imported here."""

    def __init__(self, log_dir: str):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            raise TrainingError("--tensorboard needs the tensorboard package: pip install tensorboard") from err
        self.writer = SummaryWriter(log_dir)

    def log(self, event: events.Event) -> None:
        from playground.packages.scores import EVAL_KEYS
        from playground.training import events
        match event:  # the TensorBoard section, and the event's numbers to log
            case events.Step():
                section, names = "train", ("loss", "lr", "grad_norm", "tokens_per_s")
            case events.Eval():
                section, names = "val", EVAL_KEYS[1:]  # the step is TensorBoard's x axis
            case _:
                return
        for name in names:
            self.writer.add_scalar(f"{section}/{name}", getattr(event, name), event.step)

    def close(self) -> None:
        self.writer.close()


class ProgressLine:
    """The step events as one status line on stderr, rewritten in place at most twice a second (none with --json)."""

    def __init__(self, args: argparse.Namespace):
        self.quiet, self.last = args.json, 0.0

    def show(self, e: events.Step) -> None:
        now, planned = time.monotonic(), e.planned_steps
        if self.quiet or (now - self.last < 0.5 and e.step != planned):  # the last step always shows
            return
        self.last = now
        done = f"{e.step}/{planned}" if planned else str(e.step)
        eta = f", ETA {e.eta:.0f}s" if e.eta is not None else ""
        sys.stderr.write(f"\rstep {done} | epoch {e.epoch:.2f} | loss {e.loss:.3f} | lr {e.lr:.2e} | "
                         f"{e.tokens_per_s:.0f} tok/s | {e.elapsed:.0f}s{eta}   ")
        sys.stderr.flush()


def say(args: argparse.Namespace, text: str, err: bool = False) -> None:
    """Human-readable output; with --json it goes to stderr so the last stdout line stays the JSON result."""
    print(text, file=sys.stderr if (err or args.json) else sys.stdout, flush=True)
