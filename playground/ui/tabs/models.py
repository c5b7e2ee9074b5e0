"""Models tab: every package in models/ with its metrics; model card and config; download as zip, upload a zip (a
package, or a 🤗 transformers Marian checkpoint to import), import a Marian model from the Hub, delete (with a
confirmation)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pandas as pd

from playground.errors import PackageError
from playground.packages.info import summary_of
from playground.serving import work
from playground.serving.library import Library
from playground.settings import KB, MB
from playground.ui.caches import package_info
from playground.ui.handlers import IN_WORKERS, bind, download_dir, quick_call, readable, said_beside
from playground.ui.pickers import default_model, model_dropdown, model_names, package_folder, shown
from playground.ui.sessions import admit_import, current_address
from playground.ui.state import Session, visitor_of
from playground.ui.tabs import hub_panel

# the scores are the final validation's (the weights saved); the model card gives the best one too
COLUMNS = ["name", "direction", "architecture", "parameters", "steps", "final BLEU", "final chrF", "final val loss",
           "size (MB)", "saved"]
# all in sight at 1024 px: the numbers and dates get the pixels they need unbroken, names and architectures wrap
COLUMN_WIDTHS = ["10%", "92px", "16%", "100px", "60px", "64px", "64px", "64px", "64px", "104px"]


@dataclass
class ModelsTab:
    table: gr.Dataframe
    model: gr.Dropdown
    changed: list  # events after which the set of packages may have changed (import, delete)
    show_card: dict  # listener arguments that redraw the card of the picked model (a run may have changed it)


def models_frame(library: Library, session: Session | None) -> pd.DataFrame:
    """One row per package this session may use, by its shown name, from its JSON files (no weights loaded); a
    broken package says so in its own row."""
    rows = []
    for folder in library.packages(visitor_of(library, session)):
        name = shown(library, session, folder.name)
        try:  # the JSON files are schema-checked (playground.packages.schema), so the summary's fields have their types
            summary = summary_of(package_info(folder))
            m = summary.model
            architecture = (f"{summary.layers}, d_model {m['d_model']}, {m['n_heads']} heads, "
                            f"{summary.tokenizer_kind} {m['src_vocab_size']}")
            saved = summary.saved_at or time.strftime("%Y-%m-%d %H:%M", time.localtime(folder.stat().st_mtime))
            saved = f"{saved[:10]} {saved[11:16]}" if saved[10:11] == "T" else saved  # ISO: the date and the minute
        except (PackageError, OSError) as err:  # broken, or deleted while listing
            rows.append([name, "⚠️ broken", str(err)[:160], None, None, None, None, None, None, None])
            continue
        last = summary.last
        rows.append([
            name, summary.direction, architecture, summary.params, summary.steps,
            round(last["bleu"], 2) if "bleu" in last else None, round(last["chrf"], 2) if "chrf" in last else None,
            round(last["val_loss"], 3) if "val_loss" in last else None,
            round(summary.size_bytes / MB, 2), saved,
        ])
    return pd.DataFrame(rows, columns=COLUMNS)


def models_table(library: Library, session: Session | None):
    """models_frame as the page shows it: counts with thousands separators (1,251,584 parameters), still sorted as
    numbers (a Styler formats what is shown, the values stay)."""
    def shown(value) -> str:
        return "" if value is None or pd.isna(value) else f"{value:g}" if isinstance(value, float) else str(value)

    def count(value) -> str:
        return f"{int(value):,}" if pd.notna(value) else ""

    return models_frame(library, session).style.format(shown).format(count, subset=["parameters", "steps"])


def file_size(n_bytes: int) -> str:
    """"6.59 MB", or "137.4 KB" for a file under a megabyte (not "0.14 MB")."""
    return f"{n_bytes / MB:.2f} MB" if n_bytes >= MB else f"{n_bytes / KB:.1f} KB"


def card(library: Library, session: Session | None, name: str | None) -> tuple[str, dict]:
    """The model card (README.md) and config.json of a package."""
    from playground.packages.format import CARD, read_limited

    if not name:
        return "*No model selected.*", {}
    folder = package_folder(library, session, name)
    info = package_info(folder)
    # never more than a card's limit is read (a README.md of a gigabyte of zeros is refused, not loaded)
    text = (read_limited(folder / CARD).decode("utf-8", errors="replace") if (folder / CARD).is_file()
            else f"# {name}\n\n(no model card)")
    # its title as the pickers show it (the folder's path in the card's code keeps the code: that is on disk)
    text = text.replace(f"# {folder.name}\n", f"# {shown(library, session, folder.name)}\n", 1)
    files = ", ".join(f"`{f}` ({file_size(size)})" for f, size in sorted(info["files"].items()))
    return f"{text}\n\n**Files:** {files}", info["config"]


def zip_bytes(path: Path) -> int:
    """What a zip expands to (its members' sizes as its directory states them; import_zip checks them)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            return sum(info.file_size for info in zf.infolist())
    except (zipfile.BadZipFile, OSError):
        return 0  # import_zip says what is wrong with it


def storage_note(library: Library) -> str:
    """Where packages live, and in shared mode the visitor's quota and whether models outlive a restart."""
    if not library.shared:
        return f"Packages are saved in `{library.models_dir}`."
    q = library.quotas
    note = (f"You can keep up to {q.models_per_visitor} models and {q.bytes_per_visitor / MB:.0f} MB here; "
            "only you see yours (sign in to keep them across browsers).")
    if not library.persistent:
        note += (" ⚠️ **This Space has no persistent storage: models vanish when it restarts.** Download the ones "
                 "you want to keep (⬇ Download as zip) and upload them again later.")
    return note


# ----------------------------------------------------------------------------------------------------------
# Handlers (build binds `library`)


@readable
def refresh_all(library: Library, session: Session, keep: str | None = None):
    """All packages with their metrics (newest first), and the picker's choices."""
    return models_table(library, session), model_dropdown(library, session, keep)


@readable
def model_card(library: Library, session: Session, name: str):
    """The model card (Markdown) and config (JSON) of a package."""
    return card(library, session, name)


@readable
def export_model(library: Library, session: Session, name: str, with_state: bool = False):
    """Zip a package (weights, tokenizer, config, card; with_state: also resume.*, to go on training it
    elsewhere) for download."""
    from playground.packages.zips import export_zip

    folder = package_folder(library, session, name)
    # one folder per package and kind, whoever asks (a visitor reaches only the packages they may see): thirty
    # sessions downloading the demo share one zip instead of keeping thirty for Gradio's hour; each download replaces
    # the zip whole (handlers.download_dir)
    kind = "package with state" if with_state else "package"  # both are NAME.zip: a link stays the zip it was
    return str(export_zip(folder, download_dir(str(folder.resolve()), kind, empty=False), with_state=bool(with_state)))


# an upload's tokenizer is parsed by native code, its weights loaded: in a worker process (playground.serving.work)
checked_in_worker = quick_call(work.check_upload, "Upload a smaller package.")
# so is an imported checkpoint's conversion (its SentencePiece models, vocabulary and weights), given longer
converted_in_worker = quick_call(work.import_checkpoint, "Import a smaller model.", seconds=work.IMPORT_S)
# what the Hub box offers as it is typed into (any other repo id may be typed): OPUS-MT models of common pairs
HUB_SUGGESTIONS = tuple(f"Helsinki-NLP/opus-mt-{pair}" for pair in (
    "en-de", "de-en", "en-fr", "fr-en", "en-es", "es-en", "en-it", "it-en", "en-nl", "nl-en", "en-ru", "ru-en",
    "en-zh", "zh-en", "en-ROMANCE", "ROMANCE-en", "mul-en", "en-mul"))


@readable
def import_model(library: Library, session: Session, file):
    """Add a package from a zip file (checked before anything is written to the models folder)."""
    from playground.packages.names import safe_stem
    from playground.packages.zips import import_zip

    if not file:
        raise PackageError("Choose a package zip to upload.")
    path = Path(file if isinstance(file, str) else file.name)
    visitor = visitor_of(library, session)
    reserved = library.add(safe_stem(path.stem), visitor, zip_bytes(path))  # quotas checked, name reserved
    try:
        folder = import_zip(path, library.models_dir, name=reserved.name, check=checked_in_worker,
                            convert=converted_in_worker)
    finally:
        library.forget(reserved.name)  # dropped only when nothing was imported
    return imported(library, session, folder) + (None,)


def imported(library: Library, session: Session, folder: Path) -> tuple:
    """What an import says: its line (the language pair of an imported model), the table and the picker."""
    gr.Info(f"Imported {shown(library, session, folder.name)}.")
    table, dropdown = refresh_all(library, session, folder.name)
    summary = summary_of(package_info(folder))
    origin = f" from {summary.imported['origin']}" if summary.imported.get("origin") else ""
    return (f"✅ Imported **{shown(library, session, folder.name)}**{origin}: translates "
            f"{summary.direction}, {summary.params:,} parameters.", table, dropdown)


@readable
def import_from_hub(library: Library, session: Session, repo_id: str, progress=gr.Progress()):
    """Import a 🤗 transformers Marian translation model (OPUS-MT) from the Hugging Face Hub by its repo id
    (Helsinki-NLP/opus-mt-en-de), named after it: only the files the import needs are downloaded, their sizes and the
    model's parameters checked first."""
    from playground.serving.hub_fetch import checkpoint_on_hub, import_hub_checkpoint

    progress(0, desc="Asking the Hub for the model's files")
    checkpoint = checkpoint_on_hub(repo_id)  # sizes from the Hub's metadata: nothing downloaded yet
    reserved = library.add(checkpoint.default_name, visitor_of(library, session), checkpoint.total_bytes)
    refusal = library.shared and admit_import(current_address(), checkpoint.total_bytes)  # counted as an upload
    if refusal:
        library.forget(reserved.name)
        raise PackageError(refusal)
    try:
        folder = import_hub_checkpoint(checkpoint, library.models_dir, reserved.name, check=checked_in_worker,
                                       convert=converted_in_worker,
                                       progress=lambda share, what: progress(share, desc=what))
    finally:
        library.forget(reserved.name)
    return imported(library, session, folder)


@readable
def delete_model(library: Library, session: Session, name: str, confirm: bool = False):
    """Delete a package (confirm must be True); the shipped ones are read-only."""
    if not name:
        raise PackageError("Choose the model to delete.")
    folder = package_folder(library, session, name)  # somebody else's is "no such model", before any question
    if not confirm:
        raise PackageError(f"Tick “Yes, delete {shown(library, session, name)}” first: deleting cannot be undone.")
    library.delete(folder.name, visitor_of(library, session))
    table, dropdown = refresh_all(library, session, None)
    return f"🗑 Deleted **{shown(library, session, folder.name)}**.", table, dropdown, gr.update(value=False)


def pick(library: Library, session: Session, evt: gr.SelectData):
    """The model of the table row clicked (the row shows its name as the pickers do)."""
    row = evt.row_value or []
    by_label = {shown(library, session, name): name for name in model_names(library, session)}
    return gr.update(value=by_label.get(row[0], row[0])) if row else gr.update()


def untick() -> bool:
    """The delete confirmation, unticked: a tick is for one model and one press."""
    return False


# ----------------------------------------------------------------------------------------------------------
# Layout and wiring


def card_column(library: Library) -> SimpleNamespace:
    """The left column: the model picker, its card and its config."""
    c = SimpleNamespace()
    names = model_names(library, None)
    first = default_model(names)
    first_card, first_config = card(library, None, first)
    c.model = gr.Dropdown(names, value=first, label="Model", allow_custom_value=True)
    c.card_md = gr.Markdown(first_card)
    with gr.Accordion("config.json", open=False):
        c.config = gr.JSON(first_config)
    return c


def files_column(session: gr.State, library: Library, model: gr.Dropdown) -> SimpleNamespace:
    """The right column: download, export, push, upload and delete the picked package."""
    f = SimpleNamespace()
    f.download_btn = gr.Button("⬇ Download as zip")
    f.download = gr.File(label="Package zip", interactive=False, height=90)
    f.with_state = gr.Checkbox(False, label="Include the training state (resume.*)",
                               info="about twice the size; lets the model be resumed elsewhere (Train tab → "
                                    "Resume from, after uploading the zip)")
    hub_panel.build(session, library, model)
    f.upload = gr.File(label="Upload a package zip, or a 🤗 Marian (OPUS-MT) model folder as a zip",
                       file_types=[".zip"], height=120, elem_id="models-upload")
    with gr.Group(elem_id="models-hub-fetch"):
        f.hub_repo = gr.Dropdown(list(HUB_SUGGESTIONS), value=None, allow_custom_value=True, filterable=True,
                                 label="Or import a translation model from the Hugging Face Hub",
                                 info="a Marian (OPUS-MT) repo id: type to search, e.g. Helsinki-NLP/opus-mt-en-de",
                                 elem_id="models-hub-repo")
        f.hub_btn = gr.Button("⬇ Import from the Hub", elem_id="models-hub-import")
    f.status = gr.Markdown(elem_id="models-status")
    with gr.Group():
        f.confirm = gr.Checkbox(False, label="Yes, delete the selected model (cannot be undone)")
        f.delete_btn = gr.Button("🗑 Delete", variant="stop")
    return f


def build(session: gr.State, library: Library) -> ModelsTab:
    gr.Markdown(storage_note(library), elem_id="models-storage")
    with gr.Row():
        table = gr.Dataframe(models_table(library, None), label="Model packages (click a row)",
                             interactive=False, wrap=True, scale=5, column_widths=COLUMN_WIDTHS)
        refresh = gr.Button("↻ Refresh", scale=0, min_width=100)
    with gr.Row():
        with gr.Column(scale=3):
            c = card_column(library)
        with gr.Column(scale=2):
            f = files_column(session, library, c.model)
    model = c.model

    refresh.click(bind(refresh_all, library), [session, model], [table, model], api_name="list_models",
                  show_progress="hidden")
    table.select(bind(pick, library), [session], [model], api_visibility="private")
    show_card = dict(**said_beside(bind(model_card, library), [c.card_md, c.config], c.card_md),
                     inputs=[session, model], show_progress="hidden")
    model.change(**show_card, api_name="model_card")
    refresh.click(**show_card, api_visibility="private")
    f.download_btn.click(**said_beside(bind(export_model, library), [f.download], f.status),
                         inputs=[session, model, f.with_state], api_name="export_model")
    uploaded = f.upload.upload(**said_beside(bind(import_model, library), [f.status, table, model, f.upload], f.status),
                               inputs=[session, f.upload], api_name="import_model", **IN_WORKERS)
    fetched = f.hub_btn.click(**said_beside(bind(import_from_hub, library), [f.status, table, model], f.status),
                              inputs=[session, f.hub_repo], api_name="import_from_hub", concurrency_limit=1,
                              concurrency_id="hub-import")
    deleted = f.delete_btn.click(**said_beside(bind(delete_model, library), [f.status, table, model, f.confirm],
                                           f.status), inputs=[session, model, f.confirm], api_name="delete_model")
    # a tick is for one model and one press: a refused delete, or another model picked, asks again
    unticked = dict(fn=untick, inputs=None, outputs=[f.confirm], queue=False, show_progress="hidden",
                    api_visibility="private")
    deleted.then(**unticked)
    model.change(**unticked)
    # the zip of the model picked before is not offered for this one
    model.change(lambda: None, None, [f.download], queue=False, show_progress="hidden", api_visibility="private")
    return ModelsTab(table, model, [uploaded, fetched, deleted], {**show_card, "api_visibility": "private"})
