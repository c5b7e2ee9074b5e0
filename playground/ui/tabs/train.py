"""Train tab: preset, every hyperparameter, an estimate of the run time, Start/Stop/Resume and live charts.

The form and its settings are here; its fields are laid out in train_form.py, a run is driven in train_run.py and
its status lines are written in train_progress.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr
import pandas as pd

from playground.errors import TrainingError
from playground.insight import plots
from playground.serving.library import Library
from playground.serving.zerogpu import (
    CPU_RUN_MAX_PARAMS,
    ESTIMATE_GPU_S,
    gpu_chunk_seconds,
    gpu_time_note,
    on_zerogpu,
    training_slots,
)
from playground.training.finetune import BASE_SETTINGS
from playground.training.form import FIELDS, base_values, build_config, checked_config, field_note, preset_values
from playground.training.presets import FINE_TUNE
from playground.ui import texts
from playground.ui.handlers import bind, readable, said_beside
from playground.ui.pickers import labelled, model_names
from playground.ui.state import Session, visitor_of
from playground.ui.tabs.train_form import form_controls
from playground.ui.tabs.train_preview import (
    data_shape,
    estimate_line,
    lr_preview_figure,
    parameter_line,
    preset_line,
    too_short_warning,
)
from playground.ui.tabs.train_progress import SAMPLE_COLUMNS, STOPPING, STOPPING_PENDING
from playground.ui.tabs.train_run import continue_run, package_bytes, resumable_folder, resume_run, start_run
from playground.ui.zerogpu import duration_factor, gpu

NAME_HELP = "Saved as a package of that name; an existing name gets a -2, -3… suffix."
SCRATCH = "(scratch)"  # "Start from"'s value for new weights: no package can have this name (names.check_name)
SCRATCH_LABEL = "Scratch: new weights"
START_HELP = ("new weights, or a model's weights to fine-tune on your data: its model and tokenizer are kept, and "
              "the fine-tune preset's gentle schedule is chosen")
KEPT_NOTE = "the model's own, kept when you fine-tune it (choose Scratch in Start from to change it)"
DEFAULT_PRESET = "tiny"
NAME_HELP_SHARED = ("Saved as your code, a dash and this name (the pickers show it without the code): the code is "
                    "yours alone, so only your own models can make it a -2, -3… and nobody else's name matters.")
SAMPLE_WIDTHS = ["8%", "30%", "31%", "31%"]  # the model output stays in sight at 1024 px


@dataclass
class TrainTab:
    resume_from: gr.Dropdown
    start_event: object
    resume_event: object
    continue_events: list = field(default_factory=list)  # ZeroGPU: a paused run goes on (GPU, CPU)


# ----------------------------------------------------------------------------------------------------------
# Settings <-> TrainConfig


def field_notes(**values) -> list:
    """Each number field's note: its refusal (in the words the CLI uses, with what a size out of range would cost)
    in place of its help line, or the help line back."""
    return [gr.update(info=f"⚠️ {note}." if (note := field_note(name, values)) else FIELDS[name].help)
            for name in number_fields(values)]


def number_fields(controls: dict) -> list[str]:
    return [name for name in controls if FIELDS[name].kind in (int, float)]


ESTIMATING = "  \n⏱ Estimating the duration on this machine…"
STALE = "  \n⏱ Press **Estimate duration** to time this configuration on this machine."
STALE_ZEROGPU = ("  \n⏱ Press **Estimate duration** to time this configuration on ZeroGPU's GPU (a few seconds of your "
                 "daily GPU time; nothing is timed unasked).")


def previews(session: Session, values: dict, note: str) -> tuple[str, object]:
    """The parameter line (then `note`) and the LR preview for the settings on the form; settings that do not work
    are said in the line, and the preview keeps the last that did."""
    try:
        cfg = checked_config(values)  # its cost too: a vocabulary of 10^9 is refused here, not by the tokenizer
    except TrainingError as err:
        return f"⚠️ {err}{note}", gr.skip()
    return parameter_line(cfg) + note, lr_preview_figure(session, cfg)


# ----------------------------------------------------------------------------------------------------------
# Handlers (wired in build; `library` and the timer are bound there)


def stale_note() -> str:
    """What the parameter line says until the configuration is timed: on ZeroGPU a timing spends the visitor's GPU
    time, so only when pressed; elsewhere the tab times a configuration as soon as it is chosen."""
    return STALE_ZEROGPU if on_zerogpu() else STALE


def base_folder(library: Library, session: Session, start_from: str | None) -> Path | None:
    """The package a run starts from (None: new weights); another visitor's reads as a missing one."""
    if not start_from or start_from == SCRATCH:
        return None
    return library.folder(start_from, visitor_of(library, session))


