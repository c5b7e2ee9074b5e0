"""Attention, §3.2 of "Attention Is All You Need": scaled dot-product attention and its multi-head projections.

  * §3.2.1 scaled dot-product attention, softmax(QK^T / sqrt(d_k)) V: `attend`;
  * §3.2.2 multi-head attention, h heads of d_k = d_model / h over linear projections of Q, K, V, concatenated and
    projected again: `split_heads`, `merge_heads`, the projections of SelfAttention and CrossAttention;
  * §3.2.3 the three uses: encoder self-attention (padding hidden by a key mask), decoder self-attention (also
    masked so a position never sees later ones: `causal_mask`) and encoder-decoder attention (CrossAttention:
    decoder queries, the encoder output as keys and values).

Shapes use B = batch, H = heads, Tq / Tk = query / key positions, D = d_model, Dh = D // H.
Two paths share every weight: the fast one calls F.scaled_dot_product_attention (fused kernels, no attention matrix
kept); the inspection path (need_weights=True) computes the softmax by hand and returns the weights for the UI.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from playground.core.dropout import Dropout

if TYPE_CHECKING:
    from playground.core.kv_cache import LayerCache


def causal_mask(tq: int, tk: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[tq, tk] bool, True where a query may look at a key: the keys up to its own position (the last tq of tk)."""
    return torch.ones(tq, tk, dtype=torch.bool, device=device).tril(tk - tq)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None, causal: bool,
           drop: Dropout, need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scaled dot-product attention over heads. q [B,H,Tq,Dh], k/v [B,H,Tk,Dh], key_mask [B,1,1,Tk] (True = keep) or
    None; `drop` applies to the attention weights.

    Returns (output [B,H,Tq,Dh], weights [B,H,Tq,Tk] or None)."""
    # SDPA draws its dropout from the global stream: a Dropout with a generator of its own drops the weights by hand
    own_stream = drop.active and drop.generator is not None
    if not (need_weights or own_stream):
        # is_causal and attn_mask are exclusive in SDPA; the decoder's self-attention never needs both because
        # target padding sits after the real tokens, where the causal mask already hides it from them.
        # the CPU flash kernel's backward is 4-7x slower than the math one at these sizes (bench/profile_step.py)
        training_on_cpu = q.requires_grad and q.device.type == "cpu"
        with sdpa_kernel(SDPBackend.MATH) if training_on_cpu else contextlib.nullcontext():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask,
                                                  dropout_p=drop.p if drop.active else 0.0, is_causal=causal), None
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))  # [B,H,Tq,Tk]
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask, float("-inf"))
    if causal:
        scores = scores.masked_fill(~causal_mask(*scores.shape[-2:], q.device), float("-inf"))
    weights = scores.softmax(dim=-1)
    out = drop(weights) @ v
    return out, weights


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # [B,H,T,Dh]


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)  # [B,T,D]


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused QKV projection."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, causal: bool):
        super().__init__()
        self.n_heads, self.causal = n_heads, causal
        self.attn_drop = Dropout(dropout)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x, key_mask=None, need_weights=False, cache: LayerCache | None = None):
        if cache is None:
            q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))  # 3 x [B,H,T,Dh]
            y, w = attend(q, k, v, key_mask, self.causal, self.attn_drop, need_weights)
            return self.out(merge_heads(y)), w
        # one new query attends to every cached position, so no mask is needed; the new keys and values go into
        # the cache in one copy (a decoding step at batch 1 is mostly per-call overhead: bench/decode_speed.py)
        B, T, D = x.shape
        q, kv = self.qkv(x).view(B, T, 3, self.n_heads, D // self.n_heads).split([1, 2], dim=2)
        k, v = cache.append(kv)  # 2 x [B,H,length,Dh]
        y, w = attend(q.squeeze(2).transpose(1, 2), k, v, key_mask, False, self.attn_drop, need_weights)
        return self.out(merge_heads(y)), w


class CrossAttention(nn.Module):
    """Decoder queries attend to the encoder output; keys/values are projected once per source (fused KV)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads = n_heads
        self.attn_drop = Dropout(dropout)
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def project_memory(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = (split_heads(t, self.n_heads) for t in self.kv(memory).chunk(2, dim=-1))
        return k, v  # 2 x [B,H,S,Dh]

    def forward(self, x, memory_kv, key_mask, need_weights=False):
        q = split_heads(self.q(x), self.n_heads)  # [B,H,T,Dh]
        y, w = attend(q, *memory_kv, key_mask, False, self.attn_drop, need_weights)
        return self.out(merge_heads(y)), w
