"""Inside tab: the articles' figures drawn from the chosen model and this session's data — the positional encoding,
the padding and look-ahead masks of a real batch, the padding that batching by length saves, and a map of the
token embeddings. The data behind each view comes from playground.insight.inspection, the figures from
playground.insight.model_plots and playground.insight.plots."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import gradio as gr

from playground.insight import model_plots, plots
from playground.serving import work
from playground.serving.library import Library
from playground.ui.handlers import IN_WORKERS, bind, quick_call, readable, said_beside
from playground.ui.numbers import Range, checked
from playground.ui.pickers import model_picker, package_folder
from playground.ui.state import Session

NO_DATA = "Load data on the Data tab: this view is computed on your sentence pairs."
NO_MODEL = "Choose a model above (train one on the Train tab, or upload one on the Models tab)."

# the numeric controls (playground.ui.numbers)
PAIRS = Range("Pairs in the batch", 1, 8, whole=True)
PAIR_SHOWN = Range("Pair shown", 1, 8, whole=True)  # its top: the pairs in the batch
MASK_SEED = Range("Which pairs (seed)", 0, 2**63 - 1, whole=True)
BATCH_TOKENS = Range("Batch tokens", 0, None, whole=True)
SHUFFLE_SEED = Range("Shuffle seed", 0, 2**63 - 1, whole=True)
TOKENS = Range("Tokens", 20, 500, whole=True)


@dataclass
class InsideTab:
    model: gr.Dropdown
    redraw: list[dict]  # listener arguments that redraw every view (the tab's select event runs them)


# in a worker process (playground.serving.work); a training step waits for them (playground.runtime.foreground)
TOO_MUCH = "Load fewer sentence pairs on the Data tab, or pick a smaller model."
quick_positional = quick_call(work.positional_table, "Pick a smaller model.")
quick_masks = quick_call(work.mask_data, TOO_MUCH)
quick_batching = quick_call(work.batching_data, TOO_MUCH)
quick_embeddings = quick_call(work.embedding_data, TOO_MUCH)


# ----------------------------------------------------------------------------------------------------------
# One function per view: (figures..., note); an empty figure with a hint when the model or the data is missing


def positional_view(session: Session, library: Library, model: str | None, side: str, dimensions: list[int] | None):
    from playground.insight.inspection import curve_dimensions

    if not model:
        return plots.empty_figure(NO_MODEL), plots.empty_figure(), gr.update(), ""
    package, table = quick_positional(str(package_folder(library, session, model)), side)
    cfg, name = package["cfg"], package["name"]
    dims = [int(d) for d in dimensions or [] if 0 <= int(d) < cfg.d_model] or curve_dimensions(cfg.d_model)
    learned = cfg.positional_encoding == "learned"
    what = f"learned {side} position embeddings" if learned else "sinusoidal encoding (the same on both sides)"
    note = (f"**{name}**: {what}, {cfg.max_positions} positions × {cfg.d_model} dimensions. " +
            ("These are the weights of the model's `positions` embedding after training: compare them with the "
             "paper's sines (train a model with *Positional encoding: sinusoidal*). Positions beyond the longest "
             "training sentences get no gradient and keep their random start." if learned else
             "PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(…): each pair of dimensions is a wave, "
             "slower and slower along the dimensions."))
    return (model_plots.positional_heatmap(table, f"Positional encoding of {name} ({side})"),
            model_plots.positional_curves(table, dims, "Chosen dimensions over the positions"),
            gr.update(choices=list(range(cfg.d_model)), value=dims), note)


def language_warning(session: Session, package: dict) -> str:
    """A warning, before a view's note, when the model (playground.serving.work.about) and the session's data are not
    the same language pair."""
    if session.data is None:
        return ""
    model_pair = (package["config"].get("src_lang"), package["config"].get("tgt_lang"))
    data_pair = (session.src_lang, session.tgt_lang)
    if model_pair == data_pair:
        return ""
    return (f"⚠️ **{package['name']}** translates `{model_pair[0]}` → `{model_pair[1]}`, your data is "
            f"`{data_pair[0]}` → `{data_pair[1]}`: its tokenizer splits your sentences with a vocabulary made for "
            "other languages. Pick a model of your data's pair above, or load data in its languages on the Data "
            "tab.  \n")


def masks_view(session: Session, library: Library, model: str | None, n_pairs: int, seed: int, pair: int):
    if not model or session.data is None:
        hint = plots.empty_figure(NO_MODEL if not model else NO_DATA)
        return hint, plots.empty_figure(), plots.empty_figure(), ""
    package, batch = quick_masks(str(package_folder(library, session, model)), session.pairs, int(n_pairs), int(seed))
    row = PAIR_SHOWN.upto(len(batch.tgt_tokens)).check(pair) - 1
    S, T = batch.padding_mask.shape[1], batch.look_ahead_mask.shape[0]
    note = language_warning(session, package) + (
            f"{len(batch.src_tokens)} pairs of your data tokenized by **{package['name']}** and padded as the trainer "
            f"pads them (to the longest sentence; on a GPU, up to a multiple of 8): {S} source and {T} target "
            "positions. The padding mask hides `<pad>` keys from every query (encoder self-attention and "
            "cross-attention). The look-ahead mask lets target position *i* see positions ≤ *i* only, so the "
            "decoder cannot read the word it must predict; the padding after a target sentence lies in that "
            "hidden future for every real token.")
    src, tgt = batch.src_tokens[row], batch.tgt_tokens[row]
    return (model_plots.padding_mask_figure(batch.padding_mask, batch.src_tokens,
                                            "Padding mask of the source batch (blue = 1: attended, grey = 0: padding)"),
            model_plots.attention_mask_figure(batch.self_attention_mask(row), src, src,
                                              f"Pair {row + 1}: padding mask in encoder self-attention"),
            model_plots.attention_mask_figure(batch.look_ahead_mask, tgt, tgt,
                                              f"Pair {row + 1}: look-ahead mask of the decoder (grey = the future)"),
            note)


def batching_view(session: Session, library: Library, model: str | None, batch_tokens: int, seed: int):
    if not model or session.data is None:
        return plots.empty_figure(NO_MODEL if not model else NO_DATA), ""
    package, budget, (random_batches, grouped) = quick_batching(
        str(package_folder(library, session, model)), session.pairs, int(batch_tokens or 0), int(seed))
    note = language_warning(session, package) + (
            f"{random_batches.batches:,} batches of up to {budget:,} tokens from your pairs, tokenized by "
            f"**{package['name']}**. Random batches pad each sentence with **{random_batches.padding_per_sequence:.2f}"
            f"** tokens on average, batches grouped by length with **{grouped.padding_per_sequence:.2f}** "
            "(the post building on *The Annotated Transformer* measured 15.25 versus 3.62 on Multi30k): "
            f"{random_batches.padding_share:.0%} versus "
            f"{grouped.padding_share:.0%} of every batch is padding. Both hold the same sentences per batch, so "
            f"random batches also overshoot the budget: the largest has {max(random_batches.padded_tokens):,} "
            "tokens.")
    return plots.batching_figure(random_batches, grouped, budget), note


def embeddings_view(session: Session, library: Library, model: str | None, n_tokens: int):
    if not model:
        return plots.empty_figure(NO_MODEL), ""
    package, tied, emb = quick_embeddings(str(package_folder(library, session, model)), session.pairs, int(n_tokens))
    chosen = "most frequent tokens of your data" if session.data is not None else "first tokens of the vocabulary"
    note = language_warning(session, package) + (f"The {len(emb.labels)} {chosen}, from **{package['name']}**'s " +
            ("one embedding table, shared by source, target (and the output layer when tied): tokens of both "
             "languages live in one space, coloured by the side of your data they occur on." if tied else
             "source and target embedding tables, projected together.") +
            " Hover for a token; drag to zoom.")
    return model_plots.embedding_figure(emb.coords, emb.labels, emb.groups, emb.explained,
                                        f"Token embeddings of {package['name']}: first two principal components"), note


# ----------------------------------------------------------------------------------------------------------
# Handlers: the views with the API's defaults and descriptions (build binds `library`)


@readable
def show_positional(library: Library, session: Session, model: str | None, side: str = "source",
                    dimensions: list[int] | None = None):
    """The model's positional encoding as a heatmap (position x dimension) and a few dimensions as curves."""
    return positional_view(session, library, model, side, dimensions)


