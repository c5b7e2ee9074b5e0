"""Plotly figure builders for the web UI: training curves, data statistics, attention maps, next-token tables.

Pure functions from plain data (lists, numpy arrays, the dicts the trainer and decoder return) to
`plotly.graph_objects.Figure`; no Gradio here, so they can be used from a notebook as well.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

HEIGHT = 300
MAX_POINTS = 2000  # longer curves are thinned before drawing (the browser stays quick during long runs)
BLUE, ORANGE, GREEN, RED, GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9aa0a6"
ATTENTION_SCALE = "Blues"
RUN_COLORS = (BLUE, ORANGE, GREEN, RED, "#9467bd", "#8c564b", "#e377c2", "#17becf")  # one per compared run


def _frame(title: str, height: int, margin: dict) -> dict:
    """Layout every chart shares (the title at the top left, the white template), with its height and margins."""
    return {"title": {"text": title, "x": 0.01, "font": {"size": 14}}, "template": "plotly_white", "height": height,
            "margin": margin}


def _layout(fig: go.Figure, title: str, x_title: str = "", y_title: str = "", height: int = HEIGHT) -> go.Figure:
    fig.update_layout(
        **_frame(title, height, {"l": 55, "r": 15, "t": 40, "b": 40}),
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"}, hovermode="x unified",
    )
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title)
    return fig


def empty_figure(message: str = "Nothing to show yet", title: str = "", height: int = HEIGHT) -> go.Figure:
    """A blank chart with a centred note, shown before there is data."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 13, "color": GREY})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(**_frame(title, height, {"l": 20, "r": 20, "t": 40, "b": 20}))
    return fig


# ----------------------------------------------------------------------------------------------------------
# Curves


def ema(values: Sequence[float], weight: float = 0.9) -> list[float]:
    """Exponential moving average with bias correction (TensorBoard's smoothing): early points are not dragged to 0."""
    out, avg, norm = [], 0.0, 0.0
    for v in values:
        avg = weight * avg + (1 - weight) * v
        norm = weight * norm + (1 - weight)
        out.append(avg / norm)
    return out


def thin(xs: Sequence, ys: Sequence, max_points: int = MAX_POINTS) -> tuple[list, list]:
    """Every k-th point (and always the last) so that at most about max_points are drawn."""
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    stride = math.ceil(n / max_points)
    idx = list(range(0, n, stride))
    if idx[-1] != n - 1:
        idx.append(n - 1)
    return [xs[i] for i in idx], [ys[i] for i in idx]


def loss_figure(steps: Sequence[int], loss: Sequence[float], evals: Sequence[dict] = (),
                smoothing: float = 0.9) -> go.Figure:
    """Training loss per step (raw, faint) and its EMA (bold); validation loss as points when given."""
    if not steps:
        return empty_figure("The training loss appears here once training starts.", "Loss")
    fig = go.Figure()
    xs, raw = thin(steps, loss)
    _, smooth = thin(steps, ema(loss, smoothing))
    fig.add_trace(go.Scatter(x=xs, y=raw, name="train (raw)", mode="lines", line={"color": BLUE, "width": 1},
                             opacity=0.3))
    fig.add_trace(go.Scatter(x=xs, y=smooth, name=f"train (EMA {smoothing})", mode="lines",
                             line={"color": BLUE, "width": 2}))
    if evals:
        fig.add_trace(go.Scatter(x=[e["step"] for e in evals], y=[e["val_loss"] for e in evals], name="validation",
                                 mode="lines+markers", line={"color": ORANGE, "width": 2}))
    return _layout(fig, "Loss", "step", "loss (train: label-smoothed)")


