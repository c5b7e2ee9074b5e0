"""Data tab: upload parallel text or pick a built-in dataset, look at it, choose direction and validation split."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import pandas as pd

from playground.errors import DataError
from playground.insight import plots
from playground.serving import jobs
from playground.ui import sessions, texts
from playground.ui.handlers import IN_WORKERS, job_call, readable, said_beside
from playground.ui.numbers import Range, checked
from playground.ui.state import Session

PREVIEW_ROWS = 20
MAX_WORDS = 256  # longest side kept when reading, in words (the run's max tokens per sentence cuts tokens later)
VALIDATION_SPLIT = Range("Validation split", 0.01, 0.3)  # playground.ui.numbers: drawn and checked from here


@dataclass
class DataTab:
    summary: gr.Markdown
    preview: gr.Dataframe
    dropped: gr.Dataframe
    lengths: gr.Plot
    src_lang: gr.Textbox
    tgt_lang: gr.Textbox
    val_fraction: gr.Slider


def builtin_choices() -> list[tuple[str, str]]:
    from playground.data.builtin import BUILTIN_DATASETS

    return [(f"{d.title} ({name})", name) for name, d in BUILTIN_DATASETS.items()]


read_in_job = job_call(jobs.read_pairs, "Upload a smaller sample of the corpus.")


def read_upload(files, language_hint: tuple[str, str] | None = None) -> tuple[object, str]:
    """One file (TSV/CSV/JSONL/TMX/Parquet, maybe gzipped) or two aligned plain-text files, source first, read in a
    process of its own (playground.serving.jobs); `language_hint` picks the pair of a file with more than two
    languages."""
    paths = [Path(f if isinstance(f, str) else f.name) for f in (files or [])]
    if not paths:
        raise DataError("Upload a file first: one TSV/CSV/JSONL file, or two aligned text files (source, then target).")
    if len(paths) > 2:
        raise DataError(f"{len(paths)} files were uploaded; upload one file with both sides, or two aligned files "
                        "(source first, then target). Clear the upload box (its ×) and upload again.")
    if len(paths) == 1:
        return read_in_job(str(paths[0]), None, MAX_WORDS, language_hint), paths[0].name
    return read_in_job(str(paths[0]), str(paths[1]), MAX_WORDS, None), f"{paths[0].name} + {paths[1].name}"


# ----------------------------------------------------------------------------------------------------------
# What the tab shows


def summary_markdown(session: Session, note: str = "") -> str:
    """The loaded data's summary; `note` (said under its title) marks it when the page shows something else."""
    from playground.data.stats import MAX_VALIDATION_PAIRS, split_sizes

    data = session.data
    if data is None:
        return "*No data loaded yet: pick a built-in dataset or upload a file.*"
    stats = session.stats()
    n_train, n_val = split_sizes(len(data.pairs), session.val_fraction)
    return "\n".join([
        f"### {session.description}",
        *([f"⚠️ {note}", ""] if note else []),
        f"{data.summary()}",
        "",
        f"**Direction:** `{session.src_lang}` → `{session.tgt_lang}` · **split:** {n_train:,} training / {n_val:,} "
        f"validation pairs ({session.val_fraction:.0%} held out, at most {MAX_VALIDATION_PAIRS:,})",
        "",
        "| side | words | mean length | median | 95th pct. | longest | distinct words |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(f"| {name} (`{lang}`) | {s.tokens:,} | {s.mean_len:.1f} | {s.median_len:g} | {s.p95_len} | {s.longest_len} | "
          f"{s.vocab_size:,} |" for name, lang, s in (("source", session.src_lang, stats.src),
                                                      ("target", session.tgt_lang, stats.tgt))),
    ])


def preview_frame(session: Session) -> pd.DataFrame:
    src, tgt = f"source ({session.src_lang})", f"target ({session.tgt_lang})"
    if src == tgt:
        tgt += " "
    return pd.DataFrame(session.pairs[:PREVIEW_ROWS], columns=[src, tgt])


def dropped_frame(session: Session) -> pd.DataFrame:
    data = session.data
    columns = ["reason", "rows dropped", "example lines"]
    if data is None:
        return pd.DataFrame(columns=columns)
    rows = [[reason, count, ", ".join(map(str, data.dropped_lines.get(reason, [])))]
            for reason, count in data.dropped.items()]
    return pd.DataFrame(rows, columns=columns)


