"""The encoder-decoder Transformer of "Attention Is All You Need" (§3), readable top to bottom.

§3.1: the encoder is a stack of N layers, each multi-head self-attention then a position-wise feed-forward network;
the decoder's layers add a third sublayer, attention over the encoder output, and mask their self-attention so that
a position sees only earlier ones. Every sublayer sits in a residual connection followed by layer normalisation,
LayerNorm(x + Sublayer(x)) (or pre-LN, an option: Xiong et al. 2020, "On Layer Normalization in the Transformer
Architecture", which trains without a long warmup). This file assembles the network; its parts live beside it:

  * attention.py   §3.2 scaled dot-product and multi-head attention, the masks (SelfAttention, CrossAttention)
  * positional.py  §3.4 embeddings x sqrt(d_model) and §3.5 positional encoding (Embedding)
  * dropout.py     §5.4 dropout, drawing its masks from a training run's own generator
  * kv_cache.py    the key/value cache that incremental decoding (core/decode.py) steps through
  * here           the config, §3.3 feed-forward network, residual + LayerNorm, encoder and decoder layers, and the
                   Transformer: encode, decode, teacher-forced forward and one decoding step at a time.

Shapes use B = batch, S = source length, T = target length, D = d_model, H = heads, Dh = D // H, V = vocab.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from playground.core.attention import CrossAttention, SelfAttention
from playground.core.dropout import Dropout
from playground.core.kv_cache import DecoderState, LayerCache
from playground.core.positional import Embedding

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "swish": nn.SiLU}


@dataclass
class TransformerConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    activation: str = "relu"  # "relu" (paper), "gelu", or "swish" (x * sigmoid(x): Marian's OPUS-MT models)
    dropout: float = 0.1  # on embeddings and after each sublayer (paper: P_drop = 0.1)
    attention_dropout: float = 0.0  # on the attention weights
    positional_encoding: str = "sinusoidal"  # "sinusoidal" (paper) or "learned"
    norm_placement: str = "post"  # "post" (paper: LayerNorm(x + Sublayer(x))) or "pre" (with final norms)
    joint_vocab: bool = True  # source and target share one vocabulary
    tie_embeddings: bool = True  # target embedding = output projection, and = source embedding when joint
    max_positions: int = 256  # a sentence's tokens + <bos>/<eos> (sequences.py)
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3
    # Marian's options (Junczys-Dowmunt et al. 2018, as 🤗 transformers' MarianMTModel has them); the defaults are
    # the paper's network
    scale_embedding: bool = True  # embeddings x sqrt(d_model) (§3.4); Marian's scale_embedding may turn it off
    final_logits_bias: bool = False  # a fixed vector added to the logits (Marian's final_logits_bias buffer)
    never_generate_pad: bool = False  # search never outputs <pad> or <bos> (Marian's bad_words_ids = [[pad]])

    def __post_init__(self) -> None:
        problems = []
        if self.d_model % self.n_heads:
            problems.append(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.activation not in ACTIVATIONS:
            problems.append(f"activation must be one of {', '.join(ACTIVATIONS)}, not {self.activation!r}")
        if self.positional_encoding not in ("sinusoidal", "learned"):
            problems.append(f"positional_encoding must be 'sinusoidal' or 'learned', not {self.positional_encoding!r}")
        if self.norm_placement not in ("post", "pre"):
            problems.append(f"norm_placement must be 'post' or 'pre', not {self.norm_placement!r}")
        if self.joint_vocab and self.src_vocab_size != self.tgt_vocab_size:
            problems.append("a joint vocabulary needs src_vocab_size == tgt_vocab_size")
        layers, sizes = (self.n_encoder_layers, self.n_decoder_layers), (self.d_model, self.d_ff, self.max_positions)
        if min(*layers, *sizes) < 1:
            problems.append("layers, d_model, d_ff and max_positions must be positive")
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
        positions = self.max_positions * d if self.positional_encoding == "learned" else 0
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



# ----------------------------------------------------------------------------------------------------------
# Layers (§3.1, §3.3)


class FeedForward(nn.Module):
    """§3.3 position-wise feed-forward network, FFN(x) = max(0, xW1 + b1)W2 + b2: D -> d_ff -> D at every position
    (ReLU as in the paper, GELU, or Marian's swish)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model)
        self.act = ACTIVATIONS[cfg.activation]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))  # [B,T,D] -> [B,T,d_ff] -> [B,T,D]


