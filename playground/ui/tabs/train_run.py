"""A Train tab run: its data and package reserved, its trainer built (chunked on ZeroGPU), its events turned into
throttled UI updates. Start, Resume and Continue all end in `run`.

The handler that drives a run is a generator that iterates the run's events (playground.training.chunked.ChunkedRun:
the trainer in a process of its own, or in ZeroGPU's GPU calls) and yields UI updates a few times a second. The run
sits in the session state so Stop can call `stop()`; when the browser tab closes, Gradio closes the generator, which
closes `run()`, whose `finally` has the trainer validate and save the package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from pathlib import Path

import gradio as gr

from playground.errors import DataError, PackageError, TrainingError
from playground.insight import plots
from playground.packages.info import summary_of
from playground.serving.library import Library
from playground.serving.zerogpu import CPU_RUN_MAX_PARAMS, gpu_chunk_seconds
from playground.training.events import StopReason
from playground.ui.caches import package_info
from playground.ui.state import Session, visitor_of
from playground.ui.tabs.train_progress import (
    STOPPED_PENDING,
    Progress,
    averaged_line,
    done_line,
    paused_line,
    samples_frame,
    start_line,
)
from playground.ui.zerogpu import duration_factor, gpu

UPDATE_EVERY = 0.3  # seconds between UI updates while training (evals, the end and errors always update)
CHART_SHARE = 0.1  # at most this share of the time goes to redrawing the charts between validations


def split_data(session: Session, seed: int):
    from playground.data.stats import split_pairs
    from playground.training.inputs import TrainData

    if session.data is None:
        raise DataError("Load data on the Data tab first (a built-in dataset or your own file).")
    train, val = split_pairs(session.pairs, session.val_fraction, seed=seed)
    return TrainData(train, val, session.src_lang, session.tgt_lang, description=session.description or "user data")


def make_trainer(cfg, data, folder: Path, resume_from: Path | None = None, in_one_piece: bool = False,
                 init_from: Path | None = None):
    """The run as a ChunkedRun: on ZeroGPU (or with PLAYGROUND_GPU_CHUNK_S) calls that each fit a GPU call, each
    declaring the seconds the run gave it (chunk_duration), in `spaces`' own processes; elsewhere, and on ZeroGPU's
    CPU (`in_one_piece`), one piece in a process of its own (in_fresh_process), where a crash or a runaway allocation
    costs this run only and its package keeps its last save. `init_from`: the package a fine-tuned run starts from."""
    from playground.training.chunked import ChunkedRun, chunk_duration, in_fresh_process, train_chunk

    chunk_s = gpu_chunk_seconds()
    if chunk_s is None or in_one_piece:
        return ChunkedRun(cfg, data, folder, resume_from, chunk_s=math.inf, run_chunk=in_fresh_process,
                          init_from=init_from)
    return ChunkedRun(cfg, data, folder, resume_from, chunk_s=chunk_s / duration_factor(),  # what a call is charged
                      run_chunk=gpu(train_chunk, duration=chunk_duration), init_from=init_from)


def capped_minutes(library: Library, cfg, already_minutes: float = 0.0) -> str:
    """Apply the Space's run-length cap to cfg.max_minutes; the sentence the run's last line adds ("" uncapped)."""
    minutes = library.run_minutes(cfg.max_minutes, already_minutes)
    if minutes == cfg.max_minutes:
        return ""
    cfg.max_minutes = minutes
    return (f"  \nThis app ends a run after {library.quotas.run_minutes:g} minutes; press **Resume** to train it "
            "further.")


@contextlib.contextmanager
def run_slot(session: Session, library: Library, name: str):
    """This tab's and this visitor's one run, taken before anything is reserved: a refused run must neither reserve
    a name nor evict anybody's models to make room for itself."""
    if session.trainer is not None:
        raise TrainingError("This tab is already training; press Stop first (or wait for it to finish).")
    with library.run_slot(visitor_of(library, session), name):
        yield


