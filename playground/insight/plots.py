"""Plotly figures of training and data: loss, learning-rate and BLEU/chrF curves, runs overlaid, sentence lengths,
the padding that batching by length saves; and the look every chart of the playground shares (frame, lay_out,
empty_figure, the colours). The figures of a model's insides are in model_plots.py, of decoding in decoding_plots.py.

Pure functions from plain data (lists, numpy arrays, the dicts the trainer returns) to `plotly.graph_objects.Figure`;
no Gradio here, so they can be used from a notebook as well.
"""

from __future__ import annotations

import functools
import math
import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.packages.sweep import written_whole

HEIGHT = 300
MAX_POINTS = 2000  # longer curves are thinned before drawing (the browser stays quick during long runs)
BLUE, ORANGE, GREEN, RED, GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9aa0a6"
ATTENTION_SCALE = "Blues"
RUN_COLORS = (BLUE, ORANGE, GREEN, RED, "#9467bd", "#8c564b", "#e377c2", "#17becf")  # one per compared run


# where a page loads plotly.js from with include_plotlyjs="directory"
PLOTLY_JS_TAG = '<script charset="utf-8" src="plotly.min.js"></script>'


def plotly_bundle() -> Path:
    """plotly.js as the plotly package ships it (about 4.6 MB)."""
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


@functools.cache
def plotly_loaders() -> tuple[str, str, str] | None:
    """How this plotly's own pages load plotly.js, read once from the pages it writes for an empty figure: (the CDN's
    tag, and what comes before and after the bundle when it is inside the page). The tags differ between plotly
    releases (a type attribute, the CDN's integrity hash since 6.2). None where the pages are not as expected."""
    def page(include_plotlyjs) -> str:
        return go.Figure().to_html(include_plotlyjs=include_plotlyjs, full_html=True, div_id="plotly-loaders")

    parts = page("directory").split(PLOTLY_JS_TAG)
    if len(parts) != 2:
        return None
    before, after = parts

    def loader(include_plotlyjs) -> str | None:
        text = page(include_plotlyjs)
        ok = text.startswith(before) and text.endswith(after)
        return text[len(before) : len(text) - len(after)] if ok else None

    cdn, inline = loader("cdn"), loader(True)
    bundle = plotly_bundle().read_text(encoding="utf-8")
    if cdn is None or inline is None or inline.count(bundle) != 1:
        return None
    opening, closing = inline.split(bundle)
    return cdn, opening, closing


def write_html(fig: go.Figure, path: Path, offline: bool) -> None:
    """The figure as a page of its own, the page fig.write_html writes, with plotly.js inside it (offline) or loaded
    from the CDN, but streamed into the file from plotly's: fig.write_html reads all of plotly.js into a string for
    each page (for the CDN's integrity hash too), and a server that wrote 20 offline pages held 100 MB more after.
    Written to a temporary name first, so a failed write leaves no half page."""
    loaders, page = plotly_loaders(), fig.to_html(include_plotlyjs="directory", full_html=True)
    if loaders is None or page.count(PLOTLY_JS_TAG) != 1:  # another plotly's pages: its own writer, at its own cost
        fig.write_html(str(path), include_plotlyjs=True if offline else "cdn", full_html=True)
        return
    cdn, opening, closing = loaders
    before, after = page.split(PLOTLY_JS_TAG)
    with written_whole(path) as partial, open(partial, "wb") as out:
        out.write(before.encode())
        if offline:
            out.write(opening.encode())
            with plotly_bundle().open("rb") as bundle:
                shutil.copyfileobj(bundle, out)
            out.write(closing.encode())
        else:
            out.write(cdn.encode())
        out.write(after.encode())


def frame(title: str, height: int, margin: dict) -> dict:
    """The layout every chart shares (the title at the top left, the white template), with its height and margins."""
    return {"title": {"text": title, "x": 0.01, "font": {"size": 14}}, "template": "plotly_white", "height": height,
            "margin": margin}


def lay_out(fig: go.Figure, title: str, x_title: str = "", y_title: str = "", height: int = HEIGHT) -> go.Figure:
    """The shared frame with a legend above the plot, hover across all traces at one x, and the axis titles."""
    fig.update_layout(
        **frame(title, height, {"l": 55, "r": 15, "t": 40, "b": 40}),
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
    fig.update_layout(**frame(title, height, {"l": 20, "r": 20, "t": 40, "b": 20}))
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
    return lay_out(fig, "Loss", "step", "loss (train: label-smoothed)")


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
    return lay_out(fig, "Validation loss", "step", "loss (NLL per token)")


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
    return lay_out(fig, title, "step", "learning rate")


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
    return lay_out(fig, "BLEU / chrF", "step", "score (validation sample)")


def positive(xs: Sequence[float], ys: Sequence[float]) -> tuple[list, list]:
    """The points of a curve whose value a log axis can draw (above 0)."""
    kept = [(x, y) for x, y in zip(xs, ys) if y is not None and y > 0]
    return [x for x, _ in kept], [y for _, y in kept]


def overlay_figure(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], title: str, x_title: str,
                   y_title: str, markers: bool = False, log_y: bool = False) -> go.Figure:
    """One line per run on shared axes: `series` holds (run name, xs, ys); runs without points are left out. On a
    log axis (`log_y`) only positive values are drawn: a learning rate of 0 (a warmup's first step) would take the
    axis down to 1e-10 and flatten every curve."""
    if log_y:
        series = [(name, *positive(xs, ys)) for name, xs, ys in series]
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
    fig = lay_out(fig, title, x_title, y_title)
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
    fig = lay_out(fig, "Sentence lengths", "words per sentence", "pairs")
    fig.update_layout(hovermode="closest")
    return fig


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
    fig = lay_out(fig, title, height=420)
    fig.update_layout(barmode="group", margin={"t": 80}, legend={"y": -0.12, "yanchor": "top", "x": 0.5,
                                                                  "xanchor": "center"})
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    fig.update_layout(hovermode="closest")
    return fig
