"""Dropout that can draw its masks from a generator of its own (§5.4 "Residual Dropout", P_drop = 0.1).

A training run gives every dropout of its model one torch.Generator (Transformer.draw_dropout_from), so the random
draws of anyone else in the process (the web app's other sessions) never change its masks, and resuming restores the
stream exactly. Without a generator, Dropout is F.dropout on torch's global stream.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Dropout(nn.Module):
    """Dropout whose masks come from `generator` when one is set (Transformer.draw_dropout_from), else from torch's
    global random stream."""

    def __init__(self, p: float):
        super().__init__()
        self.p, self.generator = p, None

    @property
    def active(self) -> bool:
        return self.training and self.p > 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
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