def val_loss_figure(evals: Sequence[dict]) -> go.Figure:
    """Validation loss at each validation, with perplexity in the hover and the best point marked."""
    if not evals:
        return empty_figure("Validation loss appears after the first validation.", "Validation loss")
    steps = [e["step"] for e in evals]
    losses = [e["val_loss"] for e in evals]
    ppl = [e.get("val_ppl", math.exp(min(e["val_loss"], 50))) for e in evals]
    fig = go.Figure(go.Scatter(x=steps, y=losses, customdata=ppl, name="validation loss", mode="lines+markers",
                               line={"color": ORANGE, "width": 2},
                               hovertemplate="step %{x}<br>loss %{y:.4f}<br>perplexity %{customdata:.2f}"
                                             "<extra></extra>"))
    best = int(np.argmin(losses))
    fig.add_trace(go.Scatter(x=[steps[best]], y=[losses[best]], name="lowest", mode="markers",
                             marker={"color": RED, "size": 11, "symbol": "star"}, hoverinfo="skip"))
    return _layout(fig, "Validation loss", "step", "loss (NLL per token)")


def lr_figure(steps: Sequence[int], lrs: Sequence[float], title: str = "Learning rate",
              mark_step: int | None = None) -> go.Figure:
    """The learning rate per step (the live schedule, or a preview of the planned one)."""
    if not steps:
        return empty_figure("The learning rate appears here once training starts.", title)
    xs, ys = thin(steps, lrs)
    fig = go.Figure(go.Scatter(x=xs, y=ys, name="learning rate", mode="lines", line={"color": GREEN, "width": 2},
                               hovertemplate="step %{x}<br>lr %{y:.3g}<extra></extra>"))
    if mark_step:
        fig.add_vline(x=mark_step, line_dash="dot", line_color=GREY, annotation_text="warmup end",
                      annotation_position="top right")
    fig.update_yaxes(exponentformat="e")
    return _layout(fig, title, "step", "learning rate")


def metrics_figure(evals: Sequence[dict]) -> go.Figure:
    """BLEU and chrF (sacreBLEU) at each validation."""
    if not evals:
        return empty_figure("BLEU and chrF appear after the first validation.", "BLEU / chrF")
    steps = [e["step"] for e in evals]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=steps, y=[e["bleu"] for e in evals], name="BLEU", mode="lines+markers",
                             line={"color": BLUE, "width": 2}))
    fig.add_trace(go.Scatter(x=steps, y=[e["chrf"] for e in evals], name="chrF", mode="lines+markers",
                             line={"color": GREEN, "width": 2}))
    if any("exact_match" in e for e in evals):
        fig.add_trace(go.Scatter(x=steps, y=[100 * e.get("exact_match", 0.0) for e in evals], name="exact match %",
                                 mode="lines", line={"color": GREY, "width": 1, "dash": "dot"}))
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, "BLEU / chrF", "step", "score (validation sample)")


def overlay_figure(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], title: str, x_title: str,
                   y_title: str, markers: bool = False, log_y: bool = False) -> go.Figure:
    """One line per run on shared axes: `series` holds (run name, xs, ys); runs without points are left out."""
    drawn = [(name, xs, ys) for name, xs, ys in series if len(xs)]
    if not drawn:
        return empty_figure("None of these runs recorded this.", title)
    fig = go.Figure()
    for index, (name, xs, ys) in enumerate(drawn):
        xs, ys = thin(xs, ys)
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines+markers" if markers else "lines",
                                 line={"color": RUN_COLORS[index % len(RUN_COLORS)], "width": 2}))
    if log_y:
        fig.update_yaxes(type="log", exponentformat="e")
    fig = _layout(fig, title, x_title, y_title)
    # the runs' names under the x-axis title: above the plot, two or more of them overlapped the title at 1024 px
    fig.update_layout(legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0.5,
                              "xanchor": "center"}, margin={"b": 55 + 18 * len(drawn)})  # a narrow chart: a row each
    return fig


# ----------------------------------------------------------------------------------------------------------
# Data


