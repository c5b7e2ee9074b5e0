"""What one quick call costs at the limits playground/limits.py sets (issue 25): CPU seconds and peak memory of a
translate at the decode-token limit, of attention maps at the cell limit (computed and drawn), and of encoding a
request of the most characters. The limits are sized so that each stays within a few seconds of one core and a
few hundred MB on the 2-core machines the app runs on; this script is how they were measured.

    python bench/quick_limits.py [--threads 1] [--json]

CPU time (time.process_time) rather than wall time: on a shared machine the wall clock measures the neighbours.
Peak memory is the rise of this process's VmHWM, reset before each measurement (/proc/self/clear_refs).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import common  # noqa: F401 - first: the allocator is chosen before PyTorch loads
import numpy as np
import torch

from playground import limits
from playground.core.attention_maps import attention_maps
from playground.core.decode import DecodeOptions, source_ids, translate
from playground.core.model import Transformer, TransformerConfig
from playground.insight import model_plots
from playground.packages.store import load_package
from playground.runtime.request_bounds import decode_tokens, server_bounds

DEMO = Path(__file__).resolve().parents[1] / "models" / "demo-en-de"
# a model of the paper's base shape with an 8k vocabulary: the largest a free CPU Space serves in practice
BASE = TransformerConfig(8000, 8000, d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048,
                         max_positions=256, dropout=0.0)


def peak_rise(fn):
    """(result, CPU seconds, MB the peak RSS rose by) of fn()."""
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    start_rss = limits._status_bytes("VmRSS")
    start = time.process_time()
    result = fn()
    seconds = time.process_time() - start
    return result, seconds, (limits._status_bytes("VmHWM") - start_rss) / 1e6


def decode_cost(name: str, model: Transformer, tokenizer, sentences: list[str], max_output_tokens: int) -> dict:
    opts = DecodeOptions("greedy", max_output_tokens=max_output_tokens)
    tokens = decode_tokens(model.cfg, source_ids(tokenizer, sentences, model.cfg, server_bounds()), opts)
    results, seconds, rise = peak_rise(lambda: translate(model, tokenizer, sentences, opts, server_bounds()))
    decoded = sum(len(t.best.ids) for t in results)
    return {"model": name, "sentences": len(sentences), "budgeted_tokens": tokens, "decoded_tokens": decoded,
            "cpu_s": round(seconds, 2), "tokens_per_cpu_s": round(decoded / seconds), "peak_rise_mb": round(rise)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    report = {"limits": {"decode_tokens": limits.max_decode_tokens(), "attention_cells": limits.max_attention_cells(),
                         "request_chars": limits.max_request_chars(), "quick_call_s": limits.quick_call_seconds()}}
    demo = load_package(DEMO)
    torch.manual_seed(0)
    base = Transformer(BASE).eval()  # untrained: it decodes every sentence to its length limit, the worst case
    # 200 lines (the page's most), each allowed its full output: what the decode-token limit must cover
    lines = ["A man in a blue shirt is standing on a ladder cleaning windows ."] * 200
    report["decode"] = [decode_cost("demo (1.6 M)", demo.model, demo.tokenizer, lines, 150),
                        decode_cost("base shape (63 M, untrained)", base, demo.tokenizer, lines[:64], 255)]
    # the attention maps at the cell limit, and drawing them
    cfg = TransformerConfig(2000, 2000, d_model=64, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=64,
                            max_positions=4096)
    wide = Transformer(cfg).eval()
    ids = list(range(4, 2000))
    maps, seconds, rise = peak_rise(lambda: attention_maps(wide, demo.tokenizer, ids + [3], [2] + ids,
                                                                  limits.max_attention_cells()))
    cells = sum(maps[k].size for k in ("encoder", "decoder", "cross"))
    grid = np.asarray(maps["cross"])[:, :, :, :]
    figure, draw_s, draw_rise = peak_rise(
        lambda: model_plots.attention_grid(grid, maps["src_tokens"], maps["tgt_tokens"]))
    report["attention"] = {"cells": cells, "kept_tokens": len(maps["src_tokens"]), "cpu_s": round(seconds, 2),
                           "peak_rise_mb": round(rise), "grid_draw_cpu_s": round(draw_s, 2),
                           "grid_json_mb": round(len(figure.to_json()) / 1e6, 1)}
    text = "A man in a blue shirt is standing on a ladder cleaning windows . " * 800
    _, seconds, rise = peak_rise(lambda: source_ids(demo.tokenizer, [text[:2000]] * 25, demo.model.cfg))
    report["encode_request_chars"] = {"chars": 50_000, "cpu_s": round(seconds, 3), "peak_rise_mb": round(rise)}
    if args.json:
        print(json.dumps(report))
    else:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
