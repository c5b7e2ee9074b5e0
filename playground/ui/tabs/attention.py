"""Attention tab: heatmaps of encoder self-, decoder self- and cross-attention for one sentence pair (the
model's own translation, or a target typed in and teacher-forced), per head, averaged, or all heads at once;
plus the cross-attention of a fixed validation pair at each validation of training."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import gradio as gr
import numpy as np

from playground.errors import PlaygroundError
from playground.insight import model_plots, plots
from playground.serving import work
from playground.serving.library import Library
from playground.ui.caches import package_probe
from playground.ui.handlers import (
    IN_WORKERS,
    bind,
    cleared_export,
    download_dir,
    quick_call,
    readable,
    request_lines,
    said_beside,
)
from playground.ui.numbers import Range, Slider, checked
from playground.ui.pickers import default_model, model_names, model_picker, package_folder, picked_shape, shown
from playground.ui.sessions import admit_download, current_address
from playground.ui.state import Session

KINDS = [("Cross-attention (decoder → encoder)", "cross"), ("Encoder self-attention", "encoder"),
         ("Decoder self-attention (masked)", "decoder")]
KIND_NAMES = {value: label for label, value in KINDS}
VIEWS = ["one head", "mean over heads", "all heads (layers × heads)"]
TARGET_MODES = ["the model's translation", "my target (teacher-forced)"]
# the numeric controls (playground.ui.numbers); the top of each is the maps' (or the training history's) own
LAYER = Range("Layer", 0, None, whole=True)
HEAD = Range("Head", 0, None, whole=True)
VALIDATION = Range("Validation", 0, None, whole=True)
MAX_GRID_MAPS = 96  # heatmaps in the all-heads grid: drawing 96 takes ~0.7 s on a 2-core CPU, 192 ~1.8 s
# PNG export is drawn by the browser from the chart it shows (plotly.js's own toImage, via the chart's camera
# button), so the server needs no image engine (kaleido + Chrome)
PNG_JS = """() => {
    const chart = document.querySelector('#attention-plot .js-plotly-plot');
    const camera = chart && chart.querySelector('.modebar-btn[data-title^="Download plot"]');
    if (camera) camera.click();
}"""


@dataclass
class AttentionTab:
    model: gr.Dropdown
    source: gr.Textbox


def axis_tokens(att: dict, kind: str) -> tuple[list[str], list[str]]:
    """(key tokens, query tokens) of an attention kind."""
    src, tgt = att["src_tokens"], att["tgt_tokens"]
    return {"encoder": (src, src), "decoder": (tgt, tgt), "cross": (src, tgt)}[kind]


def render(att: dict | None, kind: str, view: str, layer: int, head: int):
    """The figure for the stored maps: one head, the mean over heads, or the layers x heads grid."""
    if not att:
        return plots.empty_figure("Type a source sentence and press “Show attention”.", height=400)
    weights = att["maps"][kind]  # [L, H, q, k]
    n_layers, n_heads = weights.shape[:2]
    layer, head = LAYER.upto(n_layers - 1).check(layer), HEAD.upto(n_heads - 1).check(head)
    keys, queries = axis_tokens(att, kind)
    name = KIND_NAMES[kind]
    if view == VIEWS[2]:
        if n_layers * n_heads > MAX_GRID_MAPS:
            return plots.empty_figure(f"{n_layers} layers × {n_heads} heads are more maps than the grid draws at once "
                                      f"({MAX_GRID_MAPS}): pick one head, or the mean over heads.", height=400)
        return model_plots.attention_grid(weights, keys, queries, f"{name}: all {n_layers} layers × {n_heads} heads")
    if view == VIEWS[1]:
        return model_plots.attention_heatmap(weights[layer].mean(axis=0), keys, queries,
                                             f"{name}: layer {layer}, mean over {n_heads} heads")
    return model_plots.attention_heatmap(weights[layer, head], keys, queries, f"{name}: layer {layer}, head {head}")


def map_shape(att: dict | None, kind: str, shape: dict | None = None) -> tuple[int, int] | None:
    """(layers, heads) of one kind of maps: those drawn, else those the model `shape` (config.json's "model") would
    draw; None when neither is known."""
    if att:
        return tuple(att["maps"][kind].shape[:2])
    if not shape:
        return None
    return shape["n_encoder_layers" if kind == "encoder" else "n_decoder_layers"], shape["n_heads"]


def sliders(att: dict | None, kind: str, layer: int, head: int, shape: dict | None = None):
    """The Layer and Head sliders over the maps' (or the model's) layers and heads, their values kept in range."""
    known = map_shape(att, kind, shape)
    if not known:
        return gr.update(), gr.update()
    n_layers, n_heads = known
    return (gr.update(maximum=max(n_layers - 1, 1), value=min(int(layer), n_layers - 1), interactive=n_layers > 1),
            gr.update(maximum=max(n_heads - 1, 1), value=min(int(head), n_heads - 1), interactive=n_heads > 1))


def compute_maps(folder: str, source: str, target_mode: str, target: str) -> dict:
    """Every attention map of one pair with the package in `folder`, computed in a worker
    (playground.serving.work.attention): the model's own translation, or `target` teacher-forced."""
    if target_mode != TARGET_MODES[1]:
        return quick_maps(folder, source, None)
    if not (target or "").strip():
        raise PlaygroundError("Type the target sentence to teacher-force, or choose “the model's translation”.")
    return quick_maps(folder, source, target.strip())


