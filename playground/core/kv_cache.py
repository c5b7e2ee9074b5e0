"""The decoder's key/value cache for incremental search (greedy, sampling, beam search in core/decode.py).

The decoder is auto-regressive (§3.1): each step consumes the symbols generated before. Rather than run the whole
prefix again at every step, each decoder layer keeps the self-attention keys and values of the positions decoded so
far (LayerCache), and the cross-attention keys and values of the source are projected once (DecoderState). Beam
search reorders and duplicates batch rows every step: DecoderState.select does it for all layers at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


class LayerCache:
    """Self-attention keys and values of one decoder layer for up to `steps` output steps, in one buffer stored
    time-major [steps, B, 2, H, Dh]: a step writes its keys and values with one copy, and the positions filled so far
    are one contiguous block, so reordering the rows (beam search does it every step) is a single row gather of that
    block into a spare buffer, and the two buffers swap. Batch-major [B, H, steps, Dh] made it a strided gather of
    [B, H, :length] slices into a fresh buffer, many times slower; separate key and value buffers, two copies and two
    gathers a step (bench/decode_speed.py)."""

    def __init__(self, batch: int, n_heads: int, head_dim: int, steps: int, like: torch.Tensor):
        self.kv = like.new_empty(steps, batch, 2, n_heads, head_dim)
        self.length = 0

    def append(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """kv [B,t,2,H,Dh], the keys and values of t new positions -> every position so far, 2 x [B,H,length,Dh]
        (views of the buffer)."""
        self.length += kv.size(1)
        filled = self.kv[: self.length]  # [length,B,2,H,Dh]
        filled[self.length - kv.size(1) :].copy_(kv.transpose(0, 1))
        keys, values = filled.permute(2, 1, 3, 0, 4).unbind(0)  # [2,B,H,length,Dh]: two views in two operations
        return keys, values

    @torch.inference_mode()  # like the whole cache (see Transformer.start_decoding); out= refuses autograd anyway
    def select(self, index: torch.Tensor, spare: torch.Tensor) -> torch.Tensor:
        """Keep the rows in `index`, copying only the positions filled so far into `spare`; returns the buffer freed,
        the spare for the next one (one spare goes round all layers' buffers: every buffer has the same shape)."""
        self.kv, spare = gather_rows(self.kv, index, spare, self.length), self.kv
        return spare


def gather_rows(buffer: torch.Tensor, index: torch.Tensor, spare: torch.Tensor, length: int) -> torch.Tensor:
    """buffer[:length, index] written into the storage of `spare` (contiguous), viewed as [steps, len(index), ...]."""
    shape = (buffer.size(0), len(index), *buffer.shape[2:])
    size = math.prod(shape)
    if spare.numel() < size:  # more rows than before (rows duplicated): a bigger spare
        spare = buffer.new_empty(shape)
    out = spare.view(-1)[:size].view(shape)
    torch.index_select(buffer[:length], 1, index, out=out[:length])
    return out


@dataclass
class DecoderState:
    """Everything one decoding step needs besides the new tokens; batch rows can be reordered (beam search)."""

    memory_kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: cross-attention K, V [B,H,S,Dh]
    src_mask: torch.Tensor | None  # [B,1,1,S]; None when no source has padding (then attention needs no mask)
    caches: list[LayerCache]
    length: int = 0  # target positions decoded so far
    spare: torch.Tensor | None = None  # the one buffer a reorder of the caches copies into (LayerCache.select)

    def select(self, index: torch.Tensor, memory: bool = True) -> None:
        """Keep (and reorder/duplicate) the batch rows in `index`. memory=False leaves the encoder side alone, for a
        reorder among rows of the same source (beam search's beams), whose memory rows are identical."""
        if memory:
            self.memory_kv = [(k.index_select(0, index), v.index_select(0, index)) for k, v in self.memory_kv]
            if self.src_mask is not None:
                self.src_mask = self.src_mask.index_select(0, index)
        for cache in self.caches:
            self.spare = cache.select(index, self.spare if self.spare is not None else torch.empty_like(cache.kv))