def apply_preset(library: Library, fields: list[str], session: Session, preset: str, start_from: str | None = None):
    """The preset's settings in every field (a model to start from: its model and tokenizer settings, locked), its
    description, parameter count and LR preview."""
    # `fields`: the form's setting names, in the order of its components (the docstring is the API's description)
    base = base_folder(library, session, start_from)
    vals = preset_values(preset) if base is None else base_values(preset_values(preset), base)

    def field(name: str) -> dict:
        if name not in BASE_SETTINGS:
            return gr.update(value=vals[name], info=FIELDS[name].help)
        kept = base is not None
        return gr.update(value=vals[name], info=KEPT_NOTE if kept else FIELDS[name].help, interactive=not kept)

    return (*[field(k) for k in fields], preset_line(preset),
            *previews(session, vals, stale_note() if on_zerogpu() else ESTIMATING))


def choose_start(library: Library, fields: list[str], session: Session, preset: str, start_from: str | None):
    """Start from a model: the fine-tune preset, the model's own settings locked in the form. Back to new weights:
    the fields unlocked, under the default preset where the fine-tune one was chosen."""
    base = base_folder(library, session, start_from)
    preset = FINE_TUNE if base is not None else (DEFAULT_PRESET if preset == FINE_TUNE else preset)
    return preset, *apply_preset(library, fields, session, preset, start_from)


def start_choices(library: Library, session: Session | None) -> list[tuple[str, str]]:
    return [(SCRATCH_LABEL, SCRATCH), *labelled(library, session, model_names(library, session))]


def start_dropdown(library: Library, session: Session, keep: str | None):
    """"Start from" listed afresh (a model imported or trained since), the choice kept while it exists."""
    choices = start_choices(library, session)
    return gr.update(choices=choices, value=keep if keep in [value for _, value in choices] else SCRATCH)


def refresh_preview(session: Session, **values):
    """The parameter count and the learning-rate schedule over the planned steps, for the settings as edited."""
    return previews(session, values, stale_note())


def estimate(library: Library, time_steps, session: Session, **values):
    """Time a few training steps of this configuration on this machine; estimate the whole run."""
    # time_steps: playground.training.estimate.estimate_training as a ZeroGPU call (the settings in, numbers out)
    cfg = checked_config(values)
    library.keeper.check_size(visitor_of(library, session), package_bytes(cfg))  # before building anything to time
    seq_len, epoch_steps = data_shape(session, cfg.tokenizer, cfg.batch_tokens)
    est = time_steps(cfg, seq_len=seq_len, epoch_steps=epoch_steps)
    session.estimated, session.estimate = True, (cfg.to_dict(), est.steps)
    caveat = "" if session.data is not None else " Load data first for a better guess (sentence lengths, epochs)."
    warning = too_short_warning(est, cfg.max_minutes)
    return (f"{parameter_line(cfg)}  \n⏱ Estimated duration: **{estimate_line(est)}**, validations included."
            f"{caveat}" + (f"  \n{warning}" if warning else ""), lr_preview_figure(session, cfg, est.steps))


def first_estimate(library: Library, time_steps, session: Session, **values):
    """The first time this session opens the Train tab, time the form's configuration."""
    if session.estimated:
        return gr.skip(), gr.skip()
    return estimate(library, time_steps, session, **values)


def train(library: Library, session: Session, model_name: str, start_from: str | None = SCRATCH, **values):
    """Train a new model on this session's data, from new weights or fine-tuning the model `start_from` (its model
    and tokenizer settings are then its own, whatever the fields say); yields status, charts and sample translations
    as it runs. (On ZeroGPU the run is a sequence of GPU calls: see make_trainer.)"""
    base = base_folder(library, session, start_from)
    yield from start_run(session, library, model_name, checked_config(values, base), init_from=base)


def resume(library: Library, session: Session, resume_from: str, **values):
    """Continue training a package saved by a run: the budgets on the form are added to what it already did."""
    folder = resumable_folder(library, session, resume_from)
    yield from resume_run(session, library, folder, build_config(values))


