"""Translate tab: pick a model, type sentences, decode greedily, by sampling or with beam search, look at the
model's next-token choices for any output row, and step through the decoding of the first sentence."""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

import gradio as gr
import pandas as pd

from playground.errors import PlaygroundError
from playground.insight import decoding_plots
from playground.packages.info import summary_of
from playground.serving import work
from playground.serving.library import Library
from playground.ui.caches import package_info
from playground.ui.handlers import IN_WORKERS, bind, quick_call, readable, request_lines, said_beside
from playground.ui.numbers import Range, checked, watch
from playground.ui.pickers import DEMO_MODEL, model_picker, package_folder, picked_shape, shown
from playground.ui.state import Session
from playground.ui.tabs import steps_view

MAX_SENTENCES = 200
TOP_K = 5  # candidates per step in the next-token view
ECHO_CHARS = 300  # of a source in the results table: a 2,000-character line would make its row a page tall
MAX_TOP_K = 20  # a table of steps x k cells: an API client's k = 10**9 would list the whole vocabulary at every step
TOO_SLOW = ("Translate fewer sentences, or lower the max output length, the beam size or the samples per sentence; "
            "files go through `python -m playground translate --input FILE`.")
RESULT_COLUMNS = ["#", "rank", "source", "translation", "score", "mean log-prob", "tokens", "count"]
# the translation gets the most room: at 1024 px it must not be pushed out of sight by the source
RESULT_WIDTHS = ["32px", "52px", "15%", "25%", "68px", "88px", "68px", "60px"]  # numbers, headers whole at 1024 px
# sentences the shipped demo model (English → German) has never seen and translates right: a first visit tries them
DEMO_EXAMPLES = ["Today a student swims.", "She follows a child.", "The friend closes the bag.",
                 "A cupboard is white."]
NEXT_COLUMNS = ["step", "chosen token", "p(chosen)", "top candidates"]
NEXT_WIDTHS = ["56px", "20%", "96px", "52%"]  # the candidates wrap inside the table at 1024 px

# the numeric controls (playground.ui.numbers): each range draws its control and checks what is typed into it
TEMPERATURE = Range("Temperature", 0.05, 2.0)
TOP_K_SAMPLING = Range("Top-k", 0, None, whole=True)
TOP_P = Range("Top-p", 0.05, 1.0)
SEED = Range("Seed", 0, 2**63 - 1, whole=True)  # torch's generators take 64-bit seeds
BEAM_SIZE = Range("Beam size", 1, 16, whole=True)
LENGTH_PENALTY = Range("Length penalty α", 0.0, 2.0)
NBEST = Range("n-best", 1, 8, whole=True)
SAMPLES = Range("Samples per sentence", 1, 8, whole=True)
MAX_OUTPUT = Range("Max output tokens", 0, None, whole=True)  # its top: the model's positions (output_top)
ROW = Range("Table row", 1, None, whole=True)  # its top: the rows of the last results
CANDIDATES = Range("Candidates per step", 1, MAX_TOP_K, whole=True)


@dataclass
class TranslateTab:
    model: gr.Dropdown
    text: gr.Textbox
    translated: object  # the Translate event


def model_summary(library: Library, session: Session | None, name: str | None) -> str:
    """One line about a package, from its JSON files only (no weights loaded)."""
    if not name:
        return "*No model yet: train one on the Train tab or upload a package on the Models tab.*"
    try:
        info = package_info(package_folder(library, session, name))
    except PlaygroundError as err:
        return f"⚠️ {err}"
    summary = summary_of(info)
    line = f"`{summary.src_lang}` → `{summary.tgt_lang}` · {summary.params:,} parameters"
    if summary.trained:
        line += f" · {summary.steps or 0:,} steps"
    if summary.last:
        line += (f" · BLEU {summary.last.get('bleu', 0):.1f}, chrF {summary.last.get('chrf', 0):.1f} on its "
                 "validation sample")
    return line


