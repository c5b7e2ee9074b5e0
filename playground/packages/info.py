"""One summary of a package (direction, size, architecture, tokenizer, training, scores) from its JSON files, which
the model card, `python -m playground info` (its lines are made here), the Models tab's table and the Translate tab's
line all read."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from playground.core.model import TransformerConfig
from playground.packages.format import saved_config
from playground.packages.scores import scores_line
from playground.settings import MB


@dataclass(frozen=True)
class PackageSummary:
    """What config.json and training.json say about a package, no weights loaded. A field the files lack is None
    (each shape says it its own way: "?", 0, or nothing)."""

    name: str
    src_lang: str
    tgt_lang: str
    params: int
    model: dict  # config.json's model settings, TransformerConfig's defaults for those it leaves out
    tokenizer_kind: str
    joint: bool  # one tokenizer for both sides (config.json's tokenizer.joint)
    saved_at: str | None = None
    size_bytes: int | None = None  # the package's files and its run's snapshots
    trained: bool = False  # training.json is there (the model was trained here)
    steps: int | None = None
    epochs: float = 0.0
    wall_s: float = 0.0
    device: str | None = None
    precision: str | None = None
    data: str | None = None  # the training data in words
    train_pairs: int | None = None
    val_pairs: int | None = None
    last: dict = field(default_factory=dict)  # the final validation (the one the weights are from)
    best: dict = field(default_factory=dict)  # the best validation, by early_stop_metric
    early_stop_metric: str = "bleu"
    imported: dict = field(default_factory=dict)  # where a model made elsewhere came from (config.json's "imported")
    base: dict = field(default_factory=dict)  # a fine-tuned model's base: its name and origin (training.json)

    @property
    def direction(self) -> str:
        return f"{self.src_lang} → {self.tgt_lang}"

    @property
    def base_words(self) -> str:
        """The base a fine-tuned model started from, in words ("" when it started from new weights)."""
        if not self.base:
            return ""
        said = [f"from {self.base['origin']}" if self.base.get("origin") else "",
                f"license: {self.base['license']}" if self.base.get("license") else ""]
        return self.base["name"] + (f" ({'; '.join(s for s in said if s)})" if any(said) else "")

    @property
    def layers(self) -> str:
        return f"{self.model['n_encoder_layers']}+{self.model['n_decoder_layers']} layers"


MODEL_DEFAULTS = {f.name: f.default for f in fields(TransformerConfig)}


def summarize(config: dict, training: dict | None, name: str | None = None,
              size_bytes: int | None = None) -> PackageSummary:
    """The summary of a package's config.json and training.json (schema-checked, so every field has its type);
    `name` is the folder's (config.json's own when not given)."""
    training = training or {}
    data = training.get("data") or {}
    return PackageSummary(
        name=config.get("name", "") if name is None else name, src_lang=config["src_lang"],
        tgt_lang=config["tgt_lang"], params=config["num_parameters"], model={**MODEL_DEFAULTS, **config["model"]},
        tokenizer_kind=config["tokenizer"]["kind"], joint=config["tokenizer"]["joint"],
        saved_at=config.get("saved_at"), size_bytes=size_bytes, trained=bool(training),
        steps=training.get("steps"), epochs=training.get("epochs", 0), wall_s=training.get("wall_s", 0),
        device=training.get("device"), precision=training.get("precision"), data=data.get("description"),
        train_pairs=data.get("train_pairs"), val_pairs=data.get("val_pairs"), last=training.get("last") or {},
        best=training.get("best") or {},
        early_stop_metric=saved_config(training).get("early_stop_metric", "bleu"),
        imported=config.get("imported") or {}, base=training.get("base") or {})


def summary_of(info: dict) -> PackageSummary:
    """The summary of a playground.packages.store.package_info dict."""
    return summarize(info["config"], info["training"], info["name"], info["size_bytes"])


def known(value, unknown: str = "?"):
    """A field of the summary, or what stands for it when the files lack it."""
    return unknown if value is None else value


def info_lines(s: PackageSummary) -> list[str]:
    """The package as `python -m playground info` prints it."""
    m = s.model
    vocabulary = f"{m['src_vocab_size']:,}" if s.joint else f"{m['src_vocab_size']:,}/{m['tgt_vocab_size']:,}"
    lines = [f"{s.name}: {s.direction}, {s.params:,} parameters, {(s.size_bytes or 0) / MB:.1f} MB on disk",
             f"  d_model {m['d_model']}, {m['n_heads']} heads, {s.layers}, ff {m['d_ff']}, {m['activation']}, "
             f"{m['max_positions']} {m['positional_encoding']} positions, {m['norm_placement']}-LN, "
             f"{'tied' if m['tie_embeddings'] else 'untied'} embeddings",
             f"  tokenizer {s.tokenizer_kind} ({'joint' if s.joint else 'separate'}), vocabulary {vocabulary}"]
    if s.base:
        lines.append(f"  fine-tuned from {s.base_words}")
    if s.trained:
        lines.append(f"  trained {known(s.steps)} steps ({s.epochs:.2f} epochs) in "
                     f"{s.wall_s:.0f} s on {known(s.device)} [{known(s.precision)}], data: {known(s.data)} "
                     f"({s.train_pairs or 0:,} pairs)")
        lines += [f"  {label}: {scores_line(record)}" for label, record in (("last", s.last), ("best", s.best))
                  if record]
    return lines
