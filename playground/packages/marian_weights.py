"""Our weights under 🤗 transformers' Marian names (and Pegasus's, its pre-LN twin), both ways: one table of which
tensor is which, read forwards by the export (playground/export/transformers.py) and backwards by the import of a
Marian checkpoint (playground/packages/marian.py).

Marian builds its sinusoid with all sines before all cosines, where ours interleaves them (sin at 2i, cos at 2i+1).
Permuting the model dimension the same way in every weight that reads or writes the residual stream (embeddings,
the inputs of Q/K/V/fc1/lm_head, the outputs of out-proj/fc2, the LayerNorms, which are permutation-equivariant)
gives the identical network; importing undoes the permutation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.core.model import TransformerConfig


def residual_permutation(d_model: int) -> torch.Tensor:
    """Index m of Marian's residual stream holds our index perm[m]: sines (even) first, then cosines."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


@dataclass(frozen=True)
class Slot:
    """One transformers tensor: part `part` of `parts` equal row blocks of our tensor `ours` (our Q, K and V are
    one fused matrix), with the residual stream its input (`reads`: its columns) and/or output (`writes`: its rows,
    or the whole of a vector)."""

    hf: str
    ours: str
    reads: bool = False
    writes: bool = False
    part: int = 0
    parts: int = 1


def weight_slots(cfg: TransformerConfig) -> list[Slot]:
    """Every transformers tensor of the model `cfg` describes, in the order transformers names them. Tied tensors
    appear under each of their transformers names (the export writes them all, the import reads the first found)."""
    slots: list[Slot] = []

    def linear(hf: str, ours: str, reads: bool, writes: bool, part: int = 0, parts: int = 1) -> None:
        slots.append(Slot(f"{hf}.weight", f"{ours}.weight", reads, writes, part, parts))
        slots.append(Slot(f"{hf}.bias", f"{ours}.bias", False, writes, part, parts))

    def norm(hf: str, ours: str) -> None:
        slots.append(Slot(f"{hf}.weight", f"{ours}.weight", writes=True))
        slots.append(Slot(f"{hf}.bias", f"{ours}.bias", writes=True))

    def feed_forward(hf: str, ours: str) -> None:
        linear(f"{hf}.fc1", f"{ours}.up", reads=True, writes=False)
        linear(f"{hf}.fc2", f"{ours}.down", reads=False, writes=True)

    def self_attention(hf: str, me: str, block: str) -> None:
        """Q, K and V are one fused matrix of ours; `block` is the Residual around the sublayer."""
        for part, proj in enumerate("qkv"):
            linear(f"{hf}.self_attn.{proj}_proj", f"{me}.self_attn.qkv", True, False, part, 3)
        linear(f"{hf}.self_attn.out_proj", f"{me}.self_attn.out", reads=False, writes=True)
        norm(f"{hf}.self_attn_layer_norm", f"{me}.{block}.norm")

    for i in range(cfg.n_encoder_layers):
        hf, me = f"model.encoder.layers.{i}", f"encoder.{i}"
        self_attention(hf, me, "attn_block")
        feed_forward(hf, f"{me}.ff")
        norm(f"{hf}.final_layer_norm", f"{me}.ff_block.norm")
    for i in range(cfg.n_decoder_layers):
        hf, me = f"model.decoder.layers.{i}", f"decoder.{i}"
        self_attention(hf, me, "self_block")
        linear(f"{hf}.encoder_attn.q_proj", f"{me}.cross_attn.q", reads=True, writes=False)
        for part, proj in enumerate("kv"):
            linear(f"{hf}.encoder_attn.{proj}_proj", f"{me}.cross_attn.kv", True, False, part, 2)
        linear(f"{hf}.encoder_attn.out_proj", f"{me}.cross_attn.out", reads=False, writes=True)
        norm(f"{hf}.encoder_attn_layer_norm", f"{me}.cross_block.norm")
        feed_forward(hf, f"{me}.ff")
        norm(f"{hf}.final_layer_norm", f"{me}.ff_block.norm")
    if cfg.norm_placement == "pre":
        norm("model.encoder.layer_norm", "encoder_norm")
        norm("model.decoder.layer_norm", "decoder_norm")

    src, tgt = "src_embed.tokens.weight", "tgt_embed.tokens.weight"
    if cfg.joint_vocab and cfg.tie_embeddings:
        slots.append(Slot("model.shared.weight", src, reads=True))
    slots.append(Slot("model.encoder.embed_tokens.weight", src, reads=True))
    slots.append(Slot("model.decoder.embed_tokens.weight", tgt, reads=True))
    slots.append(Slot("lm_head.weight", "output.weight", reads=True))
    return slots