def decode_options(method: str, temperature: float, top_k: int, top_p: float, seed: int, beam_size: int,
                   length_penalty: float, nbest: int, max_output_tokens: int):
    """The DecodeOptions of the chosen method: the settings of the other methods (hidden on the page, and not
    checked there) keep their defaults."""
    from playground.core.decode import DecodeOptions

    options = dict(method=method, max_output_tokens=int(max_output_tokens) if max_output_tokens else None)
    if method == "sample":
        options.update(temperature=float(temperature), top_k=int(top_k or 0), top_p=float(top_p),
                       seed=int(seed) if seed is not None else None)
    if method == "beam":
        options.update(beam_size=int(beam_size), length_penalty=float(length_penalty), nbest=int(nbest))
    return DecodeOptions(**options)


# in a worker process (playground.serving.work); a training step waits for them (playground.runtime.foreground)
quick_translation = quick_call(work.translations, TOO_SLOW)
quick_next_rows = quick_call(work.next_token_rows, TOO_SLOW)
quick_steps = quick_call(work.decoding_steps, "Lower the max output length or the beam size.")


def check_candidates(k) -> int:
    """Candidates per step, 1 to MAX_TOP_K."""
    return CANDIDATES.check(k)


def steps_figure(steps_of: tuple, first: str, opts, k: int) -> tuple:
    """The step-by-step view's figure, table and note from a worker's steps (playground.serving.work.decoding_steps)."""
    name, steps = steps_of
    if opts.method == "beam":
        return steps_view.beam_view(name, steps, first, opts)
    return steps_view.sampling_view(name, steps, opts, k)


def next_token_view(library: Library, session: Session, row: int, k: int = TOP_K, rows_of=quick_next_rows):
    """Figure and table of the model's top-k next tokens at each step of one output row (1 = the first row). The
    row's model is looked up again by name: it may have been deleted, or its name taken by somebody else's since."""
    if not session.translations:
        return decoding_plots.next_token_figure([]), pd.DataFrame(columns=NEXT_COLUMNS)
    row, k = ROW.upto(len(session.translations)).check(row), check_candidates(k)
    entry = session.translations[row - 1]
    rows = rows_of(str(package_folder(library, session, entry["model"])), entry["src_ids"], entry["out_ids"], int(k))
    title = f"Row {row}: “{entry['text'][:60]}” — top {int(k)} next tokens at each step"
    table = pd.DataFrame([[r["step"], r["chosen"], round(r["chosen_prob"], 4),
                           ", ".join(f"{tok} ({p:.2f})" for tok, p in r["top"])] for r in rows], columns=NEXT_COLUMNS)
    return decoding_plots.next_token_figure(rows, title), table



# ----------------------------------------------------------------------------------------------------------
# Handlers (build binds `library`)


@readable
def translate_text(library: Library, session: Session, model: str, text: str, method: str = "greedy",
                   temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0, beam_size: int = 5,
                   length_penalty: float = 1.0, nbest: int = 1, max_output_tokens: int = 0):
    """Translate one sentence per line; returns the results table, a note, and row 1's next-token view."""
    folder = package_folder(library, session, model)
    config = package_info(folder)["config"]
    sentences, cut = request_lines(text)
    if not sentences:
        raise PlaygroundError("Type at least one sentence to translate (one per line).")
    if len(sentences) > MAX_SENTENCES:
        raise PlaygroundError(f"{len(sentences)} lines is more than this page translates at once "
                              f"({MAX_SENTENCES}); use `python -m playground translate --input FILE` for files.")
    from playground.core.decode import cut_sources_note

    opts = decode_options(method, temperature, top_k, top_p, seed, beam_size, length_penalty, nbest, max_output_tokens)
    start = time.perf_counter()
    results = quick_translation(str(folder), sentences, opts, int(nbest) if method == "sample" else 1)
    seconds = time.perf_counter() - start
    rows, merged = result_rows(session, folder.name, results)
    score = "log p / length^α" if method == "beam" else "sum of log p"
    note = (f"{len(sentences)} sentence{'s' if len(sentences) > 1 else ''} with "
            f"**{shown(library, session, folder.name)}** "
            f"({config['src_lang']} → {config['tgt_lang']}), {method}, in {seconds:.2f} s. "
            f"Score = {score}. Click a row to see the model's next-token choices for it.")
    if merged:
        note += (f" {merged} {'beam' if method == 'beam' else 'sample'}{'s' if merged > 1 else ''} that spelled "
                 "a sentence already listed (the same words, in the same or other tokens) "
                 f"{'were' if merged > 1 else 'was'} merged into it: its best score is kept, and the count column "
                 "says how many there were.")
    if cut:
        note += "\n\n" + cut
    token_cut_note = cut_sources_note(results)
    if token_cut_note:
        note += "\n\n✂️ " + token_cut_note
    return (pd.DataFrame(rows, columns=RESULT_COLUMNS), note, 1,
            *next_token_view(library, session, 1, TOP_K))


