"""Token sequences as the model takes them: a sentence's tokens between <bos> and <eos> within the model's
positions, and rows of ids padded into one batch tensor.

A model trained on sentences of up to N tokens (TrainConfig.max_sentence_tokens) needs N + 2 positions
(TransformerConfig.max_positions): the source gets <eos> appended and the decoder input <bos> prepended (its output,
the target + <eos>, is as long). Training (data/batching.py) and decoding (core/decode.py) cut and pad sentences with
the same functions, so inference never reaches a position that training left unfilled.
"""

from __future__ import annotations

import torch

from playground.core.tokenizer import PAD_ID

SPECIAL_POSITIONS = 2  # room for <bos>/<eos> on top of a sentence's own tokens


def model_positions(max_sentence_tokens: int) -> int:
    """Positions the model needs for sentences of up to `max_sentence_tokens` tokens (TrainConfig's setting)."""
    return max_sentence_tokens + SPECIAL_POSITIONS


def sentence_tokens(positions: int) -> int:
    """The inverse of model_positions: the sentence tokens a model with `positions` positions was trained on."""
    return positions - SPECIAL_POSITIONS


def pad_batch(seqs: list[list[int]], length: int | None = None, pad_id: int = PAD_ID) -> torch.Tensor:
    """[B, length] token ids, each row padded after its tokens (length: the longest row by default). Padded as
    lists, so the tensor is made in one call (a tensor per row took 2.4x as long)."""
    length = length or max(len(s) for s in seqs)
    return torch.tensor([s + [pad_id] * (length - len(s)) for s in seqs], dtype=torch.long)