def length_histogram(src_lengths: Sequence[int], tgt_lengths: Sequence[int], src_label: str = "source",
                     tgt_label: str = "target") -> go.Figure:
    """Overlaid histograms of sentence lengths (whitespace tokens) on both sides."""
    if not src_lengths and not tgt_lengths:
        return empty_figure("Load data to see sentence lengths.", "Sentence lengths")
    fig = go.Figure()
    top = max(list(src_lengths) + list(tgt_lengths) + [1])
    bins = {"start": 0.5, "end": top + 0.5, "size": max(1, math.ceil(top / 60))}
    fig.add_trace(go.Histogram(x=list(src_lengths), name=src_label, xbins=bins, marker_color=BLUE, opacity=0.6))
    fig.add_trace(go.Histogram(x=list(tgt_lengths), name=tgt_label, xbins=bins, marker_color=ORANGE, opacity=0.6))
    fig.update_layout(barmode="overlay")
    fig = _layout(fig, "Sentence lengths", "words per sentence", "pairs")
    fig.update_layout(hovermode="closest")
    return fig


# ----------------------------------------------------------------------------------------------------------
# Attention


def token_labels(tokens: Sequence[str]) -> list[str]:
    """Position-prefixed labels ("0:the", "3:the") so that repeated tokens stay apart on a categorical axis."""
    return [f"{i}:{t}" for i, t in enumerate(tokens)]


def _heatmap(weights: np.ndarray, x_labels: Sequence[str], y_labels: Sequence[str],
             showscale: bool = True) -> go.Heatmap:
    return go.Heatmap(
        z=np.asarray(weights, dtype=float), x=list(x_labels), y=list(y_labels), zmin=0.0, zmax=1.0,
        colorscale=ATTENTION_SCALE, showscale=showscale, colorbar={"title": {"text": "weight"}, "thickness": 12},
        hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
    )


def _attention_height(n_queries: int) -> int:
    return int(min(900, max(320, 90 + 22 * n_queries)))


def attention_heatmap(weights: np.ndarray, key_tokens: Sequence[str], query_tokens: Sequence[str],
                      title: str = "") -> go.Figure:
    """One attention matrix [queries, keys]: queries down the side (in order from the top), keys along the bottom."""
    weights = np.asarray(weights)
    x, y = token_labels(key_tokens), token_labels(query_tokens)
    fig = go.Figure(_heatmap(weights, x, y))
    fig.update_layout(**_frame(title, _attention_height(len(y)), {"l": 90, "r": 20, "t": 50, "b": 90}))
    fig.update_yaxes(autorange="reversed", type="category", title_text="query (attends from)")
    fig.update_xaxes(type="category", tickangle=-45, title_text="key (attends to)", side="bottom")
    return fig


