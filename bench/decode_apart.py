"""Batch-1 greedy decoding with int8 weights, ours against CTranslate2's, each system in a process of its own, at 1
and at 2 threads, in rounds (ours 1, ours 2, CTranslate2 1, CTranslate2 2, and again).

decode_speed.py times every search in one process, in turn. With CTranslate2 loaded (it brings its own copy of
libgomp, a second OpenMP runtime beside PyTorch's), our batch-1 greedy at 2 threads took a median 59-62 ms a
sentence on the 2-core machine, whether or not CTranslate2 had run just before, against 39 ms in a process of its own.
Here nothing else is loaded in a system's process, and each system is compared at the same thread count and at its own
fastest.

    python bench/decode_apart.py --data ../shared/data/multi30k
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import common  # first: the allocator is chosen before PyTorch loads
import torch
from decode_speed import ctranslate2_searches, forbid_eos, int8_searches, sentences_and_tokenizer, small_model

from playground.core.decode import source_ids
from playground.core.quantize import int8_linears
from playground.core.sequences import pad_batch
from playground.training.presets import preset_config

SYSTEMS = {"ours": "greedy, int8", "ctranslate2": "CTranslate2 int8 greedy"}


def time_one(system: str, threads: int, args: argparse.Namespace) -> dict:
    """In this process only: `system`'s batch-1 greedy over the sources in turn for `args.seconds` of wall time."""
    torch.set_num_threads(threads)
    sources, tokenizer, _ = sentences_and_tokenizer(args.data, preset_config("small").vocab_size)
    model = small_model(tokenizer, torch.device("cpu"), args.seed)
    ids = sorted(source_ids(tokenizer, sources[: args.sentences], model.cfg), key=len)
    if system == "ctranslate2":  # exported before forbid_eos, as decode_speed.py does
        search = ctranslate2_searches(model, tokenizer, args.steps, 5, threads)[SYSTEMS[system]]
    forbid_eos(model)
    if system == "ours":
        search = int8_searches(int8_linears(model), args.steps, 5)[SYSTEMS[system]]
    batches = [pad_batch([x], pad_id=model.cfg.pad_id) for x in ids]
    random.Random(args.seed).shuffle(batches)
    for src in batches[:20]:  # warm: first calls allocate and pack
        search(model, src)
    sentences, seconds, deadline = 0, 0.0, time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        src = batches[sentences % len(batches)]
        start = time.perf_counter()
        out = search(model, src)
        seconds += time.perf_counter() - start
        sentences += 1
        if len(out[0]) != args.steps:
            raise AssertionError(f"{system} produced {len(out[0])} tokens, not {args.steps}")
    return {"system": system, "threads": threads, "sentences": sentences, "ms_per_sentence": 1000 * seconds / sentences}


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=False)
    parser.add_argument("--steps", type=int, default=32, help="tokens decoded per sentence")
    parser.add_argument("--sentences", type=int, default=256, help="source sentences cycled through")
    parser.add_argument("--seconds", type=float, default=40.0, help="wall time of one system at one thread count")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", nargs=2, metavar=("SYSTEM", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # a child: one system, one thread count
        print(json.dumps(time_one(args.one[0], int(args.one[1]), args)))
        return

    machine = common.start(args)
    passed = [a for a in sys.argv[1:] if a != "--json"]
    times: dict[tuple[str, int], list[float]] = {}
    for round_ in range(args.rounds):
        for system in SYSTEMS:
            for threads in (1, 2):
                child = subprocess.run([sys.executable, str(Path(__file__)), *passed, "--one", system, str(threads)],
                                       capture_output=True, text=True, check=True)
                result = json.loads(child.stdout.strip().splitlines()[-1])
                times.setdefault((system, threads), []).append(result["ms_per_sentence"])
                print(f"round {round_ + 1}: {system}, {threads} thread(s): {result['ms_per_sentence']:.1f} ms a "
                      f"sentence ({result['sentences']} sentences)", flush=True)
    ms = {key: common.median(values) for key, values in times.items()}
    common.print_table(f"Batch-1 greedy, int8, {args.steps} tokens a sentence, median of {args.rounds} rounds",
                       ["system", "threads", "ms/sentence"], [[s, t, ms[s, t]] for s, t in ms])
    ratios = {f"same threads ({t})": ms["ours", t] / ms["ctranslate2", t] for t in (1, 2)}
    ratios["each at its fastest"] = min(ms["ours", t] for t in (1, 2)) / min(ms["ctranslate2", t] for t in (1, 2))
    for name, ratio in ratios.items():
        print(f"ours takes {ratio:.2f}x CTranslate2's time, {name}")
    print("target: within 2x of CTranslate2 int8 at batch 1")
    common.emit_json(args, {"benchmark": "decode_apart", "machine": machine, "settings": vars(args),
                            "ms_per_sentence": {f"{s} {t}t": v for (s, t), v in ms.items()}, "ratios": ratios})


if __name__ == "__main__":
    main()
