"""What a package's tokenizer may be: only the text pipeline the playground writes (train_tokenizer's normalizer,
pre-tokenizers and decoder), since any other normalizer (a Replace of "x" by a million "y"), pre-tokenizer (a Split
on a catastrophic regex, which makes the Rust code panic), decoder, post-processor, padding or truncation could
cost without bound per character. Those it writes are linear. Checked at every package read (packages/store.py)."""

from __future__ import annotations

import functools
import json

from tokenizers import Tokenizer

from playground.core.tokenizer import TOKENIZER_KINDS, PairTokenizer, pre_tokenizer, text_decoder, text_normalizer
from playground.errors import PackageError


@functools.cache
def written_pipeline() -> dict[str, list]:
    """The parts of a tokenizer's pipeline the playground writes, as the library serialises them, each with what
    it may be: nothing else is read from a package."""
    def state(part) -> dict:
        return json.loads(part.__getstate__())

    return {"normalizer": [None, state(text_normalizer())],
            "pre_tokenizer": [state(pre_tokenizer(kind)) for kind in TOKENIZER_KINDS],
            "decoder": [state(text_decoder())],
            "post_processor": [None], "truncation": [None], "padding": [None]}


def check_pipeline(tokenizer: PairTokenizer) -> None:
    """Refuse a tokenizer, on either side, whose text pipeline the playground does not write (PackageError)."""
    sides = [("joint", tokenizer.src_tokenizer)] if tokenizer.joint else [
        ("source", tokenizer.src_tokenizer), ("target", tokenizer.tgt_tokenizer)]
    for side, one in sides:
        check_side(one, side)


def check_side(tokenizer: Tokenizer, side: str) -> None:
    found = {"truncation": tokenizer.truncation, "padding": tokenizer.padding}
    for part in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        component = getattr(tokenizer, part)
        found[part] = None if component is None else json.loads(component.__getstate__())
    for part, allowed in written_pipeline().items():
        if found[part] not in allowed:
            kind = (found[part] or {}).get("type", "set") if isinstance(found[part], dict) else "set"
            raise PackageError(f"The {side} tokenizer's {part.replace('_', '-')} ({kind}) is not one the playground "
                               "writes, so what it costs per character is unknown; it was not loaded. Train a new "
                               "tokenizer with the playground.")
