"""The model pickers the tabs share: which packages a session may use, its dropdowns, the folder of the one picked."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from playground.errors import PlaygroundError
from playground.serving.library import Library
from playground.ui.caches import package_info
from playground.ui.handlers import bind, readable
from playground.ui.state import Session, visitor_of

DEMO_MODEL = "demo-en-de"


def model_names(library: Library, session: Session | None) -> list[str]:
    """The packages this session may use, newest first."""
    return library.names(visitor_of(library, session))


def shown(library: Library, session: Session | None, name: str) -> str:
    """A package's name as the page shows it to this session: the visitor's own without their code (shared mode:
    Library.label; the code only keeps visitors' names apart on disk)."""
    return library.label(name, visitor_of(library, session))


def labelled(library: Library, session: Session | None, names: list[str]) -> list[tuple[str, str]]:
    """A picker's choices: each package by its shown name, picked by its whole name."""
    return [(shown(library, session, name), name) for name in names]


def default_model(names: list[str], keep: str | None = None) -> str | None:
    """`keep` if it still exists, else the demo model if present, else the newest package (None when there is none)."""
    if keep in names:
        return keep
    if DEMO_MODEL in names:
        return DEMO_MODEL
    return names[0] if names else None


def model_dropdown(library: Library, session: Session, keep: str | None = None, names: list[str] | None = None) -> dict:
    """A gr.update for a model picker: fresh choices (`names` when the caller has listed them already), the
    selection kept when possible."""
    names = model_names(library, session) if names is None else names
    return gr.update(choices=labelled(library, session, names), value=default_model(names, keep))


def refreshed_picker(library: Library, session: Session, keep: str | None = None) -> dict:
    # The ↻ button's handler: the picker's choices listed afresh, `keep` selected where it still exists. No
    # docstring: it would become the API description of every picker's endpoint, which has none.
    return model_dropdown(library, session, keep)


def model_picker(library: Library, session: gr.State, api_name: str):
    """The model dropdown and its ↻ button, in a row of the caller's layout; ↻ refreshes the choices (newest
    first, the selection kept where it still exists). Returns (dropdown, the refresh event to chain on)."""
    names = model_names(library, None)
    with gr.Row():
        model = gr.Dropdown(names, value=default_model(names), label="Model", scale=4,
                            allow_custom_value=True)
        refresh = gr.Button("↻", scale=0, min_width=40)
    event = refresh.click(readable(bind(refreshed_picker, library)), [session, model], [model], api_name=api_name,
                          show_progress="hidden")
    return model, event


def package_folder(library: Library, session: Session | None, name: str | None) -> Path:
    """The folder of a picker's package; PackageError when none is chosen, it is gone or it is somebody else's
    (the same message: another visitor's models do not exist for this one)."""
    return library.folder(name, visitor_of(library, session))


def picked_shape(library: Library, session: Session | None, name: str | None) -> dict | None:
    """The model settings (config.json's "model": layers, heads, positions) of a picker's package, read from its
    JSON only; None when there is none to read (the handler it is picked for says why)."""
    try:
        return package_info(package_folder(library, session, name))["config"]["model"]
    except PlaygroundError:
        return None
