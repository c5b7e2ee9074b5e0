"""Plotly figures of decoding step by step: the model's top next tokens at each output step, greedy versus sampling,
and the tree of beam search's beams (§6.1's beam search, with GNMT's length penalty α, Wu et al. 2016).

Pure functions of what insight/inspection.py computes (next_token_table, sampling_steps, beam_steps); the shared look
is plots.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from playground.insight.plots import ATTENTION_SCALE, GREY, ORANGE, RED, empty_figure, frame, lay_out


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
    fig.update_layout(**frame(title, int(120 + 32 * k), {"l": 55, "r": 20, "t": 45, "b": 90}))
    return fig


def next_token_figure(rows: Sequence[dict], title: str = "Next-token probabilities") -> go.Figure:
    """The model's top-k candidates at each output step (from inspection.next_token_table): one column per step,
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
    fig = lay_out(fig, title, "step", "beam (rank at that step)", height=int(200 + 70 * n_ranks))
    fig.update_layout(hovermode="closest", legend={"y": -0.15, "yanchor": "top", "x": 0.5, "xanchor": "center"})
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=list(range(n_ranks)), zeroline=False)
    fig.update_xaxes(dtick=1)
    return fig
