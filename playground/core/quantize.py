"""Int8 weights for decoding on a CPU: every linear layer of a copy of the model quantized dynamically (weights stored
as int8 with one scale per output row, each step's activations quantized on the fly, int8 matrix products by
fbgemm/oneDNN). The output projection and the feed-forward layers read a quarter of the bytes per step; measured in
bench/decode_speed.py ("int8" rows) and its BLEU against fp32's in docs/BENCHMARKS.md. Inference only: the copy has
no gradients, and the model it came from is left as it was.
"""

from __future__ import annotations

import copy
import warnings

import torch
import torch.nn as nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

from playground.core.model import Transformer


class Int8Linear(DynamicLinear):
    """torch.ao's dynamically quantized linear layer, whose forward calls the int8 product directly: its own forward
    checks the weights' dtype and the module's version and casts the output at every call, which at batch 1, where
    a decoding step makes 19 such calls of ~30 µs, was a sixth of each call (bench/decode_speed.py)."""

    def set_weight_bias(self, w: torch.Tensor, b: torch.Tensor | None) -> None:
        super().set_weight_bias(w, b)
        self.packed = self._packed_params._packed_params  # a plain attribute: the fastest lookup at every call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # reduce_range=True: what DynamicLinear's forward passes for the weights it packs (version 4)
        return torch.ops.quantized.linear_dynamic(x, self.packed, True)


def int8_linears(model: Transformer) -> Transformer:
    """A CPU copy of `model` (in eval mode) whose nn.Linear layers hold int8 weights, one scale per output row."""
    cpu_copy = copy.deepcopy(model).cpu().eval()
    with warnings.catch_warnings():
        # torch.ao's eager quantization warns that it is deprecated in favour of torchao; it is what 2.8-2.13 ship
        warnings.simplefilter("ignore")
        return quantize_dynamic(cpu_copy, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                                mapping={nn.Linear: Int8Linear})
