"""Embeddings and positional encoding, §3.4 and §3.5 of "Attention Is All You Need".

§3.4: token embeddings of dimension d_model, multiplied by sqrt(d_model), and (with tie_embeddings) the same matrix
as the pre-softmax output projection. §3.5: the model has no recurrence, so a positional encoding is added to the
embeddings: the sinusoids PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...), or, as the paper's
variant in Table 3 (E), learned position embeddings. Dropout follows the sum (§5.4).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from playground.core.dropout import Dropout


def sinusoidal_table(positions: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...): [positions, d_model]. Computed in float64
    and rounded once, as Marian (and transformers' MarianMTModel) compute theirs, so an imported model sees the same
    float32 table (float32 arithmetic was 3e-5 off by position 512)."""
    position = torch.arange(positions, dtype=torch.float64)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table.float()


class Embedding(nn.Module):
    """Token embedding * sqrt(d_model) (or unscaled) + positional encoding, then dropout."""

    def __init__(self, vocab_size: int, d_model: int, n_positions: int, pad_id: int, encoding: str, dropout: float,
                 tokens: nn.Embedding | None = None, scaled: bool = True):
        super().__init__()
        self.scale = math.sqrt(d_model) if scaled else 1.0
        self.tokens = tokens if tokens is not None else nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        if encoding == "learned":
            self.positions = nn.Embedding(n_positions, d_model)
        else:  # "sinusoidal": derivable, so not saved with the weights
            self.register_buffer("table", sinusoidal_table(n_positions, d_model), persistent=False)
        self.drop = Dropout(dropout)

    def position_encoding(self, start: int, length: int) -> torch.Tensor:
        """[length, D]: what is added to the tokens at positions start .. start + length - 1."""
        if hasattr(self, "positions"):
            return self.positions.weight[start : start + length]
        return self.table[start : start + length]

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        return self.drop(self.tokens(ids) * self.scale + self.position_encoding(start, ids.size(1)))  # [B,T,D]