class Residual(nn.Module):
    """Wraps a sublayer with dropout, the residual connection and LayerNorm (§3.1 and §5.4: post-LN,
    LayerNorm(x + Dropout(Sublayer(x))), as in the paper; or pre-LN, x + Dropout(Sublayer(LayerNorm(x))), as in
    Xiong et al. 2020)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.drop = Dropout(cfg.dropout)
        self.pre = cfg.norm_placement == "pre"

    def forward(self, x, sublayer):
        """x [B,T,D]; sublayer(h) -> (y [B,T,D], attention weights or None), passed through."""
        if self.pre:
            y, w = sublayer(self.norm(x))
            return x + self.drop(y), w
        y, w = sublayer(x)
        return self.norm(x + self.drop(y)), w


class EncoderLayer(nn.Module):
    """§3.1 encoder layer: self-attention over the source (padding hidden), then the feed-forward network."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, causal=False)
        self.ff = FeedForward(cfg)
        self.attn_block, self.ff_block = Residual(cfg), Residual(cfg)

    def forward(self, x, src_mask, need_weights=False):
        """x [B,S,D], src_mask [B,1,1,S] -> x [B,S,D], self-attention weights [B,H,S,S] (or None)."""
        x, w = self.attn_block(x, lambda h: self.self_attn(h, src_mask, need_weights))
        x, _ = self.ff_block(x, lambda h: (self.ff(h), None))
        return x, w


class DecoderLayer(nn.Module):
    """§3.1 decoder layer: masked self-attention over the target so far, attention over the encoder output, then the
    feed-forward network."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, causal=True)
        self.cross_attn = CrossAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.ff = FeedForward(cfg)
        self.self_block, self.cross_block, self.ff_block = Residual(cfg), Residual(cfg), Residual(cfg)

    def forward(self, x, memory_kv, src_mask, need_weights=False, cache=None):
        """x [B,T,D], memory_kv: the encoder output's keys/values 2 x [B,H,S,Dh] -> x [B,T,D], self-attention weights
        [B,H,T,T] and cross-attention weights [B,H,T,S] (or None); with a cache, T new positions after the cached."""
        x, w_self = self.self_block(x, lambda h: self.self_attn(h, None, need_weights, cache))
        x, w_cross = self.cross_block(x, lambda h: self.cross_attn(h, memory_kv, src_mask, need_weights))
        x, _ = self.ff_block(x, lambda h: (self.ff(h), None))
        return x, w_self, w_cross


# ----------------------------------------------------------------------------------------------------------
# The model (§3.1)


class Transformer(nn.Module):
    """Embeddings, N encoder layers, N decoder layers and the output projection to the target vocabulary."""

    def __init__(self, cfg: TransformerConfig, generator: torch.Generator | None = None):
        """`generator` draws the initial weights (default: torch's global stream)."""
        super().__init__()
        self.cfg = cfg
        embedding = dict(d_model=cfg.d_model, n_positions=cfg.max_positions, pad_id=cfg.pad_id,
                         encoding=cfg.positional_encoding, dropout=cfg.dropout, scaled=cfg.scale_embedding)
        self.src_embed = Embedding(cfg.src_vocab_size, **embedding)
        share_src = cfg.tie_embeddings and cfg.joint_vocab
        self.tgt_embed = Embedding(cfg.tgt_vocab_size, **embedding, tokens=self.src_embed.tokens if share_src else None)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        pre = cfg.norm_placement == "pre"  # pre-LN leaves the residual stream un-normalised: add final norms
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.output = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)
        if cfg.final_logits_bias:  # fixed, not trained (as Marian's); saved with the weights
            self.register_buffer("final_logits_bias", torch.zeros(cfg.tgt_vocab_size))
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
        logits = self.output(self.decoder_norm(x))
        if self.cfg.final_logits_bias:
            logits = logits + self.final_logits_bias.to(logits.dtype)
        return logits, self_w, cross_w

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
    def start_decoding(self, src: torch.Tensor, output_steps: int) -> DecoderState:
        """Encode once and prepare caches for up to output_steps target positions."""
        memory, _ = self.encode(src)
        kv = self.memory_kv(memory)
        cfg = self.cfg
        head_dim = cfg.d_model // cfg.n_heads
        caches = [LayerCache(src.size(0), cfg.n_heads, head_dim, output_steps, memory) for _ in self.decoder]
        mask = self.src_key_mask(src)  # without padding (always at batch 1) no mask to apply at every step
        return DecoderState(kv, None if mask.all() else mask, caches)

    @torch.inference_mode()
    def decode_step(self, tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """tokens [B] (the latest target token of each row) -> next-token logits [B,V]; advances the state."""
        logits, _, _ = self.decode(tokens[:, None], state.memory_kv, state.src_mask, cache=state.caches,
                                   start=state.length)  # [B,1,V]
        state.length += 1
        return logits[:, -1]


def model_device(model: nn.Module) -> torch.device:
    """The device the model's weights are on."""
    return next(model.parameters()).device