def continue_on_gpu(library: Library, session: Session, resume_from: str):
    """A paused run goes on to its own budgets on ZeroGPU's GPU."""
    yield from continue_run(session, library, resume_from, on_cpu=False)


def continue_on_cpu(library: Library, session: Session, resume_from: str):
    """A paused run of a small model goes on to its own budgets on this Space's CPU, in one piece."""
    yield from continue_run(session, library, resume_from, on_cpu=True)


def stop_training(session: Session):
    """Stop this session's run after the current step; it validates once more and saves the package. The status
    says so at once. A run still waiting for its slot or being prepared ends as soon as it would begin."""
    if session.trainer is None and session.run_pending:
        session.stop_asked = True
        return STOPPING_PENDING
    if session.trainer is None:
        gr.Info("Nothing is training in this tab.")
        return gr.skip()
    session.trainer.stop()
    return STOPPING


def resumable(library: Library, session: Session | None) -> list[str]:
    """This visitor's packages saved by a training run (the shipped ones are read-only)."""
    from playground.packages.format import RESUME_STATE
    from playground.packages.names import is_shipped

    return [p.name for p in library.packages(visitor_of(library, session))
            if (p / RESUME_STATE).is_file() and not is_shipped(p)]


def resume_dropdown(library: Library, session: Session | None = None, keep: str | None = None) -> dict:
    names = resumable(library, session)
    own = Path(session.run_dir).name if session and session.run_dir else None
    value = keep if keep in names else own if own in names else (names[0] if names else None)
    return gr.update(choices=labelled(library, session, names), value=value)


# ----------------------------------------------------------------------------------------------------------
# Layout: one function per panel


@dataclass
class Panels:
    """The Train tab's components that its events read or write."""

    preset: gr.Radio
    preset_info: gr.Markdown
    params_info: gr.Markdown
    model_name: gr.Textbox
    start_from: gr.Dropdown
    estimate_btn: gr.Button
    controls: dict
    start_btn: gr.Button
    stop_btn: gr.Button
    resume_btn: gr.Button
    resume_from: gr.Dropdown
    continue_btns: tuple  # ZeroGPU: (on the GPU, on the CPU); else empty
    run_note: gr.Markdown  # beside the buttons: why a press did not start a run
    status: gr.Markdown
    outputs: list  # what a run updates: status, loss, validation, LR and metrics charts, samples


def settings_panel(library: Library, values: dict, first_params: str) -> tuple:
    """Preset, its description and parameter count, the model name, where to start from, Estimate, and every
    hyperparameter."""
    from playground.training.presets import PRESETS

    with gr.Row():
        with gr.Column(scale=2):
            preset = gr.Radio(list(PRESETS), value=DEFAULT_PRESET, label="Preset")
            preset_info = gr.Markdown(preset_line(DEFAULT_PRESET))
            params_info = gr.Markdown(first_params)
        with gr.Column(scale=1):
            model_name = gr.Textbox("my-model", label="Model name",
                                    info=NAME_HELP_SHARED if library.shared else NAME_HELP)
            start_from = gr.Dropdown(start_choices(library, None), value=SCRATCH, label="Start from",
                                     info=START_HELP, elem_id="train-start-from", allow_custom_value=True)
            estimate_btn = gr.Button("⏱ Estimate duration")
    with gr.Accordion("Advanced: every hyperparameter", open=False):
        controls = form_controls(values)
    return preset, preset_info, params_info, model_name, start_from, estimate_btn, controls


def run_buttons(library: Library) -> tuple:
    """Start, Stop, Resume and the package to resume; on ZeroGPU the two Continue buttons of a paused run."""
    with gr.Row():
        start_btn = gr.Button("▶ Start training", variant="primary", scale=2)
        stop_btn = gr.Button("■ Stop", variant="stop", scale=1)
        resume_btn = gr.Button("↻ Resume", scale=1)
        resume_from = gr.Dropdown(resumable(library, None), value=None, label="Resume from", scale=2,
                                  allow_custom_value=True,
                                  info="a package saved by a training run; the budgets above are added to it")
    continue_btns = ()
    if on_zerogpu():  # a run ZeroGPU paused (its quota spent) goes on to its own budgets
        with gr.Row():
            continue_btns = (gr.Button("▶ Continue on the GPU", scale=1), gr.Button("▶ Continue on the CPU", scale=1))
            gr.Markdown(texts.continue_note(CPU_RUN_MAX_PARAMS))
    run_note = gr.Markdown(elem_id="train-run-note")
    return start_btn, stop_btn, resume_btn, resume_from, continue_btns, run_note


