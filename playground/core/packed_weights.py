"""Float32 weights reordered once for oneDNN, for the products of a decoding step on an x86 CPU.

F.linear on a CPU goes to MKL's sgemm, which re-reads the weight in its plain layout at every call. At the one to a
few hundred rows of a decoding step, oneDNN's product over a copy of the weight reordered into its blocked layout
took a half to a sixth of MKL's time on an AMD EPYC (small preset, 2 threads: the output projection at beam search's
5 rows, 67 against 370 µs; an OPUS-MT model's, 2.3 against 14 ms; docs/BENCHMARKS.md section 2). The results differ
from F.linear's in the last bits only.

A copy costs the weight's bytes again, so the copies one process keeps are bounded (BUDGET_BYTES): past it, a weight
is used as it is. A copy lives as long as its weight and is made again when the weight has changed in place since
(an optimizer step, a load): its version counter has moved. oneDNN also compiles a kernel for each number of rows
it meets, and keeps it (up to ONEDNN_PRIMITIVE_CACHE_CAPACITY): the five shapes of the small preset's decoder took
37 MB for the row counts 1-16 and 158 MB for 1-64, so the copies serve steps of at most FEW_ROWS rows (one
sentence and its beams: where MKL is slowest), and larger ones stay with F.linear. Not every x86 CPU gains: the
decoding step uses the copies only where it measured them faster (core/decoder_step.py, copies_pay_off).
"""

from __future__ import annotations

import platform
import threading

import torch
from torch.utils.weak import WeakIdKeyDictionary

# oneDNN is PyTorch's CPU library for x86; on ARM it may sit on slower reference kernels: copies are made on x86 only
AVAILABLE = (platform.machine().lower() in ("x86_64", "amd64") and torch.backends.mkldnn.is_available()
             and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))
FOR_ROWS = 64  # the rows oneDNN picks the layout for: at 1 and 5 rows as fast as a layout made for them
FEW_ROWS = 16
BUDGET_BYTES = 256 * 2**20  # a decoder of the presets (19-160 MB) or one OPUS-MT model's (208 MB) per process


class PackedWeights:
    """The copies one process keeps: weight -> its copy, made on first use, within `budget` bytes."""

    def __init__(self, budget: int):
        self.budget = budget
        # weight -> (its version, storage and shape when copied, the copy, its bytes); held weakly: an entry goes with
        # its weight, and with it the bytes `used` counts
        self.kept: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.lock = threading.Lock()

    @property
    def used(self) -> int:
        """The bytes of the copies kept."""
        return sum(size for _, _, size in list(self.kept.values()))

    def __call__(self, weight: torch.Tensor) -> torch.Tensor | None:
        """`weight` [out, in] reordered for `linear`, or None where no copy applies: not a float32 CPU weight, no
        oneDNN, an inference tensor (it has no version counter to check), the budget spent, or oneDNN failed."""
        if not AVAILABLE or weight.device.type != "cpu" or weight.dtype != torch.float32 or weight.is_inference():
            return None
        # `weight.data = ...` and `.half().float()` replace the storage without moving the version
        stamp, size = (weight._version, weight.data_ptr(), tuple(weight.shape)), weight.numel() * weight.element_size()
        with self.lock:  # one thread makes a copy, the others wait for it rather than make their own
            kept = self.kept.get(weight)
            if kept is not None and kept[0] == stamp:
                return kept[1]
            self.kept.pop(weight, None)  # a stale copy
            if self.used + size > self.budget:
                return None
            try:
                copy = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), FOR_ROWS)
            except (RuntimeError, MemoryError):  # out of memory under a worker's limit: F.linear does without
                return None
            self.kept[weight] = stamp, copy, size
            return copy

    def release(self, weight: torch.Tensor) -> None:
        """Drop the copy of `weight`, if any (found no faster)."""
        with self.lock:
            self.kept.pop(weight, None)


packed = PackedWeights(BUDGET_BYTES)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """F.linear(x, the weight that `packed` copied, bias)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
