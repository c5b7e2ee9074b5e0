"""A Marian checkpoint in 🤗 transformers' layout (Helsinki-NLP's OPUS-MT models: Tiedemann & Thottingal 2020,
trained with Marian: Junczys-Dowmunt et al. 2018) as an ordinary package of ours.

MarianMTModel is our Transformer with a few options (core/model.py: swish, a final logits bias, the embedding
scale, <pad> never generated) and the model dimension permuted (packages/marian_weights.py). Its vocabulary is one
vocab.json for both sides, "</s>" 0, "<unk>" 1, ..., "<pad>" last, and the decoder starts from <pad>'s embedding.
Ours keeps <pad> <unk> <bos> <eos> at 0-3, so the import reorders the vocabulary: <pad> to 0, <unk> to 1, </s> to 3,
the other tokens after them in Marian's order, and a new <bos> at 2 holding the embedding Marian starts the decoder
with; its logit gets a bias 100 below that token's, e^-100 being beneath float32's resolution next to it, so every
log-probability stays Marian's exactly while the label-smoothed loss of a fine-tune stays finite.

Each side's tokenizer is its SentencePiece model (source.spm, target.spm) as a 🤗 tokenizers Unigram model over the
whole reordered vocabulary, as MarianTokenizer maps pieces through vocab.json: the other side's pieces get a "▁"
appended, which the Metaspace pre-tokenizer never leaves inside a word, so they decode but never match; a
multilingual model's >>xx<< target-language tokens are added tokens. Where this differs from MarianTokenizer: a
>>xx<< token is recognised anywhere in the text (MarianTokenizer: only at its start); the literal texts <bos> and
<eos> are our special tokens, </s> is not; and a character this side's SentencePiece model lacks is <unk> here,
where MarianTokenizer looks its text up in vocab.json (finding the other side's piece of that one character, if
any). OPUS-MT's SentencePiece models cover their corpora's characters, so the last is rare.

Reading a stranger's checkpoint: every size is checked before what it sizes is read (the JSON files, the .spm files,
the character map's header, the weights' header against config.json, the parameters against
PLAYGROUND_MAX_PARAMETERS and the free memory); 🤗 tokenizers' native code builds the tokenizers, so on a shared
server the import runs in a worker process (as an upload's check does), never in the web process.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from tokenizers import AddedToken, Tokenizer, models

from playground import limits
from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import (
    BOS_ID,
    SPACE_MARKER,
    SPECIAL_TOKENS,
    UNK_ID,
    PairTokenizer,
    pre_tokenizer,
    sentencepiece_decoder,
    sentencepiece_normalizer,
)
from playground.errors import PackageError
from playground.packages.format import safetensors_shapes
from playground.packages.marian_weights import from_marian, marian_shapes
from playground.packages.sentencepiece_model import (
    CONTROL,
    MAX_SPM_BYTES,
    NORMAL,
    UNIGRAM,
    UNKNOWN,
    SentencePieceModel,
    read_spm,
)
from playground.packages.tokenizer_checks import MAX_CHARSMAP_BYTES, charsmap_fits
from playground.runtime.memory import check_model_loads

MARIAN_FILES = ("config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json", "tokenizer_config.json")
OPTIONAL_FILES = ("generation_config.json", "README.md")  # generation defaults; the license in the card's header
PICKLED_WEIGHTS = "pytorch_model.bin"
MAX_JSON_BYTES = 16 * 1024 * 1024  # vocab.json of a 58,101-token model is ~1.3 MB
ABSENT_LOGIT = 100.0  # <bos>'s logit sits this far below its embedding's token (see the docstring)
CITATIONS = (
    "Jörg Tiedemann and Santhosh Thottingal. 2020. OPUS-MT — Building open translation services for the World. "
    "EAMT 2020.",
    "Marcin Junczys-Dowmunt et al. 2018. Marian: Fast Neural Machine Translation in C++. ACL 2018 System "
    "Demonstrations.",
)
ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
LANGUAGE_CODE = re.compile(r"^>>.+<<$")  # the target-language tokens of multilingual OPUS-MT models



def marian_file_bytes(name: str) -> int:
    """The most bytes a file of a Marian checkpoint may have: the weights and the card as a package's, the
    SentencePiece models and the JSON as import_marian reads them (the zip upload and the Hub check both ask)."""
    if name in ("model.safetensors", "README.md"):
        return limits.max_file_bytes(name)
    return MAX_SPM_BYTES if name.endswith(".spm") else MAX_JSON_BYTES

@dataclass
class MarianCheckpoint:
    """What the import read and checked: the model's config and Marian's ids of its special tokens."""

    cfg: TransformerConfig
    pad: int
    eos: int
    decoder_start: int
    unk: int = -1  # from vocab.json, read after the config


def marian_parameters(config: dict) -> int:
    """Parameters of the package a Marian config.json imports as (from the config alone: a Space refuses past
    PLAYGROUND_MAX_PARAMETERS before downloading); PackageError naming what is supported when it is not Marian."""
    return checkpoint_of(config).cfg.num_parameters()


def checkpoint_of(config: dict) -> MarianCheckpoint:
    if not isinstance(config, dict) or config.get("model_type") != "marian":
        found = config.get("model_type") if isinstance(config, dict) else None
        raise PackageError(f"This is a {found or 'non-'} model, not a Marian one: the playground imports 🤗 "
                           "transformers checkpoints of model_type 'marian' (OPUS-MT: Helsinki-NLP/opus-mt-en-de).")

    def number(key: str, default=None) -> int:
        value = config.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise PackageError(f"config.json's {key} must be a whole number, not {value!r}.")
        return value

    problems = []
    activation = config.get("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        problems.append(f"activation_function {activation!r} (supported: {', '.join(ACTIVATIONS)})")
    for first, second in (("encoder_attention_heads", "decoder_attention_heads"),
                          ("encoder_ffn_dim", "decoder_ffn_dim")):
        if config.get(first) != config.get(second):
            problems.append(f"{first} {config.get(first)} != {second} {config.get(second)} (one value for both)")
    vocab = number("vocab_size")
    if config.get("decoder_vocab_size") not in (None, vocab):
        problems.append("a separate decoder vocabulary (supported: one vocab.json for both sides)")
    for key in ("activation_dropout", "encoder_layerdrop", "decoder_layerdrop"):
        if config.get(key, 0.0) not in (0, 0.0):
            problems.append(f"{key} {config.get(key)} (supported: 0)")
    if problems:
        raise PackageError("This Marian model has options the playground's Transformer does not: "
                           f"{'; '.join(problems)}.")
    pad, eos = number("pad_token_id", vocab - 1), number("eos_token_id", 0)
    start = number("decoder_start_token_id", pad)
    outside = [f"{name} {value}" for name, value in (("pad", pad), ("eos", eos), ("decoder start", start))
               if value >= vocab]
    if outside or pad == eos:
        raise PackageError(f"config.json's special token ids ({', '.join(outside) or 'pad = eos'}) do not fit its "
                           f"vocabulary of {vocab:,}.")
    share = config.get("share_encoder_decoder_embeddings", True)
    try:
        cfg = TransformerConfig(
            src_vocab_size=vocab + 1, tgt_vocab_size=vocab + 1, d_model=number("d_model"),
            n_heads=number("encoder_attention_heads"), n_encoder_layers=number("encoder_layers"),
            n_decoder_layers=number("decoder_layers"), d_ff=number("encoder_ffn_dim"),
            activation=ACTIVATIONS[activation], dropout=float(config.get("dropout", 0.1)),
            attention_dropout=float(config.get("attention_dropout", 0.0)), joint_vocab=bool(share),
            tie_embeddings=bool(config.get("tie_word_embeddings", True)),
            max_positions=number("max_position_embeddings"), scale_embedding=bool(config.get("scale_embedding", False)),
            final_logits_bias=True, never_generate_pad=True)
    except (ValueError, TypeError) as err:
        raise PackageError(f"config.json describes a model the playground cannot build: {err}.") from None
    return MarianCheckpoint(cfg, pad=pad, eos=eos, decoder_start=start)


def import_marian(folder: Path, destination: Path, *, origin: str) -> Path:
    """Convert the Marian checkpoint in `folder` into a package at `destination` (written whole, or not at all) and
    return it; `origin` (a Hub repo id, a path) goes on the card. PackageError says what is wrong and how to fix it."""
    from playground.packages.store import save_package

    folder = Path(folder)
    check_files(folder)
    config = read_small_json(folder / "config.json")
    checkpoint = checkpoint_of(config)
    cfg = checkpoint.cfg
    check_model_loads(cfg)
    tokenizer_config = read_small_json(folder / "tokenizer_config.json")
    vocab = read_vocab(folder / "vocab.json", cfg.src_vocab_size - 1)
    checkpoint.unk = special_id(vocab, tokenizer_config, "unk_token", "<unk>")
    eos_name = tokenizer_config.get("eos_token", "</s>")
    if vocab.get(eos_name) != checkpoint.eos or checkpoint.unk in (checkpoint.eos, checkpoint.pad):
        raise PackageError("vocab.json and config.json disagree on the special tokens (</s> must be eos_token_id, "
                           "<unk> another id): the checkpoint's files do not belong together.")
    order = vocabulary_order(checkpoint, len(vocab))
    pieces = [None] * len(vocab)
    for piece, i in vocab.items():
        pieces[i] = piece
    tokenizer = PairTokenizer(side_tokenizer(read_spm(folder / "source.spm"), pieces, order, "source.spm"),
                              side_tokenizer(read_spm(folder / "target.spm"), pieces, order, "target.spm"))
    model = converted_model(folder / "model.safetensors", checkpoint, order)
    src_lang, tgt_lang = language_pair(tokenizer_config, origin)
    readme = folder / "README.md"
    imported = {"origin": origin, "architecture": "MarianMTModel", "license": license_of(readme),
                "citations": list(CITATIONS)}
    return save_package(destination, model, tokenizer, src_lang=src_lang, tgt_lang=tgt_lang, imported=imported)


def check_files(folder: Path) -> None:
    if not folder.is_dir():
        raise PackageError(f"{folder} is not a folder: give the folder of a 🤗 transformers Marian checkpoint.")
    missing = [name for name in MARIAN_FILES if not (folder / name).is_file()]
    if "model.safetensors" in missing and (folder / PICKLED_WEIGHTS).is_file():
        raise PackageError(
            f"{folder.name} has its weights only as {PICKLED_WEIGHTS} (Python pickle, which can run code when read; "
            "the playground reads no pickle). Save them as model.safetensors first: in Python with transformers, "
            "MarianMTModel.from_pretrained(FOLDER).save_pretrained(FOLDER, safe_serialization=True).")
    if missing:
        raise PackageError(f"{folder.name} lacks {', '.join(missing)}: a Marian checkpoint needs "
                           f"{', '.join(MARIAN_FILES)}.")


def read_small_json(path: Path) -> dict:
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise PackageError(f"{path.name} has {size:,} bytes; a Marian checkpoint's is at most {MAX_JSON_BYTES:,}.")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise PackageError(f"{path.name} is not valid JSON ({err}).") from None
    if not isinstance(value, dict):
        raise PackageError(f"{path.name} must hold a JSON object.")
    return value


def read_vocab(path: Path, size: int) -> dict[str, int]:
    """vocab.json: each of the config's vocab_size ids named by exactly one piece."""
    vocab = read_small_json(path)
    ids = sorted(vocab.values()) if all(isinstance(i, int) and not isinstance(i, bool) for i in vocab.values()) else []
    if ids != list(range(size)):
        raise PackageError(f"vocab.json must map {size:,} pieces (config.json's vocab_size) to the ids 0 to "
                           f"{size - 1:,}, each once; it holds {len(vocab):,} entries.")
    return vocab