def marian_shapes(cfg: TransformerConfig, vocab_size: int) -> dict[str, tuple[int, ...]]:
    """The shape of each transformers tensor of the model `cfg` describes with a vocabulary of vocab_size (from the
    config alone: checked against a checkpoint's header before a tensor is read)."""
    d, ff = cfg.d_model, cfg.d_ff
    shapes = {}
    for slot in weight_slots(cfg):
        name = slot.hf
        if name.endswith(("embed_tokens.weight", "shared.weight", "lm_head.weight")):
            shapes[name] = (vocab_size, d)
        elif ".fc1." in name:
            shapes[name] = (ff, d) if name.endswith("weight") else (ff,)
        elif ".fc2." in name:
            shapes[name] = (d, ff) if name.endswith("weight") else (d,)
        else:  # attention projections, LayerNorms
            shapes[name] = (d, d) if name.endswith("weight") and "_proj" in name else (d,)
    return shapes


def to_marian(ours: dict[str, torch.Tensor], cfg: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state dict under the transformers names, the model dimension permuted."""
    p = residual_permutation(cfg.d_model)
    out = {}
    for slot in weight_slots(cfg):
        tensor = ours[slot.ours].detach().float().cpu().chunk(slot.parts)[slot.part]
        if slot.reads:
            tensor = tensor[:, p]
        if slot.writes:
            tensor = tensor[p]
        out[slot.hf] = tensor.contiguous()
    return out


def from_marian(tensors: dict[str, torch.Tensor], cfg: TransformerConfig) -> dict[str, torch.Tensor]:
    """The inverse of to_marian: transformers' tensors as our state dict, a tied tensor read from the first of its
    names present (transformers saves a tied group once); without final_logits_bias (the importer orders its
    vocabulary). KeyError names a tensor that is missing."""
    inverse = torch.argsort(residual_permutation(cfg.d_model))
    slots = weight_slots(cfg)
    parts: dict[str, dict[int, torch.Tensor]] = {}
    converted: dict[tuple, torch.Tensor] = {}  # a tied tensor is converted once, and shared
    for ours, part in dict.fromkeys((slot.ours, slot.part) for slot in slots):
        tied = tied_names(ours, cfg)
        candidates = [slot for slot in slots if slot.ours in tied and slot.part == part]
        slot = next((s for s in candidates if s.hf in tensors), candidates[0])
        key = (slot.hf, slot.reads, slot.writes)
        if key not in converted:
            tensor = tensors[slot.hf].float()
            if slot.reads:
                tensor = tensor[:, inverse]
            if slot.writes:
                tensor = tensor[inverse]
            converted[key] = tensor
        parts.setdefault(ours, {})[part] = converted[key]
    return {name: pieces[0] if len(pieces) == 1 else torch.cat([pieces[i] for i in range(len(pieces))])
            for name, pieces in parts.items()}


def tied_names(ours: str, cfg: TransformerConfig) -> set[str]:
    """Our names of the one tensor `ours` is (Transformer.__init__ ties them)."""
    groups = []
    if cfg.tie_embeddings and cfg.joint_vocab:
        groups.append({"src_embed.tokens.weight", "tgt_embed.tokens.weight", "output.weight"})
    elif cfg.tie_embeddings:
        groups.append({"tgt_embed.tokens.weight", "output.weight"})
    return next((group for group in groups if ours in group), {ours})
