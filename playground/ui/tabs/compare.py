"""Compare tab: two or more runs side by side — their curves overlaid on shared axes (by step or by wall time), the
settings that differ, the final scores, and the same sentences translated by each."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

import gradio as gr
import pandas as pd

from playground.errors import PlaygroundError
from playground.insight import plots
from playground.serving import work
from playground.serving.library import Library
from playground.ui.handlers import IN_WORKERS, bind, quick_call, request_lines, said_beside
from playground.ui.pickers import model_names, package_folder, shown
from playground.ui.state import Session

MAX_SENTENCES = 20  # each sentence is translated by every compared model
EXAMPLE = "the cat sees the dog\nfour hundred twenty-one"


def side_by_side_widths(n_models: int) -> list[str]:
    """The side-by-side table's column widths: the source a fifth, the models the rest in equal shares. Gradio sizes
    columns to their text unbroken, so without set widths one model's endless output pushes the others off the
    page (an untrained model's "Eineeeeeeeee…")."""
    return ["20%"] + [f"{80 / n_models:.2f}%"] * n_models


@dataclass
class CompareTab:
    models: gr.Dropdown


def run_figures(runs, x_axis: str) -> list:
    """Training loss (EMA), validation loss, learning rate and BLEU of every run, on shared axes."""
    by_time = x_axis == "wall time"
    x_title = "wall time (s)" if by_time else "step"

    def xs(run, steps):
        return [run.seconds_at(step) for step in steps] if by_time else list(steps)

    def eval_series(key: str):
        return [(run.name, xs(run, [e["step"] for e in run.evals]), [e[key] for e in run.evals]) for run in runs]

    return [
        plots.overlay_figure([(run.name, xs(run, run.steps), plots.ema(run.loss)) for run in runs],
                             "Training loss (EMA 0.9)", x_title, "loss (label-smoothed)"),
        plots.overlay_figure(eval_series("val_loss"), "Validation loss", x_title, "loss (NLL per token)", markers=True),
        plots.overlay_figure([(run.name, xs(run, run.steps), run.lr) for run in runs], "Learning rate", x_title,
                             "learning rate", log_y=True),
        plots.overlay_figure(eval_series("bleu"), "BLEU", x_title, "BLEU (validation sample)", markers=True),
        plots.overlay_figure(eval_series("chrf"), "chrF", x_title, "chrF (validation sample)", markers=True),
    ]


def tables(runs) -> tuple[pd.DataFrame, pd.DataFrame]:
    from playground.insight.compare import comparison_rows

    settings, scores = comparison_rows(runs)
    names = [run.name for run in runs]
    if not settings:
        settings = [["(none: every setting is the same)", *[""] * len(names)]]
    return pd.DataFrame(settings, columns=["setting", *names]), pd.DataFrame(scores, columns=["score", *names])


def time_note(runs) -> str:
    estimated = [run.name for run in runs if not run.elapsed_recorded]
    if not estimated:
        return ""
    return (f"*By wall time: {', '.join(estimated)} recorded only the total time, so its steps are spread evenly "
            "over it.*")


# in a worker process (playground.serving.work); a training step waits for it (playground.runtime.foreground)
quick_runs = quick_call(work.compared_runs, "Compare fewer models.")
quick_columns = quick_call(work.greedy_columns, "Send fewer or shorter sentences, or compare fewer models.")


# ----------------------------------------------------------------------------------------------------------
# Handlers (build binds `library`)


def compare(library: Library, session: Session, names: list[str] | None, x_axis: str = "step"):
    """The comparison of the chosen packages; a wrong choice is said next to the button, the views stay."""
    from playground.insight.compare import check_choice

    check_choice(list(names or []))  # before any name is resolved: a list of 100,000 names costs nothing
    runs = [replace(run, name=shown(library, session, run.name))
            for run in quick_runs([str(package_folder(library, session, name)) for name in names or []])]
    note = time_note(runs) if x_axis == "wall time" else ""
    session.compared_runs = len(runs)
    return note, *tables(runs), *run_figures(runs, x_axis)


def translate_each(library: Library, session: Session, names: list[str] | None, text: str):
    """The sentences translated greedily by each chosen model: one column per model."""
    from playground.insight.compare import check_choice

    if not names:
        raise PlaygroundError("Pick the models to compare first.")
    check_choice(list(names))
    lines, cut = request_lines(text, "sentences")
    if not lines or len(lines) > MAX_SENTENCES:
        raise PlaygroundError(f"Type between 1 and {MAX_SENTENCES} sentences, one per line.")
    folders = [str(package_folder(library, session, name)) for name in names]
    columns = quick_columns(folders, lines)  # "source", then one column per package name
    table = pd.DataFrame({shown(library, session, name) if name != "source" else name: column
                          for name, column in columns.items()}).replace("", "(empty output)")
    session.compared_models = len(folders)
    return cut, table


def fitted(n_models: int):
    """A table's update to the widths of n_models side by side (gr.skip() before any table was made)."""
    return gr.Dataframe(column_widths=side_by_side_widths(n_models)) if n_models else gr.skip()


def fit_columns(session: Session):
    """Widths for the models the table shows (a refused request left both as they were); set in a step of their
    own, so that API clients get a plain table from compare_translate. Its only input is the session's State,
    which a caller cannot send: the step is reachable over HTTP like any other."""
    return fitted(session.compared_models)


def fit_tables(session: Session):
    """Widths for the settings and scores tables, in a private step as fit_columns: the names of the settings
    a fifth and more, each run an equal share, so eight runs still fit at 1024 px."""
    return fitted(session.compared_runs), fitted(session.compared_runs)


# ----------------------------------------------------------------------------------------------------------
# Layout and wiring


def comparison_panel() -> SimpleNamespace:
    """The tables and curves of the compared runs."""
    v = SimpleNamespace()
    # one above the other: side by side at 1024 px, eight models' columns did not fit in half the page
    v.settings = gr.Dataframe(pd.DataFrame(columns=["setting"]), label="Settings that differ", interactive=False,
                              wrap=True, elem_id="compare-settings")
    v.scores = gr.Dataframe(pd.DataFrame(columns=["score"]), label="Scores (the final validation of each run)",
                            interactive=False, wrap=True, elem_id="compare-scores")
    with gr.Row():
        v.loss_plot, v.val_plot = gr.Plot(show_label=False), gr.Plot(show_label=False)
    with gr.Row():
        v.lr_plot, v.bleu_plot, v.chrf_plot = (gr.Plot(show_label=False), gr.Plot(show_label=False),
                                               gr.Plot(show_label=False))
    return v


def build(session: gr.State, library: Library) -> CompareTab:
    gr.Markdown("Pick two or more models to see their training curves on shared axes, the settings that differ and "
                "the scores of their last validation; then translate the same sentences with each of them.")
    with gr.Row():
        models = gr.Dropdown(model_names(library, None), value=[], multiselect=True, label="Models to compare",
                             info="Two to eight packages", scale=4, allow_custom_value=True)  # the API may name
        # a package made after the page was built; package_folder decides whether this visitor may use it
        x_axis = gr.Radio(["step", "wall time"], value="step", label="Horizontal axis", scale=1)
        compare_btn = gr.Button("Compare", variant="primary", scale=1)
    message = gr.Markdown()
    v = comparison_panel()
    with gr.Row():
        sentences = gr.Textbox(EXAMPLE, lines=3, label="Sentences to translate with each model (one per line)",
                               scale=4)
        translate_btn = gr.Button("Translate with each", scale=1)
    side_by_side = gr.Dataframe(pd.DataFrame(columns=["source"]), label="Greedy translations, side by side",
                                interactive=False, wrap=True)

    view_outputs = [v.settings, v.scores, v.loss_plot, v.val_plot, v.lr_plot, v.bleu_plot, v.chrf_plot]
    gr.on([compare_btn.click, x_axis.change], **said_beside(bind(compare, library), [message, *view_outputs], message),
          inputs=[session, models, x_axis], api_name="compare", **IN_WORKERS).then(
        fit_tables, session, [v.settings, v.scores], api_visibility="private", show_progress="hidden", queue=False)
    translate_btn.click(**said_beside(bind(translate_each, library), [message, side_by_side], message),
                        inputs=[session, models, sentences], api_name="compare_translate", **IN_WORKERS).then(
        fit_columns, session, side_by_side, api_visibility="private", show_progress="hidden", queue=False)
    return CompareTab(models)
