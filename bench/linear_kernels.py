"""F.linear (MKL's sgemm) against oneDNN over a copy of the weight in its layout (core/packed_weights.py), float32,
at the row counts of decoding: a decoding step uses the copies only where it measures them faster on the machine
(core/decoder_step.py), and this shows by how much, layer by layer. The small preset's decoder shapes by default,
an OPUS-MT model's with --marian. Each time is the median of 5 rounds of repeated calls on one weight (warm in the
cache: a whole step streams every weight, so it can differ, which is why the step itself is what decides).

    python bench/linear_kernels.py
    python bench/linear_kernels.py --marian --rows 1 5
"""

from __future__ import annotations

import common  # first: the allocator is chosen before PyTorch loads
import torch
import torch.nn.functional as F

from playground.core.packed_weights import AVAILABLE, linear, packed

SMALL = [(768, 256), (256, 256), (1024, 256), (256, 1024), (8000, 256)]  # qkv, out and cross q/out, up, down, output
MARIAN = [(1536, 512), (512, 512), (2048, 512), (512, 2048), (58101, 512)]


def microseconds(call, rounds: int = 5) -> float:
    """Median µs of one call over `rounds` rounds of about 20 ms each, after a warm-up (oneDNN compiles at first)."""
    for _ in range(3):
        call()
    repeats = max(3, int(0.02 / max(common.call_times(call, 1)[0], 1e-6)))
    return 1e6 * common.median(common.call_times(lambda: [call() for _ in range(repeats)], rounds)) / repeats


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=False)
    parser.add_argument("--marian", action="store_true", help="an OPUS-MT model's shapes (d_model 512, 58,101 tokens)")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 5, 16, 64])
    args = parser.parse_args()
    machine = common.start(args)
    if not AVAILABLE:
        print("oneDNN copies are not made on this machine (not x86, or PyTorch without oneDNN)")
        return
    rows, results = [], {}
    for out_features, in_features in MARIAN if args.marian else SMALL:
        weight, bias = torch.nn.Parameter(torch.randn(out_features, in_features)), torch.randn(out_features)
        copy = packed(weight)
        with torch.inference_mode():
            for n in args.rows:
                x = torch.randn(n, in_features)
                plain = microseconds(lambda: F.linear(x, weight, bias))
                copied = microseconds(lambda: linear(x, copy, bias))
                name = f"{out_features}x{in_features} @ {n}"
                results[name] = {"f_linear_us": plain, "onednn_copy_us": copied}
                rows.append([f"{out_features} x {in_features}", n, plain, copied, plain / copied])
        packed.release(weight)
    common.print_table("Float32 products, µs a call",
                       ["weight", "rows", "F.linear", "oneDNN copy", "F.linear ÷ copy"], rows)
    common.emit_json(args, {"benchmark": "linear_kernels", "machine": machine, "results": results})


if __name__ == "__main__":
    main()
