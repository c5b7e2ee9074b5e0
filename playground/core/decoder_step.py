"""Transformer.decode_step without nn.Module calls: the same tensor operations, in the same order, on the same
weights, gathered once per search into plain tensors (int8 layers: their packed fbgemm weights).

A decoding step at batch 1 multiplies one row by each weight matrix: each of its 65 module calls (3 layers: the
layers, the residual wrappers, dropout that does nothing in eval mode, the attention modules and their helpers)
costs a few µs of Python around operations of 5-30 µs: the module path took 1.4x this step's time at batch 1
(bench/decode_speed.py). model.py stays the readable definition, and this step is tested equal to it, bit for bit
with the same weights (tests/unit/test_decoder_step.py). A model with hooks on any module decodes through its
modules, which call them.

On an x86 CPU, a step of a few rows (FEW_ROWS: one sentence, its beams) may do its float32 products with oneDNN over
copies of the weights made for it (core/packed_weights.py): where they were measured faster on this machine (a half
to a third of F.linear's time on an AMD EPYC, slower on an Intel Xeon). They then differ from the modules' in the
last bits (tested within 1e-5).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.core import packed_weights
from playground.core.kv_cache import DecoderState
from playground.core.model import Transformer
from playground.core.packed_weights import FEW_ROWS, packed
from playground.core.packed_weights import linear as packed_linear
from playground.core.quantize import Int8Linear

Step = Callable[[torch.Tensor, DecoderState], torch.Tensor]  # tokens [B], state -> next-token logits [B,V]

# the operator itself: the packet's Python __call__ around it adds ~2 µs to each of a step's 19 calls of ~20 µs
LINEAR_INT8 = getattr(torch.ops.quantized.linear_dynamic, "_op", torch.ops.quantized.linear_dynamic)
ACTIVATIONS = {nn.ReLU: torch.relu, nn.GELU: F.gelu, nn.SiLU: F.silu}  # what each module's forward calls
FEW_ROWS_MEASURED = 5  # the rows a step of 2 to FEW_ROWS rows is measured at: one sentence's 5 beams
CALIBRATION_STEPS = 6  # timed steps of each kind
COPIES_FASTER: dict[tuple, bool] = {}  # (decoder shapes, rows measured, threads) -> whether the copies were faster
MEASURING = threading.Lock()


def decoder_step(model: Transformer, weight_copies: bool = True) -> Step:
    """The fastest step that computes what model.decode_step computes: a FlatDecoderStep (with weight_copies, over
    oneDNN's copies of the float32 weights at a few rows), or the model's own method where a module has hooks (the
    flat step would skip them) or the model is training (dropout is active)."""
    hooked = any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    plain_activation = all(type(layer.ff.act) in ACTIVATIONS for layer in model.decoder)
    if hooked or model.training or not plain_activation or nn.modules.module._global_forward_hooks:
        return model.decode_step
    return FlatDecoderStep(model, weight_copies)


def linear(layer: nn.Module, copy: bool) -> tuple[Callable, object, object]:
    """(function, a, b) with function(x, a, b) = layer(x): an int8 layer's packed weights, a float32 one's oneDNN copy
    (if `copy`, where one applies), or F.linear's weights."""
    if isinstance(layer, Int8Linear):
        return LINEAR_INT8, layer.packed, True  # reduce_range=True, as Int8Linear.forward
    weight = packed(layer.weight) if copy else None
    if weight is not None:
        return packed_linear, weight, layer.bias
    return torch._C._nn.linear, layer.weight, layer.bias


def layer_linears(layer: nn.Module) -> tuple[nn.Module, ...]:
    """A decoder layer's linear layers, in the order its products come in `products`."""
    return (layer.self_attn.qkv, layer.self_attn.out, layer.cross_attn.q, layer.cross_attn.out, layer.ff.up,
            layer.ff.down)


def decoder_linears(model: Transformer) -> list[nn.Module]:
    """The decoder's linear layers and the output projection: the products of a step."""
    return [module for layer in model.decoder for module in layer_linears(layer)] + [model.output]


def products(model: Transformer, copies: bool) -> tuple[list[tuple], tuple]:
    """Per decoder layer, what FlatDecoderStep.run calls (its six products, the activation, the three layer norms),
    and the output projection; with `copies`, the products over oneDNN's copies where they apply."""
    layers = [(*(linear(module, copies) for module in layer_linears(layer)), ACTIVATIONS[type(layer.ff.act)],
               norm(layer.self_block.norm), norm(layer.cross_block.norm), norm(layer.ff_block.norm))
              for layer in model.decoder]
    return layers, linear(model.output, copies)


def uses_copies(step_products: tuple[list[tuple], tuple]) -> bool:
    """Whether any of these products (`products`) goes over a oneDNN copy."""
    layers, output = step_products
    return any(product[0] is packed_linear for layer in layers for product in (*layer[:6], output))


def norm(layer: nn.LayerNorm) -> tuple:
    """torch.layer_norm's arguments after the input."""
    return layer.normalized_shape, layer.weight, layer.bias, layer.eps


class FlatDecoderStep:
    """One decoding step as a flat function of tensor operations (see the module's docstring); the weights are the
    model's own tensors, so it sees every in-place change to them (not its oneDNN copies, made when they first serve
    it: one step object serves one search), nor a module replaced after it was made."""

    def __init__(self, model: Transformer, weight_copies: bool = True):
        cfg = model.cfg
        self.model, self.n_heads, self.d_model, self.pre = model, cfg.n_heads, cfg.d_model, cfg.norm_placement == "pre"
        embed = model.tgt_embed
        self.embedding, self.scale = embed.tokens.weight, embed.scale
        self.positions = embed.positions.weight if hasattr(embed, "positions") else embed.table
        self.final_norm = norm(model.decoder_norm) if self.pre else None
        self.logits_bias = model.final_logits_bias if cfg.final_logits_bias else None
        self.plain, self.copied = products(model, copies=False), None
        # F.linear's products follow autocast; oneDNN's over the copies would not
        self.weight_copies = (weight_copies and packed_weights.AVAILABLE and not torch.is_autocast_enabled("cpu")
                              and self.embedding.device.type == "cpu")
        weights = "int8" if isinstance(model.output, Int8Linear) else str(model.output.weight.dtype)
        self.shapes = (cfg.d_model, cfg.d_ff, cfg.n_heads, cfg.n_decoder_layers, cfg.tgt_vocab_size, cfg.activation,
                       cfg.norm_placement, weights)

    @torch.inference_mode()
    def __call__(self, tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """tokens [B] -> next-token logits [B,V]; advances the state. Over oneDNN's copies of the weights where they
        were measured faster for this many rows (copies_pay_off), else over the weights themselves."""
        if self.weight_copies and tokens.size(0) <= FEW_ROWS and self.copies_pay_off(tokens.size(0)):
            return self.run(tokens, state, *self.copied)
        return self.run(tokens, state, *self.plain)

    def copies_pay_off(self, rows: int) -> bool:
        """Whether a step of `rows` rows was faster over the copies on this machine: measured once per process for a
        decoder of these shapes, thread count and row class (one row: greedy; a few: one sentence's beams). On an AMD
        EPYC the copies took a half to a third of F.linear's time; on an Intel Xeon, with the same PyTorch, 1.2-1.6x
        as long (docs/BENCHMARKS.md, section 2)."""
        measured = 1 if rows == 1 else FEW_ROWS_MEASURED
        key = (self.shapes, measured, torch.get_num_threads())
        faster = COPIES_FASTER.get(key)
        if faster is None:
            with MEASURING:  # one measurement at a time: two at once would time each other
                faster = COPIES_FASTER.get(key)
                if faster is None:
                    faster = self.copies_were_faster(measured)
                    if faster is not None:  # None: no copy could be made (the budget spent): ask again later
                        COPIES_FASTER[key] = faster
        if faster and self.copied is None:
            self.copied = products(self.model, copies=True)
        return bool(faster)

    @torch.inference_mode()
    def copies_were_faster(self, rows: int) -> bool | None:
        """Time CALIBRATION_STEPS steps of `rows` rows over the copies and over the weights, alternating, on a
        made-up source; the copies stay only where their median step took under 95% of the other's. None where no
        copy could be made."""
        cfg = self.model.cfg
        steps = min(CALIBRATION_STEPS + 2, cfg.max_positions - 1)  # the first two untimed: oneDNN compiles at first
        if steps < 4 or all(isinstance(layer, Int8Linear) for layer in decoder_linears(self.model)):
            return False  # a toy model of a few positions, or int8 weights: nothing to measure
        kinds = {"plain": self.plain, "copied": products(self.model, copies=True)}
        if not uses_copies(kinds["copied"]):
            return None
        src = torch.full((rows, min(16, cfg.max_positions)), cfg.eos_id, device=self.embedding.device)
        tokens = torch.full((rows,), cfg.bos_id, device=self.embedding.device)
        seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
        try:
            states = {kind: self.model.start_decoding(src, steps) for kind in kinds}
            for step in range(steps):
                for kind, (layers, output) in kinds.items():
                    began = time.perf_counter()
                    self.run(tokens, states[kind], layers, output)
                    if step >= 2:
                        seconds[kind].append(time.perf_counter() - began)
            faster = statistics.median(seconds["copied"]) < 0.95 * statistics.median(seconds["plain"])
        except (RuntimeError, MemoryError):  # oneDNN out of memory under a worker's limit: F.linear does without
            faster = False
        if faster:
            self.copied = kinds["copied"]
        elif not any(yes for key, yes in COPIES_FASTER.items() if key[0] == self.shapes):
            for layer in decoder_linears(self.model):  # used by no row class of these shapes
                packed.release(layer.weight)
        return faster

    def run(self, tokens: torch.Tensor, state: DecoderState, layers: list[tuple], output: tuple) -> torch.Tensor:
        """The step over these products (`products`). Model.decode_step's operations on [B,D] rows where it has
        [B,1,D] (the same values in the same layout: each kernel computes what it computes there, and the products
        skip their reshapes to 2-D and back)."""
        B, H, D, pre = tokens.size(0), self.n_heads, self.d_model, self.pre
        ln, attend = torch.layer_norm, F.scaled_dot_product_attention
        start = state.length
        x = torch.embedding(self.embedding, tokens) * self.scale + self.positions[start]  # [B,D]
        for (qkv, out, cross_q, cross_out, up, down, act, norm1, norm2, norm3), cache, (memory_k, memory_v) in zip(
                layers, state.caches, state.memory_kv):
            # self-attention over the cache (SelfAttention.forward with a cache)
            h = ln(x, *norm1) if pre else x
            q_kv = qkv[0](h, qkv[1], qkv[2]).view(B, 1, 3, H, D // H)
            k, v = cache.append(q_kv[:, :, 1:])
            y = attend(q_kv[:, :, 0].transpose(1, 2), k, v, attn_mask=None, dropout_p=0.0, is_causal=False)
            y = out[0](y.transpose(1, 2).reshape(B, D), out[1], out[2])
            x = x + y if pre else ln(x + y, *norm1)
            # attention over the source (CrossAttention.forward)
            h = ln(x, *norm2) if pre else x
            q = cross_q[0](h, cross_q[1], cross_q[2]).view(B, 1, H, D // H).transpose(1, 2)
            y = attend(q, memory_k, memory_v, attn_mask=state.src_mask, dropout_p=0.0, is_causal=False)
            y = cross_out[0](y.transpose(1, 2).reshape(B, D), cross_out[1], cross_out[2])
            x = x + y if pre else ln(x + y, *norm2)
            # feed-forward network (FeedForward.forward)
            h = ln(x, *norm3) if pre else x
            y = down[0](act(up[0](h, up[1], up[2])), down[1], down[2])
            x = x + y if pre else ln(x + y, *norm3)
        if pre:
            x = ln(x, *self.final_norm)
        logits = output[0](x, output[1], output[2])
        if self.logits_bias is not None:
            logits = logits + self.logits_bias.to(logits.dtype)
        state.length += 1
        return logits