def result_rows(session: Session, model: str, results: list) -> tuple[list[list], int]:
    """The results table's rows (the hypotheses that spell the same sentence merged into one) and how many were
    merged; the session keeps each row's ids for the next-token view."""
    from playground.core.decode import distinct_hypotheses

    rows, session.translations, merged = [], [], 0
    for i, t in enumerate(results):
        distinct = distinct_hypotheses(t.hypotheses)
        merged += len(t.hypotheses) - len(distinct)
        for rank, (h, count) in enumerate(distinct):
            n = max(len(h.token_logprobs), 1)
            source = t.source if len(t.source) <= ECHO_CHARS else t.source[:ECHO_CHARS] + "…"
            rows.append([i + 1, rank + 1, source if rank == 0 else "", h.text, round(h.score, 3),
                         round(sum(h.token_logprobs) / n, 3), len(h.ids), count])
            session.translations.append({"model": model, "src_ids": t.source_ids,
                                         "out_ids": h.ids, "text": h.text})
    return rows, merged


@readable
def next_tokens(library: Library, session: Session, row: int = 1, k: int = TOP_K):
    """The top-k next tokens (teacher-forced on the output) at each step of a row of the last results.
    Rows count from 1, as in the table."""
    return next_token_view(library, session, row, k)


@readable
def pick_row(library: Library, session: Session, k: int, evt: gr.SelectData):
    """The row clicked in the results table, and its next-token view."""
    row = (evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index) + 1
    return (row, *next_token_view(library, session, row, k))


@readable
def step_through(library: Library, session: Session, model: str, text: str, method: str = "greedy",
                 temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0, beam_size: int = 5,
                 length_penalty: float = 1.0, max_output_tokens: int = 0, k: int = TOP_K):
    """Decode the first sentence step by step: greedy versus sampling (top-k candidates per step, the greedy
    choice, a seeded sampled choice) or, for beam search, every beam at every step; figure, table and note."""
    folder = package_folder(library, session, model)
    lines, cut = request_lines(text)
    opts = decode_options(method, temperature, top_k, top_p, seed, beam_size, length_penalty, 1, max_output_tokens)
    first, k = lines[0] if lines else "", check_candidates(k)
    figure, table, note = steps_figure(quick_steps(str(folder), first, opts, k), first, opts, k)
    return figure, table, note + (cut and "\n\n" + cut)


def demo_examples(model: str | None):
    """The demo's example sentences, shown for the demo model only."""
    return gr.update(visible=model == DEMO_MODEL)


@readable
def show_controls(method: str):
    """The sampling or beam controls of the chosen decoding method, and the n-best slider's meaning for it."""
    return (gr.update(visible=method == "sample"), gr.update(visible=method == "beam"),
            gr.update(visible=method != "greedy", label="n-best" if method == "beam" else "samples per sentence",
                      info="how many of the best finished beams to list per sentence" if method == "beam" else
                      "draws per sentence (seeds seed, seed+1, …), best score first"))


