"""Subword tokenizers for the source and target side, built on Hugging Face ``tokenizers``.

Every kind uses the same SentencePiece-style trick so that decoding restores the text exactly: the Metaspace
pre-tokenizer turns each space into "▁" and keeps it inside the tokens, and the Metaspace decoder joins the tokens
and turns "▁" back into spaces. No decoder has to guess where spaces were, so "Hello, world!" round-trips for
every kind (WordPiece included: its "##" continuation prefix is not needed, because word starts carry "▁").

The normaliser is NFC, not NFKC: NFKC rewrites ordinary text ("，" to ",", "…" to "...", "x²" to "x2"), which would
make round trips inexact for Chinese, Japanese and typographic punctuation. Special tokens have fixed ids 0-3.

The paper (§5.1) encodes with byte-pair encoding and a vocabulary shared by source and target: the "bpe" kind with
a joint vocabulary.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import unicodedata
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from playground.errors import DataError, PackageError

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ["<pad>", "<unk>", "<bos>", "<eos>"]
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(4)
TOKENIZER_KINDS = ("bpe", "wordpiece", "unigram", "word", "char")
TOKENIZER_FILE = "tokenizer.json"  # the joint tokenizer, or the source side when separate
TGT_TOKENIZER_FILE = "tokenizer.tgt.json"  # the target side, only when separate
SPACE_MARKER = "▁"  # U+2581, what Metaspace writes for a space

MAX_WORDPIECE_CHARS = 100  # WordPiece maps longer words to <unk>; we cut them into pieces of this size instead
_CJK_CHARACTER = Regex(r"[\p{Han}\p{Hiragana}\p{Katakana}]")  # no spaces between words: one token each (as BERT)
_MODEL_KINDS = {"BPE": "bpe", "WordPiece": "wordpiece", "Unigram": "unigram", "WordLevel": "word"}


class PairTokenizer:
    """A source and a target tokenizer; the same object when the vocabulary is joint.

    Encoding never adds <bos>/<eos> (the model does); decoding skips all special tokens.
    """

    def __init__(self, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer | None = None) -> None:
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = src_tokenizer if tgt_tokenizer is None else tgt_tokenizer
        self._kind = _kind_of(self.src_tokenizer)
        for side, tokenizer in (("source", self.src_tokenizer), ("target", self.tgt_tokenizer)):
            specials = [tokenizer.id_to_token(i) for i in range(len(SPECIAL_TOKENS))]
            if specials != SPECIAL_TOKENS:
                raise PackageError(
                    f"The {side} tokenizer has {specials} as ids 0-3 instead of {SPECIAL_TOKENS}: "
                    "it was not trained by the playground. Train a new tokenizer."
                )
        tgt_kind = self._kind if self.joint else _kind_of(self.tgt_tokenizer)  # _kind_of serialises the whole vocab
        if tgt_kind != self._kind:
            raise PackageError(
                f"The source tokenizer is {self._kind} but the target tokenizer is {tgt_kind}; "
                "both sides must be of the same kind. Train a new tokenizer."
            )

    @property
    def joint(self) -> bool:
        return self.src_tokenizer is self.tgt_tokenizer

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def src_vocab_size(self) -> int:
        return self.src_tokenizer.get_vocab_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt_tokenizer.get_vocab_size()

    def encode_src(self, text: str) -> list[int]:
        return self.src_tokenizer.encode(text, add_special_tokens=False).ids

    def encode_tgt(self, text: str) -> list[int]:
        return self.tgt_tokenizer.encode(text, add_special_tokens=False).ids

    def encode_src_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self.src_tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def encode_tgt_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self.tgt_tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode_src(self, ids: Iterable[int]) -> str:
        return self.src_tokenizer.decode(_int_list(ids), skip_special_tokens=True)

    def decode_tgt(self, ids: Iterable[int]) -> str:
        return self.tgt_tokenizer.decode(_int_list(ids), skip_special_tokens=True)

    def decode_tgt_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        """Decode many hypotheses at once (validation, BLEU)."""
        return self.tgt_tokenizer.decode_batch([_int_list(ids) for ids in batch], skip_special_tokens=True)

    def src_tokens(self, ids: Iterable[int]) -> list[str]:
        """Token strings for attention-plot labels: "▁" marks a word start, special ids show as "<bos>" etc."""
        return _token_strings(self.src_tokenizer, ids)

    def tgt_tokens(self, ids: Iterable[int]) -> list[str]:
        """Token strings for attention-plot labels, like ``src_tokens``."""
        return _token_strings(self.tgt_tokenizer, ids)

    def save(self, folder: str | os.PathLike) -> None:
        """Write tokenizer.json, and tokenizer.tgt.json when the sides are separate."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.src_tokenizer.save(str(folder / TOKENIZER_FILE))
        if self.joint:
            (folder / TGT_TOKENIZER_FILE).unlink(missing_ok=True)  # a stale target file would make load() separate
        else:
            self.tgt_tokenizer.save(str(folder / TGT_TOKENIZER_FILE))

    @classmethod
    def load(cls, folder: str | os.PathLike) -> PairTokenizer:
        """Read what ``save`` wrote; PackageError when it is missing or corrupt."""
        folder = Path(folder)
        src_path, tgt_path = folder / TOKENIZER_FILE, folder / TGT_TOKENIZER_FILE
        if not src_path.is_file():
            raise PackageError(f"No {TOKENIZER_FILE} in {folder}: the model package is incomplete. Export it again.")
        try:
            src_json = src_path.read_text(encoding="utf-8")
            tgt_json = tgt_path.read_text(encoding="utf-8") if tgt_path.is_file() else None
        except (OSError, UnicodeDecodeError) as error:
            raise PackageError(
                f"Cannot read the tokenizer in {folder}: {error}. Export the model package again.") from error
        return cls.from_json_strings(src_json, tgt_json)

    def to_json_strings(self) -> tuple[str, str | None]:
        """(joint or source JSON, target JSON or None when joint), for keeping a tokenizer in memory."""
        return self.src_tokenizer.to_str(), None if self.joint else self.tgt_tokenizer.to_str()

    @classmethod
    def from_json_strings(cls, src_json: str, tgt_json: str | None = None) -> PairTokenizer:
        """The tokenizers as written (to_json_strings, or a package's files); what a package's may do is checked by
        the packages layer (packages/tokenizer_checks.py)."""
        src_tokenizer = _tokenizer_from_json(src_json, "source" if tgt_json else "joint")
        return cls(src_tokenizer, _tokenizer_from_json(tgt_json, "target") if tgt_json else None)

    def __repr__(self) -> str:
        if self.joint:
            sizes = f"vocab={self.src_vocab_size}"
        else:
            sizes = f"src_vocab={self.src_vocab_size}, tgt_vocab={self.tgt_vocab_size}"
        return f"PairTokenizer(kind={self.kind!r}, joint={self.joint}, {sizes})"