def run_panel(first_lr) -> list:
    """The run's status line, its four charts and the sample translations: what a run updates."""
    status = gr.Markdown(texts.TRAIN_START, elem_id="train-status", min_height=50)
    with gr.Row():
        loss_plot = gr.Plot(plots.loss_figure([], []), show_label=False)
        val_plot = gr.Plot(plots.val_loss_figure([]), show_label=False)
    with gr.Row():
        lr_plot = gr.Plot(first_lr, show_label=False, elem_id="train-lr-plot")
        metrics_plot = gr.Plot(plots.metrics_figure([]), show_label=False)
    samples = gr.Dataframe(pd.DataFrame(columns=SAMPLE_COLUMNS), label="Sample translations at the last validation",
                           interactive=False, wrap=True, column_widths=SAMPLE_WIDTHS)
    gr.Markdown(texts.TRAIN_CHARTS)
    return [status, loss_plot, val_plot, lr_plot, metrics_plot, samples]


def layout(library: Library) -> Panels:
    values = preset_values(DEFAULT_PRESET)
    first_params, first_lr = previews(Session(), values, stale_note())
    settings = settings_panel(library, values, first_params)
    buttons = run_buttons(library)
    outputs = run_panel(first_lr)
    return Panels(*settings, *buttons, outputs[0], outputs)


# ----------------------------------------------------------------------------------------------------------
# Wiring


def wire_previews(p: Panels, session: gr.State, library: Library, page: gr.Tab) -> None:
    """Preset, preview and estimate: a field out of range is said beside it, an edit redraws the previews and drops
    a timing still waiting, a preset or (the first time) the tab opening times the configuration."""
    controls, lr_plot = p.controls, p.outputs[3]
    numbers = [controls[name] for name in number_fields(controls)]  # a value out of range is refused beside it
    gr.on([c.input for c in controls.values()], field_notes, None, numbers, inputs_kwargs=controls, queue=False,
          show_progress="hidden", api_visibility="private", trigger_mode="always_last")
    from playground.training.estimate import estimate_training

    time_steps = gpu(estimate_training, duration=ESTIMATE_GPU_S)  # a ZeroGPU call: the settings in, numbers out
    estimating = dict(inputs=[session], inputs_kwargs=controls, show_progress="minimal", concurrency_limit=1,
                      concurrency_id="estimate")
    timing = said_beside(bind(estimate, library, time_steps), [p.params_info, lr_plot], p.params_info)
    preset_outputs = [*controls.values(), p.preset_info, p.params_info, lr_plot]
    preset_applied = p.preset.change(**said_beside(bind(apply_preset, library, list(controls)), preset_outputs,
                                                   p.preset_info),
                                     inputs=[session, p.preset, p.start_from], api_name="apply_preset",
                                     show_progress="hidden")
    p.start_from.input(**said_beside(bind(choose_start, library, list(controls)), [p.preset, *preset_outputs],
                                     p.preset_info),
                       inputs=[session, p.preset, p.start_from], api_name="start_from", show_progress="hidden")
    page.select(bind(start_dropdown, library), [session, p.start_from], [p.start_from], queue=False,
                show_progress="hidden", api_visibility="private")
    gr.on([c.input for c in controls.values()], readable(refresh_preview), [session], [p.params_info, lr_plot],
          inputs_kwargs=controls, api_name="lr_preview", show_progress="hidden", trigger_mode="always_last")
    timings = [p.estimate_btn.click(**timing, api_name="estimate", **estimating)]
    if not on_zerogpu():  # a preset chosen, the tab opened: timed at once
        timings.append(preset_applied.then(**timing, api_name="estimate_preset", api_visibility="private",
                                           **estimating))
        timings.append(page.select(**said_beside(bind(first_estimate, library, time_steps), [p.params_info, lr_plot],
                                             p.params_info), api_visibility="private", **estimating))
    # A timing waits its turn behind other sessions' ones; by the time it reports, the person may have changed the
    # settings it timed, and its line would replace the preview of the new ones. An edit drops it instead.
    gr.on([c.input for c in controls.values()], None, None, cancels=timings, queue=False, show_progress="hidden",
          api_visibility="private")