# ----------------------------------------------------------------------------------------------------------
# Layout and wiring


def decoding_controls(session: gr.State, library: Library) -> SimpleNamespace:
    """The left column: the model, the sentences and the decoding settings (those of the other methods hidden)."""
    c = SimpleNamespace()
    c.model, _ = model_picker(library, session, "translate_models")
    demo = c.model.value == DEMO_MODEL
    c.model_info = gr.Markdown(model_summary(library, None, c.model.value))
    c.text = gr.Textbox("\n".join(DEMO_EXAMPLES[:2]) if demo else "", label="Source sentences (one per line)",
                        lines=5, placeholder="Type in the model's source language, one sentence per line.")
    c.examples = gr.Examples([[line] for line in DEMO_EXAMPLES], [c.text], label="Sentences the demo model has "
                             "never seen (English → German): click one, then Translate", visible=demo)
    c.method = gr.Radio(["greedy", "sample", "beam"], value="greedy", label="Decoding")
    with gr.Row(visible=False) as c.sample_row:
        c.temperature = TEMPERATURE.slider(1.0, step=0.05, elem_id="translate-temperature")
        c.top_k = TOP_K_SAMPLING.number(0, label="Top-k (0 = off)")
        c.top_p = TOP_P.slider(1.0, step=0.05)
        c.seed = SEED.number(0)
    with gr.Row(visible=False) as c.beam_row:
        c.beam_size = BEAM_SIZE.slider(5, step=1, info="keep this many partial translations at each step")
        c.length_penalty = LENGTH_PENALTY.slider(1.0, step=0.1,
                                                 info="a beam's score is log p / length^α: 0 favours short outputs, "
                                                      "1 = mean log-probability per token")
    with gr.Row():
        c.nbest = NBEST.slider(1, step=1, visible=False,
                               info="how many of the best finished beams to list per sentence")
        c.max_output_tokens = MAX_OUTPUT.number(0, label="Max output tokens (0 = auto)")
    c.translate_btn = gr.Button("Translate", variant="primary")
    return c


def results_panel() -> SimpleNamespace:
    """The right column: the results table and the next-token view of one of its rows."""
    r = SimpleNamespace()
    r.note = gr.Markdown()
    r.results = gr.Dataframe(pd.DataFrame(columns=RESULT_COLUMNS), label="Translations", interactive=False,
                             wrap=True, column_widths=RESULT_WIDTHS)
    with gr.Row():
        r.row = ROW.number(1, label="Table row for the next-token view (1 = first)", scale=2)
        r.k = CANDIDATES.slider(TOP_K, step=1, scale=2)
        r.show_row = gr.Button("Show", scale=1)
    gr.Markdown("The next-token view is *teacher-forced*: the model is fed the row's own output as its "
                "previous tokens (not its own guesses) and shows the next tokens it scored highest at each "
                "step.")
    r.row_note = gr.Markdown()
    r.next_plot = gr.Plot(decoding_plots.next_token_figure([]), show_label=False)
    r.next_table = gr.Dataframe(pd.DataFrame(columns=NEXT_COLUMNS), label="Next-token table", interactive=False,
                                wrap=True, column_widths=NEXT_WIDTHS)
    return r


def steps_panel() -> SimpleNamespace:
    """The accordion that steps through the decoding of the first sentence."""
    s = SimpleNamespace()
    with gr.Accordion("Step by step: greedy versus sampling, and beam search", open=False,
                      elem_id="translate-steps"):
        gr.Markdown("Decodes the first sentence with the settings on the left and shows each step: with "
                    "greedy or sampling, the candidates, the greedy choice and a sampled one (temperature, "
                    "top-k, top-p, seed); with beam search, the beams and their scores.")
        s.button = gr.Button("Step through the first sentence", elem_id="translate-steps-button")
        s.note = gr.Markdown()
        s.plot = gr.Plot(decoding_plots.sampling_steps_figure([]), show_label=False, elem_id="translate-steps-plot")
        s.table = gr.Dataframe(pd.DataFrame(columns=steps_view.SAMPLING_COLUMNS), label="Steps",
                               interactive=False, wrap=True, max_height=400, column_widths=steps_view.COLUMN_WIDTHS)
    return s


