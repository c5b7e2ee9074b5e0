"""The encoder-decoder Transformer of "Attention Is All You Need", readable top to bottom.

Shapes use B = batch, S = source length, T = target length, D = d_model, H = heads, Dh = D // H, V = vocab.
Two paths share every weight:
  * the fast path calls F.scaled_dot_product_attention (fused kernels, no attention matrix kept);
  * the inspection path (`return_attention=True`) computes softmax(QK^T / sqrt(Dh)) by hand and returns it,
    one [B, H, queries, keys] tensor per layer, so the UI can draw every head.
Incremental decoding keeps a key/value cache: cross-attention keys/values are projected once per source,
decoder self-attention keys/values are written into a preallocated buffer one step at a time.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from playground.errors import PackageError


@dataclass
class TransformerConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    activation: str = "relu"  # "relu" (paper) or "gelu"
    dropout: float = 0.1  # on embeddings and after each sublayer (paper: P_drop = 0.1)
    attention_dropout: float = 0.0  # on the attention weights
    positional_encoding: str = "sinusoidal"  # "sinusoidal" (paper) or "learned"
    norm_placement: str = "post"  # "post" (paper: LayerNorm(x + Sublayer(x))) or "pre" (with final norms)
    joint_vocab: bool = True  # source and target share one vocabulary
    tie_embeddings: bool = True  # target embedding = output projection, and = source embedding when joint
    max_len: int = 256
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self) -> None:
        problems = []
        if self.d_model % self.n_heads:
            problems.append(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.activation not in ("relu", "gelu"):
            problems.append(f"activation must be 'relu' or 'gelu', not {self.activation!r}")
        if self.positional_encoding not in ("sinusoidal", "learned"):
            problems.append(f"positional_encoding must be 'sinusoidal' or 'learned', not {self.positional_encoding!r}")
        if self.norm_placement not in ("post", "pre"):
            problems.append(f"norm_placement must be 'post' or 'pre', not {self.norm_placement!r}")
        if self.joint_vocab and self.src_vocab_size != self.tgt_vocab_size:
            problems.append("a joint vocabulary needs src_vocab_size == tgt_vocab_size")
        if min(self.n_encoder_layers, self.n_decoder_layers) < 1 or min(self.d_model, self.d_ff, self.max_len) < 1:
            problems.append("layers, d_model, d_ff and max_len must be positive")
        specials = {"pad_id": self.pad_id, "unk_id": self.unk_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        outside = [f"{name} {value}" for name, value in specials.items() if not 0 <= value < vocab]
        if outside:  # an embedding lookup past the table would fail deep inside the first translation
            problems.append(f"the special token ids must be inside the vocabulary of {vocab:,} tokens, not "
                            f"{', '.join(outside)}")
        if problems:
            raise ValueError("; ".join(problems))

    def to_dict(self) -> dict:
        return asdict(self)

    def num_parameters(self) -> int:
        """Parameters of the model this config builds (tied ones counted once), from the layer shapes below: instant,
        where building it, even on the meta device, costs tens of ms (and ~2 s the first time). The memory check,
        the duration estimate and Transformer.num_parameters all count with it; a test holds it to the tensors."""
        d, f = self.d_model, self.d_ff
        positions = self.max_len * d if self.positional_encoding == "learned" else 0
        attention = 4 * d * d + 4 * d  # fused QKV (or Q + fused KV) and the output projection, with biases
        feed_forward = 2 * d * f + f + d
        norm = 2 * d
        encoder = self.n_encoder_layers * (attention + feed_forward + 2 * norm)
        decoder = self.n_decoder_layers * (2 * attention + feed_forward + 3 * norm)
        final_norms = 2 * norm if self.norm_placement == "pre" else 0
        src_embed = self.src_vocab_size * d + positions
        tgt_embed = (0 if self.tie_embeddings and self.joint_vocab else self.tgt_vocab_size * d) + positions
        output = 0 if self.tie_embeddings else d * self.tgt_vocab_size
        return src_embed + tgt_embed + encoder + decoder + final_norms + output

    @classmethod
    def from_dict(cls, values: dict) -> "TransformerConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise PackageError(f"config.json has unknown model settings {unknown}; was it written by a newer version?")
        try:
            return cls(**values)
        except (TypeError, ValueError) as err:
            raise PackageError(f"config.json has an invalid model config: {err}") from err


# ----------------------------------------------------------------------------------------------------------
# Attention


class Dropout(nn.Module):
    """Dropout whose masks come from `generator` when one is set (Transformer.draw_dropout_from), else from torch's
    global random stream. A training run sets its own, so the draws of anyone else in the process (the web app's
    other sessions) never change its masks, and resuming restores the stream exactly."""

    def __init__(self, p: float):
        super().__init__()
        self.p, self.generator = p, None

    @property
    def active(self) -> bool:
        return self.training and self.p > 0

    def forward(self, x):
        if not self.active:
            return x
        if self.generator is None:
            return F.dropout(x, self.p)
        return x * keep_mask(x, self.p, self.generator)


def keep_mask(x: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    """Dropout's mask for x: 1/(1-p) where an element is kept, 0 where it is dropped (x's shape and dtype).

    Each element gets 16 random bits, four from each 64-bit draw of the generator: bernoulli_, which F.dropout uses,
    draws a whole number per element and made dropout a sixth of a small-preset CPU step (bench/profile_step.py);
    this costs a fifth of that. The drop rate is p rounded to a multiple of 2^-16, and the scale matches it."""
    if x.device.type not in ("cpu", "cuda"):  # full-range 64-bit draws are tested on these two only
        return bernoulli_mask(x, p, generator)
    dropped = round(p * 2**16)  # of the 2^16 values of the bits, this many drop the element
    if dropped >= 2**16:
        return torch.zeros_like(x)
    words = torch.empty((x.numel() + 3) // 4, dtype=torch.int64, device=x.device)
    bits = words.random_(-(2**63), None, generator=generator).view(torch.int16)[: x.numel()].view(x.shape)
    return (bits >= dropped - 2**15).to(x.dtype).mul_(2**16 / (2**16 - dropped))


def bernoulli_mask(x: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    """The same mask drawn as F.dropout draws it, one Bernoulli draw per element: exactly p, at keep_mask's cost x5."""
    return torch.empty_like(x).bernoulli_(1 - p, generator=generator).div_(1 - p)


