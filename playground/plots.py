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


def _layout(fig: go.Figure, title: str, x_title: str = "", y_title: str = "", height: int = HEIGHT) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}}, height=height, template="plotly_white",
        margin={"l": 55, "r": 15, "t": 40, "b": 40}, legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right",
                                                             "yanchor": "bottom"},
        hovermode="x unified",
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
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=height, template="plotly_white",
                      margin={"l": 20, "r": 20, "t": 40, "b": 20})
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


def _attention_size(n_rows: int, n_cols: int) -> int:
    return int(min(900, max(320, 90 + 22 * n_rows)))


def attention_heatmap(weights: np.ndarray, key_tokens: Sequence[str], query_tokens: Sequence[str],
                      title: str = "") -> go.Figure:
    """One attention matrix [queries, keys]: queries down the side (in order from the top), keys along the bottom."""
    weights = np.asarray(weights)
    x, y = token_labels(key_tokens), token_labels(query_tokens)
    fig = go.Figure(_heatmap(weights, x, y))
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, template="plotly_white",
                      height=_attention_size(len(y), len(x)), margin={"l": 90, "r": 20, "t": 50, "b": 90})
    fig.update_yaxes(autorange="reversed", type="category", title_text="query (attends from)")
    fig.update_xaxes(type="category", tickangle=-45, title_text="key (attends to)", side="bottom")
    return fig


def attention_grid(weights: np.ndarray, key_tokens: Sequence[str], query_tokens: Sequence[str],
                   title: str = "") -> go.Figure:
    """Every head of every layer: weights [L, H, queries, keys] as an L x H grid of small heatmaps."""
    weights = np.asarray(weights)
    n_layers, n_heads = weights.shape[:2]
    x, y = token_labels(key_tokens), token_labels(query_tokens)
    fig = make_subplots(rows=n_layers, cols=n_heads, shared_xaxes=True, shared_yaxes=True,
                        horizontal_spacing=min(0.02, 0.2 / max(n_heads, 1)),
                        vertical_spacing=min(0.04, 0.3 / max(n_layers, 1)),
                        column_titles=[f"head {h}" for h in range(n_heads)],
                        row_titles=[f"layer {layer}" for layer in range(n_layers)])
    for layer in range(n_layers):
        for head in range(n_heads):
            trace = _heatmap(weights[layer, head], x, y, showscale=(layer == 0 and head == 0))
            trace.hovertemplate = (f"layer {layer}, head {head}<br>" + trace.hovertemplate)
            fig.add_trace(trace, row=layer + 1, col=head + 1)
    fig.update_yaxes(autorange="reversed", type="category", showticklabels=False)
    fig.update_yaxes(showticklabels=True, col=1)  # token labels once per row of heads ...
    fig.update_xaxes(type="category", tickangle=-45, showticklabels=False)
    fig.update_xaxes(showticklabels=True, row=n_layers)  # ... and once per column, under the last layer
    cell = max(110, min(260, 1100 // max(n_heads, 1)))
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, template="plotly_white",
                      height=int(min(2400, 80 + n_layers * cell)), margin={"l": 90, "r": 40, "t": 70, "b": 60})
    return fig


# ----------------------------------------------------------------------------------------------------------
# Decoding


def next_token_figure(rows: Sequence[dict], title: str = "Next-token probabilities") -> go.Figure:
    """The model's top-k candidates at each output step (from decode.next_token_table): one column per step,
    candidates ranked from the top, colour = probability, the chosen token outlined in the hover text."""
    if not rows:
        return empty_figure("Translate, then pick a row of the results to see the model's choices.", title)
    k = max(len(r["top"]) for r in rows)
    x = [f"{r['step']}:{r['chosen']}" for r in rows]
    y = [f"#{i + 1}" for i in range(k)]
    z = np.full((k, len(rows)), np.nan)
    text = [["" for _ in rows] for _ in range(k)]
    for col, r in enumerate(rows):
        for rank, (token, p) in enumerate(r["top"]):
            z[rank, col] = p
            text[rank][col] = token + (" ✓" if token == r["chosen"] else "")
    fig = go.Figure(go.Heatmap(
        z=z, x=x, y=y, text=text, texttemplate="%{text}", textfont={"size": 11}, zmin=0, zmax=1,
        colorscale=ATTENTION_SCALE, colorbar={"title": {"text": "p"}, "thickness": 12},
        hovertemplate="step %{x}<br>rank %{y}: %{text}<br>p = %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category", title_text="rank")
    fig.update_xaxes(type="category", tickangle=-45, title_text="step: chosen token")
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, template="plotly_white",
                      height=int(120 + 32 * k), margin={"l": 55, "r": 20, "t": 45, "b": 90})
    return fig