def attention_grid(weights: np.ndarray, key_tokens: Sequence[str], query_tokens: Sequence[str],
                   title: str = "", row_titles: Sequence[str] | None = None,
                   column_titles: Sequence[str] | None = None) -> go.Figure:
    """Every head of every layer: weights [L, H, queries, keys] as an L x H grid of small heatmaps (rows titled
    "layer i" and columns "head j" unless other titles are given)."""
    weights = np.asarray(weights)
    n_layers, n_heads = weights.shape[:2]
    rows = list(row_titles) if row_titles is not None else [f"layer {layer}" for layer in range(n_layers)]
    columns = list(column_titles) if column_titles is not None else [f"head {h}" for h in range(n_heads)]
    x, y = token_labels(key_tokens), token_labels(query_tokens)
    fig = make_subplots(rows=n_layers, cols=n_heads, shared_xaxes=True, shared_yaxes=True,
                        horizontal_spacing=min(0.02, 0.2 / max(n_heads, 1)),
                        vertical_spacing=min(0.04, 0.3 / max(n_layers, 1)),
                        column_titles=columns, row_titles=rows)
    for layer in range(n_layers):
        for head in range(n_heads):
            trace = _heatmap(weights[layer, head], x, y, showscale=(layer == 0 and head == 0))
            trace.hovertemplate = (f"{rows[layer]}, {columns[head]}<br>" + trace.hovertemplate)
            fig.add_trace(trace, row=layer + 1, col=head + 1)
    fig.update_yaxes(autorange="reversed", type="category", showticklabels=False)
    fig.update_yaxes(showticklabels=True, col=1)  # token labels once per row of heads ...
    fig.update_xaxes(type="category", tickangle=-45, showticklabels=False)
    fig.update_xaxes(showticklabels=True, row=n_layers)  # ... and once per column, under the last layer
    cell = max(110, min(260, 1100 // max(n_heads, 1)))
    fig.update_layout(**_frame(title, int(min(2400, 80 + n_layers * cell)), {"l": 90, "r": 40, "t": 70, "b": 60}))
    return fig


# ----------------------------------------------------------------------------------------------------------
# Decoding


def _candidates_figure(x_labels: Sequence[str], columns: Sequence[Sequence[tuple[str, float]]],
                       marks: Sequence[dict[str, str]], title: str, second: Sequence[Sequence[float]] | None = None,
                       second_name: str = "") -> go.Figure:
    """Ranked candidates per step as a table of cells: one column per step, rank 1 at the top, colour = probability,
    each cell the token and its marks; `second` adds another probability per cell to the hover text."""
    k = max(len(c) for c in columns)
    z = np.full((k, len(columns)), np.nan)
    extra = np.full((k, len(columns)), np.nan)
    text = [["" for _ in columns] for _ in range(k)]
    for col, candidates in enumerate(columns):
        for rank, (token, p) in enumerate(candidates):
            z[rank, col] = p
            text[rank][col] = token + marks[col].get(token, "")
            if second is not None:
                extra[rank, col] = second[col][rank]
    hover = "step %{x}<br>rank %{y}: %{text}<br>p = %{z:.3f}"
    if second is not None:
        hover += f"<br>{second_name} = %{{customdata:.3f}}"
    fig = go.Figure(go.Heatmap(
        z=z, x=list(x_labels), y=[f"#{i + 1}" for i in range(k)], text=text, texttemplate="%{text}",
        textfont={"size": 11}, customdata=extra, zmin=0, zmax=1, colorscale=ATTENTION_SCALE,
        colorbar={"title": {"text": "p"}, "thickness": 12}, hovertemplate=hover + "<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category", title_text="rank")
    fig.update_xaxes(type="category", tickangle=-45, title_text="step: token taken")
    fig.update_layout(**_frame(title, int(120 + 32 * k), {"l": 55, "r": 20, "t": 45, "b": 90}))
    return fig


def next_token_figure(rows: Sequence[dict], title: str = "Next-token probabilities") -> go.Figure:
    """The model's top-k candidates at each output step (from decode.next_token_table): one column per step,
    candidates ranked from the top, colour = probability, the chosen token marked ✓."""
    if not rows:
        return empty_figure("Translate, then pick a row of the results to see the model's choices.", title)
    return _candidates_figure([f"{r['step']}:{r['chosen']}" for r in rows], [r["top"] for r in rows],
                              [{r["chosen"]: " ✓"} for r in rows], title)


def sampling_steps_figure(steps: Sequence, title: str = "Greedy versus sampling, step by step") -> go.Figure:
    """inspection.SamplingStep per output step: the top candidates coloured by the model's probability, the greedy
    choice marked ✓ and the sampled one ●; the hover adds each token's probability under the sampling settings."""
    if not steps:
        return empty_figure("Type a sentence and press “Step through”.", title)
    marks = []
    for s in steps:
        mark = {s.greedy: " ✓"}
        mark[s.sampled] = mark.get(s.sampled, " ") + "●"
        marks.append(mark)
    return _candidates_figure([f"{s.step}:{s.taken}" for s in steps],
                              [[(token, p) for token, p, _ in s.candidates] for s in steps], marks, title,
                              [[q for _, _, q in s.candidates] for s in steps], "p when sampling")


def beam_tree_figure(nodes: Sequence, title: str = "Beam search, step by step") -> go.Figure:
    """inspection.BeamNode list as a tree: x = step, y = the beam's rank (best on top), an edge from each beam to the
    beam it extends, colour = summed log-probability; stars = hypotheses that ended there (hover: their score),
    the best one's path in orange."""
    if len(nodes) < 2:
        return empty_figure("Choose beam search, type a sentence and press “Step through”.", title)
    beams = {(n.step, n.rank): n for n in nodes if not n.finished}
    finished = [n for n in nodes if n.finished]
    position = {id(n): (n.step, n.rank) for n in beams.values()}
    below_parent: dict[tuple[int, int], int] = {}
    for n in finished:  # a star sits just below the beam it came from, one under another when several do
        j = below_parent[(n.step, n.parent)] = below_parent.get((n.step, n.parent), -1) + 1
        position[id(n)] = (n.step, n.parent + 0.3 + 0.2 * j)

    def parent_of(n):
        return beams.get((n.step - 1, n.parent))

    def edges(children) -> tuple[list, list]:
        xs, ys = [], []
        for n in children:
            parent = parent_of(n)
            if n.step > 0 and parent is not None:
                (x0, y0), (x1, y1) = position[id(parent)], position[id(n)]
                xs += [x0, x1, None]
                ys += [y0, y1, None]
        return xs, ys

    fig = go.Figure()
    xs, ys = edges([n for n in nodes if n.step > 0])
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": GREY, "width": 1}, hoverinfo="skip",
                             showlegend=False))
    if finished:
        path, n = [], max(finished, key=lambda f: f.score)
        while n is not None and n.step > 0:
            path.append(n)
            n = parent_of(n)
        xs, ys = edges(path)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": ORANGE, "width": 3}, hoverinfo="skip",
                                 name="best hypothesis"))
    open_nodes = list(beams.values())
    fig.add_trace(go.Scatter(
        x=[position[id(n)][0] for n in open_nodes], y=[position[id(n)][1] for n in open_nodes], mode="markers+text",
        text=[n.token for n in open_nodes], textposition="top center", textfont={"size": 10}, name="open beam",
        customdata=[[n.text or "(start)", n.logp] for n in open_nodes],
        marker={"size": 11, "color": [n.logp for n in open_nodes], "colorscale": "Viridis", "showscale": True,
                "colorbar": {"title": {"text": "log p"}, "thickness": 12}},
        hovertemplate="step %{x}: %{customdata[0]}<br>sum of log p = %{customdata[1]:.3f}<extra></extra>"))
    if finished:
        fig.add_trace(go.Scatter(
            x=[position[id(n)][0] for n in finished], y=[position[id(n)][1] for n in finished], mode="markers+text",
            text=[n.token for n in finished], textposition="middle right", textfont={"size": 10, "color": RED},
            marker={"symbol": "star", "size": 14, "color": RED}, name="finished (score = log p / length^α)",
            customdata=[[n.text, n.logp, n.score] for n in finished],
            hovertemplate="ended at step %{x}: %{customdata[0]}<br>sum of log p = %{customdata[1]:.3f}"
                          "<br>score = %{customdata[2]:.3f}<extra></extra>"))
    n_ranks = max(n.rank for n in open_nodes) + 1
    fig = _layout(fig, title, "step", "beam (rank at that step)", height=int(200 + 70 * n_ranks))
    fig.update_layout(hovermode="closest", legend={"y": -0.15, "yanchor": "top", "x": 0.5, "xanchor": "center"})
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=list(range(n_ranks)), zeroline=False)
    fig.update_xaxes(dtick=1)
    return fig