def causal_mask(tq: int, tk: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[tq, tk] bool, True where a query may look at a key: the keys up to its own position (the last tq of tk)."""
    return torch.ones(tq, tk, dtype=torch.bool, device=device).tril(tk - tq)


def attend(q, k, v, key_mask, causal: bool, drop: Dropout, need_weights=False):
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

    def __init__(self, cfg: TransformerConfig, causal: bool):
        super().__init__()
        self.n_heads, self.causal = cfg.n_heads, causal
        self.attn_drop = Dropout(cfg.attention_dropout)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x, key_mask=None, need_weights=False, cache: "LayerCache | None" = None):
        q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))  # 3 x [B,H,T,Dh]
        causal = self.causal
        if cache is not None:  # one new query attends to every cached position, so no mask is needed
            k, v = cache.append(k, v)
            causal = False
        y, w = attend(q, k, v, key_mask, causal, self.attn_drop, need_weights)
        return self.out(merge_heads(y)), w


class CrossAttention(nn.Module):
    """Decoder queries attend to the encoder output; keys/values are projected once per source (fused KV)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.attn_drop = Dropout(cfg.attention_dropout)
        self.q = nn.Linear(cfg.d_model, cfg.d_model)
        self.kv = nn.Linear(cfg.d_model, 2 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)

    def project_memory(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = (split_heads(t, self.n_heads) for t in self.kv(memory).chunk(2, dim=-1))
        return k, v  # 2 x [B,H,S,Dh]

    def forward(self, x, memory_kv, key_mask, need_weights=False):
        q = split_heads(self.q(x), self.n_heads)  # [B,H,T,Dh]
        y, w = attend(q, *memory_kv, key_mask, False, self.attn_drop, need_weights)
        return self.out(merge_heads(y)), w


class FeedForward(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model)
        self.act = nn.ReLU() if cfg.activation == "relu" else nn.GELU()

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class Residual(nn.Module):
    """Wraps a sublayer with dropout, the residual connection and LayerNorm (post-LN as in the paper, or pre-LN)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.drop = Dropout(cfg.dropout)
        self.pre = cfg.norm_placement == "pre"

    def forward(self, x, sublayer):
        if self.pre:
            y, w = sublayer(self.norm(x))
            return x + self.drop(y), w
        y, w = sublayer(x)
        return self.norm(x + self.drop(y)), w


class EncoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = SelfAttention(cfg, causal=False)
        self.ff = FeedForward(cfg)
        self.attn_block, self.ff_block = Residual(cfg), Residual(cfg)

    def forward(self, x, src_mask, need_weights=False):
        x, w = self.attn_block(x, lambda h: self.self_attn(h, src_mask, need_weights))
        x, _ = self.ff_block(x, lambda h: (self.ff(h), None))
        return x, w


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = SelfAttention(cfg, causal=True)
        self.cross_attn = CrossAttention(cfg)
        self.ff = FeedForward(cfg)
        self.self_block, self.cross_block, self.ff_block = Residual(cfg), Residual(cfg), Residual(cfg)

    def forward(self, x, memory_kv, src_mask, need_weights=False, cache=None):
        x, w_self = self.self_block(x, lambda h: self.self_attn(h, None, need_weights, cache))
        x, w_cross = self.cross_block(x, lambda h: self.cross_attn(h, memory_kv, src_mask, need_weights))
        x, _ = self.ff_block(x, lambda h: (self.ff(h), None))
        return x, w_self, w_cross


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...): [max_len, d_model]."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table


class Embedding(nn.Module):
    """Token embedding * sqrt(d_model) + positional encoding, then dropout."""

    def __init__(self, cfg: TransformerConfig, vocab_size: int, tokens: nn.Embedding | None = None):
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.tokens = tokens if tokens is not None else nn.Embedding(vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        if cfg.positional_encoding == "learned":
            self.positions = nn.Embedding(cfg.max_len, cfg.d_model)
        else:  # derivable, so not saved with the weights
            self.register_buffer("table", sinusoidal_table(cfg.max_len, cfg.d_model), persistent=False)
        self.drop = Dropout(cfg.dropout)

    def position_encoding(self, start: int, length: int) -> torch.Tensor:
        if hasattr(self, "positions"):
            return self.positions.weight[start : start + length]
        return self.table[start : start + length]

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        return self.drop(self.tokens(ids) * self.scale + self.position_encoding(start, ids.size(1)))  # [B,T,D]


# ----------------------------------------------------------------------------------------------------------
# Incremental decoding state


class LayerCache:
    """Self-attention keys/values of one decoder layer for up to max_len steps, stored time-major [max_len, B, H, Dh]:
    the positions filled so far are one contiguous block, so reordering the rows (beam search does it every step) is
    a single row gather of that block into a spare buffer, and the two buffers swap. Batch-major [B, H, max_len, Dh]
    made it a strided gather of [B, H, :length] slices into a fresh buffer, many times slower
    (bench/decode_speed.py)."""

    def __init__(self, batch: int, n_heads: int, head_dim: int, max_len: int, like: torch.Tensor):
        self.k, self.v = (like.new_empty(max_len, batch, n_heads, head_dim) for _ in range(2))
        self.length = 0

    def append(self, k, v):
        """k, v [B,H,t,Dh] -> every position so far, [B,H,length,Dh] (views of the buffers)."""
        t = k.size(2)
        self.k[self.length : self.length + t] = k.permute(2, 0, 1, 3)
        self.v[self.length : self.length + t] = v.permute(2, 0, 1, 3)
        self.length += t
        return self.k[: self.length].permute(1, 2, 0, 3), self.v[: self.length].permute(1, 2, 0, 3)

    @torch.inference_mode()  # like the whole cache (see Transformer.start_decoding); out= refuses autograd anyway
    def select(self, index: torch.Tensor, spare: torch.Tensor) -> torch.Tensor:
        """Keep the rows in `index`, copying only the positions filled so far into `spare`; returns the buffer freed,
        the spare for the next one (one spare goes round all layers' buffers: every buffer has the same shape)."""
        self.k, spare = gather_rows(self.k, index, spare, self.length), self.k
        self.v, spare = gather_rows(self.v, index, spare, self.length), self.v
        return spare


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
    """Everything one decoding step needs besides the new tokens; batch rows can be reordered (beam search)."""

    memory_kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: cross-attention K, V [B,H,S,Dh]
    src_mask: torch.Tensor  # [B,1,1,S]
    caches: list[LayerCache]
    length: int = 0  # target positions decoded so far
    spare: torch.Tensor | None = None  # the one buffer a reorder of the caches copies into (LayerCache.select)

    def select(self, index: torch.Tensor, memory: bool = True) -> None:
        """Keep (and reorder/duplicate) the batch rows in `index`. memory=False leaves the encoder side alone, for a
        reorder among rows of the same source (beam search's beams), whose memory rows are identical."""
        if memory:
            self.memory_kv = [(k.index_select(0, index), v.index_select(0, index)) for k, v in self.memory_kv]
            self.src_mask = self.src_mask.index_select(0, index)
        for cache in self.caches:
            self.spare = cache.select(index, self.spare if self.spare is not None else torch.empty_like(cache.k))


# ----------------------------------------------------------------------------------------------------------
# The model


class Transformer(nn.Module):
    def __init__(self, cfg: TransformerConfig, generator: torch.Generator | None = None):
        """`generator` draws the initial weights (default: torch's global stream)."""
        super().__init__()
        self.cfg = cfg
        self.src_embed = Embedding(cfg, cfg.src_vocab_size)
        share_src = cfg.tie_embeddings and cfg.joint_vocab
        self.tgt_embed = Embedding(cfg, cfg.tgt_vocab_size, self.src_embed.tokens if share_src else None)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        pre = cfg.norm_placement == "pre"  # pre-LN leaves the residual stream un-normalised: add final norms
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.output = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)
        self.reset_parameters(generator)
        if cfg.tie_embeddings:
            self.output.weight = self.tgt_embed.tokens.weight

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draws every random weight again (nn's layers drew theirs from the global stream; LayerNorm starts at ones):
        with a generator the initial model depends on it alone."""
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p, generator=generator)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        for emb in (self.src_embed.tokens, self.tgt_embed.tokens):
            # N(0, D^-1/2): after the sqrt(D) scale embeddings have unit variance, and as a tied output
            # projection the initial logits stay small.
            nn.init.normal_(emb.weight, std=self.cfg.d_model**-0.5, generator=generator)
            with torch.no_grad():
                emb.weight[self.cfg.pad_id].zero_()

    def draw_dropout_from(self, generator: torch.Generator | None) -> None:
        """Every dropout of the model (embeddings, sublayers, attention weights) draws from `generator` from now on."""
        for module in self.modules():
            if isinstance(module, Dropout):
                module.generator = generator

    def num_parameters(self) -> int:
        """Parameters counted once even when tied."""
        return self.cfg.num_parameters()

    def src_key_mask(self, src: torch.Tensor) -> torch.Tensor:
        return (src != self.cfg.pad_id)[:, None, None, :]  # [B,1,1,S], True = a real token

    def encode(self, src: torch.Tensor, need_weights: bool = False):
        """src [B,S] -> memory [B,S,D], and per layer the self-attention weights [B,H,S,S] (or None)."""
        mask = self.src_key_mask(src)
        x = self.src_embed(src)
        weights = []
        for layer in self.encoder:
            x, w = layer(x, mask, need_weights)
            weights.append(w)
        return self.encoder_norm(x), weights

    def memory_kv(self, memory: torch.Tensor):
        return [layer.cross_attn.project_memory(memory) for layer in self.decoder]

    def decode(self, tgt_in, memory_kv, src_mask, need_weights=False, cache=None, start=0):
        """tgt_in [B,T] -> logits [B,T,V], per-layer self- and cross-attention weights."""
        x = self.tgt_embed(tgt_in, start)
        self_w, cross_w = [], []
        for i, layer in enumerate(self.decoder):
            x, ws, wc = layer(x, memory_kv[i], src_mask, need_weights, None if cache is None else cache[i])
            self_w.append(ws)
            cross_w.append(wc)
        return self.output(self.decoder_norm(x)), self_w, cross_w

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, return_attention: bool = False):
        """Teacher forcing. src [B,S], tgt_in [B,T] (starts with <bos>) -> logits [B,T,V].

        With return_attention=True also returns {"encoder": [B,H,S,S], "decoder": [B,H,T,T],
        "cross": [B,H,T,S]} lists with one tensor per layer."""
        memory, enc_w = self.encode(src, return_attention)
        logits, dec_w, cross_w = self.decode(tgt_in, self.memory_kv(memory), self.src_key_mask(src), return_attention)
        if return_attention:
            return logits, {"encoder": enc_w, "decoder": dec_w, "cross": cross_w}
        return logits

    # -- incremental decoding -----------------------------------------------------------------------------

    @torch.inference_mode()  # the cache serves search: its buffers are written in place and never differentiated
    def start_decoding(self, src: torch.Tensor, max_len: int) -> DecoderState:
        """Encode once and prepare caches for up to max_len target positions."""
        memory, _ = self.encode(src)
        kv = self.memory_kv(memory)
        cfg = self.cfg
        caches = [LayerCache(src.size(0), cfg.n_heads, cfg.d_model // cfg.n_heads, max_len, memory) for _ in self.decoder]
        return DecoderState(kv, self.src_key_mask(src), caches)

    @torch.inference_mode()
    def decode_step(self, tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """tokens [B] (the latest target token of each row) -> next-token logits [B,V]; advances the state."""
        logits, _, _ = self.decode(tokens[:, None], state.memory_kv, state.src_mask, cache=state.caches, start=state.length)
        state.length += 1
        return logits[:, -1]
