"""The settings of a training run as one object, TrainConfig, made from their declaration
(playground.packages.settings.SETTINGS): the run's own settings are its fields, and the model's are one nested
TransformerConfig (`cfg.model`), whose vocabulary and positions follow the tokenizer's and max_sentence_tokens
settings until the trained tokenizer gives the real sizes (model_config).

A TrainConfig is written and read flat, one value per setting name (training.json, the CLI's flags, the form, the
API): `settings()` and `TrainConfig.of(**settings)`."""

from __future__ import annotations

from dataclasses import field, make_dataclass, replace

from playground.core.model import TransformerConfig
from playground.core.sequences import model_positions
from playground.core.tokenizer import BOS_ID, EOS_ID, PAD_ID
from playground.errors import TrainingError
from playground.packages.settings import ADDED, BUDGETS, FIXED, FORM, SETTINGS, settings_problems

__all__ = ["BUDGETS", "FIXED_ON_RESUME", "MODEL_SETTINGS", "RESUME_SETTINGS", "SETTING_NAMES", "TrainConfig",
           "model_settings"]

SETTING_NAMES = tuple(SETTINGS)
# What a resumed run keeps from its package whatever it is asked: the model and its tokenizer are in the package,
# and the optimizer's kind and settings come back with its saved moments.
FIXED_ON_RESUME = tuple(name for name, s in SETTINGS.items() if s.resume == FIXED)
# What the Train tab's Resume takes from its form: budgets (added to what was done), validation and the machine.
# The other settings there show a preset, not the package, so the package's own are kept.
RESUME_SETTINGS = tuple(name for name, s in SETTINGS.items() if s.resume in (ADDED, FORM))
MODEL_SETTINGS = tuple(name for name, s in SETTINGS.items() if s.model)


def model_settings(values: dict) -> TransformerConfig:
    """The model's settings among flat `values` (the rest default) as a TransformerConfig; its vocabulary and
    positions are set from the run's settings when the TrainConfig is made."""
    shape = {name: values.get(name, SETTINGS[name].default) for name in MODEL_SETTINGS}
    vocab = int(values.get("vocab_size", SETTINGS["vocab_size"].default))
    try:
        return TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, pad_id=PAD_ID, bos_id=BOS_ID,
                                 eos_id=EOS_ID, **shape)
    except (TypeError, ValueError) as err:
        raise TrainingError(f"Invalid model settings: {err}.") from err


class RunSettings:
    """TrainConfig's methods; its fields are made from SETTINGS below."""

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        problems = settings_problems(self.settings())
        if self.max_steps is None and self.max_epochs is None and self.max_minutes is None:
            problems.append("set a budget: max steps, max epochs or max minutes")
        if not problems and self.batch_tokens < 2 * self.max_sentence_tokens:
            problems.append(f"batch tokens ({self.batch_tokens}) must hold at least one pair of the maximum "
                            f"length (2 x {self.max_sentence_tokens}); raise batch tokens or lower the maximum length")
        if self.bpe_dropout and self.tokenizer != "bpe":
            problems.append("BPE-dropout needs the bpe tokenizer")
        if problems:
            raise TrainingError("Invalid training settings: " + "; ".join(problems) + ".")
        # the model follows the run's vocabulary and sentence length (the trained tokenizer's sizes: model_config)
        self.model = replace(self.model, src_vocab_size=self.vocab_size, tgt_vocab_size=self.vocab_size,
                             joint_vocab=self.joint_vocab, max_positions=model_positions(self.max_sentence_tokens))

    def model_config(self, src_vocab: int, tgt_vocab: int, joint: bool) -> TransformerConfig:
        """The model to build once the tokenizer is trained, with its real vocabulary sizes."""
        try:
            return replace(self.model, src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, joint_vocab=joint)
        except ValueError as err:
            raise TrainingError(f"Invalid model settings: {err}.") from err

    def settings(self) -> dict:
        """Every setting by name, flat: what training.json records, the form shows and the CLI's flags set."""
        return {name: getattr(self.model if s.model else self, name) for name, s in SETTINGS.items()}

    def to_dict(self) -> dict:
        return self.settings()

    @classmethod
    def of(cls, **values) -> "TrainConfig":
        """A TrainConfig from flat settings as a person or a file gives them (form numbers are floats, flags text;
        0 = not set where a setting may be unset), the rest default; each refusal says its setting's label."""
        unknown = sorted(set(values) - set(SETTINGS))
        if unknown:
            raise TrainingError(f"Unknown training settings: {', '.join(unknown)}.")
        parsed, problems = {}, []
        for name, value in values.items():
            try:
                parsed[name] = SETTINGS[name].parse(value)
            except ValueError as err:
                problems.append(str(err))
        if problems:
            raise TrainingError("Invalid training settings: " + "; ".join(problems) + ".")
        return cls(model=model_settings(parsed), **{k: v for k, v in parsed.items() if k not in MODEL_SETTINGS})

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """A recorded config (training.json's, flat): settings it does not know (a newer version's) are left out."""
        return cls.of(**{k: v for k, v in values.items() if k in SETTINGS})


def _annotation(setting) -> object:
    kind = tuple[float, float] if setting.kind is tuple else setting.kind
    return kind | None if setting.optional else kind


TrainConfig = make_dataclass(
    "TrainConfig",
    [("model", TransformerConfig, field(default_factory=lambda: model_settings({}))),
     *[(name, _annotation(s), field(default=s.default)) for name, s in SETTINGS.items() if not s.model]],
    bases=(RunSettings,))
TrainConfig.__module__ = __name__  # where pickle finds it (ZeroGPU's calls pickle their arguments)
TrainConfig.__doc__ = ("The settings of one training run: each of SETTINGS (playground.packages.settings), the model's "
                       "nested as `model`, a TransformerConfig.")