# ----------------------------------------------------------------------------------------------------------
# Positional encoding and masks


def positional_heatmap(table: np.ndarray, title: str = "Positional encoding") -> go.Figure:
    """The encoding [positions, d_model] as the articles draw it: position down the side, dimension along the
    bottom, red and blue for the sign."""
    table = np.asarray(table, dtype=float)
    limit = float(np.abs(table).max()) or 1.0
    fig = go.Figure(go.Heatmap(z=table, colorscale="RdBu", zmid=0, zmin=-limit, zmax=limit,
                               colorbar={"title": {"text": "value"}, "thickness": 12},
                               hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.3f}<extra></extra>"))
    fig = _layout(fig, title, "dimension", "position", height=420)
    fig.update_layout(hovermode="closest")
    fig.update_yaxes(autorange="reversed")
    return fig


def positional_curves(table: np.ndarray, dimensions: Sequence[int], title: str = "A few dimensions") -> go.Figure:
    """Chosen columns of the encoding as curves over the positions (sines of falling frequency for the paper's)."""
    table = np.asarray(table, dtype=float)
    if not dimensions:
        return empty_figure("Choose dimensions to draw.", title, height=420)
    fig = go.Figure()
    positions = list(range(table.shape[0]))
    for d in dimensions:
        fig.add_trace(go.Scatter(x=positions, y=table[:, d], mode="lines", name=f"dim {d}", line={"width": 2}))
    return _layout(fig, title, "position", "value", height=420)


MASK_SCALE = [[0.0, "#eceff1"], [0.5, "#eceff1"], [0.5, "#9ecae1"], [1.0, "#9ecae1"]]  # 0 = masked, 1 = visible


def _mask_figure(mask: np.ndarray, x: Sequence[str], y: Sequence[str], text: Sequence[Sequence[str]] | None,
                 hover: str, title: str, x_title: str, y_title: str, height: int) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=np.asarray(mask, dtype=float), x=list(x), y=list(y), zmin=0, zmax=1,
                               colorscale=MASK_SCALE, showscale=False, xgap=1, ygap=1, text=text,
                               texttemplate="%{text}" if text is not None else None, textfont={"size": 10},
                               hovertemplate=hover + "<extra></extra>"))
    fig.update_layout(**_frame(title, height, {"l": 90, "r": 20, "t": 50, "b": 90}))
    fig.update_yaxes(autorange="reversed", type="category", title_text=y_title)
    fig.update_xaxes(type="category", tickangle=-45, title_text=x_title)
    return fig