@readable
def show_masks(library: Library, session: Session, model: str | None, n_pairs: int = 4, seed: int = 0,
               pair: int = 1):
    """The padding mask of a batch of n_pairs of this session's pairs and the look-ahead mask of one of them."""
    return masks_view(session, library, model, n_pairs, seed, pair)


@readable
def show_batching(library: Library, session: Session, model: str | None, batch_tokens: int = 0, seed: int = 0):
    """Padding per sentence and tokens per batch: random batches versus batches grouped by length
    (batch_tokens 0 = the model's own training budget)."""
    return batching_view(session, library, model, batch_tokens, seed)


@readable
def show_embeddings(library: Library, session: Session, model: str | None, n_tokens: int = 150):
    """The n most frequent tokens of this session's data (or of the vocabulary) on a 2-D PCA map."""
    return embeddings_view(session, library, model, n_tokens)


# ----------------------------------------------------------------------------------------------------------
# Layout and wiring: one accordion per view, each returning its controls and outputs


def positional_panel() -> SimpleNamespace:
    """The positional encoding: side, dimensions, heatmap and curves."""
    p = SimpleNamespace()
    with gr.Accordion("Positional encoding", open=True, elem_id="inside-positional"):
        with gr.Row():
            p.side = gr.Radio(["source", "target"], value="source", label="Side",
                              info="learned encodings differ per side; sinusoidal ones are the same")
            p.dimensions = gr.Dropdown([], value=[], multiselect=True, label="Dimensions to draw as curves",
                                       elem_id="inside-pe-dimensions")
        p.note = gr.Markdown()
        with gr.Row():
            p.heatmap = gr.Plot(show_label=False, elem_id="inside-pe-heatmap")
            p.curves = gr.Plot(show_label=False, elem_id="inside-pe-curves")
    return p