def ready_line(session: Session, status: str | None):
    """Before any run, the status line says what is still missing: the data, or nothing (a run's line stays)."""
    if not (status or "").startswith(texts.BEFORE_RUN):
        return gr.skip()
    return texts.TRAIN_START if session.data is None else texts.train_ready(session.description)


def running_note(session: Session) -> str:
    return (f"⚠️ This tab is already training `{Path(session.run_dir or '').name}`: a new run starts when it ends. "
            "Press **■ Stop** to end it now (it is saved).")


def before_run(waiting: str, session: Session) -> tuple:
    """What Start and Resume say at once: beside the buttons, that this tab is already training (that run goes on,
    its charts too); else the wait for a training slot, with the last run's charts cleared."""
    if session.trainer is not None:
        return gr.skip(), running_note(session), *(gr.skip(),) * 4
    session.run_pending, session.stop_asked = True, False
    return (waiting, "", plots.loss_figure([], []), plots.val_loss_figure([]), plots.metrics_figure([]),
            pd.DataFrame(columns=SAMPLE_COLUMNS))


def after_run(session: Session) -> str:
    """Once a run has ended (or failed before it began): nothing of it is pending, the note beside the buttons goes."""
    session.run_pending = session.stop_asked = False
    return ""


def busy(session: Session, *others, **controls) -> list:
    """Start or Resume during this tab's own run: refused before it is queued (queued, it would wait for that run to
    end, then start one; an API client gets the note). One verdict per input, the session's first."""
    running = session.trainer is not None
    return [gr.validate(not running, running_note(session) if running else ""), *[None] * (len(others) + len(controls))]


def wire_runs(p: Panels, session: gr.State, library: Library) -> TrainTab:
    """Start and Resume (the run's queue position said at once), Stop, and on ZeroGPU Continue."""
    slots = training_slots()
    waiting = texts.waiting_line(slots, library.quotas.run_minutes) + \
        gpu_time_note(gpu_chunk_seconds(), duration_factor(), library.quotas.run_minutes)
    train_kwargs = dict(show_progress="full", show_progress_on=[p.status], concurrency_limit=slots,
                        concurrency_id="train")

    status, loss_plot, val_plot, _, metrics_plot, samples = p.outputs

    def run_button(button: gr.Button, handler, picked: list, api_name: str):
        run = button.click(bind(before_run, waiting), [session], [status, p.run_note, loss_plot, val_plot,
                                                                  metrics_plot, samples],
                           queue=False, api_visibility="private", show_progress="hidden").then(
            **said_beside(bind(handler, library), p.outputs, p.status), inputs=[session, *picked],
            api_name=api_name, inputs_kwargs=p.controls, validator=busy, **train_kwargs)
        run.then(after_run, [session], p.run_note, queue=False, api_visibility="private", show_progress="hidden")
        return run

    start_event = run_button(p.start_btn, train, [p.model_name, p.start_from], "train")
    resume_event = run_button(p.resume_btn, resume, [p.resume_from], "resume")
    start_event.then(bind(start_dropdown, library), [session, p.start_from], [p.start_from], queue=False,
                     show_progress="hidden", api_visibility="private")  # the model just trained can be started from
    p.stop_btn.click(readable(stop_training), [session], [p.status], api_name="stop", concurrency_limit=None,
                     queue=False, show_progress="hidden")
    continue_events = []
    cpu_kwargs = {**train_kwargs, "concurrency_limit": 1, "concurrency_id": "cpu-train"}
    for button, handler, kwargs in zip(p.continue_btns, (continue_on_gpu, continue_on_cpu), (train_kwargs, cpu_kwargs)):
        continue_events.append(button.click(**said_beside(bind(handler, library), p.outputs, p.status),
                                            inputs=[session, p.resume_from], api_name=handler.__name__, **kwargs))
    return TrainTab(p.resume_from, start_event, resume_event, continue_events)


def build(session: gr.State, library: Library, page: gr.Tab) -> TrainTab:
    panels = layout(library)
    page.select(ready_line, [session, panels.status], [panels.status], queue=False, show_progress="hidden",
                api_visibility="private")
    wire_previews(panels, session, library, page)
    return wire_runs(panels, session, library)
