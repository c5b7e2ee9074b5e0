"""The shapes a package's JSON files must have (types, ranges, nesting depth), checked at import and at every read,
so one hostile or broken file is refused with the field's name instead of breaking a listing, a card or the app.

A schema is written with a few small classes: Int/Num (ranges), Str (length), Bool, Opt (None allowed), List (of
one schema), Obj (named fields, some required; other keys are allowed only where `extra` says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from playground.errors import PackageError
from playground.limits import MAX_POSITIONS, max_attention_cells
from playground.packages.settings import MAX_VOCAB, SETTINGS

MAX_DEPTH = 16  # the deepest real file (training.json's attention probes) nests 5 levels


class Invalid(Exception):
    """A value that does not fit; `where` is its path in the document (model.d_model, history.loss[3])."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}" if where else problem)


def _join(where: str, key: str | int) -> str:
    return f"{where}[{key}]" if isinstance(key, int) else (f"{where}.{key}" if where else key)


@dataclass(frozen=True)
class Int:
    lo: int = 0
    hi: int = 2**62

    def check(self, value, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(where, f"must be a whole number, not {type(value).__name__}")
        if not self.lo <= value <= self.hi:
            raise Invalid(where, f"must be between {self.lo:,} and {self.hi:,}, not {value:,}")

    def all_fit(self, values: list) -> bool:
        """Whether every value fits, at C speed (a curve of a million steps); False sends List to the slow check,
        which names the first value that does not."""
        return set(map(type, values)) <= {int} and (not values or self.lo <= min(values) and max(values) <= self.hi)


@dataclass(frozen=True)
class Num:
    lo: float = float("-inf")
    hi: float = float("inf")

    def check(self, value, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(where, f"must be a number, not {type(value).__name__}")
        if value == value and not self.lo <= value <= self.hi:  # NaN is a legal JSON record of a diverged loss
            raise Invalid(where, f"must be between {self.lo} and {self.hi}, not {value}")

    def all_fit(self, values: list) -> bool:
        """As Int.all_fit; a range is checked value by value (NaN passes it)."""
        unbounded = self.lo == float("-inf") and self.hi == float("inf")
        return set(map(type, values)) <= {int, float} and unbounded


@dataclass(frozen=True)
class Str:
    max_chars: int = 1000

    def check(self, value, where: str) -> None:
        if not isinstance(value, str):
            raise Invalid(where, f"must be text, not {type(value).__name__}")
        if len(value) > self.max_chars:
            raise Invalid(where, f"is {len(value):,} characters long; at most {self.max_chars:,}")


@dataclass(frozen=True)
class Bool:
    def check(self, value, where: str) -> None:
        if not isinstance(value, bool):
            raise Invalid(where, f"must be true or false, not {type(value).__name__}")


@dataclass(frozen=True)
class Opt:
    inner: object

    def check(self, value, where: str) -> None:
        if value is not None:
            self.inner.check(value, where)


@dataclass(frozen=True)
class List:
    item: object
    max_items: int = 1_000_000

    def check(self, value, where: str) -> None:
        if not isinstance(value, list):
            raise Invalid(where, f"must be a list, not {type(value).__name__}")
        if len(value) > self.max_items:
            raise Invalid(where, f"has {len(value):,} items; at most {self.max_items:,}")
        if isinstance(self.item, (Int, Num)) and self.item.all_fit(value):
            return
        for i, item in enumerate(value):
            self.item.check(item, _join(where, i))


FREE_NODES = 10_000  # values in a free-form part of a file (a field of unknown shape, the keys a schema does not name)


def nodes(value, limit: int) -> int:
    """The number of JSON values in `value` (itself included), counted up to just past `limit`, without recursion."""
    count, stack = 0, [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


@dataclass(frozen=True)
class Anything:
    """Any JSON value of at most max_nodes values (the depth is checked for the whole document)."""

    max_nodes: int = FREE_NODES

    def check(self, value, where: str) -> None:
        if nodes(value, self.max_nodes) > self.max_nodes:
            raise Invalid(where, f"holds more than {self.max_nodes:,} values")


@dataclass(frozen=True)
class Obj:
    fields: dict
    required: frozenset = field(default_factory=frozenset)
    extra: bool = True  # keys not in `fields` are allowed (and not checked)

    def check(self, value, where: str) -> None:
        if not isinstance(value, dict):
            raise Invalid(where, f"must be an object, not {type(value).__name__}")
        missing = sorted(self.required - value.keys())
        if missing:
            raise Invalid(where, f"lacks {', '.join(missing)}")
        free = 0  # values under the keys this schema does not name: free-form, so bounded in size
        for key, item in value.items():
            if key in self.fields:
                self.fields[key].check(item, _join(where, key))
            elif not self.extra:
                raise Invalid(where, f"has an unknown field {key!r}")
            else:
                free += nodes(item, FREE_NODES) + 1
                if free > FREE_NODES:
                    raise Invalid(where, f"holds more than {FREE_NODES:,} values in fields of unknown purpose "
                                         f"({key!r} among them)")


@dataclass(frozen=True)
class Probe:
    """One validation's attention probe: `cross`, [layers, target positions, source positions] of numbers (the
    mean over heads), rectangular, with a label per position, and at most max_attention_cells() weights: what the
    trainer records (playground.core.attention_maps cuts a pair to that), so the Attention tab draws it in bounded
    time. Checked from the lists' lengths before a number is looked at."""

    def check(self, value, where: str) -> None:
        if not isinstance(value, dict) or "cross" not in value:
            raise Invalid(where, "must be an object with the maps in `cross`")
        PROBE_FIELDS.check({k: v for k, v in value.items() if k != "cross"}, where)
        cross, where = value["cross"], _join(where, "cross")
        if not isinstance(cross, list) or not cross or not all(isinstance(m, list) and m for m in cross):
            raise Invalid(where, "must be a list of maps, one per layer")
        rows = [row for layer in cross for row in layer]
        if not all(isinstance(row, list) for row in rows) or len({len(layer) for layer in cross}) > 1 or len(
                {len(row) for row in rows}) > 1:
            raise Invalid(where, "must hold maps of one shape, a list of numbers per target position")
        layers, targets, sources = len(cross), len(cross[0]), len(rows[0])
        allowed = max_attention_cells()
        if layers * targets * sources > allowed:
            raise Invalid(where, f"holds {layers:,} x {targets:,} x {sources:,} attention weights; at most "
                                 f"{allowed:,} are drawn here (the operator sets PLAYGROUND_MAX_ATTENTION_CELLS)")
        if not all(set(map(type, row)) <= {int, float} for row in rows):
            raise Invalid(where, "must hold numbers")
        if (len(value["src_tokens"]), len(value["tgt_tokens"])) != (sources, targets):
            raise Invalid(where, f"has {targets} x {sources} positions but {len(value['tgt_tokens'])} target and "
                                 f"{len(value['src_tokens'])} source labels")


def depth(value) -> int:
    """Nesting depth of a JSON value, without recursion (a hostile file may nest thousands of levels); a list of
    a million numbers is looked through at C speed."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if children:
            deepest = max(deepest, level + 1)
            if not set(map(type, children)).isdisjoint((dict, list)):
                stack.extend((v, level + 1) for v in children if isinstance(v, (dict, list)))
    return deepest


def validate(data, schema: Obj, what: str) -> None:
    """Raise PackageError naming `what` (e.g. "training.json in my-model") and the field that does not fit."""
    if depth(data) > MAX_DEPTH:
        raise PackageError(f"{what} nests deeper than {MAX_DEPTH} levels; it is not a file this playground wrote.")
    try:
        schema.check(data, "")
    except Invalid as err:
        raise PackageError(f"{what} is invalid: {err}.") from None


# ----------------------------------------------------------------------------------------------------------
# The package files

VOCAB, SIZE, LAYERS = Int(4, MAX_VOCAB), Int(1, 1_000_000), Int(1, 1000)
MODEL = Obj({
    "src_vocab_size": VOCAB, "tgt_vocab_size": VOCAB, "d_model": SIZE, "n_heads": Int(1, 10_000),
    "n_encoder_layers": LAYERS, "n_decoder_layers": LAYERS, "d_ff": SIZE, "activation": Str(20),
    "dropout": Num(0, 1), "attention_dropout": Num(0, 1), "positional_encoding": Str(20), "norm_placement": Str(20),
    "joint_vocab": Bool(), "tie_embeddings": Bool(), "max_positions": Int(2, MAX_POSITIONS),
    "pad_id": Int(0, 999_999), "unk_id": Int(0, 999_999), "bos_id": Int(0, 999_999), "eos_id": Int(0, 999_999),
    "scale_embedding": Bool(), "final_logits_bias": Bool(), "never_generate_pad": Bool(),
}, required=frozenset({"src_vocab_size", "tgt_vocab_size"}))
CONFIG = Obj({
    "format_version": Int(), "name": Str(64), "src_lang": Str(64), "tgt_lang": Str(64), "model": MODEL,
    "tokenizer": Obj({"kind": Str(20), "joint": Bool()}, required=frozenset({"kind", "joint"})),
    "special_tokens": Obj({k: Int(0, 999_999) for k in ("pad", "unk", "bos", "eos")}),
    "num_parameters": Int(), "saved_at": Str(64), "versions": Obj({}, extra=True),
    "imported": Obj({"origin": Str(1000), "architecture": Str(100), "license": Str(200),
                     "citations": List(Str(500), 10)}),
}, required=frozenset({"format_version", "src_lang", "tgt_lang", "model", "tokenizer", "num_parameters"}))

# A training record's `config`: the settings of the run by name (resuming builds a TrainConfig from them), typed from
# their one declaration (playground.packages.settings). Types only: a package saved before a range was tightened
# still loads, and a run resumed from it is checked when its TrainConfig is built.
RECORD_TYPES = {int: Int(), float: Num(), str: Str(100), bool: Bool(), tuple: List(Num(), 2)}
TRAIN_SETTINGS = {name: Opt(RECORD_TYPES[s.kind]) if s.optional else RECORD_TYPES[s.kind]
                  for name, s in SETTINGS.items()}

SCORES = {"step": Int(), "val_loss": Num(), "val_ppl": Num(), "bleu": Num(0, 100), "chrf": Num(0, 100),
          "exact_match": Num(0, 1), "sentences": Int()}
EVAL = Obj(SCORES)
TRAINING = Obj({
    "config": Obj(TRAIN_SETTINGS), "steps": Int(), "epochs": Num(0), "params": Int(), "wall_s": Num(0),
    "device": Str(200), "precision": Str(20), "world_size": Int(1), "tokens_seen": Int(),
    "data": Obj({"description": Str(1000), "train_pairs": Int(), "val_pairs": Int(), "src_lang": Str(64),
                 "tgt_lang": Str(64)}),
    "last": Opt(EVAL), "best": Opt(EVAL), "averaged_from": List(Str(200), 1000),
    "base": Obj({"name": Str(64), "origin": Str(1000), "license": Str(200)}, required=frozenset({"name"}),
                extra=False),  # a fine-tuned model's
    "history": Obj({"steps": List(Int()), "loss": List(Num()), "lr": List(Num()), "elapsed": List(Num()),
                    "evals": List(EVAL, 100_000),
                    "probe": List(Probe(), 100_000)}),
})
# a probe's fields (Probe checks its maps' shape against its labels)
PROBE_FIELDS = Obj({"step": Int(), "src_tokens": List(Str(), MAX_POSITIONS), "tgt_tokens": List(Str(), MAX_POSITIONS)},
                   required=frozenset({"step", "src_tokens", "tgt_tokens"}))
RESUME = Obj({"step": Int(), "epoch": Int(), "batch_in_epoch": Int(), "tokens_seen": Int(), "elapsed_s": Num(0),
              "best": Opt(EVAL), "bad_evals": Int(),
              "optimizer": Obj({"param_groups": Anything(100_000), "scalars": Anything(100_000)}),
              "rng_state": List(Int(0, 255), 100_000), "planned_steps": Opt(Int(1)), "warmup_steps": Opt(Int()),
              "schedule_steps": Opt(Int(1)), "schedule_position": Num(0)},
             required=frozenset({"step", "optimizer"}))
