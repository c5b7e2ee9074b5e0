"""What a package's tokenizer may be: only the text pipeline the playground writes (train_tokenizer's normalizer,
pre-tokenizers and decoder), since any other normalizer (a Replace of "x" by a million "y"), pre-tokenizer (a Split
on a catastrophic regex, which makes the Rust code panic), decoder, post-processor, padding or truncation could
cost without bound per character. Those it writes are linear. And what parsing it may cost: its size, strings and
added tokens, counted in its JSON before the library reads it. Checked at every package read (packages/store.py)."""

from __future__ import annotations

import base64
import binascii
import functools
import json
from pathlib import Path

from tokenizers import Tokenizer

from playground import limits
from playground.core.tokenizer import (
    MAX_WORDPIECE_CHARS,
    TOKENIZER_KINDS,
    PairTokenizer,
    pre_tokenizer,
    sentencepiece_decoder,
    sentencepiece_normalizer,
    text_decoder,
    text_normalizer,
)
from playground.errors import PackageError
from playground.packages.format import read_limited

# an imported Marian tokenizer's SentencePiece character map (nmt_nfkc's is 237 KB); larger ones are refused unread
MAX_CHARSMAP_BYTES = 1024 * 1024


@functools.cache
def written_pipeline() -> dict[str, list]:
    """The parts of a tokenizer's pipeline the playground writes, as the library serialises them, each with what
    it may be: nothing else is read from a package."""
    def state(part) -> dict:
        return json.loads(part.__getstate__())

    return {"normalizer": [None, state(text_normalizer())],
            "pre_tokenizer": [state(pre_tokenizer(kind)) for kind in TOKENIZER_KINDS],
            "decoder": [state(text_decoder()), state(sentencepiece_decoder())],
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
        if found[part] not in allowed and not (part == "normalizer" and is_sentencepiece_normalizer(found[part])):
            kind = (found[part] or {}).get("type", "set") if isinstance(found[part], dict) else "set"
            raise PackageError(f"The {side} tokenizer's {part.replace('_', '-')} ({kind}) is not one the playground "
                               "writes, so what it costs per character is unknown; it was not loaded. Train a new "
                               "tokenizer with the playground.")


def check_tokenizer_cost(path: Path, vocab_size: int) -> None:
    """Refuse a tokenizer file whose parsing would cost more than a vocabulary of vocab_size (config.json's) needs,
    counted in its JSON before the tokenizers library reads a byte of it (a 63 MB tokenizer once took 1.4 GB there,
    and the vocabulary was only compared afterwards): its size, then its entries. A playground tokenizer holds
    vocab_size tokens, fewer merges, and the 4 special tokens as its only added tokens."""
    data = read_limited(path)
    what = f"{path.name} in {path.parent.name}"
    strings = (data.count(b'"') - data.count(b'\\"')) // 2  # keys and values; a merge is one or two
    allowed = 3 * vocab_size + 1000
    if strings > allowed:
        raise PackageError(f"{what} holds about {strings:,} strings; a tokenizer of the {vocab_size:,} tokens "
                           f"config.json gives has at most {allowed:,}. It is not a tokenizer this playground wrote.")
    try:
        tokenizer = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise PackageError(f"{what} is not valid JSON ({err}).") from None
    model = tokenizer.get("model") if isinstance(tokenizer, dict) else None
    added = tokenizer.get("added_tokens") if isinstance(tokenizer, dict) else None
    if not isinstance(model, dict) or not isinstance(added, list):
        raise PackageError(f"{what} lacks a tokenizer's model or added tokens; it is not a tokenizer.")
    if len(added) > limits.ADDED_TOKENS:
        raise PackageError(f"{what} has {len(added):,} added tokens; a playground tokenizer has its 4 special "
                           f"tokens (at most {limits.ADDED_TOKENS} are read). It was not loaded.")
    entries = len(model.get("vocab") or ())
    if entries > vocab_size:
        raise PackageError(f"{what} has {entries:,} tokens but config.json says the vocabulary has {vocab_size:,}. "
                           "It was not loaded.")
    check_parsing_cost(tokenizer, what)


def is_sentencepiece_normalizer(normalizer) -> bool:
    """Whether `normalizer` (as JSON) is core.tokenizer.sentencepiece_normalizer's, an imported Marian tokenizer's,
    with a character map that charsmap_fits."""
    if not isinstance(normalizer, dict) or not isinstance(normalizer.get("normalizers"), list):
        return False
    steps = normalizer["normalizers"]
    first = steps[0] if steps and isinstance(steps[0], dict) else {}
    charsmap = first.get("precompiled_charsmap") if first.get("type") == "Precompiled" else None
    if charsmap is None:
        return normalizer == json.loads(sentencepiece_normalizer(b"").__getstate__())
    if not isinstance(charsmap, str) or len(charsmap) > MAX_CHARSMAP_BYTES * 4 // 3 + 4:
        return False
    try:
        raw = base64.b64decode(charsmap, validate=True)
    except (binascii.Error, ValueError):
        return False
    expected = json.loads(sentencepiece_normalizer(b"").__getstate__())
    return charsmap_fits(raw) and {**normalizer, "normalizers": steps[1:]} == expected


def charsmap_fits(charsmap: bytes) -> bool:
    """Whether 🤗 tokenizers' native parser reads a SentencePiece character map within its size: at most
    MAX_CHARSMAP_BYTES, and the trie size its header gives inside it (a garbage header made the parser reserve
    gigabytes and abort the server: issue 32's row A)."""
    trie_bytes = int.from_bytes(charsmap[:4], "little") if len(charsmap) >= 4 else -1
    return len(charsmap) <= MAX_CHARSMAP_BYTES and 0 <= trie_bytes <= len(charsmap) - 4 and trie_bytes % 4 == 0


def check_parsing_cost(tokenizer: dict, what: str) -> None:
    """Refuse, in the tokenizer's JSON before the library parses it, a normalizer the playground does not write or
    import (a Precompiled charsmap past its bounds: is_sentencepiece_normalizer, issue 32's row A) and a
    WordPiece model that tries words of more than MAX_WORDPIECE_CHARS characters (its longest-match search costs
    the cube of a word's length: 24 words of 2,000 letters held a worker for a minute, row D)."""
    normalizer = tokenizer.get("normalizer")
    if normalizer not in written_pipeline()["normalizer"] and not is_sentencepiece_normalizer(normalizer):
        kind = normalizer.get("type", "set") if isinstance(normalizer, dict) else "set"
        raise PackageError(f"{what}: its normalizer ({kind}) is not one the playground writes, so what it costs to "
                           "read is unknown; it was not loaded. Train a new tokenizer with the playground.")
    model = tokenizer["model"]
    word = model.get("max_input_chars_per_word", MAX_WORDPIECE_CHARS) if model.get("type") == "WordPiece" else 0
    if not isinstance(word, int) or word > MAX_WORDPIECE_CHARS:
        raise PackageError(f"{what}: its WordPiece model splits words of up to {word!r} characters; the playground's "
                           f"split at most {MAX_WORDPIECE_CHARS} (the search costs the cube of a word's length). It "
                           "was not loaded. Train a new tokenizer with the playground.")
