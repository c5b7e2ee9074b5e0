"""The attention weights of one sentence pair, teacher-forced, for drawing: every head of every layer of the
encoder self-attention, the decoder's masked self-attention and the encoder-decoder attention (§3.2.3).

A map holds heads x queries x keys weights per layer, quadratic in the length: a pair is cut to the longest
prefixes whose maps stay within the caller's bound on weights before anything is computed.
"""

from __future__ import annotations

import torch

from playground.core.model import Transformer, TransformerConfig, model_device


def attention_cells(cfg: TransformerConfig, source: int, target: int) -> int:
    """Attention weights of one pair over the three kinds: heads x (encoder layers x S^2 + decoder layers x
    (T^2 + T x S))."""
    return cfg.n_heads * (cfg.n_encoder_layers * source**2 + cfg.n_decoder_layers * (target**2 + target * source))


def fit_attention(cfg: TransformerConfig, src_ids: list[int], tgt_in_ids: list[int],
                  max_cells: int | None) -> tuple[list[int], list[int]]:
    """The pair cut to the longest prefixes whose attention maps stay within max_cells (None: no bound), so the
    maps are bounded before they are computed (the caller says what was cut; refusing a model so big that only a
    few tokens fit is the caller's too)."""
    if max_cells is None or attention_cells(cfg, len(src_ids), len(tgt_in_ids)) <= max_cells:
        return src_ids, tgt_in_ids
    keep = 1
    while attention_cells(cfg, min(len(src_ids), keep + 1), min(len(tgt_in_ids), keep + 1)) <= max_cells:
        keep += 1
    return src_ids[:keep], tgt_in_ids[:keep]


@torch.inference_mode()
def attention_maps(model: Transformer, tokenizer, src_ids: list[int], tgt_in_ids: list[int],
                   max_cells: int | None = None) -> dict:
    """Teacher-forced attention of one pair: {"encoder"|"decoder"|"cross": float32 array [L,H,queries,keys],
    "src_tokens": labels for source positions, "tgt_tokens": labels for target-input positions}. A pair whose maps
    would pass max_cells is cut first (fit_attention): "cut" then holds the lengths it had."""
    lengths = len(src_ids), len(tgt_in_ids)
    src_ids, tgt_in_ids = fit_attention(model.cfg, src_ids, tgt_in_ids, max_cells)
    model.eval()
    device = model_device(model)
    src = torch.tensor([src_ids], device=device)
    tgt = torch.tensor([tgt_in_ids], device=device)
    _, att = model(src, tgt, return_attention=True)
    maps = {kind: torch.stack([w[0] for w in ws]).float().cpu().numpy() for kind, ws in att.items()}
    maps["src_tokens"] = tokenizer.src_tokens(src_ids)
    maps["tgt_tokens"] = tokenizer.tgt_tokens(tgt_in_ids)
    maps["cut"] = lengths if lengths != (len(src_ids), len(tgt_in_ids)) else None
    return maps
