"""Every setting of a training run, declared once: its type, default, range, label, help, form group, what a resumed
run may do with it and whether it belongs to the model. The rest is made from this table: TrainConfig and its nested
TransformerConfig (playground.training.config), the Train tab's fields and their checks (playground.training.form,
playground.ui.tabs.train_form), the CLI's flags (playground.cli.train), the training record's schema
(playground.packages.schema) and the resume rules (playground.training.checkpoint).

It lives with the package format because training.json records these settings by name; the training layer above
builds on it. Each refusal is worded here once (`problem`), so the form, the API and the CLI say the same words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from playground import limits
from playground.core.model import ACTIVATIONS as MODEL_ACTIVATIONS
from playground.core.sequences import sentence_tokens
from playground.core.tokenizer import TOKENIZER_KINDS
from playground.runtime.device import PRECISIONS
from playground.runtime.memory import tokenizer_training_bytes
from playground.settings import GB

ACTIVATIONS = tuple(MODEL_ACTIVATIONS)  # relu (the paper), gelu, swish (Marian's OPUS-MT models)
POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
NORM_PLACEMENTS = ("post", "pre")
OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("noam", "inverse_sqrt", "cosine", "constant")
EARLY_STOP_METRICS = ("auto", "bleu", "chrf", "val_loss", "exact_match")  # auto: training.evaluation.judging_metric
DEVICES = ("auto", "cpu", "cuda", "mps")
MAX_VOCAB = 1_000_000  # the largest vocabulary a package may hold (packages.schema); its tokenizer trains in ~70 MB
MAX_AVERAGE_LAST = 20  # the paper averages at most the last 20 checkpoints; each snapshot is a copy on disk
MAX_SEED = 2**63 - 1  # torch's generators take a signed 64-bit seed

# What a resumed run does with a setting
FIXED = "fixed"  # the package's own, always: the model, its tokenizer, the optimizer whose moments were saved
ADDED = "added"  # a budget: what is given is added to what the package has done
FORM = "form"  # the Train tab's Resume takes it from the form (the CLI when given): validation and the machine
KEPT = "kept"  # the package's own unless given on the command line (the form shows a preset there, not the package)

GROUPS = ("model", "tokenizer", "optimisation", "budget", "machine")  # the Train form's panels, in order


@dataclass(frozen=True)
class Setting:
    name: str
    kind: type  # int, float, str, bool, or tuple (Adam's two betas, each a float)
    default: object
    group: str  # one of GROUPS
    label: str  # the form's label; refusals start with it
    help: str = ""
    low: float | None = None
    high: float | Callable[[], float] | None = None  # a callable: a limit the operator sets (playground.limits)
    above_low: bool = False  # the lowest value itself is refused (a learning rate must be above 0)
    below_high: bool = False  # the highest value itself is refused (dropout below 1)
    choices: tuple = ()
    optional: bool = False  # None = not set, written 0 on the form and the command line
    resume: str = FIXED
    model: bool = False  # a field of the model's TransformerConfig (the rest are the run's)
    step: float | None = None  # the form's spin step
    cost: Callable[[float], str] | None = None  # what an out-of-range value would cost, in words

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def highest(self) -> float | None:
        return self.high() if callable(self.high) else self.high

    def range_text(self) -> str:
        """"from 1 to 32", "above 0", "from 0 to below 1", "0 (not set) or at least 1"."""
        low, high = self.low, self.highest()
        if high is None:
            return f"above {shown(low)}" if self.above_low else f"at least {shown(low)}"
        if self.above_low:
            return f"above {shown(low)} and {'below' if self.below_high else 'at most'} {shown(high)}"
        return f"from {shown(low)} to {'below ' if self.below_high else ''}{shown(high)}"

    def problem(self, value: object) -> str:
        """What is wrong with `value` for this setting, in words the form, the API and the CLI share ("" when
        nothing). None is fine for an optional setting; 0 means "not set" there too."""
        if value is None:
            return "" if self.optional else "is empty"
        if self.kind is tuple:
            items = list(value) if isinstance(value, (list, tuple)) else [value]
            if len(items) != 2:
                return f"must be two numbers, not {value!r}"
            return next((found for item in items if (found := self.number_problem(item, float))), "")
        if self.kind is bool:
            return "" if isinstance(value, bool) else f"must be true or false, not {value!r}"
        if self.kind is str:
            if not isinstance(value, str):
                return f"must be text, not {value!r}"
            return f"must be one of {', '.join(self.choices)}, not {value!r}" if self.choices and \
                value not in self.choices else ""
        if self.optional and not isinstance(value, bool) and value == 0:
            return ""
        return self.number_problem(value, self.kind)

    def number_problem(self, value: object, kind: type) -> str:
        try:
            if isinstance(value, bool):
                raise ValueError
            number = value if isinstance(value, int) else float(value)  # an int exactly: seeds reach 2**63 - 1
            if not math.isfinite(number):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            return f"must be a number, not {value!r}"
        if kind is int and number != int(number):
            return f"must be a whole number, not {shown(number)}"
        low, high = self.low, self.highest()
        too_low = low is not None and (number <= low if self.above_low else number < low)
        too_high = high is not None and (number >= high if self.below_high else number > high)
        if too_low or too_high:
            optional = "0 (not set) or " if self.optional else ""
            cost = f": {self.cost(number)}" if self.cost and too_high else ""
            return f"must be {optional}{self.range_text()}, not {shown(number)}{cost}"
        return ""

    def parse(self, value: object) -> object:
        """A checked value as this setting's type (form numbers arrive as floats, CLI flags as text); raises
        ValueError with the problem's words."""
        found = self.problem(value)
        if found:
            raise ValueError(f"{self.label} {found}")
        if value is None or self.kind in (str, bool):
            return value
        if self.kind is tuple:
            return tuple(float(v) for v in value)
        number = value if isinstance(value, int) else float(value)
        if self.optional and number == 0:
            return None
        return int(number) if self.kind is int else float(number)