MAX_TEXT_COLUMNS = 24  # wider batches show their tokens in the hover text only: the cells get too narrow


def padding_mask_figure(mask: np.ndarray, tokens: Sequence[Sequence[str]],
                        title: str = "Padding mask") -> go.Figure:
    """The source padding mask of a batch [sentences, positions]: blue = 1 (a token attention may look at),
    grey = 0 (padding, hidden from every query); each cell shows its token."""
    mask = np.asarray(mask)
    n, length = mask.shape
    fig = _mask_figure(mask, [str(i) for i in range(length)], [f"pair {i + 1}" for i in range(n)], tokens,
                       "%{y}, position %{x}: %{text}<br>mask %{z:.0f}", title, "position", "", int(150 + 34 * n))
    if length > MAX_TEXT_COLUMNS:
        fig.update_traces(texttemplate=None)
    return fig


def attention_mask_figure(mask: np.ndarray, key_tokens: Sequence[str], query_tokens: Sequence[str],
                          title: str = "Attention mask") -> go.Figure:
    """A mask as one attention layer applies it [queries, keys], tokens on both axes: blue = 1 (the query may look
    at that key), grey = 0 (hidden: padding, or the future for the decoder's look-ahead mask)."""
    x, y = token_labels(key_tokens), token_labels(query_tokens)
    return _mask_figure(mask, x, y, None, "query %{y}<br>key %{x}<br>mask %{z:.0f}", title,
                        "key (looked at)", "query (looking)", _attention_height(len(y)))


# ----------------------------------------------------------------------------------------------------------
# Batching and embeddings