def special_id(vocab: dict[str, int], tokenizer_config: dict, key: str, default: str) -> int:
    name = tokenizer_config.get(key, default)
    name = name.get("content") if isinstance(name, dict) else name
    if name not in vocab:
        raise PackageError(f"vocab.json lacks the {key} {name!r} that tokenizer_config.json names.")
    return vocab[name]


def vocabulary_order(checkpoint: MarianCheckpoint, size: int) -> list[int]:
    """Marian's id of each of our ids: its <pad>, <unk>, decoder start (our <bos>), </s>, then the rest in order."""
    head = [checkpoint.pad, checkpoint.unk, checkpoint.decoder_start, checkpoint.eos]
    taken = {checkpoint.pad, checkpoint.unk, checkpoint.eos}
    return head + [i for i in range(size) if i not in taken]


def side_tokenizer(spm: SentencePieceModel, pieces: list[str], order: list[int], name: str) -> Tokenizer:
    """One side's SentencePiece model as a Unigram tokenizer over our ids (see the module docstring)."""
    if spm.model_type != UNIGRAM or spm.byte_fallback:
        raise PackageError(f"{name} is not a plain Unigram SentencePiece model (model type {spm.model_type}, byte "
                           f"fallback {spm.byte_fallback}); the playground imports Unigram models, as OPUS-MT's are.")
    if not (spm.add_dummy_prefix and spm.remove_extra_whitespaces and spm.escape_whitespaces
            and spm.split_by_whitespace and not spm.whitespace_as_suffix):
        raise PackageError(f"{name} handles whitespace in a way other than SentencePiece's default (a dummy prefix, "
                           "extra whitespace removed, words split at spaces), which the playground does not import.")
    if spm.precompiled_charsmap and not charsmap_fits(spm.precompiled_charsmap):
        raise PackageError(f"{name}'s character map is larger than {MAX_CHARSMAP_BYTES:,} bytes or corrupt; it was "
                           "not read.")
    scores = {p.text: p.score for p in spm.pieces if p.type == NORMAL}
    unknown = [p.type for p in spm.pieces if p.type not in (NORMAL, UNKNOWN, CONTROL)]
    if unknown:
        raise PackageError(f"{name} has user-defined, byte or unused pieces, which the playground does not import.")
    known = set(pieces)
    missing = [piece for piece in scores if piece not in known]
    if missing:
        raise PackageError(f"{name} has {len(missing):,} pieces that vocab.json lacks (e.g. {missing[0]!r}): "
                           "MarianTokenizer would make them <unk>, which a tokenizer here cannot copy.")
    vocab = [(token, 0.0) for token in SPECIAL_TOKENS]
    for marian_id in order[len(SPECIAL_TOKENS):]:
        piece = pieces[marian_id]
        if piece in scores or LANGUAGE_CODE.match(piece):  # a language code is matched as an added token
            vocab.append((piece, scores.get(piece, 0.0)))
        else:
            vocab.append((piece + SPACE_MARKER, 0.0))
    if len({token for token, _ in vocab}) != len(vocab):
        raise PackageError(f"vocab.json has pieces that collide once {name}'s are told apart from the other side's.")
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=UNK_ID, byte_fallback=False))
    tokenizer.normalizer = sentencepiece_normalizer(spm.precompiled_charsmap)
    tokenizer.pre_tokenizer = pre_tokenizer("unigram")
    tokenizer.decoder = sentencepiece_decoder()
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    codes = [token for token, _ in vocab if LANGUAGE_CODE.match(token)]
    if len(SPECIAL_TOKENS) + len(codes) > limits.ADDED_TOKENS:
        raise PackageError(f"This multilingual model has {len(codes):,} target-language tokens (>>xx<<); a package's "
                           f"tokenizer may add at most {limits.ADDED_TOKENS - len(SPECIAL_TOKENS)}. Choose a model "
                           "with fewer target languages.")
    tokenizer.add_tokens([AddedToken(code, normalized=False) for code in codes])
    return tokenizer