class BpeDropout:
    """BPE-dropout (Provilkov et al., 2020): segment with the tokenizer's own merges, skipping each candidate merge
    with probability ``p`` at every step, so the same word comes out in different pieces from epoch to epoch.

    The tokenizers library has BPE-dropout too, but draws from an unseeded random source; this one takes a
    ``random.Random``, so a run's segmentations (and a resumed run's) are reproducible. With p = 0 it gives exactly
    the library's segmentation. Only for training data: validation and translation use the plain tokenizer."""

    def __init__(self, tokenizer: Tokenizer, p: float) -> None:
        model = json.loads(tokenizer.to_str())["model"]
        if model.get("type") != "BPE":
            raise DataError("BPE-dropout needs the bpe tokenizer; choose tokenizer bpe or set BPE-dropout to 0.")
        if not 0 <= p < 1:
            raise DataError(f"BPE-dropout must be at least 0 and below 1, not {p}.")
        self.p = p
        self.vocab: dict[str, int] = model["vocab"]
        merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.pre_tokenizer = tokenizer.pre_tokenizer

    def encode_batch(self, texts: Sequence[str], rng) -> list[list[int]]:
        return [self.encode(text, rng) for text in texts]

    def encode(self, text: str, rng) -> list[int]:
        ids = []
        for word, _ in self.pre_tokenizer.pre_tokenize_str(unicodedata.normalize("NFC", text)):
            ids.extend(self.vocab.get(piece, UNK_ID) for piece in self.segment(word, rng))
        return ids

    def segment(self, word: str, rng) -> list[str]:
        """Merge the best-ranked adjacent pair that survives this step's dropout, until none survives."""
        pieces = list(word)
        while len(pieces) > 1:
            best_rank, best = None, -1
            for i in range(len(pieces) - 1):
                rank = self.ranks.get((pieces[i], pieces[i + 1]))
                if rank is None or (best_rank is not None and rank >= best_rank):
                    continue
                if not (self.p and rng.random() < self.p):  # the merge survives this step's dropout
                    best_rank, best = rank, i
            if best_rank is None:
                break
            pieces[best : best + 2] = [pieces[best] + pieces[best + 1]]
        return pieces