def batching_figure(random_stats, grouped_stats, batch_tokens: int | None = None,
                    title: str = "Padding: random batches versus batches grouped by length") -> go.Figure:
    """Two inspection.BatchingStats side by side: padding tokens per sentence (source, target, both), and the
    mean tokens per batch split into real tokens and padding, with the largest batch and the batch budget."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("padding per sentence", "tokens per batch (mean)"),
                        horizontal_spacing=0.12)
    colours = (RED, GREEN)
    for stats, colour in zip((random_stats, grouped_stats), colours):
        values = [stats.src_padding, stats.tgt_padding, stats.padding_per_sequence]
        fig.add_trace(go.Bar(x=["source", "target", "both sides"], y=values, name=stats.name, marker_color=colour,
                             text=[f"{v:.2f}" for v in values], textposition="outside", legendgroup=stats.name),
                      row=1, col=1)
    names = [s.name for s in (random_stats, grouped_stats)]
    real = [float(np.mean(s.real_tokens)) for s in (random_stats, grouped_stats)]
    padded = [float(np.mean(s.padded_tokens)) for s in (random_stats, grouped_stats)]
    # barmode is one for the whole figure ("group", for the left chart): the right one stacks by hand (base=)
    fig.add_trace(go.Bar(x=names, y=real, name="real tokens", marker_color=BLUE, offsetgroup="tokens",
                         hovertemplate="%{x}<br>real tokens %{y:.0f}<extra></extra>"), row=1, col=2)
    fig.add_trace(go.Bar(x=names, y=[p - r for p, r in zip(padded, real)], base=real, name="padding",
                         marker_color=GREY, offsetgroup="tokens",
                         text=[f"{1 - r / p:.0%} padding" if p else "" for p, r in zip(padded, real)],
                         textposition="outside", hovertemplate="%{x}<br>padding %{y:.0f}<extra></extra>"),
                  row=1, col=2)
    fig.add_trace(go.Scatter(x=names, y=[max(s.padded_tokens) for s in (random_stats, grouped_stats)],
                             mode="markers", marker={"symbol": "line-ew-open", "size": 30, "color": "black"},
                             name="largest batch", hovertemplate="%{x}<br>largest batch %{y:,} tokens<extra></extra>"),
                  row=1, col=2)
    if batch_tokens:
        fig.add_hline(y=batch_tokens, line_dash="dot", line_color=GREY, annotation_text="batch budget",
                      annotation_position="top left", row=1, col=2)
    fig = _layout(fig, title, height=420)
    fig.update_layout(barmode="group", margin={"t": 80}, legend={"y": -0.12, "yanchor": "top", "x": 0.5,
                                                                  "xanchor": "center"})
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    fig.update_layout(hovermode="closest")
    return fig


def embedding_figure(coords: np.ndarray, labels: Sequence[str], groups: Sequence[str],
                     explained: tuple[float, float], title: str = "Token embeddings (PCA)") -> go.Figure:
    """Tokens on the first two principal components of their embeddings, one colour per group, labelled."""
    coords = np.asarray(coords, dtype=float)
    fig = go.Figure()
    palette = {"source only": BLUE, "target only": ORANGE, "both": GREEN, "source": BLUE, "target": ORANGE}
    for group in dict.fromkeys(groups):
        idx = [i for i, g in enumerate(groups) if g == group]
        fig.add_trace(go.Scatter(
            x=coords[idx, 0], y=coords[idx, 1], mode="markers+text", name=group, text=[labels[i] for i in idx],
            textposition="top center", textfont={"size": 9, "color": palette.get(group, GREY)},
            marker={"size": 6, "color": palette.get(group, GREY), "opacity": 0.8},
            hovertemplate="%{text}<br>(%{x:.2f}, %{y:.2f})<extra>" + group + "</extra>"))
    fig = _layout(fig, title, f"PC 1 ({explained[0]:.1%} of the variance)",
                  f"PC 2 ({explained[1]:.1%} of the variance)", height=560)
    fig.update_layout(hovermode="closest")
    return fig