class Charts:
    """A run's four charts (loss, validation loss, learning rate, BLEU/chrF), drawn from its history. The generator
    that draws them drives the trainer, so drawing pauses training: a redraw of the per-step curves (tens of ms,
    more for long histories) waits until CHART_SHARE of the time since the last one covers it."""

    def __init__(self, history):
        self.history = history  # for a resumed run it holds the earlier steps too: the charts continue
        self.drawn_at, self.draw_seconds = 0.0, 0.0

    def all(self, every: bool = True) -> tuple:
        """All four charts drawn now (`every` False: only the per-step curves; the others skipped)."""
        history, skip = self.history, gr.skip()
        start = time.monotonic()
        loss = plots.loss_figure(history.steps, history.loss, history.evals)
        lr = plots.lr_figure(history.steps, history.lr)
        figures = ((loss, plots.val_loss_figure(history.evals), lr, plots.metrics_figure(history.evals))
                   if every else (loss, skip, lr, skip))  # between validations only the per-step curves change
        self.drawn_at = time.monotonic()
        self.draw_seconds = self.drawn_at - start
        return figures

    def steps(self) -> tuple:
        """The per-step curves when it is their turn, else nothing redrawn."""
        if time.monotonic() - self.drawn_at >= self.draw_seconds / CHART_SHARE:
            return self.all(False)
        return (gr.skip(),) * 4


def stream_run(session: Session, build_trainer, name: str, folder: Path, cfg, cap_note: str,
               estimated: int | None = None):
    """Shared by Start, Resume and Continue: build the trainer, iterate its events, yield throttled UI updates.

    Outputs: status, loss chart, validation chart, LR chart, BLEU/chrF chart, samples table."""
    from playground.training import events as ev
    skip = gr.skip()
    yield (f"⏳ Preparing `{name}`: training the tokenizer, encoding the data, building the model…",
           skip, skip, skip, skip, skip)
    trainer = build_trainer()
    if session.stop_asked:  # Stop was pressed while the trainer was being built: it never runs
        session.run_pending = session.stop_asked = False
        yield STOPPED_PENDING, skip, skip, skip, skip, skip
        return
    session.trainer, session.run_dir, session.run_pending = trainer, str(folder), False
    events = trainer.run()
    charts = Charts(trainer.history)
    last_eval = trainer.history.evals[-1] if trainer.history.evals else None
    last_yield, status, last_step, samples, averaged = 0.0, "", None, skip, ""
    progress = Progress(name, cfg)
    try:
        for e in events:
            match e:
                case ev.Start():
                    from playground.training.schedule import planned_steps

                    progress.budget_steps = planned_steps(cfg, e.steps_per_epoch)[0]
                    yield (start_line(name, e), *charts.all(), skip)
                    last_yield = time.monotonic()
                case ev.Step():
                    last_step = e
                    status = progress.line(e, last_eval, trainer.stop_requested.is_set())
                    if time.monotonic() - last_yield >= UPDATE_EVERY:
                        yield (status, *charts.steps(), skip)
                        last_yield = time.monotonic()
                case ev.Phase() if last_step is not None and not trainer.stop_requested.is_set():
                    status = progress.line(last_step, last_eval, doing=e.what)
                    yield (status, skip, skip, skip, skip, skip)  # said at once: a validation can take seconds
                    last_yield = time.monotonic()
                case ev.Eval():
                    last_eval, samples = dataclasses.asdict(e), samples_frame(e)
                    if last_step is not None:
                        status = progress.line(last_step, last_eval, trainer.stop_requested.is_set(), doing="saving")
                    yield (status, *charts.all(), samples)
                    last_yield = time.monotonic()
                case ev.Interrupted():  # ZeroGPU gave no GPU for the next call: paused, never failed
                    yield (paused_line(name, e, cfg), *charts.all(), samples)
                    return
                case ev.Error():  # the run's own failure (NaN loss, out of memory): said in the status
                    yield (f"❌ {e.message}", *charts.all(), samples)
                    return
                case ev.Averaged():
                    averaged = averaged_line(e)
                case ev.Done():
                    note = cap_note if e.reason == StopReason.TIME else ""
                    note += f"  \n✂️ {e.summary['cut']}" if e.summary.get("cut") else ""
                    yield (done_line(name, e, estimated) + averaged + note, *charts.all(), samples)
    finally:
        events.close()  # a closed tab closes this generator: run()'s finally then saves the package
        session.trainer = None


def package_bytes(cfg) -> int:
    """About what a run of this configuration keeps on disk: fp32 weights and Adam's two moments, and with
    average_last its snapshots (weights only) and the averaged package."""
    from playground.training.estimate import count_parameters

    copies = 3 + (cfg.average_last + 1 if cfg.average_last else 0)
    return copies * 4 * count_parameters(cfg)


