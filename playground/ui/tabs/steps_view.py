"""Decoding step by step (the Translate tab's accordion): greedy versus sampling along one translation, or the beams
of beam search, as a figure, a table and a note. The steps come from playground.insight.inspection, computed in a
worker (playground.serving.work.decoding_steps)."""

from __future__ import annotations

import pandas as pd

from playground.insight import decoding_plots

# one table shows either kind of step: the columns line up so that one set of widths suits both
SAMPLING_COLUMNS = ["step", "token taken", "greedy ✓ (p)", "sampled ● (p)", "top candidates: p → p when sampling"]
BEAM_COLUMNS = ["step", "beam", "sum of log p", "ended here: score", "hypothesis so far"]
COLUMN_WIDTHS = ["8%", "14%", "17%", "17%", "44%"]


def settings_text(opts) -> str:
    return (f"temperature {opts.temperature:g}, top-k {opts.top_k or 'off'}, top-p {opts.top_p:g}, "
            f"seed {opts.seed}")


def sampling_view(name: str, walked: tuple, opts, k: int):
    """Figure, table and note of greedy versus sampling along the translation `opts` makes, from sampling_steps'
    (hypothesis, steps) with the package `name`."""
    hypothesis, steps = walked
    rows = [[s.step, s.taken, f"{s.greedy} ({s.candidates[0][1]:.3g})", f"{s.sampled} ({s.sampled_p:.3g})",
             ", ".join(f"{token} {p:.3g} → {q:.3g}" for token, p, q in s.candidates)] for s in steps]
    table = pd.DataFrame(rows, columns=SAMPLING_COLUMNS)
    path = "greedy" if opts.method == "greedy" else "sampled"
    differ = sum(s.greedy != s.sampled for s in steps)
    note = (f"Following the **{path}** translation “{hypothesis.text}” ({len(steps)} tokens). At each step ✓ is the "
            f"greedy choice (the most likely token) and ● a draw under {settings_text(opts)}; they differ at "
            f"{differ} of {len(steps)} steps. The table gives each candidate's probability under the model and under "
            "the sampling settings (temperature reshapes it, top-k and top-p cut the tail to 0).")
    title = f"{name}: top {k} next tokens at each step (✓ greedy, ● sampled; colour = model probability)"
    return decoding_plots.sampling_steps_figure(steps, title), table, note


def beam_view(name: str, searched: tuple, source: str, opts):
    """Figure (the beam tree), table (every beam at every step) and note of beam search on one sentence, from
    beam_steps' (hypotheses, nodes) with the package `name`."""
    hypotheses, nodes = searched
    table = pd.DataFrame([[n.step, "ended" if n.finished else n.rank, round(n.logp, 3),
                           round(n.score, 3) if n.finished else "", n.text] for n in nodes if n.step > 0],
                         columns=BEAM_COLUMNS)
    best = hypotheses[0]
    note = (f"Beam size {opts.beam_size}, length penalty α = {opts.length_penalty:g}: each step keeps the "
            f"{opts.beam_size} best continuations by summed log-probability; a hypothesis ends with `<eos>` (★) and "
            f"is then scored log p / length^α. Best: “{best.text}” (score {best.score:.3f}; orange path).")
    title = f"{name}: beam search on “{source.strip()[:60]}”"
    return decoding_plots.beam_tree_figure(nodes, title), table, note