class PairBpeDropout:
    """Encodes like a PairTokenizer (encode_src_batch, encode_tgt_batch) with BPE-dropout on both sides, drawing
    from one seeded stream: what one epoch's training data is segmented with."""

    def __init__(self, tokenizer: PairTokenizer, p: float) -> None:
        self.src = BpeDropout(tokenizer.src_tokenizer, p)
        self.tgt = self.src if tokenizer.joint else BpeDropout(tokenizer.tgt_tokenizer, p)
        self.rng = random.Random()

    def reseeded(self, seed: str) -> "PairBpeDropout":
        self.rng.seed(seed)
        return self

    def encode_src_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.src.encode_batch(texts, self.rng)

    def encode_tgt_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.tgt.encode_batch(texts, self.rng)


def train_tokenizer(
    pairs: Sequence[tuple[str, str]],
    kind: str = "bpe",
    vocab_size: int = 8000,
    joint: bool = True,
    min_frequency: int = 2,
) -> PairTokenizer:
    """Train a tokenizer of ``kind`` (one of TOKENIZER_KINDS) on sentence pairs; joint = one shared vocabulary.

    Every character of the training text gets into the vocabulary (except for "word", whose units are words), so
    ``vocab_size`` grows to the alphabet plus special tokens when it is smaller. ``min_frequency`` applies to
    merges (bpe, wordpiece) and words (word).
    """
    if kind not in TOKENIZER_KINDS:
        raise DataError(f"Unknown tokenizer kind {kind!r}; choose one of: {', '.join(TOKENIZER_KINDS)}.")
    if vocab_size < 1:
        raise DataError(f"vocab_size must be a positive number, not {vocab_size}.")
    if not pairs:
        raise DataError("Cannot train a tokenizer without sentence pairs: the training data is empty.")
    sources, targets = [src for src, _ in pairs], [tgt for _, tgt in pairs]
    if joint:
        tokenizer = _train_side(chain(sources, targets), kind, vocab_size, min_frequency, "source and target")
        return PairTokenizer(tokenizer)
    return PairTokenizer(
        _train_side(sources, kind, vocab_size, min_frequency, "source"),
        _train_side(targets, kind, vocab_size, min_frequency, "target"),
    )


def _train_side(texts: Iterable[str], kind: str, vocab_size: int, min_frequency: int, side: str) -> Tokenizer:
    texts = list(texts)
    alphabet = _alphabet(texts)
    if not alphabet:
        raise DataError(f"Cannot train a tokenizer: the {side} text is empty.")
    needed = len(SPECIAL_TOKENS) + len(alphabet)
    if kind != "word" and vocab_size < needed:  # words need no full alphabet; the other kinds would lose characters
        logger.warning("vocab_size %d is below the %d characters and special tokens; using %d",
                       vocab_size, needed, needed)
        vocab_size = needed

    tokenizer = Tokenizer(_model(kind))
    tokenizer.normalizer = text_normalizer()
    tokenizer.pre_tokenizer = pre_tokenizer(kind)
    tokenizer.decoder = text_decoder()
    common = {"vocab_size": vocab_size, "special_tokens": SPECIAL_TOKENS, "show_progress": False}
    if kind == "bpe":
        trainer = trainers.BpeTrainer(min_frequency=min_frequency, initial_alphabet=alphabet, **common)
    elif kind == "wordpiece":
        trainer = trainers.WordPieceTrainer(
            min_frequency=min_frequency, initial_alphabet=alphabet, continuing_subword_prefix="", **common
        )
    elif kind == "unigram":
        trainer = trainers.UnigramTrainer(unk_token=SPECIAL_TOKENS[UNK_ID], initial_alphabet=alphabet, **common)
    elif kind == "word":
        trainer = trainers.WordLevelTrainer(min_frequency=min_frequency, **common)
    else:  # char: every character is a "word", and all of them are kept
        trainer = trainers.WordLevelTrainer(min_frequency=1, **{**common, "vocab_size": needed})
    tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tokenizer


def _alphabet(texts: list[str]) -> list[str]:
    """Every character the tokenizer will see, after NFC and with spaces as "▁"."""
    characters: set[str] = set()
    for text in texts:
        characters.update(unicodedata.normalize("NFC", text))
    characters.discard(" ")
    if characters:
        characters.add(SPACE_MARKER)  # Metaspace prefixes every word with it
    return sorted(characters)


