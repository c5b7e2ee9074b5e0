"""The Train tab's form: one field per TrainConfig setting, in groups (the model, its tokenizer, the optimisation,
the budgets and validation, then any setting the trainer gained since). Each group adds its fields to `c`, keyed by
setting name."""

from __future__ import annotations

import gradio as gr

EXTRA_LABELS = {"accumulate": "Gradient accumulation (batches per optimizer step)",
                "average_last": "Average the weights of the last K validations at the end (0 = off)"}


def form_controls(values: dict) -> dict:
    """One component per TrainConfig field (betas as two numbers), grouped; keys are the field names."""
    c = {}
    for group in (model_fields, tokenizer_fields, optimisation_fields, budget_fields, extra_fields):
        group(c, values)
    return c


def model_fields(c: dict, values: dict) -> None:
    gr.Markdown("**Model**")
    with gr.Row():
        c["n_encoder_layers"] = gr.Number(values["n_encoder_layers"], label="Encoder layers", precision=0, step=1)
        c["n_decoder_layers"] = gr.Number(values["n_decoder_layers"], label="Decoder layers", precision=0, step=1)
        c["d_model"] = gr.Number(values["d_model"], label="d_model", precision=0, step=8)
        c["n_heads"] = gr.Dropdown([1, 2, 4, 8, 16, 32], value=values["n_heads"], label="Attention heads",
                                   info="must divide d_model")
        c["d_ff"] = gr.Number(values["d_ff"], label="Feed-forward size (d_ff)", precision=0, step=64)
    with gr.Row():
        c["dropout"] = gr.Number(values["dropout"], label="Dropout", step=0.05)
        c["attention_dropout"] = gr.Number(values["attention_dropout"], label="Attention dropout", step=0.05)
        c["activation"] = gr.Radio(["relu", "gelu"], value=values["activation"], label="Activation")
        c["positional_encoding"] = gr.Radio(["sinusoidal", "learned"], value=values["positional_encoding"],
                                            label="Positional encoding")
        c["norm_placement"] = gr.Radio(["post", "pre"], value=values["norm_placement"], label="LayerNorm placement",
                                       info="post (Post-LN, the paper): normalise after adding each sublayer's "
                                            "output; pre (Pre-LN): before each sublayer, steadier at high learning "
                                            "rates")
    with gr.Row():
        c["tie_embeddings"] = gr.Checkbox(values["tie_embeddings"], label="Tie embeddings and output layer")
        c["max_len"] = gr.Number(values["max_len"], label="Max tokens per sentence", precision=0)


def tokenizer_fields(c: dict, values: dict) -> None:
    from playground.core.tokenizer import TOKENIZER_KINDS

    gr.Markdown("**Tokenizer**")
    with gr.Row():
        c["tokenizer"] = gr.Dropdown(list(TOKENIZER_KINDS), value=values["tokenizer"], label="Tokenizer kind")
        c["vocab_size"] = gr.Number(values["vocab_size"], label="Vocabulary size", precision=0)
        c["joint_vocab"] = gr.Checkbox(values["joint_vocab"], label="One joint vocabulary for both sides",
                                       info="one tokenizer and embedding table shared by source and target: words "
                                            "the languages share (names, numbers) get one vector")
        c["bpe_dropout"] = gr.Number(values["bpe_dropout"], step=0.05, label="BPE-dropout",
                                     info="bpe only: skip each merge with this chance, so words are split afresh "
                                          "each epoch (0.1 helps on small data); validation is not affected")