def cut_note(att: dict) -> str:
    """What fit_attention cut, said beside the button ("" when nothing was)."""
    if not att.get("cut"):
        return ""
    from playground import limits

    sources, targets = att["cut"]
    return (f"\n\n✂️ The maps of all {sources} source tokens and {targets} target inputs would pass the "
            f"{limits.max_attention_cells():,} attention weights one request may draw here: they were computed for "
            f"the first {len(att['src_tokens'])} and "
            f"{len(att['tgt_tokens'])}. Shorten the sentence to see all of it.")


def read_probe(library: Library, session: Session | None, name: str | None) -> list:
    """The recorded cross-attention of the package's probe pair, one entry per validation ([] when none)."""
    if not name:
        return []
    try:
        return package_probe(package_folder(library, session, name))
    except PlaygroundError:
        return []


def probe_figure(probe: list, index: int):
    """The index-th recorded cross-attention of the probe pair: every decoder layer side by side, mean over heads."""
    if not probe:
        return plots.empty_figure("This model has no attention history (it was not trained here, or never validated).")
    index = VALIDATION.upto(len(probe) - 1).check(index)
    p = probe[index]
    cross = np.asarray(p["cross"], dtype=float)
    layers = [f"layer {i}" for i in range(cross.shape[0])] if cross.ndim == 3 else ["last layer"]
    cross = cross.reshape(1, len(layers), *cross.shape[-2:])  # one row of [queries, keys] maps, one per layer
    return model_plots.attention_grid(cross, p["src_tokens"], p["tgt_tokens"],
                                      f"Cross-attention of a validation pair at step {p['step']:,} "
                                      f"(validation {index + 1} of {len(probe)})",
                                      row_titles=["mean over heads"], column_titles=layers)


# in a worker process (playground.serving.work); a training step waits for it (playground.runtime.foreground)
quick_maps = quick_call(work.attention, "Shorten the sentence (the model's own translation of it is decoded first), "
                                      "or teacher-force a shorter target.")


# ----------------------------------------------------------------------------------------------------------
# Handlers (build binds `library`)


@readable
def show_attention(library: Library, session: Session, model: str, source: str, target_mode: str = TARGET_MODES[0],
                   target: str = "", kind: str = "cross", view: str = VIEWS[0], layer: int = 0, head: int = 0):
    """Compute the attention of one pair and draw it; returns the figure, the target used and a note."""
    folder = str(package_folder(library, session, model))
    source_lines, source_cut = request_lines(source, "source")
    target_lines, target_cut = request_lines(target, "target")
    session.attention = compute_maps(folder, " ".join(source_lines), target_mode, " ".join(target_lines))
    att = session.attention
    note = (f"**{shown(library, session, att['model'])}** · {len(att['src_tokens'])} source tokens (with `<eos>`), "
            f"{len(att['tgt_tokens'])} target inputs (from `<bos>`); rows are queries, columns keys. "
            "Hover for the weights." + cut_note(att) + "".join("\n\n" + cut for cut in (source_cut, target_cut)
                                                              if cut))
    return (render(att, kind, view, layer, head), att["target"], note, *sliders(att, kind, layer, head))


@readable
def redraw(session: Session, kind: str = "cross", view: str = VIEWS[0], layer: int = 0, head: int = 0,
           model: str | None = None):
    """Draw the last computed maps again with another kind, view, layer or head (`model`, the one picked, sets the
    sliders' ranges before any maps are drawn: build's validator checks them against it)."""
    return render(session.attention, kind, view, layer, head)