def output_top(library: Library, session: Session | None, name: str | None) -> int | None:
    """The most output tokens the model makes (its positions, less the one `<bos>` takes); None when the model
    cannot be read (the handler says why)."""
    shape = picked_shape(library, session, name)
    return shape["max_positions"] - 1 if shape else None


def number_checks(library: Library, session: gr.State, c: SimpleNamespace, r: SimpleNamespace) -> dict:
    """The range of each numeric control; the sampling and beam settings only count for their own method."""
    def of(method: str, rule: Range):
        return lambda v: rule if v[c.method] == method else None

    def nbest(v: dict) -> Range | None:
        if v[c.method] != "beam":
            return SAMPLES if v[c.method] == "sample" else None
        beams = v[c.beam_size]
        return NBEST.upto(min(NBEST.high, int(beams))) if not BEAM_SIZE.problem(beams) else NBEST

    return {c.temperature: of("sample", TEMPERATURE), c.top_k: of("sample", TOP_K_SAMPLING),
            c.top_p: of("sample", TOP_P), c.seed: of("sample", SEED), c.beam_size: of("beam", BEAM_SIZE),
            c.length_penalty: of("beam", LENGTH_PENALTY), c.nbest: nbest,
            c.max_output_tokens: lambda v: MAX_OUTPUT.upto(output_top(library, v[session], v[c.model])),
            r.row: lambda v: ROW.upto(len(v[session].translations) or None), r.k: CANDIDATES}


def build(session: gr.State, library: Library) -> TranslateTab:
    with gr.Row():
        with gr.Column(scale=1):
            c = decoding_controls(session, library)
        with gr.Column(scale=2):
            r = results_panel()
            s = steps_panel()

    c.method.change(show_controls, [c.method], [c.sample_row, c.beam_row, c.nbest], api_visibility="private",
                    show_progress="hidden")
    c.model.change(bind(model_summary, library), [session, c.model], [c.model_info], api_visibility="private",
                   show_progress="hidden")
    c.model.change(demo_examples, [c.model], [c.examples.dataset], queue=False, api_visibility="private",
                   show_progress="hidden")
    settings = [c.method, c.temperature, c.top_k, c.top_p, c.seed, c.beam_size, c.length_penalty]
    checks = number_checks(library, session, c, r)
    translation = dict(**said_beside(bind(translate_text, library), [r.results, r.note, r.row, r.next_plot,
                                                                     r.next_table], r.note), **IN_WORKERS)
    inputs = checked([session, c.model, c.text, *settings, c.nbest, c.max_output_tokens], checks)
    translated = c.translate_btn.click(**translation, **inputs, api_name="translate")
    c.text.submit(**translation, **inputs, api_visibility="private")
    r.results.select(**said_beside(bind(pick_row, library), [r.row, r.next_plot, r.next_table], r.row_note),
                     **checked([session, r.k], checks), api_visibility="private", **IN_WORKERS)
    r.show_row.click(**said_beside(bind(next_tokens, library), [r.next_plot, r.next_table], r.row_note),
                     **checked([session, r.row, r.k], checks), api_name="next_tokens", **IN_WORKERS)
    s.button.click(**said_beside(bind(step_through, library), [s.plot, s.table, s.note], s.note),
                   **checked([session, c.model, c.text, *settings, c.max_output_tokens, r.k], checks),
                   api_name="decode_steps", **IN_WORKERS)
    # n-best's range follows the beam size and the method, Max output tokens' the model
    watch(checks, [session, c.model, c.method, c.beam_size, c.nbest, c.max_output_tokens], changes=(c.method, c.model))
    return TranslateTab(c.model, c.text, translated)