def converted_model(path: Path, checkpoint: MarianCheckpoint, order: list[int]) -> Transformer:
    """The checkpoint's weights in our model: shapes checked from the header before a tensor is read."""
    cfg = checkpoint.cfg
    shapes = safetensors_shapes(path)
    marian_vocab = cfg.src_vocab_size - 1
    needed = {"final_logits_bias": (1, marian_vocab), **marian_shapes(cfg, marian_vocab)}
    wrong = [f"{k}: {shapes[k]} (config.json: {v})" for k, v in needed.items() if k in shapes and shapes[k] != v]
    if wrong:
        raise PackageError(f"model.safetensors does not fit config.json: {'; '.join(wrong[:3])}.")
    try:
        with safe_open(str(path), framework="pt") as f:
            tensors = {name: f.get_tensor(name) for name in needed if name in shapes}
        state = from_marian(tensors, cfg)
    except KeyError as err:
        raise PackageError(f"model.safetensors lacks the tensor {err}: it is not a complete Marian model.") from None
    except (SafetensorError, OSError) as err:
        raise PackageError(f"model.safetensors is corrupt or truncated ({err}).") from None
    index = torch.tensor(order)
    bias = tensors.pop("final_logits_bias", torch.zeros(1, marian_vocab)).float()[0][index]
    bias[BOS_ID] -= ABSENT_LOGIT
    del tensors
    reordered: dict[int, torch.Tensor] = {}  # tied embeddings are one tensor: reordered once
    for name in ("src_embed.tokens.weight", "tgt_embed.tokens.weight", "output.weight"):
        if id(state[name]) not in reordered:
            reordered[id(state[name])] = state[name][index]
        state[name] = reordered[id(state[name])]
    state["final_logits_bias"] = bias
    model = Transformer(cfg)
    model.load_state_dict(state, strict=True)
    return model.eval()


def language_pair(tokenizer_config: dict, origin: str) -> tuple[str, str]:
    """tokenizer_config.json's source_lang/target_lang, else what an opus-mt-xx-yy name says, else src/tgt."""
    src, tgt = tokenizer_config.get("source_lang"), tokenizer_config.get("target_lang")
    if isinstance(src, str) and isinstance(tgt, str) and 0 < len(src) <= 64 and 0 < len(tgt) <= 64:
        return src, tgt
    named = re.search(r"opus-mt-([A-Za-z]{2,3}(?:_[A-Za-z]+)?)-([A-Za-z]{2,3}(?:_[A-Za-z]+)?)$", origin.rstrip("/"))
    return (named.group(1), named.group(2)) if named else ("src", "tgt")


def license_of(readme: Path) -> str:
    """The license a Hub card's metadata names (`license: cc-by-4.0`), or what to check."""
    if readme.is_file() and readme.stat().st_size <= MAX_JSON_BYTES:
        text = readme.read_text(encoding="utf-8", errors="replace")
        header = re.match(r"---\n(.*?)\n---", text, re.S)
        found = re.search(r"^license:\s*(\S+)", header.group(1), re.M) if header else None
        if found:
            return found.group(1)
    return "unknown: see the origin's model card"