def start_run(session: Session, library: Library, model_name: str, cfg, init_from: Path | None = None):
    """Start: a new package named `model_name` (a -2, -3… suffix when taken), trained with `cfg` from new weights or
    from the package `init_from`'s."""
    from playground.packages.names import check_name

    name = check_name((model_name or "").strip())
    timed, estimated = session.estimate or (None, None)
    estimated = estimated if timed == cfg.to_dict() else None  # the estimate was of these very settings
    yield from run(session, library, name, cfg, estimated=estimated, init_from=init_from)


def resume_run(session: Session, library: Library, folder: Path, form):
    """Resume: the package's saved settings (playground.training.checkpoint.resume_config), with the form's budgets,
    validation and machine settings (`form`, a TrainConfig): the rest of the form shows a preset, not the package."""
    from playground.training.checkpoint import resume_config
    from playground.training.config import RESUME_SETTINGS

    form = form.to_dict()
    cfg = resume_config(folder, {k: form[k] for k in RESUME_SETTINGS})
    yield from run(session, library, folder.name, cfg, resume_from=folder)


def resumable_folder(library: Library, session: Session, resume_from: str) -> Path:
    """This visitor's package `resume_from`, which must hold a run's state."""
    from playground.packages.format import RESUME_STATE

    folder = library.writable(resume_from, visitor_of(library, session))
    if not (folder / RESUME_STATE).is_file():
        raise PackageError(f"{folder.name} holds no training state to resume from (it was imported, or not trained "
                           "here): start a new run instead.")
    return folder


def continue_run(session: Session, library: Library, resume_from: str, on_cpu: bool):
    """Continue: a paused run (ZeroGPU gave no more GPU time) goes on to its own budgets: on the GPU, or in one piece
    on the CPU when its model is small enough."""
    from playground.training.checkpoint import resume_config

    folder = resumable_folder(library, session, resume_from)
    cfg = resume_config(folder, {"device": "cpu"} if on_cpu else {})
    if on_cpu:
        from playground.training.estimate import count_parameters

        if (summary_of(package_info(folder)).params or count_parameters(cfg)) > CPU_RUN_MAX_PARAMS:
            raise TrainingError(f"{folder.name} is too large to train on this Space's CPU (at most "
                                f"{CPU_RUN_MAX_PARAMS / 1e6:g} M parameters): continue it on the GPU.")
    yield from run(session, library, folder.name, cfg, resume_from=folder, in_one_piece=on_cpu)


def reserve(library: Library, session: Session, name: str, cfg, resume_from: Path | None) -> tuple[Path, list[Path]]:
    """The package a run writes and, when it averages (average_last), its <name>-avg package, reserved as this
    visitor's within its quotas: a new name (suffixed when taken), or the resumed package's own."""
    from playground.packages.names import average_name

    visitor, size = visitor_of(library, session), package_bytes(cfg)
    if resume_from is not None:
        return resume_from, [library.add_average(resume_from, visitor, size)] if cfg.average_last else []
    folder = library.add(name, visitor, size, average=cfg.average_last > 0)
    if library.label(folder.name, visitor) != name:
        gr.Warning(f"This run is saved as {folder.name!r}; choose another name to pick it yourself.")
    return folder, [folder.with_name(average_name(folder.name))] if cfg.average_last else []


def run(session: Session, library: Library, name: str, cfg, resume_from: Path | None = None,
        in_one_piece: bool = False, estimated: int | None = None, init_from: Path | None = None):
    """What Start, Resume and Continue share: train the package `name` with `cfg`, a new one or `resume_from`
    further, in this tab's and this visitor's one run slot; not at all when Stop was pressed while it waited."""
    if session.stop_asked:
        session.run_pending = session.stop_asked = False
        yield STOPPED_PENDING, *(gr.skip(),) * 5
        return
    done_s = summary_of(package_info(resume_from)).wall_s if resume_from else 0.0
    data = split_data(session, cfg.seed)
    cap_note = capped_minutes(library, cfg, done_s / 60)
    with run_slot(session, library, name):
        folder, averaged = reserve(library, session, name, cfg, resume_from)
        with library.writing(folder, *averaged):  # held until the run ends: nothing else writes them
            yield from stream_run(session, lambda: make_trainer(cfg, data, folder, resume_from, in_one_piece,
                                                                init_from),
                                  folder.name, folder, cfg, cap_note, estimated)
