"""The settings of a training run (TrainConfig), which of them may change when a run is resumed, and the types of
its fields (setting_types): the one place the CLI's flags and the Train tab's form fields are made from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from playground.core.model import TransformerConfig
from playground.core.sequences import model_positions, sentence_tokens
from playground.core.tokenizer import BOS_ID, EOS_ID, PAD_ID
from playground.errors import TrainingError
from playground.limits import MAX_POSITIONS
from playground.packages.schema import TRAIN_SETTINGS, Bool, Int, List, Num, Opt, Str
from playground.training.schedule import SCHEDULES

OPTIMIZERS = ("adam", "adamw")
EARLY_STOP_METRICS = ("bleu", "chrf", "val_loss", "exact_match")
BUDGETS = ("max_steps", "max_epochs", "max_minutes")
MAX_AVERAGE_LAST = 20  # the paper averages at most the last 20 checkpoints; each snapshot is a copy on disk


@dataclass
class TrainConfig:
    # model
    d_model: int = 256
    n_heads: int = 8
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    d_ff: int = 1024
    activation: str = "relu"
    dropout: float = 0.1
    attention_dropout: float = 0.0
    positional_encoding: str = "sinusoidal"
    norm_placement: str = "post"
    tie_embeddings: bool = True
    max_len: int = 128  # tokens per sentence; longer pairs are dropped when reading the data
    # tokenizer
    tokenizer: str = "bpe"
    vocab_size: int = 8000
    joint_vocab: bool = True
    bpe_dropout: float = 0.0  # BPE-dropout on the training data, segmented afresh each epoch; 0 = off
    # optimisation
    optimizer: str = "adam"
    lr: float = 1.0  # noam: a scale on d_model^-0.5 * min(...); otherwise the peak learning rate
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    schedule: str = "noam"
    warmup_steps: int = 4000
    label_smoothing: float = 0.1
    clip_norm: float = 1.0  # 0 = no clipping
    batch_tokens: int = 4096  # source + target tokens per batch, padding included
    accumulate: int = 1  # batches per optimizer step (on each process under torchrun)
    # budgets and validation
    max_steps: int | None = None
    max_epochs: float | None = None
    max_minutes: float | None = None
    eval_every: int | None = None  # steps between validations; None = auto (schedule.eval_interval: five per run)
    eval_sentences: int = 200  # validation sentences decoded greedily for BLEU/chrF
    early_stop_metric: str = "bleu"
    patience: int | None = None  # validations without improvement before stopping; None = never
    average_last: int = 0  # at the end, average the weights of the last K validations into <out>-avg; 0 = off
    # machine
    device: str = "auto"
    precision: str = "auto"
    seed: int = 0

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        problems = []
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}")
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"optimizer must be one of {', '.join(OPTIMIZERS)}")
        if self.early_stop_metric not in EARLY_STOP_METRICS:
            problems.append(f"early-stop metric must be one of {', '.join(EARLY_STOP_METRICS)}")
        if self.max_steps is None and self.max_epochs is None and self.max_minutes is None:
            problems.append("set a budget: max steps, max epochs or max minutes")
        if self.batch_tokens < 2 * self.max_len:
            problems.append(f"batch tokens ({self.batch_tokens}) must hold at least one pair of the maximum "
                            f"length (2 x {self.max_len}); raise batch tokens or lower the maximum length")
        if (self.eval_every is not None and self.eval_every < 1) or self.warmup_steps < 0 or \
                not 0 <= self.label_smoothing < 1:
            problems.append("eval-every must be ≥ 1, warmup ≥ 0 and label smoothing in [0, 1)")
        if not (0 <= self.dropout < 1 and 0 <= self.attention_dropout < 1):
            problems.append(f"dropout and attention dropout must be in [0, 1), not {self.dropout} and "
                            f"{self.attention_dropout}")
        if not 0 <= self.bpe_dropout < 1 or (self.bpe_dropout and self.tokenizer != "bpe"):
            problems.append("BPE-dropout must be in [0, 1) and needs the bpe tokenizer")
        if self.accumulate < 1 or not 0 <= self.average_last <= MAX_AVERAGE_LAST:
            problems.append(f"accumulate must be ≥ 1 and average-last from 0 to {MAX_AVERAGE_LAST} (each one is a "
                            "copy of the weights on disk)")
        if not 1 <= self.max_len <= sentence_tokens(MAX_POSITIONS):
            problems.append(f"the maximum length must be from 1 to {sentence_tokens(MAX_POSITIONS)} tokens, not "
                            f"{self.max_len}")
        if len(self.betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.betas):
            problems.append(f"Adam's betas must be two numbers in [0, 1) (the paper: 0.9, 0.98), not "
                            f"{', '.join(map(str, self.betas))}")
        if not 0 <= self.seed < 2**63:  # torch's generators take a signed 64-bit seed
            problems.append(f"seed must be a whole number from 0 to {2**63 - 1}, not {self.seed}")
        if problems:
            raise TrainingError("Invalid training settings: " + "; ".join(problems) + ".")

    def model_config(self, src_vocab: int, tgt_vocab: int, joint: bool) -> TransformerConfig:
        try:
            return TransformerConfig(
                src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, d_model=self.d_model, n_heads=self.n_heads,
                n_encoder_layers=self.n_encoder_layers, n_decoder_layers=self.n_decoder_layers, d_ff=self.d_ff,
                activation=self.activation, dropout=self.dropout, attention_dropout=self.attention_dropout,
                positional_encoding=self.positional_encoding, norm_placement=self.norm_placement,
                joint_vocab=joint, tie_embeddings=self.tie_embeddings, max_len=model_positions(self.max_len),
                pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID)
        except ValueError as err:
            raise TrainingError(f"Invalid model settings: {err}.") from err

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


# What a resumed run keeps from its package whatever it is asked: the model and its tokenizer are in the package,
# and the optimizer's kind and settings come back with its saved moments.
FIXED_ON_RESUME = ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "activation", "dropout",
                   "attention_dropout", "positional_encoding", "norm_placement", "tie_embeddings", "max_len",
                   "tokenizer", "vocab_size", "joint_vocab", "optimizer", "betas", "eps", "weight_decay")
# What the Train tab's Resume takes from its form: budgets (added to what was done), validation and the machine.
# The other settings there show a preset, not the package, so the package's own are kept.
RESUME_SETTINGS = (*BUDGETS, "eval_every", "eval_sentences", "early_stop_metric", "patience", "average_last",
                   "device", "precision")


def setting_types() -> dict[str, type]:
    """Each TrainConfig field's type, None left out (int | None -> int): what a CLI flag or form field parses to
    (tuple: Adam's two betas). Read from the training record's schema, which declares the same fields."""
    return {name: KINDS[type(unwrap(TRAIN_SETTINGS[name]))] for name in SETTING_NAMES}


def optional_settings() -> set[str]:
    """TrainConfig fields that may be None (budgets, patience): "not set"."""
    return {name for name in SETTING_NAMES if isinstance(TRAIN_SETTINGS[name], Opt)}


def unwrap(check: object) -> object:
    return check.inner if isinstance(check, Opt) else check


KINDS = {Int: int, Num: float, Str: str, Bool: bool, List: tuple}  # schema check -> the Python type it admits
SETTING_NAMES = tuple(f.name for f in fields(TrainConfig))
