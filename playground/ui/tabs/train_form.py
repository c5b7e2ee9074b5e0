"""The Train tab's form, made from the settings' declaration (playground.training.form.FIELDS): one panel per group,
one control per field, keyed by setting name. A number is a gr.Number without Gradio's own minimum and maximum (the
form's notes refuse a value beside its field instead of a corner toast), a choice a radio or a dropdown, a switch a
checkbox."""

from __future__ import annotations

import gradio as gr

from playground.packages.settings import GROUPS, Setting
from playground.training.form import FIELDS

GROUP_TITLES = {"model": "**Model**", "tokenizer": "**Tokenizer**", "optimisation": "**Optimisation**",
                "budget": "**Budget and validation** (the first budget reached ends the run; 0 = not set)",
                "machine": "**Machine**"}
ROW = 6  # controls per row: readable at 1024 px


def form_controls(values: dict) -> dict:
    """One component per form field, grouped; keys are the field names."""
    c = {}
    for group in GROUPS:
        names = [name for name, s in FIELDS.items() if s.group == group]
        gr.Markdown(GROUP_TITLES[group])
        for start in range(0, len(names), ROW):
            with gr.Row():
                for name in names[start:start + ROW]:
                    c[name] = control(FIELDS[name], values[name])
    return c


def control(s: Setting, value) -> gr.components.Component:
    info = s.help or None
    if s.kind is bool:
        return gr.Checkbox(value, label=s.label, info=info)
    if s.choices:
        choices = [c for c in s.choices if c == value or available(s.name, c)]
        kind = gr.Radio if len(s.choices) <= 3 else gr.Dropdown
        return kind(choices, value=value if value in choices else choices[0], label=s.label, info=info)
    if s.kind is str:
        return gr.Textbox(value, label=s.label, info=info)
    return gr.Number(value, label=s.label, info=info, precision=0 if s.kind is int else None, step=s.step or 1)


def available(name: str, choice: str) -> bool:
    """A device is offered only where this machine has it."""
    if name != "device" or choice in ("auto", "cpu"):
        return True
    import torch

    return torch.cuda.is_available() if choice == "cuda" else torch.backends.mps.is_available()