def length_figure(session: Session):
    if session.data is None:
        return plots.length_histogram([], [])
    stats = session.stats()
    return plots.length_histogram(stats.src.lengths, stats.tgt.lengths, session.src_lang, session.tgt_lang)


def show(session: Session):
    """Outputs of every data handler: summary, preview, dropped rows, histogram, language boxes."""
    return (summary_markdown(session), preview_frame(session), dropped_frame(session), length_figure(session),
            session.src_lang, session.tgt_lang)


# ----------------------------------------------------------------------------------------------------------
# Handlers


def _adopt(session: Session, data, description: str, val_fraction: float | None) -> None:
    from playground.data.packed import session_pairs

    # every visitor's session keeps its own pairs for as long as it lives: packed, and never past the cap
    data.pairs = session_pairs(data.pairs, "This data")
    sessions.check_room(session, data.pairs.nbytes)  # all sessions together, not only this one
    session.data, session.description = data, description
    sessions.holding(session)
    session.src_lang, session.tgt_lang = data.src_lang or "src", data.tgt_lang or "tgt"
    if val_fraction is not None:
        session.val_fraction = VALIDATION_SPLIT.check(val_fraction)


def load_builtin(session: Session, name: str, val_fraction: float = 0.05):
    """Load a built-in dataset (reverse, numbers, mini-translation) into this session."""
    from playground.data.builtin import BUILTIN_DATASETS, read_builtin

    data = read_builtin(name, MAX_WORDS)
    _adopt(session, data, f"Built-in: {BUILTIN_DATASETS[name].title}", val_fraction)
    return show(session)


def load_files(session: Session, files, val_fraction: float = 0.05):
    """Load uploaded parallel text: one TSV/CSV/JSONL/TMX/Parquet file, or two aligned files (source, then target).
    The language fields pick the pair of a multilingual TMX or Parquet file. A file that could not be read on its
    own (one side of two aligned files) waits for the next upload, which is added to it."""
    new = [str(Path(f if isinstance(f, str) else f.name)) for f in files or []]
    files = [*[f for f in session.waiting_files if f not in new], *new]  # the box may hold the waiting one already
    session.waiting_files = []
    sessions.check_room(session, sum(os.path.getsize(f) for f in files if os.path.isfile(f)))  # before reading
    try:
        data, description = read_upload(files, (session.src_lang, session.tgt_lang))
    except DataError as err:
        still = (f" Below is still the data loaded before ({session.description}): it is what Train uses."
                 if session.data is not None else "")
        if len(files) != 1:
            raise DataError(f"{err}{still}") from err
        session.waiting_files = files  # maybe one side: the other one comes next
        name = Path(files[0]).name
        raise DataError(f"{err} If {name} is one side of two aligned text files, upload the other side now: it is "
                        f"added to this one.{still}") from err
    _adopt(session, data, f"Uploaded: {description}", val_fraction)
    return (*show(session), files)


def forget_files(session: Session) -> str:
    """The upload box was cleared: the next upload starts afresh. The data loaded from it stays (Train uses it),
    and its summary says so."""
    session.waiting_files = []
    if session.data is None:
        return summary_markdown(session)
    return summary_markdown(session, "The upload box was cleared; these pairs stay loaded and are what Train uses "
                                     "until you load other data.")


def swap_direction(session: Session):
    """Swap source and target: train the other direction."""
    if session.data is None:
        raise DataError("Load data first, then swap its direction.")
    data = session.data
    data.pairs = data.pairs.swapped()
    data.src_lang, data.tgt_lang = data.tgt_lang, data.src_lang
    session.src_lang, session.tgt_lang = session.tgt_lang, session.src_lang
    return show(session)


def set_languages(session: Session, src_lang: str, tgt_lang: str):
    from playground.data.languages import check_language

    session.src_lang = check_language((src_lang or "").strip() or "src", "source language")
    session.tgt_lang = check_language((tgt_lang or "").strip() or "tgt", "target language")
    return summary_markdown(session), preview_frame(session), length_figure(session)


