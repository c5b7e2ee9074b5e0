"""The validation record of training.json (its `last`, `best` and history entries): the keys, their words, and the
record in words. One definition for the trainer that writes it and the card, the CLI and the tabs that show it."""

from __future__ import annotations

import math

SCORE_KEYS = ("val_loss", "bleu", "chrf", "exact_match")  # what one validation measures
EVAL_KEYS = ("step", "val_loss", "val_ppl", "bleu", "chrf", "exact_match")  # what a run's history keeps of one
SCORE_WORDS = {"val_loss": "validation loss", "bleu": "BLEU", "chrf": "chrF", "exact_match": "exact match"}


def is_number(value) -> bool:
    return isinstance(value, (int, float))


def scores_text(record: dict) -> str:
    """A validation record in words, as the model card says it: "step 40: validation loss 2.310 (NLL per token),
    BLEU 12.3, chrF 40.1, exact match 2.0%" (scores the record lacks are left out)."""
    parts = []
    if is_number(record.get("val_loss")):
        parts.append(f"{SCORE_WORDS['val_loss']} {record['val_loss']:.3f} (NLL per token)")
    parts += [f"{SCORE_WORDS[k]} {record[k]:.1f}" for k in ("bleu", "chrf") if is_number(record.get(k))]
    if is_number(record.get("exact_match")):
        parts.append(f"{SCORE_WORDS['exact_match']} {record['exact_match']:.1%}")
    return f"step {record.get('step', '?')}: " + ", ".join(parts)


def scores_line(record: dict) -> str:
    """A validation record in one short line, as `python -m playground info` prints it: "step 40, val loss 2.310,
    BLEU 12.3, chrF 40.1, exact match 2.0%" (a score the record lacks reads nan)."""
    r = {"step": "?", **{k: math.nan for k in SCORE_KEYS}, **record}
    return (f"step {r['step']}, val loss {r['val_loss']:.3f}, BLEU {r['bleu']:.1f}, chrF {r['chrf']:.1f}, "
            f"exact match {r['exact_match']:.1%}")
