"""The loss the trainer minimises, label-smoothed, and the plain NLL validation reports.

Label smoothing as in the paper (§5.4, "Regularization": ε_ls = 0.1), the technique of Szegedy et al. 2016
("Rethinking the Inception Architecture for Computer Vision", §7): each target token's loss mixes the NLL of the
reference token with the mean NLL over the vocabulary, which hurts perplexity but improves accuracy and BLEU."""

from __future__ import annotations

import torch

from playground.runtime.memory import loss_chunk_rows


def chunk_rows_for(logits: torch.Tensor) -> int:
    """Rows of logits [N,V] the loss turns to float32 at a time on their device (runtime.memory.loss_chunk_rows)."""
    return loss_chunk_rows(logits.size(-1), logits.device.type)


def smoothed_loss_sum(logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int,
                      chunk_rows: int | None = None) -> torch.Tensor:
    """Sum over non-pad tokens of (1-eps)*NLL + eps*mean_v(-log p_v), as F.cross_entropy(logits.float(), target,
    ignore_index=pad_id, label_smoothing=eps, reduction="sum") computes it.
    logits [B,T,V] (any dtype; computed in float32 a chunk of rows at a time: chunk_rows, else chunk_rows_for),
    target [B,T]."""
    flat = logits.flatten(0, 1)
    return SmoothedCrossEntropySum.apply(flat, target.flatten(), smoothing, pad_id, chunk_rows or chunk_rows_for(flat))


class SmoothedCrossEntropySum(torch.autograd.Function):
    """F.cross_entropy on float32 logits keeps [N, V] float32 tensors alive across the step: the copy of bf16
    logits, the log-softmax saved for the backward pass, and two gradients (about 400 MB of a small-preset step on
    Multi30k, the largest part of its peak memory). Here the float32 work is done a chunk of rows at a time and the
    backward pass recomputes the softmax from the logits themselves, so only the logits and their gradient, in
    their own dtype, are ever whole."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int,
                chunk_rows: int) -> torch.Tensor:
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        for start in range(0, logits.size(0), chunk_rows):
            logp = logits[start : start + chunk_rows].float().log_softmax(-1)
            rows = target[start : start + chunk_rows]
            per_token = (1 - smoothing) * -logp.gather(1, rows[:, None]).squeeze(1) + smoothing * -logp.mean(-1)
            total += per_token.masked_fill(rows == pad_id, 0.0).sum()
        ctx.save_for_backward(logits, target)
        ctx.smoothing, ctx.pad_id, ctx.chunk_rows = smoothing, pad_id, chunk_rows
        return total

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        logits, target = ctx.saved_tensors
        eps, V = ctx.smoothing, logits.size(-1)
        grad = torch.empty_like(logits)
        for start in range(0, logits.size(0), ctx.chunk_rows):
            rows = target[start : start + ctx.chunk_rows]
            # d/dlogits of the per-token loss: softmax - (1-eps) * one_hot(target) - eps / V
            g = logits[start : start + ctx.chunk_rows].float().softmax(-1).sub_(eps / V)
            g[torch.arange(len(rows), device=g.device), rows] -= 1 - eps
            g.mul_((rows != ctx.pad_id)[:, None] * grad_total)
            grad[start : start + ctx.chunk_rows] = g
        return grad, None, None, None, None