def set_val_fraction(session: Session, val_fraction: float):
    session.val_fraction = VALIDATION_SPLIT.check(val_fraction)
    return summary_markdown(session)


# ----------------------------------------------------------------------------------------------------------
# Layout


def source_panel() -> tuple:
    """The built-in dataset picker and the upload box."""
    with gr.Row():
        with gr.Column(scale=1):
            builtin = gr.Dropdown(builtin_choices(), value="numbers", label="Built-in dataset",
                                  info="Made by code in the repo; nothing is downloaded.")
            builtin_btn = gr.Button("Load built-in dataset", variant="primary")
        with gr.Column(scale=1):
            files = gr.File(file_count="multiple", label="…or upload parallel text",
                            file_types=[".tsv", ".csv", ".txt", ".jsonl", ".json", ".tmx", ".xml", ".parquet", ".gz",
                                        ".de", ".en", ".fr", ".es", ".src", ".tgt"])
            gr.Markdown(texts.UPLOAD_HELP)
    return builtin, builtin_btn, files


def direction_panel() -> tuple:
    """The language names, the swap button and the validation split."""
    with gr.Row():
        src_lang = gr.Textbox(label="Source language", value="src", scale=2)
        tgt_lang = gr.Textbox(label="Target language", value="tgt", scale=2)
        swap = gr.Button("⇄ Swap direction", scale=1)
        val_fraction = VALIDATION_SPLIT.slider(0.05, step=0.01, scale=3,
                                               info="Share of pairs held out for validation (at most 1,000)")
    return src_lang, tgt_lang, swap, val_fraction


def data_view() -> tuple:
    """The summary, the first pairs, the length histogram and the dropped rows, as before any data is loaded."""
    blank = Session()  # what the tab shows before any data is loaded: column headers, no rows
    summary = gr.Markdown(summary_markdown(blank), elem_id="data-summary")
    with gr.Row():
        with gr.Column(scale=3):
            preview = gr.Dataframe(preview_frame(blank), label=f"First {PREVIEW_ROWS} pairs", interactive=False,
                                   wrap=True, max_height=420, column_widths=["50%", "50%"])
        with gr.Column(scale=2):
            lengths = gr.Plot(length_figure(blank), show_label=False)
            dropped = gr.Dataframe(dropped_frame(blank), label="Dropped rows by reason", interactive=False)
    return summary, preview, dropped, lengths


def build(session: gr.State) -> DataTab:
    gr.Markdown(texts.DATA_INTRO)
    builtin, builtin_btn, files = source_panel()
    note = gr.Markdown(elem_id="data-note")
    src_lang, tgt_lang, swap, val_fraction = direction_panel()
    summary, preview, dropped, lengths = data_view()

    outputs = [summary, preview, dropped, lengths, src_lang, tgt_lang]
    checks = {val_fraction: VALIDATION_SPLIT}  # a split out of range is said beside it, and nothing is loaded
    builtin_btn.click(**said_beside(load_builtin, outputs, note), **checked([session, builtin, val_fraction], checks),
                      api_name="load_builtin")
    files.upload(**said_beside(load_files, [*outputs, files], note), **checked([session, files, val_fraction], checks),
                 api_name="load_files", **IN_WORKERS)
    files.clear(readable(forget_files), [session], [summary], api_visibility="private", show_progress="hidden")
    swap.click(**said_beside(swap_direction, outputs, note), inputs=[session], api_name="swap_direction")
    # always_last: a target typed right after the source blurs while the source's call still runs; the default
    # ("once") dropped that second call, and the run was saved "en → tgt"
    gr.on([src_lang.blur, src_lang.submit, tgt_lang.blur, tgt_lang.submit], readable(set_languages),
          [session, src_lang, tgt_lang], [summary, preview, lengths], api_name="set_languages", show_progress="hidden",
          trigger_mode="always_last")
    val_fraction.change(readable(set_val_fraction), **checked([session, val_fraction], checks), outputs=[summary],
                        api_name="set_val_fraction", show_progress="hidden", trigger_mode="always_last")
    return DataTab(summary, preview, dropped, lengths, src_lang, tgt_lang, val_fraction)