def switch(library: Library, session: Session, kind: str, view: str, layer: int, head: int, model: str | None):
    """Another kind has its own number of layers: the sliders follow, and the figure is drawn at their values."""
    shape = picked_shape(library, session, model)
    known = map_shape(session.attention, kind, shape)
    if known:
        layer, head = min(int(layer), known[0] - 1), min(int(head), known[1] - 1)
    return (redraw(session, kind, view, layer, head), *sliders(session.attention, kind, layer, head, shape))


def model_sliders(library: Library, session: Session, kind: str, layer: int, head: int, model: str | None):
    """Before any maps are drawn, the sliders span the picked model's layers and heads (drawn maps keep theirs)."""
    if session.attention:
        return gr.update(), gr.update()
    return sliders(None, kind, layer, head, picked_shape(library, session, model))


def current_figure(session: Session, kind: str, view: str, layer: int, head: int):
    """The chart on screen, drawn again for an export."""
    if not session.attention:
        raise PlaygroundError("Show some attention first, then export it.")
    return render(session.attention, kind, view, layer, head)


@readable
def export_html(library: Library, session: Session, kind: str = "cross", view: str = VIEWS[0], layer: int = 0,
                head: int = 0, offline: bool = False):
    """The current chart as an HTML file with zoom and hover: a few kB that load plotly.js from its CDN when
    opened, or (offline) self-contained with plotly.js inside (about 4.7 MB)."""
    fig = current_figure(session, kind, view, layer, head)
    # an offline page counts with the uploads of its address, by its bulk (plotly.js), before anything is written:
    # the page it would replace stays when it is refused (a page that loads plotly.js is a few kB)
    refusal = library.shared and offline and admit_download(
        current_address(), plots.plotly_bundle().stat().st_size, "The offline page",
        "export without \"HTML for offline viewing\" (a page of a few kB that loads plotly.js when opened)")
    if refusal:
        raise PlaygroundError(refusal)
    # one folder per session, emptied by its next export and swept with the other downloads (packages.sweep)
    path = download_dir("attention", session.download_key) / f"attention-{kind}.html"
    plots.write_html(fig, path, offline)
    return str(path)


def probe_slider(probe: list) -> dict:
    """The validation slider of a probe history: at its last validation, hidden when there is none."""
    n = len(probe)
    return {"maximum": max(n - 1, 1), "value": max(n - 1, 0), "visible": n > 0, "interactive": n > 1}


@readable
def pick_model(library: Library, session: Session, model: str):
    """The picked model's attention history, at its last validation."""
    probe = read_probe(library, session, model)
    return gr.update(**probe_slider(probe)), probe_figure(probe, len(probe) - 1)


@readable
def show_probe(library: Library, session: Session, model: str, index: int = 0):
    """Cross-attention of the model's fixed validation pair at the index-th validation of its training."""
    return probe_figure(read_probe(library, session, model), index)


# ----------------------------------------------------------------------------------------------------------
# Layout and wiring


def pair_controls(session: gr.State, library: Library) -> SimpleNamespace:
    """The left column: the model, the pair, which maps to draw and the export buttons."""
    c = SimpleNamespace()
    c.model, c.refreshed = model_picker(library, session, "attention_models")
    c.source = gr.Textbox(label="Source sentence", lines=2)
    c.target_mode = gr.Radio(TARGET_MODES, value=TARGET_MODES[0], label="Target side",
                             info="teacher-forced: the decoder is fed your target as its previous tokens "
                                  "instead of its own guesses")
    c.target = gr.Textbox(label="Target (filled with the model's translation; edit it and choose "
                                "“my target” to teacher-force your own)", lines=2)
    c.show = gr.Button("Show attention", variant="primary")
    c.kind = gr.Radio(KINDS, value="cross", label="Attention")
    c.view = gr.Radio(VIEWS, value=VIEWS[0], label="View")
    # the picked model's layers and heads from the start (the first maps drawn keep them, or set theirs)
    n_layers, n_heads = map_shape(None, "cross", picked_shape(library, None, c.model.value)) or (1, 1)
    c.layer = LAYER.slider(0, high=max(n_layers - 1, 1), step=1, interactive=n_layers > 1)
    c.head = HEAD.slider(0, high=max(n_heads - 1, 1), step=1, interactive=n_heads > 1)
    with gr.Row():
        c.html_btn = gr.Button("Export HTML", size="sm")
        c.png_btn = gr.Button("Export PNG", size="sm")
    c.offline = gr.Checkbox(False, label="HTML for offline viewing (4.7 MB)",
                            info="off: a file of a few kB that loads plotly.js from the internet when opened")
    c.export = gr.File(label="Exported chart", interactive=False, height=90)
    c.export_note = gr.Markdown()
    return c