def optimisation_fields(c: dict, values: dict) -> None:
    from playground.training.config import OPTIMIZERS
    from playground.training.schedule import SCHEDULES

    gr.Markdown("**Optimisation**")
    with gr.Row():
        c["optimizer"] = gr.Radio(list(OPTIMIZERS), value=values["optimizer"], label="Optimizer")
        c["lr"] = gr.Number(values["lr"], label="Learning rate", info="noam: a scale on d_model^-0.5; else the peak",
                            step=1e-4)
        c["beta1"] = gr.Number(values["beta1"], label="Adam β1", step=0.01)
        c["beta2"] = gr.Number(values["beta2"], label="Adam β2", step=0.001)
        c["eps"] = gr.Number(values["eps"], label="Adam ε")
        c["weight_decay"] = gr.Number(values["weight_decay"], label="Weight decay", step=0.01)
    with gr.Row():
        c["schedule"] = gr.Dropdown(list(SCHEDULES), value=values["schedule"], label="LR schedule",
                                    info="noam: the paper's (Noam Shazeer's) warmup then 1/√step decay, scaled by "
                                         "d_model; inverse_sqrt: the same shape peaking at the learning rate; cosine: "
                                         "warmup then down to 0 at the planned end; constant")
        c["warmup_steps"] = gr.Number(values["warmup_steps"], label="Warmup steps", precision=0, step=50,
                                      info="the rate climbs for this many steps; a minutes budget shortens it to at "
                                           "most a fifth of the steps the run gets")
        c["label_smoothing"] = gr.Number(values["label_smoothing"], step=0.01, label="Label smoothing")
        c["clip_norm"] = gr.Number(values["clip_norm"], label="Gradient clip norm (0 = off)", step=0.5)
        c["batch_tokens"] = gr.Number(values["batch_tokens"], label="Batch tokens", precision=0, step=512,
                                      info="source + target tokens per batch, padding included")


def budget_fields(c: dict, values: dict) -> None:
    """The budgets, validation, early stopping and the machine."""
    import torch

    from playground.runtime.device import PRECISIONS
    from playground.training.config import EARLY_STOP_METRICS

    devices = ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else []) + (
        ["mps"] if torch.backends.mps.is_available() else [])
    gr.Markdown("**Budget and validation** (the first budget reached ends the run; 0 = not set)")
    with gr.Row():
        c["max_steps"] = gr.Number(values["max_steps"], label="Max steps", precision=0, step=100)
        c["max_epochs"] = gr.Number(values["max_epochs"], label="Max epochs", step=1)
        c["max_minutes"] = gr.Number(values["max_minutes"], label="Max minutes", step=1)
        c["eval_every"] = gr.Number(values["eval_every"], label="Validate every (steps, 0 = auto)", precision=0,
                                    step=50, info="auto: five validations spread over the run, fitted to "
                                                             "the steps a minutes budget allows")
        c["eval_sentences"] = gr.Number(values["eval_sentences"], label="Sentences decoded per validation",
                                        precision=0, step=50)
    with gr.Row():
        c["early_stop_metric"] = gr.Dropdown(list(EARLY_STOP_METRICS), value=values["early_stop_metric"],
                                             label="Early-stopping metric",
                                             info="BLEU: matching word n-grams; chrF: matching character n-grams "
                                                  "(kinder to small models); both 0–100")
        c["patience"] = gr.Number(values["patience"], label="Patience (validations, 0 = never stop early)",
                                  precision=0)
        c["device"] = gr.Dropdown(devices, value=values["device"] if values["device"] in devices else "auto",
                                  label="Device")
        c["precision"] = gr.Dropdown(list(PRECISIONS), value=values["precision"], label="Precision",
                                     info="auto measures what is fastest here; bf16 (16-bit floats) halves memory, "
                                          "but on a CPU it is often slower than fp32")
        c["seed"] = gr.Number(values["seed"], label="Seed", precision=0)


def extra_fields(c: dict, values: dict) -> None:
    """Settings the trainer gained after this form was written still get a field."""
    from playground.training.config import setting_types

    extra = {name: kind for name, kind in setting_types().items() if name not in c and kind is not tuple
             and name in values}
    if extra:  # settings the trainer gained after this form was written still get a field
        gr.Markdown("**More**")
        with gr.Row():
            for name, kind in extra.items():
                label = EXTRA_LABELS.get(name, name.replace("_", " ").capitalize())
                if kind is bool:
                    c[name] = gr.Checkbox(values[name], label=label)
                elif kind in (int, float):
                    c[name] = gr.Number(values[name], label=label, precision=0 if kind is int else None)
                else:
                    c[name] = gr.Textbox(str(values[name]), label=label)