def shown(number: float) -> str:
    """A number as people read it: 1,000,000,000 (not 1e+09), 0.0001, -1."""
    return f"{int(number):,}" if number == int(number) and abs(number) < 1e24 else f"{number:g}"


def tokenizer_cost(vocab_size: float) -> str:
    return f"training its tokenizer alone would reserve about {tokenizer_training_bytes(int(vocab_size)) / GB:,.1f} GB"


def _sentence_tokens_limit() -> int:
    return sentence_tokens(limits.max_positions())


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    # the model (TransformerConfig's fields)
    Setting("n_encoder_layers", int, 3, "model", "Encoder layers", "N of §3.1: encoder layers stacked",
            low=1, high=limits.max_layers, model=True),
    Setting("n_decoder_layers", int, 3, "model", "Decoder layers", "decoder layers stacked",
            low=1, high=limits.max_layers, model=True),
    Setting("d_model", int, 256, "model", "d_model", "the width of every token's vector (the paper: 512)",
            low=4, step=8, model=True),
    Setting("n_heads", int, 8, "model", "Attention heads", "must divide d_model", low=1, high=limits.max_heads,
            model=True),
    Setting("d_ff", int, 1024, "model", "Feed-forward size (d_ff)", "the feed-forward layer's hidden width "
            "(the paper: 2048, four times d_model)", low=1, step=64, model=True),
    Setting("dropout", float, 0.1, "model", "Dropout", "on embeddings and after each sublayer (the paper: 0.1)",
            low=0, high=1, below_high=True, step=0.05, model=True),
    Setting("attention_dropout", float, 0.0, "model", "Attention dropout", "on the attention weights",
            low=0, high=1, below_high=True, step=0.05, model=True),
    Setting("activation", str, "relu", "model", "Activation", choices=ACTIVATIONS, model=True),
    Setting("positional_encoding", str, "sinusoidal", "model", "Positional encoding", choices=POSITIONAL_ENCODINGS,
            model=True),
    Setting("norm_placement", str, "post", "model", "LayerNorm placement",
            "post (Post-LN, the paper): normalise after adding each sublayer's output; pre (Pre-LN): before each "
            "sublayer, steadier at high learning rates", choices=NORM_PLACEMENTS, model=True),
    Setting("tie_embeddings", bool, True, "model", "Tie embeddings and output layer", model=True),
    Setting("max_sentence_tokens", int, 128, "model", "Max tokens per sentence",
            "longer pairs are dropped when the data is read; the model gets two positions more (<bos>, <eos>)",
            low=1, high=_sentence_tokens_limit),
    # its tokenizer
    Setting("tokenizer", str, "bpe", "tokenizer", "Tokenizer kind", choices=TOKENIZER_KINDS),
    Setting("vocab_size", int, 8000, "tokenizer", "Vocabulary size",
            "tokens the tokenizer learns (the paper: 37,000 shared); each is a row of d_model weights",
            low=8, high=MAX_VOCAB, cost=tokenizer_cost),
    Setting("joint_vocab", bool, True, "tokenizer", "One joint vocabulary for both sides",
            "one tokenizer and embedding table shared by source and target: words the languages share (names, "
            "numbers) get one vector"),
    Setting("bpe_dropout", float, 0.0, "tokenizer", "BPE-dropout",
            "bpe only: skip each merge with this chance, so words are split afresh each epoch (0.1 helps on small "
            "data); validation is not affected", low=0, high=1, below_high=True, step=0.05, resume=KEPT),
    # the optimisation
    Setting("optimizer", str, "adam", "optimisation", "Optimizer", choices=OPTIMIZERS),
    Setting("lr", float, 1.0, "optimisation", "Learning rate", "noam: a scale on d_model^-0.5; else the peak",
            low=0, above_low=True, step=1e-4, resume=KEPT),
    Setting("betas", tuple, (0.9, 0.98), "optimisation", "Adam β1, β2",
            "how much of the past gradients' mean and square Adam keeps (the paper: 0.9, 0.98)",
            low=0, high=1, below_high=True),
    Setting("eps", float, 1e-9, "optimisation", "Adam ε", "added to Adam's denominator (the paper: 1e-9)",
            low=0, above_low=True),
    Setting("weight_decay", float, 0.0, "optimisation", "Weight decay", low=0, step=0.01),
    Setting("schedule", str, "noam", "optimisation", "LR schedule",
            "noam: the paper's (Noam Shazeer's) warmup then 1/√step decay, scaled by d_model; inverse_sqrt: the same "
            "shape peaking at the learning rate; cosine: warmup then down to 0 at the planned end; constant",
            choices=SCHEDULES, resume=KEPT),
    Setting("warmup_steps", int, 4000, "optimisation", "Warmup steps",
            "the rate climbs for this many steps; a minutes budget shortens it to at most a fifth of the steps the "
            "run gets", low=0, step=50, resume=KEPT),
    Setting("label_smoothing", float, 0.1, "optimisation", "Label smoothing", "ε_ls of §5.4 (the paper: 0.1)",
            low=0, high=1, below_high=True, step=0.01, resume=KEPT),
    Setting("clip_norm", float, 1.0, "optimisation", "Gradient clip norm (0 = off)", low=0, step=0.5, resume=KEPT),
    Setting("batch_tokens", int, 4096, "optimisation", "Batch tokens",
            "source + target tokens per batch, padding included", low=16, step=512, resume=KEPT),
    Setting("accumulate", int, 1, "optimisation", "Gradient accumulation (batches per optimizer step)",
            "on each process under torchrun", low=1, resume=KEPT),
    # budgets and validation
    Setting("max_steps", int, None, "budget", "Max steps", "stop after this many optimizer steps", low=1,
            optional=True, step=100, resume=ADDED),
    Setting("max_epochs", float, None, "budget", "Max epochs", "stop after this many passes over the data", low=0,
            above_low=True, optional=True, step=1,
            resume=ADDED),
    Setting("max_minutes", float, None, "budget", "Max minutes", "stop after this many minutes", low=0,
            above_low=True, optional=True, step=1,
            resume=ADDED),
    Setting("eval_every", int, None, "budget", "Validate every (steps, 0 = auto)",
            "auto: five validations spread over the run, fitted to the steps a minutes budget allows",
            low=1, optional=True, step=50, resume=FORM),
    Setting("eval_sentences", int, 200, "budget", "Sentences decoded per validation",
            "validation sentences translated greedily for BLEU, chrF and exact match", low=1, high=100_000, step=50,
            resume=FORM),
    Setting("early_stop_metric", str, "auto", "budget", "Early-stopping metric",
            "the score that picks the best validation and stops a run early. BLEU: matching word n-grams; chrF: "
            "matching character n-grams (kinder to small models and single words); both 0–100. auto: BLEU, or "
            "chrF where the references are too short for BLEU (under four words, where it reads 0)",
            choices=EARLY_STOP_METRICS, resume=FORM),
    Setting("patience", int, None, "budget", "Patience (validations, 0 = never stop early)", low=1, optional=True,
            resume=FORM),
    Setting("average_last", int, 0, "budget", "Average the weights of the last K validations at the end (0 = off)",
            low=0, high=MAX_AVERAGE_LAST, resume=FORM),
    # the machine
    Setting("device", str, "auto", "machine", "Device", choices=DEVICES, resume=FORM),
    Setting("precision", str, "auto", "machine", "Precision",
            "auto measures what is fastest here; bf16 (16-bit floats) halves memory, but on a CPU it is often slower "
            "than fp32", choices=PRECISIONS, resume=FORM),
    Setting("seed", int, 0, "machine", "Seed", "the same seed, data and settings train the same model",
            low=0, high=MAX_SEED, resume=KEPT),
)}
BUDGETS = tuple(name for name, s in SETTINGS.items() if s.resume == ADDED)


def settings_problems(values: dict) -> list[str]:
    """Each given setting's problem, with its label ("Learning rate must be above 0, not -1")."""
    return [f"{SETTINGS[name].label} {found}" for name, value in values.items()
            if name in SETTINGS and (found := SETTINGS[name].problem(value))]
