"""Train tab: preset, every hyperparameter, an estimate of the run time, Start/Stop/Resume and live charts.

The Start handler is a generator that iterates `Trainer.run()` itself and yields UI updates a few times a
second. The trainer sits in the session state so Stop can call `trainer.stop()`; when the browser tab closes,
Gradio closes the generator, which closes `run()`, whose `finally` saves the package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr
import pandas as pd

from playground.insight import plots
from playground.errors import DataError, PackageError, TrainingError
from playground.serving.library import Library
from playground.training.form import FIELD_RANGES, build_config, field_problem, label_of, preset_values
from playground.serving.zerogpu import (CPU_RUN_MAX_PARAMS, ESTIMATE_GPU_S, GPU_TIME, gpu_chunk_seconds, on_zerogpu,
                                        training_slots)
from playground.ui.state import Session, answers, friendly, visitor_of
from playground.ui.zerogpu import gpu

UPDATE_EVERY = 0.3  # seconds between UI updates while training (evals, the end and errors always update)
CHART_SHARE = 0.1  # at most this share of the time goes to redrawing the charts between validations
SAMPLE_COLUMNS = ["step", "source", "reference", "model output"]
SAMPLE_WIDTHS = ["8%", "30%", "31%", "31%"]  # the model output stays in sight at 1024 px
EXTRA_LABELS = {"accumulate": "Gradient accumulation (batches per optimizer step)",
                "average_last": "Average the weights of the last K validations at the end (0 = off)"}


@dataclass
class TrainTab:
    resume_from: gr.Dropdown
    start_event: object
    resume_event: object
    continue_events: list = field(default_factory=list)  # ZeroGPU: a paused run goes on (GPU, CPU)


# ----------------------------------------------------------------------------------------------------------
# Settings <-> TrainConfig


def range_note(name: str, info: str | None):
    """The handler that shows a field's refusal (with its range) in place of its info line, and puts the info back."""
    def note(value):
        problem = field_problem(name, value)
        return gr.update(info=f"⚠️ {label_of(name)} {problem}." if problem else info or "")  # None would keep it
    return note


ESTIMATING = "  \n⏱ Estimating the duration on this machine…"
STALE = "  \n⏱ Press **Estimate duration** to time this configuration on this machine."
STALE_ZEROGPU = ("  \n⏱ Press **Estimate duration** to time this configuration on ZeroGPU's GPU (a few seconds of your "
                 "daily GPU time; nothing is timed unasked).")


def preset_line(name: str) -> str:
    from playground.training.presets import PRESETS

    return f"**{name}**: {PRESETS[name].description}"


def parameter_line(cfg) -> str:
    from playground.training.estimate import count_parameters

    n = count_parameters(cfg)
    return (f"**{n:,} parameters** ({n / 1e6:.2f} M) with a joint vocabulary of {cfg.vocab_size:,} "
            f"(the trained tokenizer's vocabulary can come out smaller).")


def data_shape(session: Session, tokenizer: str, batch_tokens: int) -> tuple[int | None, int | None]:
    """(mean tokens per sentence, batches per epoch) of the session's data, roughly; (None, None) without data."""
    from playground.training.estimate import data_tokens, steps_per_epoch

    if not session.pairs:
        return None, None
    stats = session.stats()
    src = data_tokens(stats.src.tokens, stats.src.chars, tokenizer)
    tgt = data_tokens(stats.tgt.tokens, stats.tgt.chars, tokenizer)
    mean = max(2, round((src + tgt) / (2 * max(stats.num_pairs, 1))) + 1)
    return mean, steps_per_epoch(src, tgt, stats.num_pairs, batch_tokens)


