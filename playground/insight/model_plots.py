"""Plotly figures of what a model holds: attention weights (one head, or every head of every layer), the padding and
look-ahead masks attention applies (§3.2.3), the positional encoding (§3.5) and the token embeddings on a 2-D map.

Pure functions of the arrays insight/inspection.py and core/attention_maps.py compute; the shared look is plots.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.insight.plots import ATTENTION_SCALE, BLUE, GREEN, GREY, ORANGE, empty_figure, frame, lay_out

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
    fig.update_layout(**frame(title, _attention_height(len(y)), {"l": 90, "r": 20, "t": 50, "b": 90}))
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
    fig.update_layout(**frame(title, int(min(2400, 80 + n_layers * cell)), {"l": 90, "r": 40, "t": 70, "b": 60}))
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
    fig = lay_out(fig, title, "dimension", "position", height=420)
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
    return lay_out(fig, title, "position", "value", height=420)


MASK_SCALE = [[0.0, "#eceff1"], [0.5, "#eceff1"], [0.5, "#9ecae1"], [1.0, "#9ecae1"]]  # 0 = masked, 1 = visible


def _mask_figure(mask: np.ndarray, x: Sequence[str], y: Sequence[str], text: Sequence[Sequence[str]] | None,
                 hover: str, title: str, x_title: str, y_title: str, height: int) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=np.asarray(mask, dtype=float), x=list(x), y=list(y), zmin=0, zmax=1,
                               colorscale=MASK_SCALE, showscale=False, xgap=1, ygap=1, text=text,
                               texttemplate="%{text}" if text is not None else None, textfont={"size": 10},
                               hovertemplate=hover + "<extra></extra>"))
    fig.update_layout(**frame(title, height, {"l": 90, "r": 20, "t": 50, "b": 90}))
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
# Embeddings


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
    fig = lay_out(fig, title, f"PC 1 ({explained[0]:.1%} of the variance)",
                  f"PC 2 ({explained[1]:.1%} of the variance)", height=560)
    fig.update_layout(hovermode="closest")
    return fig