def masks_panel() -> SimpleNamespace:
    """The padding and look-ahead masks of a batch of the session's pairs."""
    m = SimpleNamespace()
    with gr.Accordion("Padding and look-ahead masks", open=True, elem_id="inside-masks"):
        with gr.Row():
            m.n_pairs = PAIRS.slider(4, step=1)
            m.seed = MASK_SEED.number(0)
            m.pair = PAIR_SHOWN.slider(1, step=1, label="Pair shown in the square masks")
        m.note = gr.Markdown()
        m.padding_plot = gr.Plot(show_label=False, elem_id="inside-padding-mask")
        with gr.Row():
            m.self_mask_plot = gr.Plot(show_label=False, elem_id="inside-self-attention-mask")
            m.look_ahead_plot = gr.Plot(show_label=False, elem_id="inside-look-ahead-mask")
    return m


def batching_panel() -> SimpleNamespace:
    """Random batches versus batches grouped by length."""
    b = SimpleNamespace()
    with gr.Accordion("Batching by length", open=True, elem_id="inside-batching-view"):
        with gr.Row():
            b.batch_tokens = BATCH_TOKENS.number(0, label="Batch tokens (0 = the model's training setting)", step=512)
            b.seed = SHUFFLE_SEED.number(0)
        b.note = gr.Markdown()
        b.plot = gr.Plot(show_label=False, elem_id="inside-batching")
    return b


def embeddings_panel() -> SimpleNamespace:
    """The token embeddings on a 2-D map."""
    e = SimpleNamespace()
    with gr.Accordion("Token embeddings", open=True, elem_id="inside-embeddings-view"):
        e.n_tokens = TOKENS.slider(150, step=10)
        e.note = gr.Markdown()
        e.plot = gr.Plot(show_label=False, elem_id="inside-embeddings")
    return e


def number_checks(session: gr.State, m: SimpleNamespace, b: SimpleNamespace, e: SimpleNamespace) -> dict:
    """The range of each numeric control; the pair shown is one of the batch's."""
    def shown_pair(v: dict) -> Range:
        pairs = v[m.n_pairs]
        top = PAIR_SHOWN.high if PAIRS.problem(pairs) else int(pairs)
        data = v[session].data
        return PAIR_SHOWN.upto(min(top, max(len(data.pairs), 1)) if data is not None else top)

    return {m.n_pairs: PAIRS, m.seed: MASK_SEED, m.pair: shown_pair, b.batch_tokens: BATCH_TOKENS,
            b.seed: SHUFFLE_SEED, e.n_tokens: TOKENS}


def build(session: gr.State, library: Library) -> InsideTab:
    gr.Markdown("The figures that explain the Transformer, drawn from **your** model and **your** data (load some on "
                "the Data tab for the masks, batching and word-frequency views).")
    model, _ = model_picker(library, session, "inside_models")
    p, m, b, e = positional_panel(), masks_panel(), batching_panel(), embeddings_panel()

    # a view that cannot be drawn says why in its own note; the others keep what they show; a number out of its
    # range is said beside its control, and no view is drawn for it
    checks = number_checks(session, m, b, e)
    views = [
        dict(**said_beside(bind(show_positional, library), [p.heatmap, p.curves, p.dimensions, p.note], p.note),
             inputs=[session, model, p.side, p.dimensions], api_name="positional_encoding", **IN_WORKERS),
        dict(**said_beside(bind(show_masks, library), [m.padding_plot, m.self_mask_plot, m.look_ahead_plot, m.note],
                       m.note), **checked([session, model, m.n_pairs, m.seed, m.pair], checks), api_name="masks",
             **IN_WORKERS),
        dict(**said_beside(bind(show_batching, library), [b.plot, b.note], b.note),
             **checked([session, model, b.batch_tokens, b.seed], checks), api_name="batching", **IN_WORKERS),
        dict(**said_beside(bind(show_embeddings, library), [e.plot, e.note], e.note),
             **checked([session, model, e.n_tokens], checks), api_name="embeddings", **IN_WORKERS),
    ]
    # each view redraws when its own controls are edited (.input: not when a handler sets them) ...
    for view, controls in zip(views, [(p.side, p.dimensions), (m.n_pairs, m.seed, m.pair), (b.batch_tokens, b.seed),
                                      (e.n_tokens,)]):
        gr.on([c.input for c in controls], **view, trigger_mode="always_last", show_progress="minimal")
    # ... all of them when the tab opens (the session's data may have changed) or the model changes; another model
    # has other dimensions, so it starts from its own default curves
    redraw = [{**view, "api_name": None, "api_visibility": "private", "show_progress": "minimal"} for view in views]
    for view in [{**redraw[0], "inputs": [session, model, p.side]}, *redraw[1:]]:
        model.change(**view)
    return InsideTab(model, redraw)