def _model(kind: str) -> models.Model:
    unk = SPECIAL_TOKENS[UNK_ID]
    if kind == "bpe":
        return models.BPE(unk_token=unk)
    if kind == "wordpiece":
        return models.WordPiece(unk_token=unk, continuing_subword_prefix="",
                                max_input_chars_per_word=MAX_WORDPIECE_CHARS)
    if kind == "unigram":
        return models.Unigram()
    return models.WordLevel(unk_token=unk)  # word and char


def text_normalizer() -> normalizers.Normalizer:
    """NFC for every kind (see the module's docstring for why not NFKC)."""
    return normalizers.NFC()


def sentencepiece_normalizer(precompiled_charsmap: bytes) -> normalizers.Normalizer:
    """SentencePiece's normalisation as 🤗 transformers converts it (convert_slow_tokenizer.SpmConverter): the
    model's character map (e.g. nmt_nfkc), then its extra whitespace removed. For imported Marian tokenizers
    (playground/packages/marian.py); the playground's own use NFC."""
    steps = [normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), SPACE_MARKER)]
    if precompiled_charsmap:
        steps.insert(0, normalizers.Precompiled(precompiled_charsmap))
    return normalizers.Sequence(steps)


def text_decoder() -> decoders.Decoder:
    """Joins the tokens and turns "▁" back into spaces, for every kind."""
    return decoders.Metaspace(replacement=SPACE_MARKER)


def sentencepiece_decoder() -> decoders.Decoder:
    """text_decoder for imported Marian tokenizers, whose tokens of the other side's SentencePiece model end in an
    extra "▁" so that they never match (playground/packages/marian.py): it is dropped first, and the token decodes
    as MarianTokenizer decodes it."""
    return decoders.Sequence([decoders.Replace(Regex(f"(?<=.){SPACE_MARKER}$"), ""), text_decoder()])


def pre_tokenizer(kind: str) -> pre_tokenizers.PreTokenizer:
    """Metaspace first for every kind, so spaces live on in the tokens; then the kind's own splits."""
    metaspace = pre_tokenizers.Metaspace(replacement=SPACE_MARKER, prepend_scheme="always", split=True)
    if kind in ("bpe", "unigram"):
        return metaspace  # SentencePiece style: words with their punctuation, split by the model
    if kind == "char":
        # one token per character; this pre-tokenizer is also how _kind_of tells a loaded char tokenizer from word
        return pre_tokenizers.Sequence([metaspace, pre_tokenizers.FixedLength(length=1)])
    splits = [
        metaspace,
        pre_tokenizers.Punctuation(behavior="isolated"),  # "world!" -> "▁world", "!"
        pre_tokenizers.Split(_CJK_CHARACTER, behavior="isolated"),
    ]
    if kind == "wordpiece":
        splits.append(pre_tokenizers.FixedLength(length=MAX_WORDPIECE_CHARS))  # long runs (Thai, URLs) stay usable
    return pre_tokenizers.Sequence(splits)


def _kind_of(tokenizer: Tokenizer) -> str:
    """The kind a (loaded) tokenizer was trained as: its model type; for WordLevel, words or characters."""
    config = json.loads(tokenizer.to_str())
    model_type = config["model"].get("type")
    if model_type not in _MODEL_KINDS:
        raise PackageError(f"Unsupported tokenizer model {model_type!r}; expected one of {', '.join(_MODEL_KINDS)}.")
    if model_type == "WordLevel" and config["pre_tokenizer"] == _pre_tokenizer_config("char"):
        return "char"
    return _MODEL_KINDS[model_type]


@functools.cache
def _pre_tokenizer_config(kind: str) -> dict:
    probe = Tokenizer(models.WordLevel(unk_token=SPECIAL_TOKENS[UNK_ID]))
    probe.pre_tokenizer = pre_tokenizer(kind)
    return json.loads(probe.to_str())["pre_tokenizer"]


def _tokenizer_from_json(text: str, side: str) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_str(text)
    except Exception as error:  # tokenizers raises a bare Exception for any malformed JSON
        raise PackageError(
            f"The {side} tokenizer file is corrupt ({error}). Export the model package again.") from error
    return tokenizer


def _int_list(ids: Iterable[int]) -> list[int]:
    """Plain ints, so tensors and numpy arrays can be passed straight from the model."""
    return [int(i) for i in (ids.tolist() if hasattr(ids, "tolist") else ids)]


def _token_strings(tokenizer: Tokenizer, ids: Iterable[int]) -> list[str]:
    return [tokenizer.id_to_token(i) or SPECIAL_TOKENS[UNK_ID] for i in _int_list(ids)]