def maps_panel(library: Library) -> SimpleNamespace:
    """The right column: the maps, and the attention of the validation pair over training."""
    p = SimpleNamespace()
    first_probe = read_probe(library, None, default_model(model_names(library, None)))
    p.note = gr.Markdown()
    p.plot = gr.Plot(render(None, "cross", VIEWS[0], 0, 0), show_label=False, elem_id="attention-plot")
    with gr.Accordion("Attention over training", open=True, elem_id="attention-over-training"):
        gr.Markdown("The trainer records the cross-attention (each decoder layer, mean over heads) of one "
                    "fixed validation pair at every validation: slide through training to watch the "
                    "alignment form.")
        p.probe_step = Slider(0, **probe_slider(first_probe), step=1, label=VALIDATION.label,
                                 elem_id="attention-probe-step",
                                 info="0 = the first validation; the training step is in the chart's title")
        p.probe_plot = gr.Plot(probe_figure(first_probe, len(first_probe) - 1), show_label=False,
                               elem_id="attention-probe-plot")
    return p


def number_checks(library: Library, session: gr.State, c: SimpleNamespace, p: SimpleNamespace,
                  drawn: bool = True) -> dict:
    """The Layer, Head and Validation ranges: those of the maps drawn (`drawn`, else of the model picked, whose maps
    are about to be computed) and of the model's training history."""
    def shape(v: dict) -> tuple[int, int] | None:
        att = v[session].attention if drawn else None
        return map_shape(att, v[c.kind], picked_shape(library, v[session], v.get(c.model)))

    def top(v: dict, which: int, rule: Range) -> Range:
        known = shape(v)
        return rule.upto(known[which] - 1) if known else rule

    return {c.layer: lambda v: top(v, 0, LAYER), c.head: lambda v: top(v, 1, HEAD),
            p.probe_step: lambda v: VALIDATION.upto(max(len(read_probe(library, v[session], v[c.model])) - 1, 0))}


def build(session: gr.State, library: Library) -> AttentionTab:
    with gr.Row():
        with gr.Column(scale=1):
            c = pair_controls(session, library)
        with gr.Column(scale=2):
            p = maps_panel(library)

    view_inputs = [session, c.kind, c.view, c.layer, c.head]
    compute = dict(**said_beside(bind(show_attention, library), [p.plot, c.target, p.note, c.layer, c.head], p.note),
                   **checked([session, c.model, c.source, c.target_mode, c.target, *view_inputs[1:]],
                             number_checks(library, session, c, p, drawn=False)), trigger_mode="always_last",
                   **IN_WORKERS)
    c.show.click(**compute, api_name="attention")
    c.source.submit(**compute, api_visibility="private")
    checks = number_checks(library, session, c, p)
    c.kind.change(readable(bind(switch, library)), [*view_inputs, c.model], [p.plot, c.layer, c.head],
                  api_visibility="private", show_progress="hidden")
    c.view.change(redraw, **checked([*view_inputs, c.model], checks), outputs=[p.plot], api_name="attention_view",
                  show_progress="hidden")
    for control in (c.layer, c.head):
        control.change(redraw, **checked([*view_inputs, c.model], checks), outputs=[p.plot],
                       api_visibility="private", show_progress="hidden", trigger_mode="always_last")
    c.model.change(readable(bind(model_sliders, library)), [session, c.kind, c.layer, c.head, c.model],
                   [c.layer, c.head], api_visibility="private", show_progress="hidden")
    c.html_btn.click(**said_beside(bind(export_html, library), [c.export], c.export_note),
                     **checked([*view_inputs, c.offline], checks), api_name="export_attention_html")
    c.png_btn.click(None, js=PNG_JS)
    gr.on([c.show.click, c.source.submit, c.kind.change, c.view.change, c.layer.change, c.head.change,
           c.model.change], cleared_export, None, [c.export, c.export_note], queue=False, show_progress="hidden",
          api_visibility="private")
    probe_outputs = dict(fn=bind(pick_model, library), inputs=[session, c.model],
                         outputs=[p.probe_step, p.probe_plot], api_visibility="private", show_progress="hidden")
    # ↻ also rereads the history: a model still training (the demo) gains validations under the same name
    c.refreshed.then(**probe_outputs)
    c.model.change(**probe_outputs)
    p.probe_step.change(bind(show_probe, library), **checked([session, c.model, p.probe_step], checks),
                        outputs=[p.probe_plot], api_name="attention_probe", show_progress="hidden",
                        trigger_mode="always_last")
    return AttentionTab(c.model, c.source)