def lr_preview_figure(session: Session, cfg, estimated_steps: int | None = None):
    from playground.training.schedule import learning_rate, schedule_preview

    _, epoch_steps = data_shape(session, cfg.tokenizer, cfg.batch_tokens)
    preview = schedule_preview(cfg, epoch_steps, estimated_steps)
    total, warmup = preview.steps, preview.warmup
    stride = max(1, total // 400)
    steps = list(range(1, total + 1, stride)) + ([total] if (total - 1) % stride else [])
    return plots.lr_figure(steps, [learning_rate(cfg, s, total, warmup) for s in steps],
                           f"Learning rate: {cfg.schedule} over {total:,} steps ({preview.caption})",
                           mark_step=warmup if 0 < warmup < total else None)


def previews(session: Session, values: dict, note: str) -> tuple[str, object]:
    """The parameter line (then `note`) and the LR preview for the settings on the form; a setting that does not
    work shows its error in both."""
    try:
        cfg = build_config(values)
    except TrainingError as err:
        return f"⚠️ {err}{note}", plots.empty_figure(str(err), "Learning rate")
    return parameter_line(cfg) + note, lr_preview_figure(session, cfg)


# ----------------------------------------------------------------------------------------------------------
# Progress text


def clock(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(max(seconds, 0))
    if seconds >= 3600:
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return f"{seconds // 60}:{seconds % 60:02d}"


def bar(fraction: float) -> str:
    """An HTML progress bar (Markdown keeps the <progress> element)."""
    return f'<progress value="{max(0.0, min(fraction, 1.0)):.3f}" max="1"></progress>'


STOPPING = ("⏹ **Stopping…** the run ends after this step, validates once more (quickly: 50 sentences) and saves "
            "the package.")


@dataclass
class Progress:
    """The status line of a run in progress: what it is doing, and a share done that only grows."""

    name: str
    cfg: object
    budget_steps: int | None = None  # the steps or epochs budget in steps (planned_steps); not a minutes budget's plan
    done: float = 0.0  # the largest share shown so far

    def share(self, e) -> float:
        """The share of the budget that ends the run first: steps (or epochs) done, or minutes spent. A minutes
        budget's planned steps are re-fitted as the machine's speed changes, so they make no total here."""
        shares = [e.step / self.budget_steps] if self.budget_steps else []
        if self.cfg.max_minutes:
            shares.append(e.elapsed / (self.cfg.max_minutes * 60))
        self.done = max(self.done, min(max(shares, default=0.0), 1.0))
        return self.done

    def line(self, e, last_eval: dict | None, stopping: bool = False, doing: str = "training") -> str:
        """The status for the last Step event `e`; `doing`: "training", "validating" or "saving"."""
        if stopping:
            return f"{STOPPING}  \n(`{self.name}` at step {e.step:,}.)"
        share = self.share(e)
        of = f"/{self.budget_steps:,}" if self.budget_steps else ""
        budget = f" of {clock(self.cfg.max_minutes * 60)}" if self.cfg.max_minutes and not of else ""
        done = f"step **{e.step:,}**{of} · {bar(share)} {share:.0%}{budget}"
        if doing == "validating":
            line = (f"🔎 Validating `{self.name}` at step {e.step:,}: the loss on the validation pairs, then greedy "
                    f"translations for BLEU and chrF… · {done} · elapsed {clock(e.elapsed)}")
        elif doing == "saving":
            line = f"💾 Saving `{self.name}` at step {e.step:,}… · {done} · elapsed {clock(e.elapsed)}"
        else:
            line = "⏳ Training `{}`: ".format(self.name) + " · ".join(
                [done, f"epoch {e.epoch:.2f}", f"loss {e.loss:.3f}", f"lr {e.lr:.2e}", f"{e.tokens_per_s:,.0f} tokens/s",
                 f"elapsed {clock(e.elapsed)}", f"ETA {clock(e.eta)}"])
        if last_eval:
            line += (f"  \nLast validation (step {last_eval['step']:,}): loss {last_eval['val_loss']:.3f}, "
                     f"BLEU {last_eval['bleu']:.1f}, chrF {last_eval['chrf']:.1f}")
        return line


def estimate_error(estimated: int | None, did: int, reason: str) -> str:
    """How far the run's steps were from the estimate made before it (only a minutes budget leaves room for one)."""
    from playground.training.events import StopReason

    if not estimated or reason != StopReason.TIME:
        return ""
    ratio = did / max(estimated, 1)
    why = ("the machine was busier than when it was timed (other work, or other visitors' runs)" if ratio < 0.8 else
           "the machine was faster than when it was timed" if ratio > 1.25 else "close to the estimate")
    return f"  \n⏱ Estimated {estimated:,} steps for the minutes budget, did {did:,}: {why}."


def done_line(name: str, e, estimated: int | None = None) -> str:
    """The status line for the Done event; `estimated`: the steps the Train tab's estimate expected."""
    s = e.summary
    final = s.get("final") or {}
    best = s.get("best") or {}
    metrics = (f"final BLEU {final.get('bleu', 0):.1f}, chrF {final.get('chrf', 0):.1f}, val loss "
               f"{final.get('val_loss', float('nan')):.3f}" if final else "no validation")
    if best:
        metrics += f" (best BLEU {best.get('bleu', 0):.1f} at step {best.get('step', '?')})"
    return (f"✅ **Done** ({e.reason}): {s['steps']:,} steps, {s['epochs']:.2f} epochs in {clock(s['wall_s'])}, "
            f"{s['tokens_per_s']:,.0f} tokens/s on {s['device']}; {metrics}.  \nSaved as **`{name}`**: try it "
            "on the Translate and Attention tabs." + estimate_error(estimated or s.get("first_plan"), s["steps"], e.reason))


def samples_frame(e) -> pd.DataFrame:
    """The sample translations of an Eval event."""
    rows = [[e.step, s["source"], s["reference"], s["hypothesis"]] for s in e.samples]
    return pd.DataFrame(rows, columns=SAMPLE_COLUMNS)


# ----------------------------------------------------------------------------------------------------------
# The run


def split_data(session: Session, seed: int):
    from playground.data.stats import split_pairs
    from playground.training.trainer import TrainData

    if session.data is None:
        raise DataError("Load data on the Data tab first (a built-in dataset or your own file).")
    train, val = split_pairs(session.pairs, session.val_fraction, seed=seed)
    return TrainData(train, val, session.src_lang, session.tgt_lang, description=session.description or "user data")


def make_trainer(cfg, data, folder: Path, resume_from: Path | None = None, in_one_piece: bool = False):
    """A Trainer, or on ZeroGPU (or with PLAYGROUND_GPU_CHUNK_S) a ChunkedRun whose calls each fit a GPU call, each
    declaring the seconds the run gave it (chunk_duration). `in_one_piece` (the CPU): one call, and on ZeroGPU in a
    fresh process, away from the torch that `spaces` patched here."""
    from playground.training.trainer import Trainer

    chunk_s = gpu_chunk_seconds()
    if chunk_s is None or (in_one_piece and not on_zerogpu()):
        return Trainer(cfg, data, folder, resume_from=resume_from)
    from playground.training.chunked import ChunkedRun, chunk_duration, in_fresh_process, train_chunk

    if in_one_piece:
        return ChunkedRun(cfg, data, folder, resume_from, chunk_s=math.inf, run_chunk=in_fresh_process)
    return ChunkedRun(cfg, data, folder, resume_from, chunk_s=chunk_s,
                      run_chunk=gpu(train_chunk, duration=chunk_duration))


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


def drive(session: Session, build_trainer, name: str, folder: Path, cfg, cap_note: str, estimated: int | None = None):
    """Shared by Start and Resume: build the trainer, iterate its events, yield throttled UI updates.

    Outputs: status, loss chart, validation chart, LR chart, BLEU/chrF chart, samples table."""
    from playground.training import events as ev
    skip = gr.skip()
    yield (f"⏳ Preparing `{name}`: training the tokenizer, encoding the data, building the model…",
           skip, skip, skip, skip, skip)
    trainer = build_trainer()
    session.trainer, session.run_dir = trainer, str(folder)
    events = trainer.run()
    history = trainer.history  # for a resumed run it holds the earlier steps too: the charts continue

    # this generator drives the trainer, so drawing pauses training: a redraw of the curves (tens of ms, more for
    # long histories) waits until CHART_SHARE of the time since the last one covers it; the status line is cheap
    drawn_at, draw_seconds = 0.0, 0.0

    def charts(all_of_them: bool) -> tuple:
        nonlocal drawn_at, draw_seconds
        start = time.monotonic()
        loss = plots.loss_figure(history.steps, history.loss, history.evals)
        lr = plots.lr_figure(history.steps, history.lr)
        figures = ((loss, plots.val_loss_figure(history.evals), lr, plots.metrics_figure(history.evals))
                   if all_of_them else (loss, skip, lr, skip))  # between validations only the per-step curves change
        drawn_at = time.monotonic()
        draw_seconds = drawn_at - start
        return figures

    def step_charts() -> tuple:
        if time.monotonic() - drawn_at >= draw_seconds / CHART_SHARE:
            return charts(False)
        return skip, skip, skip, skip

    last_eval = history.evals[-1] if history.evals else None
    last_yield, status, last_step, samples, averaged = 0.0, "", None, skip, ""
    progress = Progress(name, cfg)
    try:
        for e in events:
            match e:
                case ev.Start():
                    from playground.training.schedule import planned_steps

                    progress.budget_steps = planned_steps(cfg, e.steps_per_epoch)[0]
                    status = (f"⏳ Training `{name}`: {e.params:,} parameters on {e.device} ({e.precision}), "
                              f"{e.train_pairs:,} training / {e.val_pairs:,} validation pairs, "
                              f"{e.steps_per_epoch:,} steps per epoch, vocabulary {e.vocab_size:,}.")
                    yield (status, *charts(True), skip)
                    last_yield = time.monotonic()
                case ev.Step():
                    last_step = e
                    status = progress.line(e, last_eval, trainer.stop_requested.is_set())
                    if time.monotonic() - last_yield >= UPDATE_EVERY:
                        yield (status, *step_charts(), skip)
                        last_yield = time.monotonic()
                case ev.Phase() if last_step is not None and not trainer.stop_requested.is_set():
                    status = progress.line(last_step, last_eval, doing=e.what)
                    yield (status, skip, skip, skip, skip, skip)  # said at once: a validation can take seconds
                    last_yield = time.monotonic()
                case ev.Eval():
                    last_eval, samples = dataclasses.asdict(e), samples_frame(e)
                    if last_step is not None:
                        status = progress.line(last_step, last_eval, trainer.stop_requested.is_set(), doing="saving")
                    yield (status, *charts(True), samples)
                    last_yield = time.monotonic()
                case ev.Interrupted():  # ZeroGPU gave no GPU for the next call: paused, never failed
                    yield (paused_line(name, e, cfg), *charts(True), samples)
                    return
                case ev.Error():  # the run's own failure (NaN loss, out of memory): said in the status
                    yield (f"❌ {e.message}", *charts(True), samples)
                    return
                case ev.Averaged():
                    averaged = (f"  \nThe weights of steps {', '.join(map(str, e.steps))} were averaged into "
                                f"**`{Path(e.path).name}`**.")
                case ev.Done():
                    note = cap_note if e.reason == ev.StopReason.TIME else ""
                    note += f"  \n✂️ {e.summary['cut']}" if e.summary.get("cut") else ""
                    yield (done_line(name, e, estimated) + averaged + note, *charts(True), samples)
    finally:
        events.close()  # a closed tab closes this generator: run()'s finally then saves the package
        session.trainer = None


def paused_line(name: str, e, cfg) -> str:
    """The status of a run that ZeroGPU gave no more GPU time (an Interrupted event): what happened, what is kept,
    and how it goes on."""
    from playground.training.estimate import count_parameters

    if e.step:
        kept = (f"The package **`{name}`** is kept as of step {e.step:,}. Pick it under **Resume from** and press "
                "**▶ Continue on the GPU** when your GPU time is back: the run goes on to the budget you set")
    else:
        kept = "Nothing of this run was saved yet: start it again when your GPU time is back"
    if count_parameters(cfg) <= CPU_RUN_MAX_PARAMS:
        kept += (", or press **▶ Continue on the CPU** to go on now on this Space's processor (slower; one CPU run "
                 "at a time for the whole Space)" if e.step else "")
    else:
        kept += f" (only models up to {CPU_RUN_MAX_PARAMS / 1e6:g} M parameters may go on on this Space's CPU)"
    return (f"⏸ **Paused**: ZeroGPU gave no GPU time for the next part of this run ({e.message}). {GPU_TIME}. "
            f"{kept}.")


def package_bytes(cfg) -> int:
    """About what a run of this configuration keeps on disk: fp32 weights and Adam's two moments, and with
    average_last its snapshots (weights only) and the averaged package."""
    from playground.training.estimate import count_parameters

    copies = 3 + (cfg.average_last + 1 if cfg.average_last else 0)
    return copies * 4 * count_parameters(cfg)


def _train(session: Session, model_name: str, library: Library, values: dict):
    from playground.packages.names import average_name, check_name

    cfg = build_config(values)
    name = check_name((model_name or "").strip())
    data = split_data(session, cfg.seed)
    timed, estimated = session.estimate or (None, None)
    estimated = estimated if timed == cfg.to_dict() else None  # the estimate was of these very settings
    cap_note = capped_minutes(library, cfg)
    with run_slot(session, library, name):
        # quotas checked, the name (and <name>-avg when averaging) reserved as this visitor's
        folder = library.add(name, visitor_of(library, session), package_bytes(cfg), average=cfg.average_last > 0)
        if folder.name != name:
            gr.Warning(f"This run is saved as {folder.name!r}; choose another name to pick it yourself.")
        averaged = [folder.with_name(average_name(folder.name))] if cfg.average_last else []
        with library.writing(folder, *averaged):  # held until the run ends: nothing else writes them
            yield from drive(session, lambda: make_trainer(cfg, data, folder), folder.name, folder, cfg, cap_note,
                             estimated)


def _resume(session: Session, resume_from: str, library: Library, values: dict):
    """The package's saved settings (playground.training.checkpoint.resume_config), with the form's budgets, validation and
    machine settings: the rest of the form shows a preset, not the package."""
    from playground.training.checkpoint import resume_config
    from playground.training.config import RESUME_SETTINGS

    folder = resumable_folder(library, session, resume_from)
    form = build_config(values).to_dict()
    cfg = resume_config(folder, {k: form[k] for k in RESUME_SETTINGS})
    yield from _go_on(session, library, folder, cfg)


def resumable_folder(library: Library, session: Session, resume_from: str) -> Path:
    """This visitor's package `resume_from`, which must hold a run's state."""
    from playground.packages.format import RESUME_STATE

    folder = library.writable(resume_from, visitor_of(library, session))
    if not (folder / RESUME_STATE).is_file():
        raise PackageError(f"{folder.name} holds no training state to resume from (it was imported, or not trained "
                           "here): start a new run instead.")
    return folder


def _continue(session: Session, resume_from: str, library: Library, on_cpu: bool):
    """A paused run (ZeroGPU gave no more GPU time) goes on to its own budgets: on the GPU, or in one piece on the
    CPU when its model is small enough."""
    from playground.training.checkpoint import resume_config
    from playground.ui.state import package_info

    folder = resumable_folder(library, session, resume_from)
    cfg = resume_config(folder, {"device": "cpu"} if on_cpu else {})
    if on_cpu:
        from playground.training.estimate import count_parameters

        if ((package_info(folder)["training"] or {}).get("params") or count_parameters(cfg)) > CPU_RUN_MAX_PARAMS:
            raise TrainingError(f"{folder.name} is too large to train on this Space's CPU (at most "
                                f"{CPU_RUN_MAX_PARAMS / 1e6:g} M parameters): continue it on the GPU.")
    yield from _go_on(session, library, folder, cfg, in_one_piece=on_cpu)


def _go_on(session: Session, library: Library, folder: Path, cfg, in_one_piece: bool = False):
    """Shared by Resume and Continue: train the package in `folder` further with `cfg`."""
    from playground.ui.state import package_info

    visitor = visitor_of(library, session)
    cap_note = capped_minutes(library, cfg, float((package_info(folder)["training"] or {}).get("wall_s", 0)) / 60)
    data = split_data(session, cfg.seed)
    with run_slot(session, library, folder.name):
        averaged = [library.add_average(folder, visitor, package_bytes(cfg))] if cfg.average_last else []
        with library.writing(folder, *averaged):  # refused while another run writes these packages
            yield from drive(session, lambda: make_trainer(cfg, data, folder, folder, in_one_piece), folder.name,
                             folder, cfg, cap_note)


@friendly
def stop_training(session: Session):
    """Stop this session's run after the current step; it validates once more and saves the package. The status
    says so at once."""
    if session.trainer is None:
        gr.Info("Nothing is training in this tab.")
        return gr.skip()
    session.trainer.stop()
    return STOPPING


def resumable(library: Library, session: Session | None) -> list[str]:
    """This visitor's packages saved by a training run (the shipped ones are read-only)."""
    from playground.packages.format import RESUME_STATE
    from playground.packages.names import is_shipped

    return [p.name for p in library.packages(visitor_of(library, session)) if (p / RESUME_STATE).is_file() and not is_shipped(p)]


def resume_dropdown(library: Library, session: Session | None = None, keep: str | None = None) -> dict:
    names = resumable(library, session)
    own = Path(session.run_dir).name if session and session.run_dir else None
    value = keep if keep in names else own if own in names else (names[0] if names else None)
    return gr.update(choices=names, value=value)


# ----------------------------------------------------------------------------------------------------------
# Layout


def _controls(values: dict) -> dict:
    """One component per TrainConfig field (betas as two numbers), grouped; keys are the field names."""
    from playground.runtime.device import PRECISIONS
    from playground.training.config import EARLY_STOP_METRICS, OPTIMIZERS, setting_types
    from playground.training.schedule import SCHEDULES
    from playground.core.tokenizer import TOKENIZER_KINDS

    import torch

    devices = ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else []) + (
        ["mps"] if torch.backends.mps.is_available() else [])
    c = {}
    gr.Markdown("**Model**")
    with gr.Row():
        c["n_encoder_layers"] = gr.Number(values["n_encoder_layers"], label="Encoder layers", precision=0, step=1)
        c["n_decoder_layers"] = gr.Number(values["n_decoder_layers"], label="Decoder layers", precision=0, step=1)
        c["d_model"] = gr.Number(values["d_model"], label="d_model", precision=0, step=8)
        c["n_heads"] = gr.Dropdown([1, 2, 4, 8, 16, 32], value=values["n_heads"], label="Attention heads",
                                   info="must divide d_model")
        c["d_ff"] = gr.Number(values["d_ff"], label="Feed-forward size (d_ff)", precision=0, step=64)
    with gr.Row():
        c["dropout"] = gr.Number(values["dropout"], label="Dropout", step=0.05)
        c["attention_dropout"] = gr.Number(values["attention_dropout"], label="Attention dropout", step=0.05)
        c["activation"] = gr.Radio(["relu", "gelu"], value=values["activation"], label="Activation")
        c["positional_encoding"] = gr.Radio(["sinusoidal", "learned"], value=values["positional_encoding"],
                                            label="Positional encoding")
        c["norm_placement"] = gr.Radio(["post", "pre"], value=values["norm_placement"], label="LayerNorm placement",
                                       info="post (Post-LN, the paper): normalise after adding each sublayer's "
                                            "output; pre (Pre-LN): before each sublayer, steadier at high learning "
                                            "rates")
    with gr.Row():
        c["tie_embeddings"] = gr.Checkbox(values["tie_embeddings"], label="Tie embeddings and output layer")
        c["max_len"] = gr.Number(values["max_len"], label="Max tokens per sentence", precision=0)
    gr.Markdown("**Tokenizer**")
    with gr.Row():
        c["tokenizer"] = gr.Dropdown(list(TOKENIZER_KINDS), value=values["tokenizer"], label="Tokenizer kind")
        c["vocab_size"] = gr.Number(values["vocab_size"], label="Vocabulary size", precision=0)
        c["joint_vocab"] = gr.Checkbox(values["joint_vocab"], label="One joint vocabulary for both sides",
                                       info="one tokenizer and embedding table shared by source and target: words "
                                            "the languages share (names, numbers) get one vector")
        c["bpe_dropout"] = gr.Number(values["bpe_dropout"], step=0.05, label="BPE-dropout",
                                     info="bpe only: skip each merge with this chance, so words are split afresh "
                                          "each epoch (0.1 helps on small data); validation is not affected")
    gr.Markdown("**Optimisation**")
    with gr.Row():
        c["optimizer"] = gr.Radio(list(OPTIMIZERS), value=values["optimizer"], label="Optimizer")
        c["lr"] = gr.Number(values["lr"], label="Learning rate", info="noam: a scale on d_model^-0.5; else the peak",
                            step=1e-4)
        c["beta1"] = gr.Number(values["beta1"], label="Adam β1", step=0.01)
        c["beta2"] = gr.Number(values["beta2"], label="Adam β2", step=0.001)
        c["eps"] = gr.Number(values["eps"], label="Adam ε")
        c["weight_decay"] = gr.Number(values["weight_decay"], label="Weight decay", step=0.01)
    with gr.Row():
        c["schedule"] = gr.Dropdown(list(SCHEDULES), value=values["schedule"], label="LR schedule",
                                    info="noam: the paper's (Noam Shazeer's) warmup then 1/√step decay, scaled by "
                                         "d_model; inverse_sqrt: the same shape peaking at the learning rate; cosine: "
                                         "warmup then down to 0 at the planned end; constant")
        c["warmup_steps"] = gr.Number(values["warmup_steps"], label="Warmup steps", precision=0, step=50,
                                      info="the rate climbs for this many steps; a minutes budget shortens it to at "
                                           "most a fifth of the steps the run gets")
        c["label_smoothing"] = gr.Number(values["label_smoothing"], step=0.01, label="Label smoothing")
        c["clip_norm"] = gr.Number(values["clip_norm"], label="Gradient clip norm (0 = off)", step=0.5)
        c["batch_tokens"] = gr.Number(values["batch_tokens"], label="Batch tokens", precision=0, step=512,
                                      info="source + target tokens per batch, padding included")
    gr.Markdown("**Budget and validation** (the first budget reached ends the run; 0 = not set)")
    with gr.Row():
        c["max_steps"] = gr.Number(values["max_steps"], label="Max steps", precision=0, step=100)
        c["max_epochs"] = gr.Number(values["max_epochs"], label="Max epochs", step=1)
        c["max_minutes"] = gr.Number(values["max_minutes"], label="Max minutes", step=1)
        c["eval_every"] = gr.Number(values["eval_every"], label="Validate every (steps, 0 = auto)", precision=0,
                                    step=50, info="auto: five validations spread over the run, fitted to "
                                                             "the steps a minutes budget allows")
        c["eval_sentences"] = gr.Number(values["eval_sentences"], label="Sentences decoded per validation",
                                        precision=0, step=50)
    with gr.Row():
        c["early_stop_metric"] = gr.Dropdown(list(EARLY_STOP_METRICS), value=values["early_stop_metric"],
                                             label="Early-stopping metric",
                                             info="BLEU: matching word n-grams; chrF: matching character n-grams "
                                                  "(kinder to small models); both 0–100")
        c["patience"] = gr.Number(values["patience"], label="Patience (validations, 0 = never stop early)",
                                  precision=0)
        c["device"] = gr.Dropdown(devices, value=values["device"] if values["device"] in devices else "auto",
                                  label="Device")
        c["precision"] = gr.Dropdown(list(PRECISIONS), value=values["precision"], label="Precision",
                                     info="auto measures what is fastest here; bf16 (16-bit floats) halves memory, "
                                          "but on a CPU it is often slower than fp32")
        c["seed"] = gr.Number(values["seed"], label="Seed", precision=0)
    extra = {name: kind for name, kind in setting_types().items() if name not in c and kind is not tuple
             and name in values}
    if extra:  # settings the trainer gained after this form was written still get a field
        gr.Markdown("**More**")
        with gr.Row():
            for name, kind in extra.items():
                label = EXTRA_LABELS.get(name, name.replace("_", " ").capitalize())
                if kind is bool:
                    c[name] = gr.Checkbox(values[name], label=label)
                elif kind in (int, float):
                    c[name] = gr.Number(values[name], label=label, precision=0 if kind is int else None)
                else:
                    c[name] = gr.Textbox(str(values[name]), label=label)
    return c


def build(session: gr.State, library: Library, page: gr.Tab) -> TrainTab:
    from playground.training.presets import PRESETS

    values = preset_values("tiny")
    auto_timing = not on_zerogpu()  # on ZeroGPU a timing spends the visitor's GPU time: only when pressed
    stale = STALE if auto_timing else STALE_ZEROGPU
    first_params, first_lr = previews(Session(), values, stale)

    @friendly
    def apply_preset(session: Session, preset: str):
        """The preset's settings in every field, its description, parameter count and LR preview."""
        vals = preset_values(preset)
        return (*[gr.update(value=vals[k]) for k in controls], preset_line(preset),
                *previews(session, vals, ESTIMATING if auto_timing else stale))

    @friendly
    def refresh_preview(session: Session, **values):
        """The parameter count and the learning-rate schedule over the planned steps, for the settings as edited."""
        return previews(session, values, stale)

    @friendly
    def first_estimate(session: Session, **values):
        """The first time this session opens the Train tab, time the form's configuration."""
        if session.estimated:
            return gr.skip(), gr.skip()
        return estimate(session, **values)

    from playground.training.estimate import estimate_training

    time_steps = gpu(estimate_training, duration=ESTIMATE_GPU_S)  # a ZeroGPU call: the settings in, numbers out

    @friendly
    def estimate(session: Session, **values):
        """Time a few training steps of this configuration on this machine; estimate the whole run."""
        cfg = build_config(values)
        library.keeper.check_size(visitor_of(library, session), package_bytes(cfg))  # before building anything to time
        seq_len, epoch_steps = data_shape(session, cfg.tokenizer, cfg.batch_tokens)
        est = time_steps(cfg, seq_len=seq_len, epoch_steps=epoch_steps)
        session.estimated, session.estimate = True, (cfg.to_dict(), est.steps)
        caveat = "" if session.data is not None else " Load data first for a better guess (sentence lengths, epochs)."
        warning = est.too_short(cfg.max_minutes)
        return (f"{parameter_line(cfg)}  \n⏱ Estimated duration: **{est.describe()}**, validations included."
                f"{caveat}" + (f"  \n{warning}" if warning else ""), lr_preview_figure(session, cfg, est.steps))

    @friendly
    def train(session: Session, model_name: str, **values):
        """Train a new model on this session's data; yields status, charts and sample translations as it runs.
        (On ZeroGPU the run is a sequence of GPU calls: see make_trainer.)"""
        yield from _train(session, model_name, library, values)

    @friendly
    def resume(session: Session, resume_from: str, **values):
        """Continue training a package saved by a run: the budgets on the form are added to what it already did."""
        yield from _resume(session, resume_from, library, values)

    with gr.Row():
        with gr.Column(scale=2):
            preset = gr.Radio(list(PRESETS), value="tiny", label="Preset")
            preset_info = gr.Markdown(preset_line("tiny"))
            params_info = gr.Markdown(first_params)
        with gr.Column(scale=1):
            model_name = gr.Textbox("my-model", label="Model name",
                                    info="Saved as a package of that name; an existing name gets a -2, -3… suffix.")
            estimate_btn = gr.Button("⏱ Estimate duration")
    with gr.Accordion("Advanced: every hyperparameter", open=False):
        controls = _controls(values)
    with gr.Row():
        start_btn = gr.Button("▶ Start training", variant="primary", scale=2)
        stop_btn = gr.Button("■ Stop", variant="stop", scale=1)
        resume_btn = gr.Button("↻ Resume", scale=1)
        resume_from = gr.Dropdown(resumable(library, None), value=None, label="Resume from", scale=2,
                                  allow_custom_value=True,
                                  info="a package saved by a training run; the budgets above are added to it")
    if on_zerogpu():  # a run ZeroGPU paused (its quota spent) goes on to its own budgets
        with gr.Row():
            continue_gpu_btn = gr.Button("▶ Continue on the GPU", scale=1)
            continue_cpu_btn = gr.Button("▶ Continue on the CPU", scale=1)
            gr.Markdown(f"<small>A run paused when your GPU time ran out goes on to the budget it was started with "
                        f"(pick it under **Resume from**). On the CPU: models up to {CPU_RUN_MAX_PARAMS / 1e6:g} M "
                        "parameters, one CPU run at a time for the whole Space.</small>")
    status = gr.Markdown("Load data on the Data tab, choose a preset, then press **Start training**.",
                         elem_id="train-status", min_height=50)
    with gr.Row():
        loss_plot = gr.Plot(plots.loss_figure([], []), show_label=False)
        val_plot = gr.Plot(plots.val_loss_figure([]), show_label=False)
    with gr.Row():
        lr_plot = gr.Plot(first_lr, show_label=False, elem_id="train-lr-plot")
        metrics_plot = gr.Plot(plots.metrics_figure([]), show_label=False)
    samples = gr.Dataframe(pd.DataFrame(columns=SAMPLE_COLUMNS), label="Sample translations at the last validation",
                           interactive=False, wrap=True, column_widths=SAMPLE_WIDTHS)
    gr.Markdown("<small>The loss chart's smooth line is an **EMA** (exponential moving average: each point is 0.9 × "
                "the one before + 0.1 × the new loss). **BLEU** and **chrF** score the greedy translations of "
                "validation sentences against their references: matching word n-grams and character n-grams, "
                "0–100, higher is better.</small>")

    for field, control in controls.items():  # a value out of its range is refused beside it, as it is typed
        if field in FIELD_RANGES:
            control.input(range_note(field, control.info), [control], [control], queue=False, show_progress="hidden",
                          api_visibility="private")

    estimating = dict(show_progress="minimal", concurrency_limit=1, concurrency_id="estimate")
    preset_outputs = [*controls.values(), preset_info, params_info, lr_plot]
    timing = answers(estimate, [params_info, lr_plot], params_info)
    preset_applied = preset.change(**answers(apply_preset, preset_outputs, preset_info), inputs=[session, preset],
                                   api_name="apply_preset", show_progress="hidden")
    gr.on([c.input for c in controls.values()], refresh_preview, [session], [params_info, lr_plot],
          inputs_kwargs=controls, api_name="lr_preview", show_progress="hidden", trigger_mode="always_last")
    button_timing = estimate_btn.click(**timing, inputs=[session], inputs_kwargs=controls, api_name="estimate",
                                       **estimating)
    timings = [button_timing]
    if auto_timing:  # a preset chosen, the tab opened: timed at once
        timings.append(preset_applied.then(**timing, inputs=[session], inputs_kwargs=controls,
                                           api_name="estimate_preset", api_visibility="private", **estimating))
        timings.append(page.select(**answers(first_estimate, [params_info, lr_plot], params_info), inputs=[session],
                                   inputs_kwargs=controls, api_visibility="private", **estimating))
    # A timing waits its turn behind other sessions' ones; by the time it reports, the person may have changed the
    # settings it timed, and its line would replace the preview of the new ones. An edit drops it instead.
    gr.on([c.input for c in controls.values()], None, None, cancels=timings, queue=False, show_progress="hidden",
          api_visibility="private")

    outputs = [status, loss_plot, val_plot, lr_plot, metrics_plot, samples]
    slots = training_slots()
    waiting = ("⏳ Waiting for the training slot: one run trains at a time on this machine, so if another session is "
               "training, yours starts as soon as it finishes (the queue position shows here)." if slots == 1 else
               f"⏳ Waiting for a training slot: {slots} runs train at once on this Space, each on a GPU ZeroGPU lends "
               "for each part of the run (the queue position shows here).")
    if library.quotas.run_minutes:  # a bound on the wait: every run ahead ends within the cap
        waiting += (f" Runs last at most {library.quotas.run_minutes:g} minutes each: with n runs ahead of yours, "
                    f"yours starts within n × {library.quotas.run_minutes:g} minutes.")
    train_kwargs = dict(inputs_kwargs=controls, show_progress="full", show_progress_on=[status],
                        concurrency_limit=slots, concurrency_id="train")
    start_event = start_btn.click(lambda: waiting, None, [status], queue=False, api_visibility="private",
                                  show_progress="hidden").then(
        **answers(train, outputs, status), inputs=[session, model_name], api_name="train", **train_kwargs)
    resume_event = resume_btn.click(lambda: waiting, None, [status], queue=False, api_visibility="private",
                                    show_progress="hidden").then(
        **answers(resume, outputs, status), inputs=[session, resume_from], api_name="resume", **train_kwargs)
    stop_btn.click(stop_training, [session], [status], api_name="stop", concurrency_limit=None, queue=False,
                   show_progress="hidden")
    continue_events = []
    if on_zerogpu():
        @friendly
        def continue_on_gpu(session: Session, resume_from: str):
            """A paused run goes on to its own budgets on ZeroGPU's GPU."""
            yield from _continue(session, resume_from, library, on_cpu=False)

        @friendly
        def continue_on_cpu(session: Session, resume_from: str):
            """A paused run of a small model goes on to its own budgets on this Space's CPU, in one piece."""
            yield from _continue(session, resume_from, library, on_cpu=True)

        cpu_kwargs = {**train_kwargs, "concurrency_limit": 1, "concurrency_id": "cpu-train"}
        for button, fn, kwargs in ((continue_gpu_btn, continue_on_gpu, train_kwargs),
                                   (continue_cpu_btn, continue_on_cpu, cpu_kwargs)):
            continue_events.append(button.click(**answers(fn, outputs, status), inputs=[session, resume_from],
                                                api_name=fn.__name__, **{k: v for k, v in kwargs.items()
                                                                         if k != "inputs_kwargs"}))
    return TrainTab(resume_from, start_event, resume_event, continue_events)
