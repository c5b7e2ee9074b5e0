"""Models tab, right column: download a package as 🤗 transformers or CTranslate2 zips, and push it to the Hub.

Sign-in: on a Space with OAuth enabled (README front matter `hf_oauth: true`, `hf_oauth_scopes: [contribute-repos]`,
and `gradio[oauth]` installed) a gr.LoginButton gives the visitor's own token, which may create repos in their
account; elsewhere the HF_TOKEN environment variable of the person running the app is used, never on a shared app
(any visitor could push with it). No `from __future__ import annotations` here: Gradio reads the gr.OAuthToken and
gr.OAuthProfile annotations of the push handler to inject the token and the username."""

import importlib.util
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from playground.export.optional import check_quantization
from playground.serving import jobs
from playground.serving.library import Library
from playground.ui.handlers import IN_WORKERS, bind, cleared_export, download_dir, job_call, readable, said_beside
from playground.ui.pickers import package_folder
from playground.ui.state import Session, oauth_available

# the export parses the package's tokenizer and loads and converts its weights: in a job process of its own
exported_in_job = job_call(jobs.export_archive, "Export a smaller model.")


def export_zip(folder: Path, fmt: str, quantization: str) -> str:
    """Export the package to `fmt` and zip it (the zip holds one folder) into the download folder of this package
    and format (handlers.download_dir), which every visitor who may see the package shares: the next export replaces
    the zip whole. Each export works in a folder of its own there, removed afterwards, also when the job failed or
    was stopped."""
    dest = download_dir(str(folder.resolve()), fmt, quantization, empty=False)
    scratch = tempfile.mkdtemp(prefix=".export-", dir=dest)
    try:
        return exported_in_job(str(folder), fmt, quantization, scratch, str(dest))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------
# Handlers (build binds `library`)


@readable
def transformers_zip(library: Library, session: Session, name: str):
    """Zip the package exported for 🤗 transformers (AutoModelForSeq2SeqLM + AutoTokenizer)."""
    return export_zip(package_folder(library, session, name), "transformers", "float32")


@readable
def ctranslate2_zip(library: Library, session: Session, name: str, quantization: str):
    """Zip the package exported for CTranslate2 (float32 or int8 weights)."""
    check_quantization(quantization)  # a client may send none: refused before a folder is named after it
    return export_zip(package_folder(library, session, name), "ctranslate2", quantization)


@readable
def push(library: Library, session: Session, name: str, repo_id: str, private: bool, with_transformers: bool,
         license: str, oauth_token: gr.OAuthToken | None = None, profile: gr.OAuthProfile | None = None):
    """Upload the package (and optionally its transformers export) to a new model repo on the Hub; a bare name
    goes to the signed-in visitor's account."""
    from playground.serving.hub import check_scope, hub_token, push_package

    if oauth_token is not None:
        check_scope(oauth_token.scope)
    token = hub_token(oauth_token.token if oauth_token else None, shared=library.shared)
    url = push_package(package_folder(library, session, name), repo_id, token, private=private,
                       with_transformers=with_transformers, license=license.strip() or None,
                       namespace=profile.username if profile is not None else None)
    return f"✅ Pushed to [{url}]({url})."


# ----------------------------------------------------------------------------------------------------------
# Layout and wiring


def hub_accordion(library: Library) -> SimpleNamespace:
    """The push form, with the sign-in this app offers (or why it has none)."""
    h = SimpleNamespace()
    with gr.Accordion("Share on the 🤗 Hub", open=False):
        if oauth_available() and library.shared:
            gr.Markdown("Sign in with the button at the top of the page: the push goes to your own account.")
        elif oauth_available():
            gr.LoginButton()
        elif library.shared:
            gr.Markdown("Pushing needs Hugging Face sign-in, which this app has not enabled.")
        else:
            gr.Markdown("Uses the `HF_TOKEN` environment variable (a token with write access) of the person "
                        "running the app.")
        h.repo_id = gr.Textbox(label="Repo id (a new repo)", placeholder="model-name, or your-user-name/model-name")
        with gr.Row():
            h.private = gr.Checkbox(True, label="Private")
            h.with_transformers = gr.Checkbox(importlib.util.find_spec("transformers") is not None,
                                              label="Add the 🤗 transformers export (in transformers/)")
        h.license = gr.Textbox(label="License (optional, e.g. apache-2.0)", max_lines=1)
        h.push_btn = gr.Button("⬆ Push to the Hub")
        h.pushed = gr.Markdown()
    return h


def build(session: gr.State, library: Library, model: gr.Dropdown) -> None:
    with gr.Row():
        hf_btn = gr.Button("⬇ 🤗 transformers zip", size="sm")
        ct2_btn = gr.Button("⬇ CTranslate2 zip", size="sm")
    quantization = gr.Radio(["float32", "int8"], value="int8", label="CTranslate2 weights")
    exported = gr.File(label="Export zip", interactive=False, height=90)
    export_note = gr.Markdown()
    h = hub_accordion(library)

    hf_btn.click(**said_beside(bind(transformers_zip, library), [exported], export_note), inputs=[session, model],
                 api_name="export_transformers", **IN_WORKERS)
    ct2_btn.click(**said_beside(bind(ctranslate2_zip, library), [exported], export_note),
                  inputs=[session, model, quantization], api_name="export_ctranslate2", **IN_WORKERS)
    model.change(cleared_export, None, [exported, export_note], queue=False, show_progress="hidden",
                 api_visibility="private")
    push_inputs = [session, model, h.repo_id, h.private, h.with_transformers, h.license]
    h.push_btn.click(**said_beside(bind(push, library), [h.pushed], h.pushed), inputs=push_inputs,
                     api_name="push_to_hub")
