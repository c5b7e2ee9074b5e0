"""The few fields of a SentencePiece model file (.spm, a protobuf ModelProto) that a Marian tokenizer needs, read in
pure Python: its pieces with their scores and types, the model type, and the normalizer (name, precompiled
charsmap, whitespace handling).

Why not the sentencepiece library: a Space installs only requirements.txt, and importing an OPUS-MT model there
must work; protobuf's own parser is not installed either. The wire format is simple (Google's "Encoding" page:
varints, 32/64-bit numbers, length-delimited bytes), every length is checked against the bytes left, and the file
is size-limited before it is read. tests/unit/test_marian.py holds this reader to sentencepiece's on trained models.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from playground.errors import PackageError

MAX_SPM_BYTES = 16 * 1024 * 1024  # an OPUS-MT .spm is ~0.8 MB (32,000 pieces and nmt_nfkc's 237 KB charsmap)
MAX_PIECES = 512_000

# the field numbers of sentencepiece_model.proto: ModelProto's, SentencePiece's; TrainerSpec's and NormalizerSpec's
# that the import needs, each with the SentencePieceModel attribute it fills and how its value is read (below)
MODEL_PIECES, MODEL_TRAINER, MODEL_NORMALIZER = 1, 2, 3
PIECE_TEXT, PIECE_SCORE, PIECE_TYPE = 1, 2, 3
TRAINER_FIELDS = {3: ("model_type", "number"), 22: ("split_by_whitespace", "flag"),
                  24: ("whitespace_as_suffix", "flag"), 35: ("byte_fallback", "flag"), 40: ("unk_id", "number")}
NORMALIZER_FIELDS = {1: ("normalizer_name", "text"), 2: ("precompiled_charsmap", "bytes"),
                     3: ("add_dummy_prefix", "flag"), 4: ("remove_extra_whitespaces", "flag"),
                     5: ("escape_whitespaces", "flag")}

# SentencePiece.Type and TrainerSpec.ModelType
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1


@dataclass
class Piece:
    text: str
    score: float
    type: int = NORMAL


@dataclass
class SentencePieceModel:
    pieces: list[Piece] = field(default_factory=list)
    model_type: int = UNIGRAM
    unk_id: int = 0
    byte_fallback: bool = False
    split_by_whitespace: bool = True
    whitespace_as_suffix: bool = False
    normalizer_name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True


def read_spm(path: Path) -> SentencePieceModel:
    """The model in `path`; PackageError naming the file when it is too large or not a SentencePiece model."""
    try:
        size = path.stat().st_size
        if size > MAX_SPM_BYTES:
            raise PackageError(f"{path.name} is {size:,} bytes; a SentencePiece model is at most {MAX_SPM_BYTES:,}.")
        data = path.read_bytes()
    except OSError as err:
        raise PackageError(f"{path.name} cannot be read ({err.strerror}).") from err
    try:
        return parse_spm(data)
    except (ValueError, UnicodeDecodeError, struct.error) as err:
        raise PackageError(f"{path.name} is not a SentencePiece model ({err}).") from None


def parse_spm(data: bytes) -> SentencePieceModel:
    model = SentencePieceModel()
    for number, value in fields(data):
        if number == MODEL_PIECES:
            if len(model.pieces) >= MAX_PIECES:
                raise ValueError(f"more than {MAX_PIECES:,} pieces")
            model.pieces.append(parse_piece(message(value)))
        elif number in (MODEL_TRAINER, MODEL_NORMALIZER):
            known = TRAINER_FIELDS if number == MODEL_TRAINER else NORMALIZER_FIELDS
            for n, v in fields(message(value)):
                if n in known:
                    name, kind = known[n]
                    setattr(model, name, read_value(v, kind))
    if not model.pieces:
        raise ValueError("it has no pieces")
    return model


def parse_piece(data: bytes) -> Piece:
    piece = Piece("", 0.0)
    for number, value in fields(data):
        if number == PIECE_TEXT:
            piece.text = message(value).decode("utf-8")
        elif number == PIECE_SCORE:
            piece.score = struct.unpack("<f", message(value))[0]
        elif number == PIECE_TYPE:
            piece.type = read_value(value, "number")
    return piece


def read_value(value, kind: str):
    """A field's value as `kind` says: a number, a flag (a number, true when not 0), text (UTF-8) or bytes."""
    if kind in ("number", "flag"):
        if not isinstance(value, int):
            raise ValueError("bytes where a number belongs")
        return value if kind == "number" else bool(value)
    return message(value).decode("utf-8") if kind == "text" else message(value)


def message(value) -> bytes:
    """A length-delimited field's bytes (a nested message, a string); ValueError for a number."""
    if not isinstance(value, bytes):
        raise ValueError("a number where bytes belong")
    return value


def fields(data: bytes):
    """(field number, value) of each field of one message: an int for a varint, bytes for the others (a fixed32's
    4 bytes, a fixed64's 8, a length-delimited field's content)."""
    position, end = 0, len(data)
    while position < end:
        key, position = varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = varint(data, position)
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            value, position = data[position : position + size], position + size
        elif wire_type == 2:
            size, position = varint(data, position)
            value, position = data[position : position + size], position + size
        else:
            raise ValueError(f"wire type {wire_type} at byte {position}")
        if position > end:
            raise ValueError("a field runs past the end of the file")
        yield number, value


def varint(data: bytes, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("a truncated number")
        byte = data[position]
        result |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if not byte & 0x80:
            return result, position
