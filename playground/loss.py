"""Label smoothing (the paper's eps_ls = 0.1): the loss the trainer minimises, and plain NLL for validation."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def smoothed_loss_sum(logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int) -> torch.Tensor:
    """Sum over non-pad tokens of (1-eps)*NLL + eps*mean_v(-log p_v).
    logits [B,T,V] (any dtype; computed in float32), target [B,T]."""
    return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=pad_id,
                           label_smoothing=smoothing, reduction="sum")


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int) -> tuple[torch.Tensor, int]:
    """smoothed_loss_sum and the token count it sums over (counting waits for the device: not for the hot loop)."""
    return smoothed_loss_sum(logits, target, smoothing, pad_id), int((target != pad_id).sum())
