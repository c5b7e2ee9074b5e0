"""The decoder's key/value cache for incremental search (greedy, sampling, beam search in core/decode.py).

The decoder is auto-regressive (§3.1): each step consumes the symbols generated before. Rather than run the whole
prefix again at every step, the decoder keeps the self-attention keys and values of the positions decoded so far
(one buffer for all its layers, DecoderState.kv; LayerCache is one layer's window on it), and the cross-attention
keys and values of the source are projected once (DecoderState.memory_kv). Beam search reorders and duplicates batch
rows every step: DecoderState.select does it for all layers at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


class LayerCache:
    """One decoder layer's self-attention keys and values: its slice of the state's buffer (DecoderState.kv)."""

    def __init__(self, state: DecoderState, layer: int):
        self.state, self.layer = state, layer

    def append(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """kv [B,t,2,H,Dh], the keys and values of t new positions -> every position so far, 2 x [B,H,length+t,Dh]
        (views of the buffer; the state's length moves on once every layer has appended, in decode_step)."""
        start, t = self.state.length, kv.size(1)
        block = self.state.kv[: start + t, :, self.layer]  # [length+t,B,2,H,Dh]
        block[start:] = kv.transpose(0, 1)
        return block[:, :, 0].permute(1, 2, 0, 3), block[:, :, 1].permute(1, 2, 0, 3)


def gather_rows(buffer: torch.Tensor, index: torch.Tensor, spare: torch.Tensor, length: int) -> torch.Tensor:
    """buffer[:length, index] written into the storage of `spare` (contiguous), viewed as [max_len, len(index), ...]."""
    shape = (buffer.size(0), len(index), *buffer.shape[2:])
    size = math.prod(shape)
    if spare.numel() < size:  # more rows than before (rows duplicated): a bigger spare
        spare = buffer.new_empty(shape)
    out = spare.view(-1)[:size].view(shape)
    torch.index_select(buffer[:length], 1, index, out=out[:length])
    return out


@dataclass
class DecoderState:
    """Everything one decoding step needs besides the new tokens; batch rows can be reordered (beam search).

    The self-attention keys and values of every layer live in one buffer, time-major [max_len, B, layers, 2, H, Dh]:
    the positions filled so far are one contiguous block, so a reorder of the rows (beam search, every step) is one
    row gather of that block into a spare buffer, and the two swap. A buffer per layer and per keys/values took six
    gathers a step for the small preset; batch-major [B, H, max_len, Dh] made each a strided gather of
    [B, H, :length] slices into a fresh buffer, many times slower (bench/decode_speed.py)."""

    memory_kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: cross-attention K, V [B,H,S,Dh]
    src_mask: torch.Tensor | None  # [B,1,1,S]; None when no source has padding (then attention needs no mask)
    kv: torch.Tensor  # [max_len, B, layers, 2, H, Dh], the first `length` positions filled
    length: int = 0  # target positions decoded so far
    spare: torch.Tensor | None = None  # the buffer a reorder of kv copies into, then kv's previous buffer
    caches: list[LayerCache] = field(init=False)  # one window on kv per layer

    def __post_init__(self) -> None:
        self.caches = [LayerCache(self, layer) for layer in range(self.kv.size(2))]

    @torch.inference_mode()  # like the whole cache (see Transformer.start_decoding); out= refuses autograd anyway
    def select(self, index: torch.Tensor, memory: bool = True) -> None:
        """Keep (and reorder/duplicate) the batch rows in `index`. memory=False leaves the encoder side alone, for a
        reorder among rows of the same source (beam search's beams), whose memory rows are identical."""
        if memory:
            self.memory_kv = [(k.index_select(0, index), v.index_select(0, index)) for k, v in self.memory_kv]
            if self.src_mask is not None:
                self.src_mask = self.src_mask.index_select(0, index)
        spare = self.spare if self.spare is not None else torch.empty_like(self.kv)
        self.kv, self.spare = gather_rows(self.kv, index, spare, self.length), self.kv
