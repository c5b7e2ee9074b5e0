"""Command line: python -m playground {train,translate,evaluate,info,average,export} ... (see --help of each).

`train` runs unchanged under torchrun: every process trains, rank 0 alone prints, logs and saves."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from playground.errors import PlaygroundError, TrainingError, is_rust_panic
from playground.export import add_export_command

if TYPE_CHECKING:  # the commands import what they need when they run, to keep `--help` fast
    from playground.training import events
    from playground.training.config import TrainConfig
    from playground.training.distributed import Ranks

MODELS_DIR = Path("models")
BUILTIN_PREFIX = "builtin:"
DEFAULT_PRESET = "tiny"


# ----------------------------------------------------------------------------------------------------------
# Shared pieces


def add_decoding_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding")
    g.add_argument("--method", choices=["greedy", "sample", "beam"], default="greedy", help="search method (default greedy)")
    g.add_argument("--beam-size", type=int, default=5, help="beams per sentence for --method beam (default 5)")
    g.add_argument("--length-penalty", type=float, default=1.0,
                   help="beam score = sum log p / length^A; 0 = raw sum, favours short outputs (default 1.0)")
    g.add_argument("--nbest", type=int, default=1, help="hypotheses to print per sentence with beam search (default 1)")
    g.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    g.add_argument("--top-k", type=int, default=0, help="sample from the k most likely tokens only (0 = all)")
    g.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling: smallest set with probability ≥ p (default 1.0)")
    g.add_argument("--seed", type=int, default=0, help="random seed for sampling (default 0)")
    g.add_argument("--max-len", type=int, default=None, help="maximum output tokens (default 2 x source + 10)")
    g.add_argument("--batch-size", type=int, default=64, help="sentences decoded together (default 64)")
    g.add_argument("--device", default="auto", help="auto, cpu, cuda or mps (default auto)")


def decode_options(args: argparse.Namespace):
    from playground.core.decode import DecodeOptions

    return DecodeOptions(method=args.method, max_len=args.max_len, temperature=args.temperature, top_k=args.top_k,
                         top_p=args.top_p, seed=args.seed, beam_size=args.beam_size,
                         length_penalty=args.length_penalty, nbest=args.nbest if args.method == "beam" else 1,
                         batch_size=args.batch_size)


def load_model(args: argparse.Namespace):
    from playground.runtime.device import resolve_device
    from playground.packages.store import load_package

    return load_package(args.model, resolve_device(args.device))


def read_lines(path: str) -> list[str]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise PlaygroundError(f"File not found: {path}") from err
    except UnicodeDecodeError as err:
        raise PlaygroundError(f"{path} is not UTF-8 text ({err}); save it as UTF-8 and try again.") from err
    return [line.strip() for line in text.splitlines()]


def out_folder(out: str) -> Path:
    """A bare name goes under models/; a path is used as given."""
    path = Path(out)
    return MODELS_DIR / path if len(path.parts) == 1 else path


def load_data(path: str, tgt_path: str | None, src_lang: str | None, tgt_lang: str | None, max_len: int):
    from playground.data.load import load_parallel

    if path.startswith(BUILTIN_PREFIX):
        from playground.data.builtin import BUILTIN_DATASETS, DATASETS_DIR

        name = path[len(BUILTIN_PREFIX):]
        if name not in BUILTIN_DATASETS:
            raise PlaygroundError(f"No built-in dataset {name!r}; choose one of {', '.join(BUILTIN_DATASETS)}.")
        path = str(DATASETS_DIR / name / "train.tsv")
    return load_parallel(path, tgt_path, src_lang=src_lang, tgt_lang=tgt_lang, max_len=max_len)


# ----------------------------------------------------------------------------------------------------------
# train


def add_config_flags(p: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig field, so every hyperparameter can be set (the preset gives the defaults)."""
    from playground.training.config import BUDGETS, setting_types

    g = p.add_argument_group("hyperparameters (defaults come from the preset; a resumed run's from its package)")
    for name, kind in setting_types().items():
        flag = "--" + name.replace("_", "-")
        if name in BUDGETS or name == "device":
            continue  # declared with the budgets below
        if kind is bool:
            g.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
        elif kind is tuple:  # betas
            g.add_argument(flag, type=float, nargs=2, default=None, metavar=("B1", "B2"), help="Adam betas (0.9 0.98)")
        else:
            g.add_argument(flag, type=kind, default=None)


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The run's settings: a new run's come from the preset and the flags; a resumed run's from its package, with
    the flags given as changes (playground.training.checkpoint.resume_config: budgets added, the model's settings kept)."""
    from playground.training.checkpoint import resume_config
    from playground.training.config import BUDGETS, setting_types
    from playground.training.presets import PRESETS, preset_config

    flags = {name: getattr(args, name, None) for name in setting_types()}
    budgets = {k: flags.pop(k) for k in BUDGETS}
    if args.resume:
        preset = PRESETS[args.preset].settings if args.preset else {}
        return resume_config(args.resume, {**{k: v for k, v in preset.items() if k not in BUDGETS}, **flags, **budgets})
    cfg = preset_config(args.preset or DEFAULT_PRESET, **flags)
    if any(v is not None for v in budgets.values()):  # an explicit budget replaces the preset's budgets
        cfg = dataclasses.replace(cfg, **budgets)
    return cfg


def cmd_train(args: argparse.Namespace) -> int:
    from playground.training.distributed import process_group, torchrun_ranks
    from playground.packages.names import average_name, reserve_package

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
    from playground.training import events
    from playground.data.stats import split_pairs
    from playground.training.trainer import TrainData, run_training

    data = load_data(args.data, args.data_tgt, args.src_lang, args.tgt_lang, cfg.max_len)
    if ranks.is_main:
        say(args, data.summary())
    if args.val:
        val = load_data(args.val, args.val_tgt, args.src_lang, args.tgt_lang, cfg.max_len).pairs
        train = data.pairs
    else:
        train, val = split_pairs(data.pairs, args.val_fraction, seed=cfg.seed)
    src_lang = args.src_lang or data.src_lang or "src"
    tgt_lang = args.tgt_lang or data.tgt_lang or "tgt"
    out = out_folder(args.out)
    train_data = TrainData(train, val, src_lang, tgt_lang, description=Path(args.data).name)
    summary, failed, progress = None, False, ProgressLine(args)
    for event in run_training(cfg, train_data, out, args.resume, ranks):
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


# ----------------------------------------------------------------------------------------------------------
# translate, evaluate, info, average


def cmd_translate(args: argparse.Namespace) -> int:
    from playground.core.decode import translate
    from playground.limits import max_line_chars

    sentences = list(args.text) + (read_lines(args.input) if args.input else [])
    if not sentences:
        raise PlaygroundError("Nothing to translate: give sentences as arguments or --input FILE (- for stdin).")
    package = load_model(args)
    per_line = max_line_chars()
    cut = sum(len(sentence) > per_line for sentence in sentences)
    if cut:
        print(f"note: {cut:,} line{'s' if cut > 1 else ''} longer than {per_line:,} characters {'were' if cut > 1 else 'was'}"
              " cut there before translating (PLAYGROUND_MAX_LINE_CHARS sets the limit)", file=sys.stderr)
    results = translate(package.model, package.tokenizer, sentences, decode_options(args))
    if args.json:
        print(json.dumps([{"source": t.source, "hypotheses": [{"text": h.text, "score": h.score,
                           "token_logprobs": h.token_logprobs} for h in t.hypotheses]} for t in results],
                         ensure_ascii=False))
        return 0
    for t in results:
        if len(t.hypotheses) == 1:
            print(t.text)
        else:
            for rank, h in enumerate(t.hypotheses, 1):
                print(f"{rank}\t{h.score:.4f}\t{h.text}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from playground.core.decode import translate
    from playground.core.metrics import score

    sources, references = read_lines(args.src), read_lines(args.ref)
    if len(sources) != len(references):
        raise PlaygroundError(f"{args.src} has {len(sources)} lines but {args.ref} has {len(references)}; "
                              "they must be aligned line by line.")
    package = load_model(args)
    start = time.perf_counter()
    hyps = [t.text for t in translate(package.model, package.tokenizer, sources, decode_options(args))]
    scores = score(hyps, references)
    result = {**scores.as_dict(), "method": args.method, "model": str(args.model),
              "seconds": round(time.perf_counter() - start, 2)}
    if args.output:
        Path(args.output).write_text("\n".join(hyps) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result))
    else:
        print(f"BLEU = {scores.bleu:.2f}  ({scores.bleu_signature})")
        print(f"chrF = {scores.chrf:.2f}  ({scores.chrf_signature})")
        print(f"exact match = {scores.exact_match:.1%} of {scores.n} sentences ({args.method}, {result['seconds']} s)")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    """What load_package checks (every file's size and schema, tokenizer, weights' header), without the weights."""
    from playground.packages.info import info_lines, summary_of
    from playground.packages.store import check_package, package_info

    check_package(args.model)
    info = package_info(args.model)
    if args.json:
        print(json.dumps(info, ensure_ascii=False))
        return 0
    print("\n".join(info_lines(summary_of(info))))
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from playground.training.averaging import average_packages
    from playground.packages.names import reserve_package

    with reserve_package(out_folder(args.out), overwrite=args.overwrite) as folder:
        out = average_packages(args.packages, folder)
    if args.json:
        print(json.dumps({"package": str(out), "averaged_from": args.packages}))
    else:
        print(f"averaged the weights of {len(args.packages)} packages into {out}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from playground.insight.compare import comparison, comparison_rows, format_table, load_runs

    runs = load_runs([package_arg(model) for model in args.models])
    if args.json:
        print(json.dumps(comparison(runs), ensure_ascii=False))
        return 0
    settings, scores = comparison_rows(runs)
    names = [run.name for run in runs]
    print(format_table(["setting", *names], settings) if settings else "No setting differs between these runs.")
    print()
    print(format_table(["score (last validation)", *names], scores))
    return 0


def package_arg(model: str) -> Path:
    """A package given as a folder, or by its bare name under models/."""
    folder = Path(model)
    return folder if folder.exists() else out_folder(model)


# ----------------------------------------------------------------------------------------------------------
# The parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
    t.add_argument("--preset", choices=["tiny", "small", "base"],
                   help=f"starting hyperparameters of a new run (default {DEFAULT_PRESET}); with --resume, the "
                        "package's own settings are the start and a preset's settings count as changes")
    t.add_argument("--max-steps", type=int, help="stop after N optimizer steps")
    t.add_argument("--max-epochs", type=float, help="stop after N passes over the data")
    t.add_argument("--max-minutes", type=float, help="stop after M minutes")
    t.add_argument("--resume", help="continue training this package from its saved step, with its saved settings; "
                                     "budgets given are added to what it has done")
    t.add_argument("--device", help="auto, cpu, cuda or mps")
    t.add_argument("--json", action="store_true", help="print the result as one JSON object on the last line")
    t.add_argument("--tensorboard", metavar="DIR",
                   help="also log loss, learning rate, gradient norm, tokens/s and validation scores for TensorBoard "
                        "into DIR (needs: pip install tensorboard)")
    add_config_flags(t)
    t.set_defaults(func=cmd_train)

    tr = sub.add_parser("translate", help="translate sentences with a package",
                        description="Translate sentences given as arguments or in --input FILE (one per line); "
                                    "prints one line per input (n-best: rank, score and text, tab-separated).")
    tr.add_argument("--model", required=True, help="package folder")
    tr.add_argument("--input", help="file with one sentence per line (- for stdin)")
    tr.add_argument("text", nargs="*", help="sentences to translate")
    tr.add_argument("--json", action="store_true", help="print results as JSON")
    add_decoding_flags(tr)
    tr.set_defaults(func=cmd_translate)

    ev = sub.add_parser("evaluate", help="BLEU, chrF and exact match on a test set",
                        description="Translate --src and score against --ref with sacreBLEU (cased, 13a).")
    ev.add_argument("--model", required=True, help="package folder")
    ev.add_argument("--src", required=True, help="source sentences, one per line")
    ev.add_argument("--ref", required=True, help="reference translations, aligned with --src")
    ev.add_argument("--output", help="also write the translations to this file")
    ev.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    add_decoding_flags(ev)
    ev.set_defaults(func=cmd_evaluate)

    info = sub.add_parser("info", help="a package's config, size and metrics")
    info.add_argument("--model", required=True, help="package folder")
    info.add_argument("--json", action="store_true", help="print everything as JSON")
    info.set_defaults(func=cmd_info)

    av = sub.add_parser("average", help="average the weights of packages (checkpoint averaging)",
                        description="Write a package whose weights are the element-wise mean of those of the given "
                                    "packages, as the paper does with its last 5 or 20 checkpoints. They must share "
                                    "the model config and the tokenizer (checkpoints of one run do).")
    av.add_argument("--out", required=True, help="package folder to write; a bare name goes under models/")
    av.add_argument("packages", nargs="+", metavar="PKG", help="package folders to average")
    av.add_argument("--overwrite", action="store_true", help="replace the package at --out if it exists")
    av.add_argument("--json", action="store_true", help="print the result as one JSON object")
    av.set_defaults(func=cmd_average)

    co = sub.add_parser("compare", help="the settings that differ between runs, and their scores",
                        description="Compare two or more packages: the training settings that differ and the scores "
                                    "of their last validation (the web app's Compare tab also overlays the curves).")
    co.add_argument("models", nargs="+", metavar="MODEL", help="package folders (or names under models/)")
    co.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    co.set_defaults(func=cmd_compare)
    add_export_command(sub)
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
